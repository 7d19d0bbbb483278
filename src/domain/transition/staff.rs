//! What a person does to an operation (manual: Staff actions): each staff action once [`staff_check`] has let
//! it through (the one place its rules are written), and what is left to do to a terminal one.

use serde_json::json;

use super::op::{Claim, Op};
use super::rules::Why;
use super::rules::staff_check;
use super::terms::{AttemptEffect, Command, Ctx, Refusal, StaffAction, Transition};
use super::terms::{Made, lease_end, refuse, renewed};
use crate::domain::lookup::LookupAnswer;
use crate::domain::state::{Outcome, Resolution, State};

/// A terminal operation never changes again: a note is still taken, the same contents again are
/// a harmless repeat, everything else is refused.
pub(super) fn on_terminal(
    op: &Op,
    cmd: &Command,
    ctx: &Ctx,
) -> Result<Option<Transition>, Refusal> {
    let key = &op.key;
    match cmd {
        Command::Staff(StaffAction::Note { text }) => note(op, text, ctx).map(|m| {
            Some(Transition {
                op: m.op,
                attempt: m.attempt,
                kind: m.kind,
                detail: m.detail,
                warning: m.warning,
                made: None,
            })
        }),
        Command::Record { fingerprint, .. } if *fingerprint == op.fingerprint => Ok(None),
        Command::Record { .. } => refuse(format!(
            "{key} is {}: its contents cannot change (the recorded contents are kept)",
            op.state
        )),
        Command::FinishAttempt { .. } | Command::StartAttempt => refuse(format!(
            "{key} is {}: no further attempt is recorded",
            op.state
        )),
        Command::Sweep => Ok(None),
        Command::Staff(StaffAction::Correct { .. }) => {
            super::correct::may_correct(op, ctx).map(|_| None)
        }
        _ => refuse(format!(
            "{key} is {}: nothing more can be done to it",
            op.state
        )),
    }
}

/// A staff action on an operation that is not terminal.
pub(super) fn act(op: &Op, next: Op, action: &StaffAction, ctx: &Ctx) -> Result<Made, Refusal> {
    if let StaffAction::Note { text } = action {
        return note(op, text, ctx);
    }
    let claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
    let mut made = match action {
        StaffAction::Claim { force_reason } => claim(op, next, force_reason, ctx),
        StaffAction::Release => release(next),
        StaffAction::ReconcileFound { reference, note } => found(op, next, reference, note),
        StaffAction::ReconcileAbsent { note } => absent(op, next, note, ctx, claimed),
        StaffAction::Retry { note } => retry(op, next, note, ctx),
        StaffAction::Close {
            resolution,
            reference,
            superseded_by,
            note,
        } => close(op, next, *resolution, reference, superseded_by, note),
        StaffAction::Note { .. } => unreachable!("a note is taken above"),
        StaffAction::LookUp { answer } => look_up(op, next, answer, ctx, claimed),
        StaffAction::Correct {
            corrected_as,
            edits,
            note,
        } => super::correct::correct(op, next, corrected_as, edits, note, ctx)?,
    };
    made.claimed = claimed;
    Ok(made)
}

fn claim(op: &Op, mut next: Op, force_reason: &Option<String>, ctx: &Ctx) -> Made {
    let now = ctx.now;
    let (kind, detail) = match op.claimed_by_other(ctx.actor, now) {
        Some(c) => (
            "claim_taken",
            json!({ "from": c.by, "reason": force_reason }),
        ),
        None => ("claimed", json!({})),
    };
    let since = match &op.claim {
        Some(c) if c.by == ctx.actor && c.is_live(now) => c.since,
        _ => now,
    };
    next.claim = Some(Claim {
        by: ctx.actor.into(),
        since,
        expires: lease_end(ctx),
    });
    Made::new(next, kind, detail)
}

fn release(mut next: Op) -> Made {
    next.claim = None;
    Made::new(next, "released", json!({}))
}

fn found(op: &Op, mut next: Op, reference: &str, note: &Option<String>) -> Made {
    next.state = State::Succeeded;
    next.reference = Some(reference.to_string());
    // done after all: the old error is history (the attempts keep it), not its reason
    next.reason = None;
    next.attempt_started_at = None;
    let detail = json!({ "found": true, "reference": reference, "note": note });
    Made::new(next, "reconciled", detail)
        .with_attempt(close_open_attempt(op, "interrupted; reconciled by staff"))
}

