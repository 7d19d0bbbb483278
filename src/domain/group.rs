//! An exception's group (manual: Owners and notifications): the exceptions that share a
//! workflow, destination, state and reason (a destination's answer summarized, the payload's own
//! values taken out, redacted, what varies masked) are one group, known by a short id. The id is
//! kept on each operation while it is an exception, so that `group:ID` lists exactly a group's
//! items: `settle groups`, the console's `Enter` on a group and every message name the same set.

use sha2::{Digest, Sha256};

use super::mask::told_reason;
use super::patterns::redact_text;
use super::transition::Op;

/// How many hex digits a group's id has.
pub const ID_LEN: usize = 10;

/// A reason as a group names it (and a message tells it): redacted, a destination's answer
/// summarized, every value of the payload taken out, what varies masked, on one line.
pub fn group_reason(reason: Option<&str>, payload: &str) -> String {
    let payload: Option<serde_json::Value> = serde_json::from_str(payload).ok();
    told_reason(&redact_text(reason.unwrap_or("")), payload.as_ref())
}

/// The id of the group of `workflow`, `destination`, `state` and a reason as [`group_reason`]
/// gives it: the first ten hex digits of their SHA-256.
pub fn group_id(workflow: &str, destination: &str, state: &str, reason: &str) -> String {
    let mut h = Sha256::new();
    for part in [workflow, destination, state, reason] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(ID_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The group `op` belongs to while it is an exception (`rejected`, `unknown`, `failed`,
/// `conflict`); none otherwise.
pub fn group_of(op: &Op) -> Option<String> {
    op.state.is_exception().then(|| {
        let reason = group_reason(op.reason.as_deref(), &op.payload);
        group_id(&op.workflow, &op.destination, op.state.as_str(), &reason)
    })
}

/// Whether `text` can be a group's id: ten lower-case hex digits.
pub fn is_group_id(text: &str) -> bool {
    text.len() == ID_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_varies_in_one_incident_is_one_group_and_a_kind_is_another() {
        let id = |reason: &str, payload: &str| {
            group_id(
                "billing",
                "crm",
                "unknown",
                &group_reason(Some(reason), payload),
            )
        };
        let p = r#"{"customer":{"name":"Zed Example"}}"#;
        let q = r#"{"customer":{"name":"Ann Other"}}"#;
        assert_eq!(
            id("read timeout after 30s", p),
            id("read timeout after 31s", q)
        );
        assert_eq!(
            id("HTTP 409: customer Zed Example exists", p),
            id("HTTP 409: customer Ann Other exists", q),
            "a destination that echoes the request: one group"
        );
        assert_ne!(
            id("read timeout after 30s", p),
            id("connection reset by peer", p)
        );
        assert_ne!(id("HTTP 422: no", p), id("HTTP 500: no", p));
        let a = id("read timeout after 30s", p);
        assert!(is_group_id(&a), "{a}");
        assert_ne!(
            a,
            group_id(
                "billing",
                "crm",
                "failed",
                &group_reason(Some("read timeout after 30s"), p)
            ),
            "the state is part of it"
        );
        assert!(!is_group_id("ABCDEF0123") && !is_group_id("abc"));
    }
}
