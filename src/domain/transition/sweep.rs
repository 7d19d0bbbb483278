//! What happens to an attempt nobody answered (manual: States): past its timeout it is swept as an
//! unknown outcome; and the dispatcher's lookup, which settles an unknown outcome by what the
//! destination says (manual: Destinations and the dispatcher).

use serde_json::json;

use super::attempts::{Answered, finish_attempt};
use super::op::Op;
use super::terms::{AttemptEffect, Ctx, Refusal};
use super::terms::{Made, refuse};
use crate::domain::lookup::LookupAnswer;
use crate::domain::state::{Outcome, State};
use crate::domain::time::format_duration;

/// An open attempt past its timeout, by the rule of any unknown outcome: at a destination that
/// deduplicates, inside its horizon, the next attempt with the same key settles it; elsewhere it
/// waits as `unknown` (interrupted), for the dispatcher's lookup or a person. `None`: not stuck.
pub(super) fn sweep(op: &Op, mut next: Op, ctx: &Ctx) -> Option<Made> {
    if !op.is_stuck(ctx.now, ctx.attempt_timeout) {
        return None;
    }
    let error = format!(
        "interrupted: no outcome within {}",
        format_duration(ctx.attempt_timeout)
    );
    next.attempt_started_at = None;
    next.last_error = Some(error.clone());
    let error = Some(error);
    finish_attempt(
        op,
        &mut next,
        op.attempts,
        Outcome::Unknown,
        &None,
        &error,
        Answered::default(),
        ctx,
    );
    if next.state == State::Unknown {
        next.reason = Some("interrupted".into());
    }
    let attempt = AttemptEffect::Finish {
        n: op.attempts,
        whole: false,
        outcome: Outcome::Unknown,
        http_status: None,
        reference: None,
        error,
    };
    let detail = json!({ "attempt": op.attempts, "reason": "interrupted" });
    Some(Made::new(next, "swept", detail).with_attempt(attempt))
}

/// The dispatcher asked the destination: found or absent settle an unknown outcome; no answer
/// leaves it unknown, now for a person (who can look again).
pub(super) fn lookup(op: &Op, mut next: Op, answer: &LookupAnswer) -> Result<Made, Refusal> {
    if op.state != State::Unknown {
        return refuse(format!(
            "{} is {}: a lookup settles only an unknown outcome",
            op.key, op.state
        ));
    }
    let dest = &op.destination;
    match answer {
        LookupAnswer::Found { reference, .. } => {
            next.state = State::Succeeded;
            next.reference = Some(reference.clone());
            next.reason = None;
        }
        LookupAnswer::Absent { .. } => {
            next.state = State::Failed;
            next.reason = Some(format!("looked up: not at {dest}"));
            next.ambiguous = false;
        }
        LookupAnswer::NoAnswer { why } => {
            next.reason = Some(format!("looked up at {dest}: no answer ({why})"));
        }
    }
    let detail = json!({ "found": answer.reference().is_some(), "reference": answer.reference(),
                         "evidence": answer.evidence() });
    Ok(Made::new(next, "looked_up", detail))
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
