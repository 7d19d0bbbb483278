//! The safe next step (manual: The safe next step): what a person may do about an operation right now.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::policy::DestinationPolicy;
use super::state::State;
use super::time::format_age;
use super::transition::Op;

/// What holds an operation's automatic attempts back: its workflow or its destination paused
/// (manual: Staff actions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paused {
    pub workflow: bool,
    pub destination: bool,
}

/// Which row of the manual's table applies; the console colours and the tests key on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    LeaveToHolder,
    Wait,
    ReconcileInterrupted,
    RetrySameKey,
    LookUp,
    CheckDestination,
    RetryOrAbandon,
    CorrectAtSource,
    DecideContents,
    Automatic,
    Paused,
    Nothing,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NextStep {
    pub kind: StepKind,
    pub text: String,
}

fn at(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if t.date_naive() == now.date_naive() {
        t.format("%H:%M UTC").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M UTC").to_string()
    }
}

/// A pure function of the operation, its destination's capabilities, the claim and the clock.
/// `viewer` is the operator asking: their own claim does not tell them to leave it.
pub fn safe_next_step(
    op: &Op,
    policy: &DestinationPolicy,
    viewer: &str,
    paused: Paused,
    attempt_timeout: Duration,
    now: DateTime<Utc>,
) -> NextStep {
    if op.state.is_terminal() {
        return step(StepKind::Nothing, "Nothing to do".into());
    }
    if let Some(c) = op.claimed_by_other(viewer, now) {
        return step(
            StepKind::LeaveToHolder,
            format!(
                "Claimed by {} for {}: leave it to them",
                c.by,
                format_age(now - c.since)
            ),
        );
    }
    let dest = &op.destination;
    match op.state {
        State::InFlight => in_flight(op, policy, attempt_timeout, now),
        State::Unknown => unknown(op, policy, now),
        State::Failed => step(
            StepKind::RetryOrAbandon,
            "Confirmed not done: retry, or close as abandoned".into(),
        ),
        State::Rejected => step(
            StepKind::CorrectAtSource,
            format!(
                "{dest} rejected it: {}. Correct it (settle correct, e): it is sent once under a new key",
                op.reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        State::Conflict => step(
            StepKind::DecideContents,
            format!(
                "Request changed under {}: decide which contents are intended; close or supersede",
                op.key
            ),
        ),
        State::Pending | State::RetryWait => waiting(op, policy, paused, now),
        State::Succeeded | State::Closed => step(StepKind::Nothing, "Nothing to do".into()),
    }
}

fn step(kind: StepKind, text: String) -> NextStep {
    NextStep { kind, text }
}

/// An attempt running, or interrupted: an interrupted attempt is an unknown outcome (manual: States):
/// where the destination can settle it (a retry with the same key, or a lookup) that is the
/// step; else a person reconciles.
fn in_flight(
    op: &Op,
    policy: &DestinationPolicy,
    attempt_timeout: Duration,
    now: DateTime<Utc>,
) -> NextStep {
    let (dest, key) = (&op.destination, &op.key);
    if !op.is_stuck(now, attempt_timeout) {
        step(StepKind::Wait, "Attempt running: wait".into())
    } else if policy.dedupes_at(op.first_sent_at, now) {
        let until = policy.horizon(op.first_sent_at).unwrap_or(now);
        step(
            StepKind::Wait,
            format!(
                "Attempt interrupted: the sweep retries it with the same key ({dest} deduplicates until {})",
                at(until, now)
            ),
        )
    } else if policy.lookup {
        step(
            StepKind::LookUp,
            format!("Attempt interrupted: look up {key} in {dest}, then reconcile found/absent"),
        )
    } else {
        step(
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome".into(),
        )
    }
}

/// An unknown outcome: retried with the same key where the destination deduplicates, looked up
/// where it can be, else checked at the destination by a person (an interrupted attempt says so).
fn unknown(op: &Op, policy: &DestinationPolicy, now: DateTime<Utc>) -> NextStep {
    let (dest, key) = (&op.destination, &op.key);
    let interrupted = op.reason.as_deref() == Some("interrupted");
    if policy.dedupes_at(op.first_sent_at, now) {
        let until = policy.horizon(op.first_sent_at).unwrap_or(now);
        step(
            StepKind::RetrySameKey,
            format!(
                "Retry with the same key: {dest} deduplicates until {}",
                at(until, now)
            ),
        )
    } else if policy.lookup {
        step(
            StepKind::LookUp,
            format!("Look up {key} in {dest}, then reconcile found/absent"),
        )
    } else if interrupted {
        step(
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome".into(),
        )
    } else {
        step(
            StepKind::CheckDestination,
            format!(
                "Check {dest} for this request ({key}, created {} ago); reconcile found/absent before any retry",
                format_age(now - op.created_at)
            ),
        )
    }
}

/// Waiting for an automatic attempt: when, or what holds it back.
fn waiting(op: &Op, policy: &DestinationPolicy, paused: Paused, now: DateTime<Utc>) -> NextStep {
    if paused.workflow {
        return step(
            StepKind::Paused,
            format!("Automatic attempt waits: workflow {} paused", op.workflow),
        );
    }
    if paused.destination {
        return step(
            StepKind::Paused,
            format!(
                "Automatic attempt waits: destination {} paused",
                op.destination
            ),
        );
    }
    if op.claim.as_ref().is_some_and(|c| c.is_live(now)) {
        return step(
            StepKind::Automatic,
            "Held by your claim: release it to let the automatic attempt run".into(),
        );
    }
    let n = op.attempts - op.budget_start + 1;
    let when = op
        .next_attempt_at
        .filter(|t| *t > now)
        .map_or("now".to_string(), |t| at(t, now));
    step(
        StepKind::Automatic,
        format!(
            "Automatic attempt {n} of {} at {when}",
            policy.retry.max_attempts
        ),
    )
}

#[cfg(test)]
#[path = "next_step_tests.rs"]
mod tests;
