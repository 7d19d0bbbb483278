//! What the transition tables share: a clock, operations in every state, a context, and a
//! runner that checks what every change must keep.

pub(crate) use super::*;
pub(crate) use crate::domain::lookup::LookupAnswer;
pub(crate) use crate::domain::policy::DestinationPolicy;
pub(crate) use crate::domain::state::{Outcome, Resolution, State};
pub(crate) use Expect::*;
pub(crate) use chrono::TimeDelta;
pub(crate) use chrono::{DateTime, Utc};
pub(crate) use std::time::Duration;

pub(crate) const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, PartialEq)]
pub(crate) enum Expect {
    To(State),
    Nothing,
    Refused,
}

pub(crate) fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
        .unwrap()
        .to_utc()
}

pub(crate) fn base() -> Op {
    Op::new(
        "onb-42-task",
        "onboarding",
        "create-task",
        "projects",
        "create_task",
        "{}".into(),
        "fp1".into(),
        t0(),
    )
}

/// An operation in `state` as it would be after getting there; `stuck` for an old in_flight.
pub(crate) fn op_in(state: State, stuck: bool) -> Op {
    let mut op = base();
    op.state = state;
    op.next_attempt_at = None;
    if state != State::Pending {
        op.attempts = 1;
        op.first_sent_at = Some(t0());
    }
    match state {
        State::InFlight => {
            let started = if stuck {
                t0() - TimeDelta::minutes(10)
            } else {
                t0() - TimeDelta::seconds(5)
            };
            op.attempt_started_at = Some(started);
            op.exception_since = Some(started + TimeDelta::from_std(TIMEOUT).unwrap());
        }
        State::RetryWait => op.next_attempt_at = Some(t0() - TimeDelta::seconds(1)),
        State::Pending => op.next_attempt_at = Some(t0()),
        State::Unknown | State::Rejected | State::Failed | State::Conflict => {
            op.exception_since = Some(t0() - TimeDelta::hours(1));
            op.reason = Some("read timeout".into());
        }
        _ => {}
    }
    op
}

pub(crate) fn with_claim(mut op: Op, by: &str) -> Op {
    op.claim = Some(Claim {
        by: by.into(),
        since: t0() - TimeDelta::minutes(1),
        expires: t0() + TimeDelta::minutes(29),
    });
    op
}

pub(crate) fn ctx<'a>(policy: &'a DestinationPolicy, actor: &'a str) -> Ctx<'a> {
    Ctx {
        now: t0(),
        actor,
        policy,
        lease: Duration::from_secs(1800),
        attempt_timeout: TIMEOUT,
        paused: false,
        jitter: 0.5,
        role: crate::domain::Role::Lead,
    }
}

pub(crate) fn run(op: &Op, cmd: &Command, ctx: &Ctx) -> Expect {
    match apply(op, cmd, ctx) {
        Ok(Some(t)) => {
            assert_eq!(
                t.op.version,
                op.version + 1,
                "each change bumps the version"
            );
            // the dispatcher's due query relies on this (it does not filter on state)
            assert!(
                t.op.next_attempt_at.is_none()
                    || matches!(t.op.state, State::Pending | State::RetryWait),
                "only pending and retry_wait have a next attempt: {:?} at {:?}",
                t.op.state,
                t.op.next_attempt_at
            );
            To(t.op.state)
        }
        Ok(None) => Nothing,
        Err(Refusal(text)) => {
            assert!(
                !text.is_empty() && !text.contains('\n'),
                "a refusal is one line: {text:?}"
            );
            Refused
        }
    }
}

pub(crate) fn commands(op: &Op) -> Vec<(&'static str, Command)> {
    let next = if op.attempt_started_at.is_some() {
        op.attempts
    } else {
        op.attempts + 1
    };
    let finish = |outcome| Command::FinishAttempt {
        n: next,
        outcome,
        reference: Some("T-1".into()),
        error: None,
        http_status: None,
        retry_after: None,
    };
    vec![
        (
            "record same",
            Command::Record {
                payload: "{}".into(),
                fingerprint: "fp1".into(),
                run: None,
            },
        ),
        (
            "record changed",
            Command::Record {
                payload: "{\"a\":1}".into(),
                fingerprint: "fp2".into(),
                run: None,
            },
        ),
        ("start", Command::StartAttempt),
        ("accepted", finish(Outcome::Accepted)),
        ("rejected", finish(Outcome::Rejected)),
        ("transient", finish(Outcome::Transient)),
        ("unknown", finish(Outcome::Unknown)),
        ("sweep", Command::Sweep),
        ("resend", Command::Resend),
        (
            "claim",
            Command::Staff(StaffAction::Claim { force_reason: None }),
        ),
        ("release", Command::Staff(StaffAction::Release)),
        (
            "found",
            Command::Staff(StaffAction::ReconcileFound {
                reference: "T-9".into(),
                note: None,
            }),
        ),
        (
            "absent",
            Command::Staff(StaffAction::ReconcileAbsent { note: None }),
        ),
        ("retry", Command::Staff(StaffAction::Retry { note: None })),
        (
            "close",
            Command::Staff(StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "gone".into(),
            }),
        ),
        (
            "note",
            Command::Staff(StaffAction::Note {
                text: "looked at it".into(),
            }),
        ),
    ]
}
