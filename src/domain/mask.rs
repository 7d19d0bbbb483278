//! A reason as a group of exceptions is named by (manual: Owners and notifications): its
//! numbers, ids, UUIDs, quoted values and times masked, so that `read timeout after 30s` and
//! `read timeout after 31s` are one group, and a key or an order number in a message does not
//! make a group of one.

/// `reason` with what varies between items of one incident masked: UUIDs, times and hex ids
/// as `<id>`, quoted values as `"…"`, numbers as `N` (a unit written after one stays: `Ns`).
/// Text that was redacted stays as it was.
pub fn mask_reason(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut after_http = false;
    for word in reason.split_inclusive(|c: char| c.is_whitespace()) {
        let (body, space) = split_trailing_space(word);
        // an HTTP status says what kind of failure it is: 422 and 500 are different groups
        if after_http && is_status(body) {
            out.push_str(body);
        } else {
            out.push_str(&mask_word(body));
        }
        out.push_str(space);
        if !body.is_empty() {
            after_http = body.eq_ignore_ascii_case("http")
                || body.to_ascii_lowercase().starts_with("http/")
                || body.eq_ignore_ascii_case("status");
        }
    }
    // one line: any run of white space (a new line too) reads as one space
    let mut out: String = out
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let mut last_space = false;
    out.retain(|c| {
        let space = c == ' ';
        let keep = !(space && last_space);
        last_space = space;
        keep
    });
    out.trim().to_string()
}

/// `422`, `503:`, `404,`: a status code, with the punctuation after it.
fn is_status(word: &str) -> bool {
    let digits = word.trim_end_matches([':', ',', ';', '.', ')']);
    digits.len() == 3
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (b'1'..=b'5').contains(&digits.as_bytes()[0])
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
    // numbers (with their decimals and thousands: a `.` or `,` between digits) as N, the rest
    // as written: `"amount":1,"currency"` keeps its comma
    let chars: Vec<char> = word.chars().collect();
    let mut out = String::with_capacity(word.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',')
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push('N');
        } else {
            out.push(chars[i]);
            i += 1;
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

/// The longest reason a message to people holds.
const TOLD: usize = 120;

/// A reason as a message to people tells it (manual: Owners and notifications): a destination's
/// answer summarized (its status and the message it gives, never its body whole), every value
/// of the operation's own payload taken out (an answer that echoes the request must not carry it
/// into a message), what varies masked, on one line, at most 120 characters. `reason` is
/// already redacted.
pub fn told_reason(reason: &str, payload: Option<&serde_json::Value>) -> String {
    let (status, said) = match reason.strip_prefix("HTTP ").and_then(|r| {
        let (code, rest) = r.split_once(':')?;
        (code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit())).then(|| (code, rest.trim()))
    }) {
        Some((code, rest)) => (Some(code), summary(rest)),
        None => (None, reason.to_string()),
    };
    let mut said = said;
    for value in payload.map(values).unwrap_or_default() {
        if said.contains(value.as_str()) {
            said = said.replace(value.as_str(), "…");
        }
    }
    let said = mask_reason(&said);
    let said = match status {
        Some(code) if said.is_empty() => format!("HTTP {code}"),
        Some(code) => format!("HTTP {code}: {said}"),
        None => said,
    };
    match said.chars().count() > TOLD {
        true => format!("{}…", said.chars().take(TOLD - 1).collect::<String>()),
        false => said,
    }
}

/// What a destination's answer says, in a few words: the message a JSON error gives where it
/// gives one, else the text.
fn summary(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.to_string();
    };
    const SAID: [&str; 8] = [
        "/error/message",
        "/error",
        "/message",
        "/detail",
        "/title",
        "/errors/0/message",
        "/errors/0/detail",
        "/errors/0",
    ];
    SAID.iter()
        .find_map(|p| json.pointer(p).and_then(|v| v.as_str()))
        .map_or_else(|| "an answer with no message".to_string(), str::to_string)
}

/// The texts of a payload's values (strings of three characters or more, as written and as
/// JSON would escape them), the longest first, so that none is left in part.
fn values(payload: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![payload];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) if s.chars().count() >= 3 => {
                out.push(s.clone());
                let escaped = serde_json::to_string(s).unwrap_or_default();
                let escaped = escaped.trim_matches('"');
                if escaped != s {
                    out.push(escaped.to_string());
                }
            }
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::{mask_reason, told_reason};

    #[test]
    fn a_told_reason_summarizes_the_answer_and_carries_no_payload_value() {
        let payload =
            serde_json::json!({"title": "Kickoff call", "customer": {"name": "Zed Example"}});
        let told = told_reason(
            r#"HTTP 422: {"error":{"message":"customer Zed Example exists","trace":"at x.rb:12"}}"#,
            Some(&payload),
        );
        assert_eq!(told, "HTTP 422: customer … exists");
        // text that is not JSON: as it came, without the request's values, masked
        let told = told_reason(
            "HTTP 400: title Kickoff call is 12 chars too long",
            Some(&payload),
        );
        assert_eq!(told, "HTTP 400: title … is N chars too long");
        // one line, however many the reason had, and short
        let told = told_reason(&format!("a\nb\r\nc {}", "x ".repeat(200)), None);
        assert!(
            !told.contains(['\n', '\r']) && told.chars().count() <= 120,
            "{told}"
        );
        assert!(told.starts_with("a b c x"), "{told}");
        assert_eq!(told_reason("HTTP 503: ", None), "HTTP 503");
    }

    #[test]
    fn what_varies_in_one_incident_is_masked() {
        for (a, b) in [
            ("read timeout after 30s", "read timeout after 31s"),
            ("amount 1,250.50 refused", "amount 3.75 refused"),
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
            "HTTP 422: email is [redacted]"
        );
        // punctuation stays where it is
        assert_eq!(
            mask_reason(r#"{"amount":1,"currency":"EUR"}"#),
            r#"{"amount":N,"currency":"EUR"}"#
        );
        // what differs in kind stays apart: a status code is a kind
        assert_ne!(
            mask_reason("read timeout"),
            mask_reason("connection refused")
        );
        assert_ne!(mask_reason("HTTP 422"), mask_reason("HTTP 500"));
        assert_ne!(
            mask_reason("HTTP 503: upstream busy"),
            mask_reason("HTTP 502: upstream busy")
        );
        assert_eq!(
            mask_reason("status 404, not found"),
            "status 404, not found"
        );
        assert_ne!(
            mask_reason("HTTP 503"),
            mask_reason("HTTP 503 rate limited")
        );
    }
}
