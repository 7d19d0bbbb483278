//! What a redaction rule names: a field path (`customer.name`, `items[*].address`, `**.iban`)
//! and the hint it may keep of a value (manual: Redaction).

use serde::{Deserialize, Serialize};

use super::patterns::{REDACTED, escape_text};

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

    pub(crate) fn matches(&self, path: &[PathSeg]) -> bool {
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
pub(crate) enum PathSeg {
    Key(String),
    Index(usize),
}

/// What a redaction hint keeps of a value (manual: Redaction): never enough to be the value.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Hint {
    /// The last four digits: `[redacted …0199]` (a phone, a card).
    Last4,
    /// An email's first letter and domain: `[redacted z…@example.org]`.
    Domain,
}

impl Hint {
    /// The hint that fits a value: an email keeps its domain, anything with four digits or more
    /// its last four.
    pub(crate) fn fitting(value: &str) -> Option<Hint> {
        if value.contains('@') {
            Some(Hint::Domain)
        } else if value.chars().filter(char::is_ascii_digit).count() >= 4 {
            Some(Hint::Last4)
        } else {
            None
        }
    }

    /// The marker for `value`, or plain `[redacted]` when this hint does not fit it.
    pub(crate) fn marker(self, value: &str) -> String {
        match self {
            Hint::Last4 => {
                let digits: Vec<char> = value.chars().filter(char::is_ascii_digit).collect();
                if digits.len() < 8 {
                    // too short to show a quarter of it safely
                    return REDACTED.into();
                }
                let last: String = digits[digits.len() - 4..].iter().collect();
                format!("[redacted …{last}]")
            }
            Hint::Domain => match value.split_once('@') {
                Some((local, domain))
                    if !local.is_empty()
                        && domain.contains('.')
                        && domain
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-')) =>
                {
                    let first: String = local.chars().take(1).collect();
                    format!("[redacted {}…@{domain}]", escape_text(&first))
                }
                _ => REDACTED.into(),
            },
        }
    }
}
