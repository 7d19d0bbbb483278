//! The rules of the automation's own commands (manual: States, Automatic retries, The protocol): the key recorded again, an
//! attempt started, an attempt's outcome.

use std::time::Duration;

use serde_json::json;

use super::op::Op;
use super::terms::{AttemptEffect, Command, Ctx, Refusal};
use super::terms::{Made, fmt_time, refuse};
use crate::domain::state::{Outcome, State};
use crate::domain::time::after;

/// The key arrived again with these contents: the same is a harmless repeat; new contents make
/// a `conflict` that keeps both (the first new contents: a repeat of them changes nothing).
pub(super) fn record(op: &Op, mut next: Op, payload: &str, fingerprint: &str) -> Option<Made> {
    if fingerprint == op.fingerprint || Some(fingerprint) == op.conflicting_fingerprint.as_deref() {
        return None;
    }
    next.state = State::Conflict;
    next.conflicting_payload = Some(payload.to_string());
    next.conflicting_fingerprint = Some(fingerprint.to_string());
    next.reason = Some(format!("contents changed while {}", op.state));
    next.next_attempt_at = None;
    let detail = json!({ "fingerprint": fingerprint, "previous_fingerprint": op.fingerprint });
    Some(Made::new(next, "conflict", detail))
}

/// The next attempt starts: only a due `pending` or `retry_wait`, never in a paused workflow.
pub(super) fn start(op: &Op, mut next: Op, ctx: &Ctx) -> Result<Option<Made>, Refusal> {
    let (key, now) = (&op.key, ctx.now);
    if !matches!(op.state, State::Pending | State::RetryWait) {
        return refuse(format!(
            "{key} is {}: only pending or retry_wait operations are attempted",
            op.state
        ));
    }
    if ctx.paused {
        return refuse(format!(
            "workflow {} is paused: no attempt is started",
            op.workflow
        ));
    }
    if op.next_attempt_at.is_some_and(|t| t > now) {
        return refuse(format!(
            "{key} is not due until {}",
            fmt_time(op.next_attempt_at.unwrap_or(now))
        ));
    }
    next.attempts = op.attempts + 1;
    next.state = State::InFlight;
    next.attempt_started_at = Some(now);
    next.first_sent_at = op.first_sent_at.or(Some(now));
    next.next_attempt_at = None;
    let n = next.attempts;
    let detail = json!({ "attempt": n });
    Ok(Some(
        Made::new(next, "attempt_started", detail).with_attempt(AttemptEffect::Start { n }),
    ))
}

/// The gateway's repeat of a request confirmed not done: pending now, a fresh attempt budget,
/// as a person's retry would make it (the caller asked again; nothing was done to repeat).
pub(super) fn resend(op: &Op, mut next: Op, ctx: &Ctx) -> Result<Made, Refusal> {
    if op.state != State::Failed {
        return refuse(format!(
            "{} is {}: only a failed operation (confirmed not done) is sent again on a repeat",
            op.key, op.state
        ));
    }
    next.state = State::Pending;
    next.next_attempt_at = Some(ctx.now);
    next.budget_start = op.attempts;
    next.ambiguous = false;
    next.reason = None;
    let detail = json!({ "requested_by": ctx.actor, "why": "repeated by its caller" });
    Ok(Made::new(next, "resend_requested", detail))
}

