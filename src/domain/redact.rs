//! Redaction: what leaves the store for any reader never holds a sensitive value.
//!
//! Three layers, all applied by [`Redactor::for_operation`] and [`redact_text`]:
//! sensitive JSON keys, sensitive value patterns in any string (emails, card numbers, bearer
//! tokens, phone numbers, `secret=...` pairs), and configured field paths per destination/action.
//! Values removed from a payload are also scrubbed from the same operation's free texts (error
//! texts, references, notes), so a customer's name cannot leak through a destination's reply.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed from free text: they would destroy ordinary words.
const MIN_SCRUB_LEN: usize = 4;

/// Whether a JSON object key names sensitive data (SPEC section 8), case-insensitively.
pub fn sensitive_key(key: &str) -> bool {
    const WORDS: [&str; 17] = [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "authorization",
        "cookie",
        "session",
        "ssn",
        "iban",
        "card",
        "cvv",
        "email",
        "phone",
        "dob",
    ];
    let k = key.to_ascii_lowercase();
    WORDS.iter().any(|w| k.contains(w)) || k.contains("birth") || k.contains("address")
}

/// One configured path, e.g. `customer.name`, `*.notes`, `items[*].address`, `**.iban`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath(Vec<Seg>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
    /// `*` or `[*]`: any one key or index.
    Any,
    /// `**`: zero or more levels.
    Deep,
}

impl FieldPath {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("bad field path '{text}': {why}");
        let mut segs = Vec::new();
        for part in text.split('.') {
            let (name, mut rest) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            match name {
                "" if rest.is_empty() => return Err(bad("empty segment")),
                "" => {}
                "*" => segs.push(Seg::Any),
                "**" => segs.push(Seg::Deep),
                n => segs.push(Seg::Key(n.to_string())),
            }
            while !rest.is_empty() {
                let close = rest.find(']').ok_or_else(|| bad("unclosed '['"))?;
                let inner = &rest[1..close];
                segs.push(match inner {
                    "*" => Seg::Any,
                    n => Seg::Index(n.parse().map_err(|_| bad("index must be a number or *"))?),
                });
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(bad("unexpected text after ']'"));
                }
            }
        }
        Ok(FieldPath(segs))
    }

    fn matches(&self, path: &[PathSeg]) -> bool {
        fn go(pat: &[Seg], path: &[PathSeg]) -> bool {
            match (pat.first(), path.first()) {
                (None, None) => true,
                (Some(Seg::Deep), _) => {
                    go(&pat[1..], path) || (!path.is_empty() && go(pat, &path[1..]))
                }
                (None, Some(_)) | (Some(_), None) => false,
                (Some(seg), Some(step)) => {
                    let ok = match (seg, step) {
                        (Seg::Any, _) => true,
                        (Seg::Key(k), PathSeg::Key(s)) => k == s,
                        (Seg::Index(i), PathSeg::Index(j)) => i == j,
                        _ => false,
                    };
                    ok && go(&pat[1..], &path[1..])
                }
            }
        }
        go(&self.0, path)
    }
}

#[derive(Clone, Debug)]
enum PathSeg {
    Key(String),
    Index(usize),
}

/// Configured redaction: field paths for a destination and/or action (either may be any).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FieldRule {
    #[serde(default)]
    pub destination: Option<String>,
    #[serde(default)]
    pub action: Option<String>,
    pub fields: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Redactor {
    rules: Vec<(Option<String>, Option<String>, Vec<FieldPath>)>,
}

/// The redacted payload of one operation, and what was removed, to scrub its free texts too.
#[derive(Clone, Debug)]
pub struct OperationRedaction {
    pub payload: Value,
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(rules: &[FieldRule]) -> Result<Self, String> {
        let rules = rules
            .iter()
            .map(|r| {
                let paths = r
                    .fields
                    .iter()
                    .map(|f| FieldPath::parse(f))
                    .collect::<Result<_, _>>()?;
                Ok((r.destination.clone(), r.action.clone(), paths))
            })
            .collect::<Result<_, String>>()?;
        Ok(Redactor { rules })
    }

    /// Redacts a stored payload (raw JSON text) for a destination and action.
    pub fn for_operation(
        &self,
        destination: &str,
        action: &str,
        payload: &str,
    ) -> OperationRedaction {
        let mut value: Value =
            serde_json::from_str(payload).unwrap_or_else(|_| Value::String(payload.to_string()));
        let paths = self.paths(destination, action);
        let mut secrets = Vec::new();
        redact_value(&mut value, &mut Vec::new(), &paths, &mut secrets);
        OperationRedaction {
            payload: value,
            secrets: tidy(secrets),
        }
    }

    /// Only what is needed to redact an operation's free texts, without building its redacted
    /// payload: what a list row needs (`payload` is left `null`).
    pub fn scrubber(&self, destination: &str, action: &str, payload: &str) -> OperationRedaction {
        use serde::de::DeserializeSeed;
        let paths = self.paths(destination, action);
        let mut secrets = Vec::new();
        let mut path = Vec::new();
        let seed = Collect {
            path: &mut path,
            rules: &paths,
            out: &mut secrets,
            sensitive: false,
        };
        let mut de = serde_json::Deserializer::from_str(payload);
        if seed.deserialize(&mut de).is_err() {
            // not JSON (it always is when settle wrote it): treat the whole text as sensitive
            secrets = vec![payload.to_string()];
        }
        OperationRedaction {
            payload: Value::Null,
            secrets: tidy(secrets),
        }
    }

