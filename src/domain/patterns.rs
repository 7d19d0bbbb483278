//! Sensitive values in free text (emails, card numbers, bearer tokens, phone numbers,
//! `secret=value` pairs) and sensitive JSON keys: found by scanning bytes, no regex engine. The
//! characters a terminal would act on are `escapes.rs`'s.

use std::borrow::Cow;
use std::ops::Range;

pub use super::escapes::{escape_text, is_hostile};

pub const REDACTED: &str = "[redacted]";

/// Replaces every sensitive value pattern in a free text with `[redacted]`.
pub fn redact_text(text: &str) -> String {
    redact_cow(text).into_owned()
}

pub(super) fn redact_cow(text: &str) -> Cow<'_, str> {
    // a URL's password first (whatever it holds), then the patterns, which leave a database's
    // or mail server's user and hosts alone: `settle@db.internal` there names a server's
    // account, not a person
    if text.contains("://")
        && let Some(hidden) = super::url::hide_passwords(text)
    {
        return Cow::Owned(redact_plain(&hidden).into_owned());
    }
    redact_plain(text)
}

fn redact_plain(text: &str) -> Cow<'_, str> {
    // Fast path: every pattern needs a digit, an `@`, a `=`/`:` or the word "bearer".
    let b = text.as_bytes();
    if !b
        .iter()
        .any(|c| c.is_ascii_digit() || matches!(c, b'@' | b'=' | b':'))
        && !b.windows(6).any(|w| w.eq_ignore_ascii_case(b"bearer"))
    {
        return Cow::Borrowed(text);
    }
    let mut ranges = Vec::new();
    let hosts: Vec<Range<usize>> = match text.contains("://") {
        true => super::url::find_urls(text)
            .into_iter()
            .filter(|u| super::url::names_a_server(&text[u.whole.clone()]))
            .map(|u| u.authority)
            .collect(),
        false => Vec::new(),
    };
    ranges.extend(
        find_emails(text)
            .into_iter()
            .filter(|e| !hosts.iter().any(|h| e.start < h.end && h.start < e.end)),
    );
    ranges.extend(find_card_numbers(text));
    ranges.extend(find_bearer_tokens(text));
    ranges.extend(find_settle_tokens(text));
    ranges.extend(find_phone_numbers(text));
    ranges.extend(find_secret_pairs(text));
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    ranges.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        if r.start < at {
            // overlaps the previous match: widen it, one marker for both
            at = at.max(r.end);
            continue;
        }
        out.push_str(&text[at..r.start]);
        out.push_str(REDACTED);
        at = r.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

fn is_email_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

fn is_domain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
}

pub(crate) fn find_emails(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for (at, _) in text.match_indices('@') {
        let mut start = at;
        while start > 0 && is_email_local(b[start - 1]) {
            start -= 1;
        }
        let mut end = at + 1;
        while end < b.len() && is_domain(b[end]) {
            end += 1;
        }
        while end > at + 1 && matches!(b[end - 1], b'.' | b'-') {
            end -= 1;
        }
        let domain = &text[at + 1..end];
        if start < at && domain.contains('.') && !domain.starts_with('.') {
            out.push(start..end);
        }
    }
    out
}

/// Whether a byte may separate the digit groups of a written card number.
fn card_separator(b: u8) -> bool {
    matches!(b, b' ' | b'-' | b'.' | b'_' | b'/' | b':')
}

/// Card-like numbers in a text: a run of 13-19 digits that passes the Luhn check, written whole
/// or in groups. Groups may be separated by one or two of ` - . _ / :` (the same separator all
/// along a number, as people and systems write them: `4111 1111 1111 1111`, `4111.1111.1111.1111`,
/// `4111  1111 ...`), and any span of whole groups counts. A span that mixes separators, such as a
/// time stamp's `11-30 15:22:17.2706`, is not a card.
pub fn find_card_numbers(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        // Collect the groups of one run, and the separator before each (after the first).
        let mut groups: Vec<Range<usize>> = Vec::new();
        let mut seps: Vec<&[u8]> = Vec::new();
        let mut j = i;
        loop {
            let g = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            groups.push(g..j);
            let mut k = j;
            while k < b.len() && k - j < 2 && card_separator(b[k]) {
                k += 1;
            }
            if k > j && k < b.len() && b[k].is_ascii_digit() && b[j..k].iter().all(|c| *c == b[j]) {
                seps.push(&b[j..k]);
                j = k;
            } else {
                break;
            }
        }
        let mut g = 0;
        while g < groups.len() {
            let mut digits = String::new();
            let mut found = None;
            for (h, group) in groups.iter().enumerate().skip(g) {
                // one written number keeps one separator (seps[k] lies between groups k and k+1)
                if h > g && seps[h - 1] != seps[g] {
                    break;
                }
                digits.push_str(&text[group.clone()]);
                if digits.len() > 19 {
                    break;
                }
                if digits.len() >= 13 && card_shaped(&digits) {
                    found = Some(h);
                }
            }
            match found {
                Some(h) => {
                    out.push(groups[g].start..groups[h].end);
                    g = h + 1;
                }
                None => g += 1,
            }
        }
        i = j;
    }
    out
}

