//! Redaction: what leaves the store for any reader never holds a sensitive value.
//!
//! Three layers, all applied by [`Redactor::for_operation`] and [`redact_text`]:
//! sensitive JSON keys, sensitive value patterns in any string (emails, card numbers, bearer
//! tokens, phone numbers, `secret=...` pairs), and configured field paths per destination/action.
//! Values removed from a payload are also scrubbed from the same operation's free texts (error
//! texts, references, notes), so a customer's name cannot leak through a destination's reply.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::collect::Collect;
use super::field_path::PathSeg;
pub use super::field_path::{FieldPath, Hint};
pub use super::patterns::{REDACTED, escape_text, find_card_numbers, redact_text, sensitive_key};
use super::patterns::{card_like_number, redact_cow};

/// Secrets shorter than this are not scrubbed from free text: they would destroy ordinary words.
const MIN_SCRUB_LEN: usize = 4;

/// Configured redaction: field paths for a destination and/or action (either may be any).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FieldRule {
    #[serde(default)]
    pub destination: Option<String>,
    #[serde(default)]
    pub action: Option<String>,
    pub fields: Vec<String>,
    /// Keep a fragment of these fields' values that helps find the record (manual: Redaction).
    #[serde(default)]
    pub hint: Option<Hint>,
}

/// One configured rule, parsed: destination, action, field paths, hint.
type Rule = (Option<String>, Option<String>, Vec<FieldPath>, Option<Hint>);

#[derive(Clone, Debug, Default)]
pub struct Redactor {
    rules: Vec<Rule>,
    /// Hints on every redacted field whose value one fits (`[redaction] hints = true`).
    hints: bool,
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
                Ok((r.destination.clone(), r.action.clone(), paths, r.hint))
            })
            .collect::<Result<_, String>>()?;
        Ok(Redactor {
            rules,
            hints: false,
        })
    }

    /// Hints on every redacted field whose value one fits (manual: Redaction; off by default).
    pub fn with_hints(mut self, hints: bool) -> Self {
        self.hints = hints;
        self
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
        let hinted = self.hinted(destination, action);
        let marker = |path: &[PathSeg], value: &str| -> String {
            let hint = hinted
                .iter()
                .find(|(p, _)| p.matches(path))
                .map(|(_, h)| *h)
                .or_else(|| self.hints.then(|| Hint::fitting(value)).flatten());
            hint.map_or_else(|| REDACTED.to_string(), |h| h.marker(value))
        };
        let mut secrets = Vec::new();
        redact_value(&mut value, &mut Vec::new(), &paths, &mut secrets, &marker);
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

    /// What redacts the free texts of an operation that holds more than one set of contents (a
    /// conflict keeps the new payload beside the old): the sensitive values of all of them.
    pub fn scrubber_of(
        &self,
        destination: &str,
        action: &str,
        payloads: &[&str],
    ) -> OperationRedaction {
        let mut secrets = Vec::new();
        for p in payloads {
            secrets.extend(self.scrubber(destination, action, p).secrets);
        }
        OperationRedaction {
            payload: Value::Null,
            secrets: tidy(secrets),
        }
    }

    fn paths(&self, destination: &str, action: &str) -> Vec<&FieldPath> {
        self.rules
            .iter()
            .filter(|(d, a, _, _)| {
                d.as_deref().is_none_or(|d| d == destination)
                    && a.as_deref().is_none_or(|a| a == action)
            })
            .flat_map(|(_, _, p, _)| p.iter())
            .collect()
    }

    /// The field paths with a hint of their own, for this destination and action.
    fn hinted(&self, destination: &str, action: &str) -> Vec<(&FieldPath, Hint)> {
        self.rules
            .iter()
            .filter(|(d, a, _, h)| {
                h.is_some()
                    && d.as_deref().is_none_or(|d| d == destination)
                    && a.as_deref().is_none_or(|a| a == action)
            })
            .flat_map(|(_, _, p, h)| p.iter().map(move |p| (p, h.unwrap_or(Hint::Last4))))
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

impl OperationRedaction {
    /// Adds the sensitive values of other contents of the same operation (a conflicting payload).
    pub fn with_secrets_of(mut self, other: OperationRedaction) -> OperationRedaction {
        self.secrets.extend(other.secrets);
        self.secrets = tidy(self.secrets);
        self
    }

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
        redact_value(&mut v, &mut Vec::new(), &[], &mut ignored, &|_, _| {
            REDACTED.to_string()
        });
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

/// The marker that replaces a redacted field: `[redacted]`, or with a hint (manual: Redaction).
type Marker<'a> = dyn Fn(&[PathSeg], &str) -> String + 'a;

/// A redacted field's marker: a hint only for a text value (an object or a list under a
/// sensitive key is replaced whole).
fn marker_for(child: &Value, path: &[PathSeg], marker: &Marker) -> Value {
    match child {
        Value::String(text) => Value::String(marker(path, text)),
        _ => Value::String(REDACTED.into()),
    }
}

fn redact_value(
    v: &mut Value,
    path: &mut Vec<PathSeg>,
    rules: &[&FieldPath],
    secrets: &mut Vec<String>,
    marker: &Marker,
) {
    match v {
        Value::Object(map) => {
            let old = std::mem::take(map);
            // keys that are themselves sensitive (an email used as a key) stay distinct
            // (manual: Redaction): `[redacted 1]`, `[redacted 2]`, so that no field disappears from view
            let mut hidden = 0;
            for (k, mut child) in old {
                path.push(PathSeg::Key(k.clone()));
                if sensitive_key(&k) || rules.iter().any(|r| r.matches(path)) {
                    collect_leaves(&child, secrets);
                    child = marker_for(&child, path, marker);
                } else {
                    redact_value(&mut child, path, rules, secrets, marker);
                }
                path.pop();
                let mut shown = redact_text(&k);
                if shown != k && (shown == REDACTED || map.contains_key(&shown)) {
                    hidden += 1;
                    shown = format!("[redacted {hidden}]");
                }
                map.insert(shown, child);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                path.push(PathSeg::Index(i));
                if rules.iter().any(|r| r.matches(path)) {
                    collect_leaves(child, secrets);
                    *child = marker_for(child, path, marker);
                } else {
                    redact_value(child, path, rules, secrets, marker);
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
        Value::Number(n) => {
            let text = n.to_string();
            if card_like_number(&text) {
                secrets.push(text);
                *v = Value::String(REDACTED.into());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