    fn paths(&self, destination: &str, action: &str) -> Vec<&FieldPath> {
        self.rules
            .iter()
            .filter(|(d, a, _)| {
                d.as_deref().is_none_or(|d| d == destination)
                    && a.as_deref().is_none_or(|a| a == action)
            })
            .flat_map(|(_, _, p)| p.iter())
            .collect()
    }
}

fn tidy(mut secrets: Vec<String>) -> Vec<String> {
    secrets.retain(|s| s.len() >= MIN_SCRUB_LEN);
    // Longest first, so a secret that contains another is removed whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// Walks a JSON text collecting the values `redact_value` would remove, without building a
/// `Value`: a list row needs only these, and parsing into maps cost more than the query.
struct Collect<'a, 'r> {
    path: &'a mut Vec<PathSeg>,
    rules: &'a [&'r FieldPath],
    out: &'a mut Vec<String>,
    sensitive: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for Collect<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Collect<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        if self.sensitive {
            self.out.push(v.to_string());
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            self.path.push(PathSeg::Key(k.into_owned()));
            let sensitive = self.sensitive
                || matches!(self.path.last(), Some(PathSeg::Key(k)) if sensitive_key(k))
                || self.rules.iter().any(|r| r.matches(self.path));
            map.next_value_seed(Collect {
                path: &mut *self.path,
                rules: self.rules,
                out: &mut *self.out,
                sensitive,
            })?;
            self.path.pop();
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            self.path.push(PathSeg::Index(i));
            let sensitive = self.sensitive || self.rules.iter().any(|r| r.matches(self.path));
            let more = seq
                .next_element_seed(Collect {
                    path: &mut *self.path,
                    rules: self.rules,
                    out: &mut *self.out,
                    sensitive,
                })?
                .is_some();
            self.path.pop();
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }
}

impl OperationRedaction {
    /// Redacts a free text that belongs to this operation (error, reference, note, reply).
    pub fn text(&self, text: &str) -> String {
        let mut out = redact_cow(text);
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), REDACTED));
            }
        }
        out.into_owned()
    }

    /// Redacts every string inside a JSON value (an event's detail), including this operation's secrets.
    pub fn json(&self, value: &Value) -> Value {
        let mut v = value.clone();
        let mut ignored = Vec::new();
        redact_value(&mut v, &mut Vec::new(), &[], &mut ignored);
        map_strings(&mut v, &|s| self.text(s));
        v
    }
}

fn map_strings(v: &mut Value, f: &dyn Fn(&str) -> String) {
    match v {
        Value::String(s) => *s = f(s),
        Value::Array(items) => items.iter_mut().for_each(|i| map_strings(i, f)),
        Value::Object(map) => map.values_mut().for_each(|i| map_strings(i, f)),
        _ => {}
    }
}

fn collect_leaves(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| collect_leaves(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_leaves(i, out)),
        _ => {}
    }
}

fn redact_value(
    v: &mut Value,
    path: &mut Vec<PathSeg>,
    rules: &[&FieldPath],
    secrets: &mut Vec<String>,
) {
    match v {
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (k, mut child) in old {
                path.push(PathSeg::Key(k.clone()));
                if sensitive_key(&k) || rules.iter().any(|r| r.matches(path)) {
                    collect_leaves(&child, secrets);
                    child = Value::String(REDACTED.into());
                } else {
                    redact_value(&mut child, path, rules, secrets);
                }
                path.pop();
                map.insert(redact_text(&k), child);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                path.push(PathSeg::Index(i));
                if rules.iter().any(|r| r.matches(path)) {
                    collect_leaves(child, secrets);
                    *child = Value::String(REDACTED.into());
                } else {
                    redact_value(child, path, rules, secrets);
                }
                path.pop();
            }
        }
        Value::String(s) => {
            let red = redact_text(s);
            if red != *s {
                *s = red;
            }
        }
        _ => {}
    }
}

/// Replaces every sensitive value pattern in a free text with `[redacted]`.
pub fn redact_text(text: &str) -> String {
    redact_cow(text).into_owned()
}

fn redact_cow(text: &str) -> Cow<'_, str> {
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
    ranges.extend(find_emails(text));
    ranges.extend(find_card_numbers(text));
    ranges.extend(find_bearer_tokens(text));
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

