//! What scrubs an operation's texts of its payload's sensitive values, kept per payload.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::redact::OperationRedaction;
use crate::domain::{Op, Redactor};

/// What scrubs an operation's texts (its reason, error and reference) of its payload's sensitive
/// values, kept by fingerprint for the operations shown lately. A list page builds fifty views and
/// the console builds the same page again on every change; finding the sensitive values parses
/// the payload, so it is done once per payload. The fingerprint covers destination, action and
/// contents, which are all the scrubber depends on; a conflict's second payload is part of the key.
#[derive(Default)]
pub(crate) struct Scrubbers(std::sync::Mutex<HashMap<String, Arc<OperationRedaction>>>);

/// How many payloads' scrubbers are kept; past it the memory starts afresh.
const SCRUBBERS_KEPT: usize = 4096;

impl Scrubbers {
    pub(crate) fn of(&self, redactor: &Redactor, op: &Op) -> Arc<OperationRedaction> {
        let key = match &op.conflicting_fingerprint {
            None => Cow::Borrowed(op.fingerprint.as_str()),
            Some(other) => Cow::Owned(format!("{} {other}", op.fingerprint)),
        };
        if let Some(found) = self.lock().get(key.as_ref()) {
            return found.clone();
        }
        let made = Arc::new(match &op.conflicting_payload {
            None => redactor.scrubber(&op.destination, &op.action, &op.payload),
            Some(other) => redactor.scrubber_of(&op.destination, &op.action, &[&op.payload, other]),
        });
        let mut kept = self.lock();
        if kept.len() >= SCRUBBERS_KEPT {
            kept.clear();
        }
        kept.insert(key.into_owned(), made.clone());
        made
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<OperationRedaction>>> {
        // a panic elsewhere while holding it leaves nothing half-written: the map stays usable
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(payload: &str, fingerprint: &str) -> Op {
        Op::new(
            "k-1",
            "w",
            "s",
            "crm",
            "upsert",
            payload.into(),
            fingerprint.into(),
            chrono::Utc::now(),
        )
    }

    #[test]
    fn a_kept_scrubber_is_the_one_of_these_contents() {
        let redactor = Redactor::default();
        let kept = Scrubbers::default();
        let a = op(r#"{"password":"hunter2-a"}"#, "fa");
        let b = op(r#"{"password":"hunter2-b"}"#, "fb");
        for _ in 0..2 {
            assert_eq!(kept.of(&redactor, &a).text("x hunter2-a"), "x [redacted]");
            assert_eq!(kept.of(&redactor, &b).text("x hunter2-b"), "x [redacted]");
            assert_eq!(kept.of(&redactor, &a).text("x hunter2-b"), "x hunter2-b");
        }
        // the same contents with a conflict beside them: the conflict's values are scrubbed too
        let mut c = a.clone();
        c.conflicting_payload = Some(r#"{"password":"hunter2-c"}"#.into());
        c.conflicting_fingerprint = Some("fc".into());
        assert_eq!(
            kept.of(&redactor, &c).text("hunter2-a hunter2-c"),
            "[redacted] [redacted]"
        );
        assert_eq!(kept.of(&redactor, &a).text("hunter2-c"), "hunter2-c");
    }
}
