//! Reveal (manual: Redaction, Running settle for a team): a `lead` may see one redacted field of one operation after giving a
//! reason. The reveal is an audit event naming the field and the reason, never the value; the
//! value is returned to the one screen that asked and goes nowhere else (no event, log or error).

use serde_json::Value;

use super::Staff;
use crate::domain::validate_key;
use crate::error::{Error, Result};
use crate::ledger::checks::check_text;
use crate::store::{self, NewEvent, Tried};

/// The value at a dotted path (`customer.email`, `items.0.phone`) of a JSON document.
fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(items) => items.get(seg.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The redacted fields of a (redacted) payload: each one's dotted path and its marker
/// (`[redacted]`, or with a hint `[redacted …0123]`).
pub(crate) fn redacted_fields(payload: &Value) -> Vec<(String, &str)> {
    fn walk<'a>(v: &'a Value, path: &mut Vec<String>, out: &mut Vec<(String, &'a str)>) {
        match v {
            Value::String(s) if s.starts_with("[redacted") => out.push((path.join("."), s)),
            Value::Object(m) => {
                for (k, v) in m {
                    path.push(k.clone());
                    walk(v, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(i.to_string());
                    walk(v, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(payload, &mut Vec::new(), &mut out);
    out
}

/// The dotted paths of an operation's redacted fields, as the detail pane shows them.
pub fn redacted_paths(payload: &Value) -> Vec<String> {
    redacted_fields(payload)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

impl Staff<'_> {
    /// The raw value of the redacted field at `path` of operation `key`, for `actor` (a lead),
    /// after writing the `revealed` event (field and reason only).
    pub async fn reveal(self, key: &str, path: &str, reason: &str, actor: &str) -> Result<String> {
        validate_key(key).map_err(Error::Invalid)?;
        self.0.check_acting(actor)?;
        self.0.require_lead("revealing a redacted field")?;
        check_text("the reason", Some(reason))?;
        if reason.trim().is_empty() {
            return Err(Error::Invalid("a reveal needs a reason".into()));
        }
        let Some((id, op)) = self.0.store.load_op(key).await? else {
            return Err(Error::NotFound(format!("no operation with key {key}")));
        };
        let red = self
            .0
            .redactor
            .for_operation(&op.destination, &op.action, &op.payload);
        if !redacted_paths(&red.payload).iter().any(|p| p == path) {
            return Err(Error::Refused(format!(
                "{key}: nothing is redacted at {}",
                crate::domain::escape_text(path)
            )));
        }
        let raw: Value = serde_json::from_str(&op.payload).unwrap_or(Value::Null);
        let value = match at_path(&raw, path) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return Err(Error::Refused(format!("{key}: no field {path}"))),
        };
        // the reason is the lead's own words, scrubbed of this operation's values all the same
        let mut detail = serde_json::json!({ "field": path, "reason": red.text(reason) });
        // a session's events hold the key it authenticated with (manual: Running settle for a team)
        self.0.sign(&mut detail);
        let detail = detail.to_string();
        let now = self.0.now();
        store::in_tx!(self.0.store, |tx| {
            let event = NewEvent {
                operation_id: Some(id),
                workflow: Some(&op.workflow),
                at: now,
                actor,
                kind: "revealed",
                from_state: Some(op.state),
                to_state: Some(op.state),
                detail: &detail,
                action: None,
                restore: None,
            };
            tx.insert_events(&[event]).await.map(Tried::Done)
        })?;
        crate::counters::inc(crate::counters::STAFF_ACTIONS, &["reveal"]);
        Ok(value)
    }
}
