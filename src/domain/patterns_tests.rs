//! The value patterns of the redaction, as texts they must and must not find.

use super::*;

#[test]
fn settles_own_tokens_are_redacted_without_the_word_bearer() {
    let token = format!("settle_{}", "0123456789abcdef".repeat(4));
    assert_eq!(
        redact_text(&format!("401 from us: {token} was wrong")),
        "401 from us: [redacted] was wrong"
    );
    assert_eq!(redact_text("settle_abc is a name"), "settle_abc is a name");
}

#[test]
fn value_patterns_go_from_free_text() {
    let text = "mail ada@example.com, card 4111 1111 1111 1111 and 4012-8888-8888-1881, \
                Authorization: Bearer abc.def-123; call +44 7700 900123 or (555) 010-4477 or 07700 900123; password=hunter2";
    let out = redact_text(text);
    for s in [
        "ada@example.com",
        "4111",
        "4012",
        "abc.def-123",
        "7700",
        "010-4477",
        "hunter2",
    ] {
        assert!(!out.contains(s), "{s} survived in {out}");
    }
    assert!(
        out.starts_with("mail [redacted], card [redacted] and [redacted]"),
        "{out}"
    );
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "read timeout after 30s",
        "HTTP 503 at 2026-12-01 10:02:03",
        "task 1234567812345678 created",
        "order 20261201 total 99.50",
        "v1.2.3",
        "retry after 120 seconds",
        "no @ here",
        "a@b",
    ] {
        assert_eq!(redact_text(text), text);
    }
}

#[test]
fn card_numbers_are_found_whatever_separates_their_digits() {
    for sep in [" ", "-", ".", "_", "/", ":", "  ", "--"] {
        let text = format!("paid with 4111{sep}1111{sep}1111{sep}1111 today");
        assert_eq!(redact_text(&text), "paid with [redacted] today", "{sep:?}");
    }
    assert_eq!(redact_text("ord_4111111111111111"), "ord_[redacted]");
    assert!(card_like_number("4111111111111111"));
    assert!(!card_like_number("4111111111111112"));
    // passing Luhn is not enough: no card begins with 0 or repeats one digit
    for digits in [
        "0000000000000",
        "0000000000000000",
        "8888888888888888",
        "0412345678905",
    ] {
        assert!(super::luhn(digits), "{digits} passes Luhn");
        assert!(!card_like_number(digits), "{digits}");
        assert!(
            find_card_numbers(&format!("order {digits}")).is_empty(),
            "{digits}"
        );
    }
    assert_eq!(redact_text("ref 4111-1111-1111-1111"), "ref [redacted]");
    // time stamps and addresses mix their separators: not card numbers
    for text in [
        "at 2026-11-30 15:22:17.270652 UTC",
        "11-30 15:22:17.2706",
        "10.20.30.40:8080/api",
    ] {
        assert_eq!(redact_text(text), text);
    }
}

#[test]
fn a_servers_url_keeps_its_user_and_host_and_loses_its_password() {
    // a database's account is not a person: shown, so a person can tell which database
    assert_eq!(
        redact_text("cannot open database postgres://settle@db.internal:5432/x: refused"),
        "cannot open database postgres://settle@db.internal:5432/x: refused"
    );
    let said = redact_text("cannot open database postgres://settle:Zk9/Vb7=@db.internal/x: no");
    assert_eq!(
        said,
        "cannot open database postgres://settle:***@db.internal/x: no"
    );
    // any other URL's user@host may be a person's address: redacted as one
    for text in [
        "see http://ada@example.com/x",
        "redirected to https://crm.example/find?email=ada@example.com",
    ] {
        let out = redact_text(text);
        assert!(!out.contains("ada@example.com"), "{out}");
    }
}
