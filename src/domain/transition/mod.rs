//! The transition table: every event and staff action against an operation, as one pure function.
//!
//! [`apply`] takes an operation, a command and the context (clock, actor, destination policy)
//! and returns either the new operation with the one audit event it needs, `Ok(None)` when the
//! command is a harmless repeat, or a [`Refusal`] that changes nothing.
//!
//! The rules live by family, each with its table tests beside it: `attempts.rs` (the key again,
//! the start and the outcome of an attempt), `sweep.rs` (an attempt past its timeout, the
//! dispatcher's lookup), `staff.rs` (what a person does), `rules.rs` (what a staff action must
//! pass, asked by `staff.rs` and by the offers), `offers.rs` (what the console offers). The types
//! they share are `terms.rs` and `op.rs`; this file holds the order in which a command is judged
//! and the bookkeeping every change shares.
//!
//! Rooms: `correct.rs` what a correction makes of a request and its key; `undo.rs` a person's
//! action taken back; `test_support.rs` the table tests' shared helpers.

mod attempts;
mod correct;
mod offers;
mod op;
mod rules;
mod staff;
mod sweep;
#[cfg(test)]
#[path = "table_tests.rs"]
mod table_tests;
mod terms;
#[cfg(test)]
pub(crate) mod test_support;
mod undo;
#[cfg(test)]
#[path = "undo_tests.rs"]
mod undo_tests;

use serde_json::json;

use super::state::State;
use super::time::after;

pub use correct::{correction_key, may_correct};
pub use offers::{Offer, Offers, offered};
pub use op::{Claim, Op, Restore};
pub use rules::{Reason, Why, staff_check};
pub use terms::{AttemptEffect, Command, Ctx, Refusal, StaffAction, Transition};
use terms::{fmt_time, refuse, renewed};

/// Applies a command to an operation. `Ok(None)`: nothing to do (a harmless repeat).
pub fn apply(op: &Op, cmd: &Command, ctx: &Ctx) -> Result<Option<Transition>, Refusal> {
    if let Command::Record { run: Some(run), .. } = cmd
        && op.run.as_deref() != Some(run.as_str())
    {
        return refuse(match &op.run {
            Some(r) => format!(
                "{} belongs to run {r}, not {run}: an operation's run is the one it was recorded with",
                op.key
            ),
            None => format!(
                "{} was recorded without a run: an operation's run is given when it is recorded",
                op.key
            ),
        });
    }
    if let Command::Undo {
        action,
        undid,
        restore,
    } = cmd
    {
        return undo::undo(op, action, undid, restore, ctx).map(Some);
    }
    if let Command::Withdraw { action, v } = cmd {
        return undo::withdraw(op, action, *v, ctx).map(Some);
    }
    if op.state.is_terminal() {
        return staff::on_terminal(op, cmd, ctx);
    }
    if cmd.is_automatic()
        && let Some(c) = op.claimed_by_other(ctx.actor, ctx.now)
        && !matches!(cmd, Command::FinishAttempt { .. } if op.attempt_started_at.is_some())
    {
        return refuse(format!(
            "{} is claimed by {} until {}: no automatic attempt while a person works it",
            op.key,
            c.by,
            fmt_time(c.expires)
        ));
    }
    let mut next = op.clone();
    next.updated_at = ctx.now;
    next.version = op.version + 1;
    let made = match cmd {
        Command::Record {
            payload,
            fingerprint,
            ..
        } => attempts::record(op, next, payload, fingerprint),
        Command::StartAttempt => attempts::start(op, next, ctx)?,
        Command::FinishAttempt { .. } => attempts::finish(op, next, cmd, ctx)?,
        Command::Sweep => sweep::sweep(op, next, ctx),
        Command::Lookup { answer } => Some(sweep::lookup(op, next, answer)?),
        Command::Resend => Some(attempts::resend(op, next, ctx)?),
        Command::Staff(action) => Some(staff::act(op, next, action, ctx)?),
        Command::Undo { .. } | Command::Withdraw { .. } => {
            unreachable!("an undo is taken above")
        }
    };
    let Some(mut made) = made else {
        return Ok(None);
    };
    if made.claimed
        && let Some(d) = made.detail.as_object_mut()
    {
        // one event for the claim and the action: its detail says it claimed
        d.insert("claimed".into(), json!(true));
    }
    if !made.as_is {
        settle_bookkeeping(op, &mut made.op, ctx);
    }
    Ok(Some(Transition {
        op: made.op,
        attempt: made.attempt,
        kind: made.kind,
        detail: made.detail,
        warning: made.warning,
        made: made.made,
    }))
}

/// Derived fields every transition keeps right: exception age, schedule, claim on terminal states.
fn settle_bookkeeping(old: &Op, next: &mut Op, ctx: &Ctx) {
    next.exception_since = match next.state {
        s if s.is_exception() => match old.exception_since {
            Some(t) if t <= ctx.now => Some(t),
            _ => Some(ctx.now),
        },
        State::InFlight => next
            .attempt_started_at
            .map(|t| after(t, ctx.attempt_timeout)),
        _ => None,
    };
    if !matches!(next.state, State::Pending | State::RetryWait) {
        next.next_attempt_at = None;
    }
    next.group = crate::domain::group::group_of(next);
    if next.state.is_terminal() {
        next.claim = None;
    } else if next.claim.as_ref().is_some_and(|c| c.by == ctx.actor) && next.state == old.state {
        next.claim = renewed(next, ctx);
    }
}
