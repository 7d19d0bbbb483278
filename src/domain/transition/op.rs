//! One operation as the rules see it: plain data, raw payload included (never shown to readers),
//! and the claim that names who works it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::state::{Resolution, State};
use crate::domain::time::after;

/// A lease naming the operator working an item.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    pub by: String,
    pub since: DateTime<Utc>,
    pub expires: DateTime<Utc>,
}

impl Claim {
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.expires > now
    }
}

/// One operation as the rules see it: plain data, raw payload included (never shown to readers).
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub key: String,
    pub workflow: String,
    pub step: String,
    pub destination: String,
    pub action: String,
    pub payload: String,
    pub fingerprint: String,
    pub conflicting_payload: Option<String>,
    pub conflicting_fingerprint: Option<String>,
    pub state: State,
    /// Why it is in this state, e.g. `interrupted` or the destination's rejection.
    pub reason: Option<String>,
    /// Attempts made so far; while `attempt_started_at` is set, the last one is still open.
    pub attempts: u32,
    /// Attempts made before the current budget (a staff retry starts a fresh one).
    pub budget_start: u32,
    /// An attempt in the current budget had an unknown outcome.
    pub ambiguous: bool,
    pub first_sent_at: Option<DateTime<Utc>>,
    pub attempt_started_at: Option<DateTime<Utc>>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub reference: Option<String>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it became (or, for an open attempt, will become) an exception.
    pub exception_since: Option<DateTime<Utc>>,
    pub claim: Option<Claim>,
    pub resolution: Option<Resolution>,
    pub superseded_by: Option<String>,
    pub version: i64,
    /// The run it belongs to (manual: Runs), named when it is recorded and never changed after.
    pub run: Option<String>,
    /// The key of the operation this one corrects (manual: Correcting a request), given when the
    /// correction is made and never changed after.
    pub corrects: Option<String>,
    /// Its group's id while it is an exception (`domain::group`), kept right by every transition.
    pub group: Option<String>,
}

impl Op {
    /// A freshly recorded operation, due at once.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: &str,
        workflow: &str,
        step: &str,
        destination: &str,
        action: &str,
        payload: String,
        fingerprint: String,
        now: DateTime<Utc>,
    ) -> Op {
        Op {
            key: key.into(),
            workflow: workflow.into(),
            step: step.into(),
            destination: destination.into(),
            action: action.into(),
            payload,
            fingerprint,
            conflicting_payload: None,
            conflicting_fingerprint: None,
            state: State::Pending,
            reason: None,
            attempts: 0,
            budget_start: 0,
            ambiguous: false,
            first_sent_at: None,
            attempt_started_at: None,
            next_attempt_at: Some(now),
            reference: None,
            last_error: None,
            created_at: now,
            updated_at: now,
            exception_since: None,
            claim: None,
            resolution: None,
            superseded_by: None,
            version: 0,
            run: None,
            corrects: None,
            group: None,
        }
    }

    /// An `in_flight` operation whose attempt outlived its timeout.
    pub fn is_stuck(&self, now: DateTime<Utc>, timeout: Duration) -> bool {
        self.state == State::InFlight
            && self
                .attempt_started_at
                .is_some_and(|t| after(t, timeout) <= now)
    }

    pub fn is_exception(&self, now: DateTime<Utc>) -> bool {
        self.exception_since.is_some_and(|t| t <= now)
    }

    /// The live claim of someone other than `actor`, if any.
    pub fn claimed_by_other(&self, actor: &str, now: DateTime<Utc>) -> Option<&Claim> {
        self.claim
            .as_ref()
            .filter(|c| c.is_live(now) && c.by != actor)
    }
}

/// An item as a person's action found it, kept on the action's event: what taking it back
/// restores. Nothing of the payload is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// The version the action left: the item is restored only while it still has it.
    pub v: i64,
    pub state: State,
    pub reason: Option<String>,
    pub claim: Option<Claim>,
    pub reference: Option<String>,
    pub resolution: Option<Resolution>,
    pub superseded_by: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub exception_since: Option<DateTime<Utc>>,
    pub budget_start: u32,
    pub ambiguous: bool,
    /// The action ended an attempt that was under way: no undo reopens it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_attempt: bool,
    /// A note: taking it back withdraws it, whatever happened to the item since.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub note: bool,
    /// A correction: the key it made and that operation's version as made; taking it back
    /// withdraws that operation, only while it is as made (never sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_as: Option<(String, i64)>,
}

impl Restore {
    /// What taking back the change from `before` to `after` restores.
    pub fn of(before: &Op, after: &Op, note: bool) -> Restore {
        Restore {
            v: after.version,
            state: before.state,
            reason: before.reason.clone(),
            claim: before.claim.clone(),
            reference: before.reference.clone(),
            resolution: before.resolution,
            superseded_by: before.superseded_by.clone(),
            next_attempt_at: before.next_attempt_at,
            exception_since: before.exception_since,
            budget_start: before.budget_start,
            ambiguous: before.ambiguous,
            ended_attempt: before.attempt_started_at.is_some()
                && after.attempt_started_at.is_none(),
            note,
            corrected_as: None,
        }
    }
}
