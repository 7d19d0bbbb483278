//! The safe next step: one test per row of the manual's safe next step.

use super::{StepKind, safe_next_step};
use crate::domain::transition::test_support::*;

#[test]
fn step_waits_for_a_paused_destination() {
    let op = op_in(State::RetryWait, false);
    let paused = crate::domain::next_step::Paused {
        workflow: false,
        destination: true,
    };
    let s = safe_next_step(
        &op,
        &DestinationPolicy::default(),
        "alice",
        paused,
        TIMEOUT,
        t0(),
    );
    assert_eq!(
        (s.kind, s.text.as_str()),
        (
            StepKind::Paused,
            format!(
                "Automatic attempt waits: destination {} paused",
                op.destination
            )
            .as_str()
        )
    );
}

fn next(op: &Op, policy: &DestinationPolicy, paused: bool) -> (StepKind, String) {
    let paused = crate::domain::next_step::Paused {
        workflow: paused,
        destination: false,
    };
    let s = safe_next_step(op, policy, "alice", paused, TIMEOUT, t0());
    (s.kind, s.text)
}

#[test]
fn step_claimed_by_someone_else() {
    let (k, text) = next(
        &with_claim(op_in(State::Unknown, false), "bob"),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::LeaveToHolder,
            "Claimed by bob for 1m: leave it to them"
        )
    );
}

#[test]
fn step_in_flight_live() {
    assert_eq!(
        next(
            &op_in(State::InFlight, false),
            &DestinationPolicy::default(),
            false
        )
        .0,
        StepKind::Wait
    );
}

/// The safe next step: an interrupted attempt asks a person to reconcile it only where the destination
/// neither deduplicates nor can be looked up; elsewhere the destination settles it.
#[test]
fn step_in_flight_stuck_or_interrupted() {
    let dedupes = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(10 * 3600)),
        ..Default::default()
    };
    let lookup = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let neither = DestinationPolicy::default();
    let stuck = op_in(State::InFlight, true);
    let mut interrupted = op_in(State::Unknown, false);
    interrupted.reason = Some("interrupted".into());
    let cases = [
        (
            &stuck,
            &dedupes,
            StepKind::Wait,
            "Attempt interrupted: the sweep retries it with the same key (projects deduplicates until 18:00 UTC)",
        ),
        (
            &stuck,
            &lookup,
            StepKind::LookUp,
            "Attempt interrupted: look up onb-42-task in projects, then reconcile found/absent",
        ),
        (
            &stuck,
            &neither,
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome",
        ),
        (
            &interrupted,
            &dedupes,
            StepKind::RetrySameKey,
            "Retry with the same key: projects deduplicates until 18:00 UTC",
        ),
        (
            &interrupted,
            &lookup,
            StepKind::LookUp,
            "Look up onb-42-task in projects, then reconcile found/absent",
        ),
        (
            &interrupted,
            &neither,
            StepKind::ReconcileInterrupted,
            "Attempt interrupted: reconcile as an unknown outcome",
        ),
    ];
    for (op, policy, kind, text) in cases {
        assert_eq!(next(op, policy, false), (kind, text.to_string()), "{op:?}");
    }
}

#[test]
fn step_unknown_deduplicated() {
    let p = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(10 * 3600)),
        lookup: true,
        ..Default::default()
    };
    let (k, text) = next(&op_in(State::Unknown, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::RetrySameKey,
            "Retry with the same key: projects deduplicates until 18:00 UTC"
        )
    );
}

#[test]
fn step_unknown_with_lookup() {
    let p = DestinationPolicy {
        lookup: true,
        ..Default::default()
    };
    let (k, text) = next(&op_in(State::Unknown, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::LookUp,
            "Look up onb-42-task in projects, then reconcile found/absent"
        )
    );
}

#[test]
fn step_unknown_neither() {
    let mut op = op_in(State::Unknown, false);
    op.created_at = t0() - TimeDelta::hours(52);
    op.first_sent_at = Some(op.created_at);
    // dedupes, but its retention is long past: the same as not deduplicating
    let p = DestinationPolicy {
        dedupes: true,
        key_retention: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let (k, text) = next(&op, &p, false);
    assert_eq!(k, StepKind::CheckDestination);
    assert_eq!(
        text,
        "Check projects for this request (onb-42-task, created 2d 4h ago); reconcile found/absent before any retry"
    );
}

#[test]
fn step_failed() {
    let (k, text) = next(
        &op_in(State::Failed, false),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::RetryOrAbandon,
            "Confirmed not done: retry, or close as abandoned"
        )
    );
}

#[test]
fn step_rejected() {
    let mut op = op_in(State::Rejected, false);
    op.reason = Some("422 due date in the past".into());
    let (k, text) = next(&op, &DestinationPolicy::default(), false);
    assert_eq!(k, StepKind::CorrectAtSource);
    assert_eq!(
        text,
        "projects rejected it: 422 due date in the past. Correct it (settle correct, e): it is sent once under a new key"
    );
}

#[test]
fn step_conflict() {
    let (k, text) = next(
        &op_in(State::Conflict, false),
        &DestinationPolicy::default(),
        false,
    );
    assert_eq!(k, StepKind::DecideContents);
    assert!(
        text.starts_with("Request changed under onb-42-task: decide which contents are intended")
    );
}

#[test]
fn step_pending_and_retry_wait() {
    let p = DestinationPolicy::default();
    let (k, text) = next(&op_in(State::Pending, false), &p, false);
    assert_eq!(
        (k, text.as_str()),
        (StepKind::Automatic, "Automatic attempt 1 of 6 at now")
    );
    let mut op = op_in(State::RetryWait, false);
    op.next_attempt_at = Some(t0() + TimeDelta::minutes(5));
    let (k, text) = next(&op, &p, false);
    assert_eq!(
        (k, text.as_str()),
        (StepKind::Automatic, "Automatic attempt 2 of 6 at 10:05 UTC")
    );
    let (k, text) = next(&op, &p, true);
    assert_eq!(
        (k, text.as_str()),
        (
            StepKind::Paused,
            "Automatic attempt waits: workflow onboarding paused"
        )
    );
}

#[test]
fn step_terminal() {
    for s in [State::Succeeded, State::Closed] {
        assert_eq!(
            next(&op_in(s, false), &DestinationPolicy::default(), false),
            (StepKind::Nothing, "Nothing to do".into())
        );
    }
}