fn find_emails(text: &str) -> Vec<Range<usize>> {
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

/// Digit groups separated by single spaces or dashes; any span of whole groups holding 13-19 digits
/// that passes the Luhn check is a card-like number.
pub fn find_card_numbers(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        // Collect the groups of one run.
        let mut groups: Vec<Range<usize>> = Vec::new();
        let mut j = i;
        loop {
            let g = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            groups.push(g..j);
            if j + 1 < b.len() && matches!(b[j], b' ' | b'-') && b[j + 1].is_ascii_digit() {
                j += 1;
            } else {
                break;
            }
        }
        let mut g = 0;
        while g < groups.len() {
            let mut digits = String::new();
            let mut found = None;
            for (h, group) in groups.iter().enumerate().skip(g) {
                digits.push_str(&text[group.clone()]);
                if digits.len() > 19 {
                    break;
                }
                if digits.len() >= 13 && luhn(&digits) {
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

fn find_bearer_tokens(text: &str) -> Vec<Range<usize>> {
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

/// Shows control characters and terminal escape sequences as `\xNN` (or `\u{...}` for the Unicode
/// controls that reorder or hide text), so stored text can never drive the terminal.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    fn needs(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRETS: [&str; 6] = [
        "ada@example.com",
        "4111111111111111",
        "abc.def-123",
        "+44 7700 900123",
        "Zebulon Quixote",
        "hunter2",
    ];

    #[test]
    fn sensitive_keys_follow_the_spec_list() {
        for k in [
            "password",
            "PASSWD",
            "client_secret",
            "accessToken",
            "apiKey",
            "api_key",
            "api-key",
            "Authorization",
            "cookie",
            "session_id",
            "ssn",
            "IBAN",
            "card_number",
            "cvv",
            "email",
            "phone",
            "dob",
            "birthdate",
            "billing_address",
        ] {
            assert!(sensitive_key(k), "{k}");
        }
        for k in ["title", "due", "name", "id", "team", "notes"] {
            assert!(!sensitive_key(k), "{k}");
        }
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
    fn payloads_lose_keys_values_and_configured_fields() {
        let rules = [FieldRule {
            destination: Some("crm".into()),
            action: None,
            fields: vec![
                "customer.name".into(),
                "*.notes".into(),
                "items[*].address".into(),
            ],
        }];
        let r = Redactor::new(&rules).unwrap();
        let payload = json!({"customer": {"name": "Zebulon Quixote", "email": "ada@example.com", "id": 7,
            "notes": "likes tea"}, "items": [{"address": "1 Main St", "sku": "A1"}],
            "auth": "Bearer abc.def-123", "card": "4111111111111111", "memo": "call +44 7700 900123",
            "password": "hunter2"}).to_string();
        let red = r.for_operation("crm", "create_customer", &payload);
        let shown = red.payload.to_string();
        for s in SECRETS.iter().chain(&["likes tea", "1 Main St"]) {
            assert!(!shown.contains(s), "{s} in {shown}");
        }
        assert_eq!(red.payload["customer"]["id"], 7);
        assert_eq!(red.payload["items"][0]["sku"], "A1");
        // the operation's own secrets are scrubbed from its error texts
        let err = red.text("409: customer Zebulon Quixote exists (likes tea)");
        assert_eq!(err, "409: customer [redacted] exists ([redacted])");
        // other destinations do not get crm's configured paths
        let other = r.for_operation("projects", "create_task", &payload);
        assert_eq!(other.payload["customer"]["name"], "Zebulon Quixote");
    }

    #[test]
    fn the_list_scrubber_finds_what_full_redaction_removes() {
        let rules = [FieldRule {
            destination: None,
            action: None,
            fields: vec!["items[*].address".into(), "a.b".into()],
        }];
        let r = Redactor::new(&rules).unwrap();
        let payload = json!({"a": {"b": "Zebulon Quixote", "c": "kept"}, "items": [{"address": "1 Main St"}],
            "contact": {"email": "ada@example.com", "phone": 447700900123_u64}, "list": [{"token": ["t0k3n-secret"]}]}).to_string();
        let text =
            "Zebulon Quixote at 1 Main St, ada@example.com, 447700900123, t0k3n-secret, kept";
        let full = r.for_operation("d", "a", &payload).text(text);
        assert_eq!(r.scrubber("d", "a", &payload).text(text), full);
        assert_eq!(
            full,
            "[redacted] at [redacted], [redacted], [redacted], [redacted], kept"
        );
    }

    #[test]
    fn field_paths_parse_and_match() {
        assert!(FieldPath::parse("a..b").is_err());
        assert!(FieldPath::parse("a[x]").is_err());
        assert!(FieldPath::parse("a[1").is_err());
        let p = FieldPath::parse("**.iban").unwrap();
        let deep = [
            PathSeg::Key("a".into()),
            PathSeg::Index(2),
            PathSeg::Key("iban".into()),
        ];
        assert!(p.matches(&deep));
        assert!(p.matches(&deep[2..]));
        assert!(!FieldPath::parse("a.iban").unwrap().matches(&deep));
    }

    #[test]
    fn escapes_terminal_sequences() {
        assert_eq!(
            escape_text("\u{1b}]0;owned\u{7}x\u{1b}[2J"),
            "\\x1b]0;owned\\x07x\\x1b[2J"
        );
        assert_eq!(escape_text("line\nnext\u{202e}"), "line\\x0anext\\u{202e}");
        assert!(matches!(escape_text("plain é"), Cow::Borrowed(_)));
    }
}
