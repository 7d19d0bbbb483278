//! A reason as a group of exceptions is named by (manual: Owners and notifications): its
//! numbers, ids, UUIDs, quoted values and times masked, so that `read timeout after 30s` and
//! `read timeout after 31s` are one group, and a key or an order number in a message does not
//! make a group of one.

/// `reason` with what varies between items of one incident masked: UUIDs, times and hex ids
/// as `<id>`, quoted values as `"…"`, numbers as `N` (a unit written after one stays: `Ns`).
/// Text that was redacted stays as it was.
pub fn mask_reason(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    for word in reason.split_inclusive(|c: char| c.is_whitespace()) {
        let (body, space) = split_trailing_space(word);
        out.push_str(&mask_word(body));
        out.push_str(space);
    }
    // many spaces in a row read as one
    let mut last_space = false;
    out.retain(|c| {
        let space = c == ' ';
        let keep = !(space && last_space);
        last_space = space;
        keep
    });
    out.trim().to_string()
}

fn split_trailing_space(word: &str) -> (&str, &str) {
    let body = word.trim_end_matches(char::is_whitespace);
    (body, &word[body.len()..])
}

fn mask_word(word: &str) -> String {
    // quoted values: '...' or "..." as a whole word
    let quoted = word.len() >= 2
        && ((word.starts_with('"') && word.ends_with('"'))
            || (word.starts_with('\'') && word.ends_with('\'')));
    if quoted {
        return "\"…\"".into();
    }
    let core = word.trim_matches(|c: char| !c.is_alphanumeric());
    if is_id(core) {
        return word.replacen(core, "<id>", 1);
    }
    // numbers (with their decimals) as N, the rest as written
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '.' || *n == ',')
            {
                chars.next();
            }
            out.push('N');
        } else {
            out.push(c);
        }
    }
    out
}

/// A UUID, a time (`2026-12-06T01:02:03Z`, `01:02:03`), or a hex or alphanumeric id of eight
/// characters or more that holds a digit and a letter.
fn is_id(word: &str) -> bool {
    let hex_dash = word.len() >= 32
        && word.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && word.contains('-');
    let time = word.contains(':')
        && word.chars().filter(|c| c.is_ascii_digit()).count() >= 4
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ':' | '-' | 'T' | 'Z' | '.' | '+'));
    let mixed = word.len() >= 8
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic());
    hex_dash || time || mixed
}

#[cfg(test)]
mod tests {
    use super::mask_reason;

    #[test]
    fn what_varies_in_one_incident_is_masked() {
        for (a, b) in [
            ("read timeout after 30s", "read timeout after 31s"),
            ("HTTP 503: upstream busy", "HTTP 502: upstream busy"),
            (
                "order 550e8400-e29b-41d4-a716-446655440000 not found",
                "order 6fa459ea-ee8a-3ca4-894e-db77e160355e not found",
            ),
            ("task TASK-8812 exists", "task TASK-9001 exists"),
            ("field 'email' invalid", "field 'phone' invalid"),
            (
                "at 2026-12-06T01:02:03Z: refused",
                "at 2026-12-05T23:59:59Z: refused",
            ),
            ("id a1b2c3d4e5 rejected", "id ffee0011aa rejected"),
        ] {
            assert_eq!(mask_reason(a), mask_reason(b), "{a} / {b}");
        }
        assert_eq!(
            mask_reason("read timeout after 30s"),
            "read timeout after Ns"
        );
        assert_eq!(
            mask_reason("HTTP 422: email is [redacted]"),
            "HTTP N: email is [redacted]"
        );
        // what differs in kind stays apart
        assert_ne!(
            mask_reason("read timeout"),
            mask_reason("connection refused")
        );
        assert_ne!(
            mask_reason("HTTP 503"),
            mask_reason("HTTP 503 rate limited")
        );
    }
}