/// The outcome of attempt `n`: the open one, or a whole attempt made outside settle (then the
/// next in order, and only where an automatic attempt is safe).
pub(super) fn finish(
    op: &Op,
    mut next: Op,
    cmd: &Command,
    ctx: &Ctx,
) -> Result<Option<Made>, Refusal> {
    let Command::FinishAttempt {
        n,
        outcome,
        reference,
        error,
        http_status,
        retry_after,
    } = cmd
    else {
        unreachable!("finish() is only called with an attempt's outcome")
    };
    let key = &op.key;
    let open = op.attempt_started_at.is_some() && *n == op.attempts;
    let whole = !open;
    if whole {
        if *n != op.attempts + 1 {
            return refuse(format!(
                "{key}: attempt {n} reported, but {} attempt(s) are recorded; the next is {}",
                op.attempts,
                op.attempts + 1
            ));
        }
        if !matches!(op.state, State::Pending | State::RetryWait) {
            return refuse(format!(
                "{key} is {}: an automatic attempt is not safe now; staff settle it from the exception queue",
                op.state
            ));
        }
        next.attempts = *n;
        next.first_sent_at = op.first_sent_at.or(Some(ctx.now));
    }
    next.attempt_started_at = None;
    let attempt = AttemptEffect::Finish {
        n: *n,
        whole,
        outcome: *outcome,
        http_status: *http_status,
        reference: reference.clone(),
        error: error.clone(),
    };
    let detail = json!({ "attempt": n, "outcome": outcome.as_str(), "http_status": http_status,
                         "reference": reference, "error": error });
    next.last_error = error.clone().or(op.last_error.clone());
    if op.state == State::Conflict {
        // The attempt ran with the first contents; the conflict still needs a person.
        if *outcome == Outcome::Accepted {
            next.reference = reference.clone();
        }
    } else {
        let answered = Answered {
            http_status: *http_status,
            retry_after: *retry_after,
        };
        finish_attempt(op, &mut next, *n, *outcome, reference, error, answered, ctx);
    }
    Ok(Some(
        Made::new(next, "attempt", detail).with_attempt(attempt),
    ))
}

/// What the destination's answer said beside its outcome class.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Answered {
    pub(super) http_status: Option<u16>,
    pub(super) retry_after: Option<Duration>,
}

/// The automatic rules for an attempt's outcome (manual: States, Automatic retries).
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_attempt(
    op: &Op,
    next: &mut Op,
    n: u32,
    outcome: Outcome,
    reference: &Option<String>,
    error: &Option<String>,
    answered: Answered,
    ctx: &Ctx,
) {
    let policy = ctx.policy;
    let used = n.saturating_sub(op.budget_start);
    let spent = used >= policy.retry.max_attempts;
    let retry_after = answered.retry_after;
    // Automatic retries: a 409 from a deduplicating destination says its first request with this key is
    // still running: the next attempt waits at least the destination's timeout (or its
    // Retry-After, if longer), so that the attempts are not spent before that request's own
    // answer could have arrived. Not capped: the wait is the point.
    let still_running = (answered.http_status == Some(409) && policy.dedupes)
        .then(|| policy.timeout.max(retry_after.unwrap_or_default()));
    match outcome {
        Outcome::Accepted => {
            next.state = State::Succeeded;
            next.reference = reference.clone();
            next.reason = None;
        }
        Outcome::Rejected => {
            next.state = State::Rejected;
            next.reason = Some(error.clone().unwrap_or_else(|| "rejected".into()));
        }
        Outcome::Transient => {
            if spent {
                next.state = if op.ambiguous {
                    State::Unknown
                } else {
                    State::Failed
                };
                next.reason = Some(format!(
                    "{used} of {} attempts spent",
                    policy.retry.max_attempts
                ));
            } else {
                let delay = policy
                    .retry
                    .delay(used.saturating_sub(1), ctx.jitter, retry_after)
                    .max(still_running.unwrap_or_default());
                next.state = State::RetryWait;
                next.next_attempt_at = Some(after(ctx.now, delay));
                next.reason = None;
            }
        }
        Outcome::Unknown => {
            next.ambiguous = true;
            let delay = policy
                .retry
                .delay(used.saturating_sub(1), ctx.jitter, retry_after);
            let at = after(ctx.now, delay);
            if !spent && policy.dedupes_at(next.first_sent_at, at) {
                next.state = State::RetryWait;
                next.next_attempt_at = Some(at);
                next.reason = None;
            } else {
                next.state = State::Unknown;
                next.reason = Some(
                    error
                        .clone()
                        .unwrap_or_else(|| "outcome not observed".into()),
                );
            }
        }
    }
}

#[cfg(test)]
#[path = "attempts_tests.rs"]
mod tests;