/// Whether a JSON number is a card-like number (13-19 digits passing Luhn), e.g. `4111111111111111`.
pub fn card_like_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    (13..=19).contains(&digits.len())
        && digits.bytes().all(|c| c.is_ascii_digit())
        && card_shaped(digits)
}

/// Whether digits could be a card's number: they pass Luhn, and are not what no card issuer
/// gives out, a number beginning with 0 (no card network's major industry identifier) or one
/// digit repeated (`0000000000000` passes Luhn and is no card: an order number of zeros, a
/// placeholder, a generated test value).
fn card_shaped(digits: &str) -> bool {
    let b = digits.as_bytes();
    b.first().is_some_and(|d| *d != b'0') && b.iter().any(|d| *d != b[0]) && luhn(digits)
}

fn luhn(digits: &str) -> bool {
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            let d = u32::from(d - b'0');
            if i % 2 == 1 {
                if d * 2 > 9 { d * 2 - 9 } else { d * 2 }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

pub(crate) fn find_bearer_tokens(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for at in 0..b.len().saturating_sub(5) {
        if !b[at..at + 6].eq_ignore_ascii_case(b"bearer") {
            continue;
        }
        let mut j = at + 6;
        let spaces = j;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let start = j;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b"._~+/=-".contains(&b[j])) {
            j += 1;
        }
        if j > start && start > spaces {
            out.push(start..j);
        }
    }
    out
}

/// settle's own bearer tokens (`settle token new`): `settle_` and 64 hex digits, found even
/// without the word "Bearer" before them (an automation that echoes its token in an error text).
fn find_settle_tokens(text: &str) -> Vec<Range<usize>> {
    const PREFIX: &[u8] = b"settle_";
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at + PREFIX.len() <= b.len() {
        if !b[at..].starts_with(PREFIX) {
            at += 1;
            continue;
        }
        let start = at + PREFIX.len();
        let hex = b[start..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        if hex >= 32 {
            out.push(at..start + hex);
        }
        at = start + hex;
    }
    out
}

/// Phone numbers in free text: `+` and 8-15 digits (`+44 7700 900123`), or a national number that
/// starts with `0` or `(` and has 10-15 digits (`07700 900123`, `(555) 010-4477`). Plain digit
/// runs without those marks are left alone: they are far more often ids, amounts or dates.
fn find_phone_numbers(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i] == b'+' || b[i] == b'(' || b[i] == b'0')
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b.get(i + 1)
                .is_some_and(|c| c.is_ascii_digit() || b[i] == b'0');
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut digits = 0;
        let mut last_digit = i;
        while j < b.len() && (b[j].is_ascii_digit() || b" -.()+".contains(&b[j])) {
            if b[j].is_ascii_digit() {
                digits += 1;
                last_digit = j;
            }
            if b[j] == b'+' && j != i {
                break;
            }
            j += 1;
        }
        let enough = if b[i] == b'+' {
            (8..=15).contains(&digits)
        } else {
            (10..=15).contains(&digits)
        };
        if enough && !text[i..=last_digit].contains("..") {
            out.push(i..last_digit + 1);
            i = last_digit + 1;
        } else {
            i = j.max(i + 1);
        }
    }
    out
}

/// `password=...`, `api_key: ...`, `"token":"..."` in free text: the value goes.
fn find_secret_pairs(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b"_-".contains(&b[i])) {
            i += 1;
        }
        let word = &text[start..i];
        let mut j = i;
        if j < b.len() && b[j] == b'"' {
            j += 1;
        }
        if j < b.len() && (b[j] == b'=' || b[j] == b':') && sensitive_key(word) {
            j += 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'"' || b[j] == b'\'') {
                j += 1;
            }
            let v = j;
            while j < b.len() && !b" \"',;&}".contains(&b[j]) {
                j += 1;
            }
            if j > v {
                out.push(v..j);
            }
            i = j;
        }
    }
    out
}

/// Whether a JSON object key names sensitive data (manual: Redaction), case-insensitively.
pub fn sensitive_key(key: &str) -> bool {
    // Does any of the words start at any position, ignoring ASCII case? One pass, no allocation,
    // the words grouped by first letter: this runs for every key of every payload a page shows.
    let k = key.as_bytes();
    (0..k.len()).any(|i| {
        let words: &[&[u8]] = match k[i].to_ascii_lowercase() {
            b'a' => &[
                b"apikey",
                b"api_key",
                b"api-key",
                b"authorization",
                b"address",
            ],
            b'b' => &[b"birth"],
            b'c' => &[b"cookie", b"card", b"cvv"],
            b'd' => &[b"dob"],
            b'e' => &[b"email"],
            b'i' => &[b"iban"],
            b'p' => &[b"password", b"passwd", b"phone"],
            b's' => &[b"secret", b"session", b"ssn"],
            b't' => &[b"token"],
            _ => return false,
        };
        let rest = &k[i..];
        words
            .iter()
            .any(|w| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w))
    })
}

#[cfg(test)]
#[path = "patterns_tests.rs"]
mod tests;