fn absent(op: &Op, mut next: Op, note: &Option<String>, ctx: &Ctx, claimed: bool) -> Made {
    next.state = State::Failed;
    next.reason = Some("reconciled absent".into());
    next.ambiguous = false;
    next.attempt_started_at = None;
    next.claim = held(op, ctx, claimed);
    let detail = json!({ "found": false, "note": note });
    Made::new(next, "reconciled", detail).with_attempt(close_open_attempt(
        op,
        "interrupted; reconciled absent by staff",
    ))
}

fn retry(op: &Op, mut next: Op, note: &Option<String>, ctx: &Ctx) -> Made {
    let warning = (op.state == State::Rejected).then(|| {
        format!(
            "{} rejected this request before and may reject it again",
            op.destination
        )
    });
    next.state = State::Pending;
    next.next_attempt_at = Some(ctx.now);
    next.budget_start = op.attempts;
    next.ambiguous = op.state == State::Unknown;
    next.reason = None;
    next.claim = None;
    let detail = json!({ "requested_by": ctx.actor, "note": note });
    Made {
        warning,
        ..Made::new(next, "retry_requested", detail)
    }
}

fn close(
    op: &Op,
    mut next: Op,
    resolution: Resolution,
    reference: &Option<String>,
    superseded_by: &Option<String>,
    note: &str,
) -> Made {
    next.state = State::Closed;
    // the resolution says why it is closed; the old error stays in the attempts
    next.reason = None;
    next.resolution = Some(resolution);
    next.superseded_by = superseded_by.clone();
    if resolution == Resolution::DoneElsewhere {
        next.reference = reference.clone();
    }
    next.attempt_started_at = None;
    let detail = json!({ "resolution": resolution.as_str(), "reference": reference,
                         "superseded_by": superseded_by, "note": note });
    Made::new(next, "closed", detail)
        .with_attempt(close_open_attempt(op, "interrupted; closed by staff"))
}

/// A note, on any operation: its holder's claim renewed, nothing else changed.
fn note(op: &Op, text: &str, ctx: &Ctx) -> Result<Made, Refusal> {
    let action = StaffAction::Note {
        text: text.to_string(),
    };
    staff_check(op, &action, ctx).map_err(Why::refusal)?;
    let mut next = op.clone();
    next.updated_at = ctx.now;
    next.version = op.version + 1;
    next.claim = renewed(op, ctx);
    Ok(Made {
        as_is: true,
        ..Made::new(next, "note", json!({ "text": text }))
    })
}

/// Reconciled by what the destination's lookup, run at a person's request, answered.
fn look_up(op: &Op, mut next: Op, answer: &LookupAnswer, ctx: &Ctx, claimed: bool) -> Made {
    next.attempt_started_at = None;
    let attempt = match answer {
        LookupAnswer::Found { reference, .. } => {
            next.state = State::Succeeded;
            next.reference = Some(reference.clone());
            next.reason = None;
            close_open_attempt(op, "interrupted; found by a lookup")
        }
        _ => {
            next.state = State::Failed;
            next.reason = Some(format!("looked up: not at {}", op.destination));
            next.ambiguous = false;
            next.claim = held(op, ctx, claimed);
            close_open_attempt(op, "interrupted; not found by a lookup")
        }
    };
    let detail = json!({ "found": answer.reference().is_some(), "reference": answer.reference(),
                         "evidence": answer.evidence() });
    Made::new(next, "reconciled", detail).with_attempt(attempt)
}

/// The claim an action leaves on an item that stays open: the actor's, renewed or newly taken.
pub(super) fn held(op: &Op, ctx: &Ctx, claimed: bool) -> Option<Claim> {
    if claimed {
        Some(Claim {
            by: ctx.actor.into(),
            since: ctx.now,
            expires: lease_end(ctx),
        })
    } else {
        renewed(op, ctx)
    }
}

pub(super) fn close_open_attempt(op: &Op, error: &str) -> AttemptEffect {
    if op.attempt_started_at.is_none() {
        return AttemptEffect::None;
    }
    AttemptEffect::Finish {
        n: op.attempts,
        whole: false,
        outcome: Outcome::Unknown,
        http_status: None,
        reference: None,
        error: Some(error.into()),
    }
}

#[cfg(test)]
#[path = "staff_tests.rs"]
mod tests;
