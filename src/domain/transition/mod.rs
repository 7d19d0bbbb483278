//! The transition table: every event and staff action against an operation, as one pure function.
//!
//! [`apply`] takes an operation, a command and the context (clock, actor, destination policy)
//! and returns either the new operation with the one audit event it needs, `Ok(None)` when the
//! command is a harmless repeat, or a [`Refusal`] that changes nothing.
//!
//! The rules live by family, each with its table tests beside it: `attempts.rs` (the key again,
//! the start and the outcome of an attempt), `sweep.rs` (an attempt past its timeout, the
//! dispatcher's lookup), `staff.rs` (what a person does), `rules.rs` (what a staff action must
//! pass, asked by `staff.rs` and by the offers), `offers.rs` (what the console offers). This file
//! holds the types they share, the order in which a command is judged, and the bookkeeping every
//! change shares.

mod attempts;
mod offers;
mod op;
mod rules;
mod staff;
mod sweep;
#[cfg(test)]
#[path = "table_tests.rs"]
mod table_tests;
#[cfg(test)]
pub(crate) mod test_support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::lookup::LookupAnswer;
use super::policy::DestinationPolicy;
use super::state::{Outcome, Resolution, State};
use super::time::after;

pub use offers::{Offer, Offers, offered};
pub use op::{Claim, Op};
pub use rules::{Reason, Why, staff_check};

/// Everything that can happen to an existing operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// The key arrived again with these contents.
    Record {
        payload: String,
        fingerprint: String,
        /// The run it names (manual: Runs): an operation's run is the one it was recorded with.
        run: Option<String>,
    },
    /// The dispatcher starts the next attempt.
    StartAttempt,
    /// The outcome of attempt `n` (the open one, or a whole attempt made outside settle).
    FinishAttempt {
        n: u32,
        outcome: Outcome,
        reference: Option<String>,
        error: Option<String>,
        http_status: Option<u16>,
        retry_after: Option<Duration>,
    },
    /// An open attempt past its timeout: swept as an attempt whose outcome is unknown.
    Sweep,
    /// The dispatcher asked a destination with lookup whether the work for the key exists.
    Lookup { answer: LookupAnswer },
    /// The gateway's repeat of a request confirmed not done (`failed`): sent again, with the
    /// same key and payload and a fresh attempt budget (manual: The gateway: after a reconcile absent, the
    /// next repeat is sent).
    Resend,
    /// A person works the item (manual: Staff actions).
    Staff(StaffAction),
}

impl Command {
    /// Commands made by automation (which a live claim keeps away) rather than by a person.
    pub fn is_automatic(&self) -> bool {
        matches!(
            self,
            Command::StartAttempt
                | Command::FinishAttempt { .. }
                | Command::Sweep
                | Command::Lookup { .. }
                | Command::Resend
        )
    }
}

/// A staff action on one operation (manual: Staff actions).
#[derive(Clone, Debug, PartialEq)]
pub enum StaffAction {
    Claim {
        force_reason: Option<String>,
    },
    Release,
    ReconcileFound {
        reference: String,
        note: Option<String>,
    },
    ReconcileAbsent {
        note: Option<String>,
    },
    Retry {
        note: Option<String>,
    },
    Close {
        resolution: Resolution,
        reference: Option<String>,
        superseded_by: Option<String>,
        note: String,
    },
    Note {
        text: String,
    },
    /// Reconcile by what the destination's lookup, run at a person's request, answered (the manual
    /// 16): found or absent, with the lookup named as the evidence. No answer reconciles nothing.
    LookUp {
        answer: LookupAnswer,
    },
}

/// The clock, the actor and the destination's rules for one decision.
#[derive(Clone, Debug)]
pub struct Ctx<'a> {
    pub now: DateTime<Utc>,
    pub actor: &'a str,
    pub policy: &'a DestinationPolicy,
    pub lease: Duration,
    pub attempt_timeout: Duration,
    /// The operation's workflow is paused.
    pub paused: bool,
    /// A uniform sample in [0, 1) for the backoff's jitter; passed in so the rules stay pure.
    pub jitter: f64,
    /// What the actor may do (manual: Running settle for a team); the local CLI and automation act as `lead`.
    pub role: super::Role,
}

/// What happens to the attempts table.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptEffect {
    None,
    Start {
        n: u32,
    },
    Finish {
        n: u32,
        /// The attempt was not started through settle: write it whole.
        whole: bool,
        outcome: Outcome,
        http_status: Option<u16>,
        reference: Option<String>,
        error: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub op: Op,
    pub attempt: AttemptEffect,
    pub kind: &'static str,
    pub detail: Value,
    /// Said to the person who asked, beside the result (e.g. a retry of a rejection).
    pub warning: Option<String>,
}

/// A one-line reason why a command was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

pub(super) fn refuse<T>(text: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(text.into()))
}

pub(super) fn fmt_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// What one command made of the operation, before the bookkeeping every change shares.
struct Made {
    op: Op,
    attempt: AttemptEffect,
    kind: &'static str,
    detail: Value,
    warning: Option<String>,
    /// The action claimed the item for the actor (nobody held a live claim): its one event
    /// says so.
    claimed: bool,
    /// Taken as it is, without the shared bookkeeping (a note).
    as_is: bool,
}

impl Made {
    fn new(op: Op, kind: &'static str, detail: Value) -> Made {
        Made {
            op,
            attempt: AttemptEffect::None,
            kind,
            detail,
            warning: None,
            claimed: false,
            as_is: false,
        }
    }

    fn with_attempt(self, attempt: AttemptEffect) -> Made {
        Made { attempt, ..self }
    }
}

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
    }))
}

/// When a claim taken or renewed now expires.
pub(super) fn lease_end(ctx: &Ctx) -> DateTime<Utc> {
    after(ctx.now, ctx.lease)
}

/// The holder's claim with its expiry pushed out (each action of the holder renews the lease).
pub(super) fn renewed(op: &Op, ctx: &Ctx) -> Option<Claim> {
    op.claim.clone().map(|mut c| {
        if c.by == ctx.actor && c.is_live(ctx.now) {
            c.expires = lease_end(ctx);
        }
        c
    })
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
    if next.state.is_terminal() {
        next.claim = None;
    } else if next.claim.as_ref().is_some_and(|c| c.by == ctx.actor) && next.state == old.state {
        next.claim = renewed(next, ctx);
    }
}
