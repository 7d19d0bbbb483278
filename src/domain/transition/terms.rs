//! What a transition is said in: the commands and staff actions, the context a rule reads, the
//! result and the refusal, what a rule made before the shared bookkeeping, and the lease.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::op::{Claim, Op};
use crate::domain::lookup::LookupAnswer;
use crate::domain::policy::DestinationPolicy;
use crate::domain::state::{Outcome, Resolution};
use crate::domain::time::after;

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
    /// A person takes back the action `action`, whose event on this item was of kind `undid`
    /// (manual: Taking an action back).
    Undo {
        action: String,
        undid: String,
        restore: Box<super::op::Restore>,
    },
    /// A correction this person's action `action` made, withdrawn with it: closed `withdrawn`,
    /// only while it is still at version `v`, as made.
    Withdraw { action: String, v: i64 },
}

impl Command {
    /// Commands made by automation (which a live claim keeps away) rather than by a person.
    /// A person's: an action, or one taken back (never told to the owners as automation's).
    pub fn is_persons(&self) -> bool {
        matches!(
            self,
            Command::Staff(_) | Command::Undo { .. } | Command::Withdraw { .. }
        )
    }

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
    /// Correct a request confirmed not done (manual: Correcting a request): a new operation
    /// under `corrected_as` with the payload edited, the original closed superseded by it.
    Correct {
        corrected_as: String,
        edits: Vec<crate::domain::edit::Edit>,
        note: String,
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
    pub role: crate::domain::Role,
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
    /// A new operation the change makes (a correction), written in the same transaction.
    pub made: Option<Box<Op>>,
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
pub(super) struct Made {
    pub(super) op: Op,
    pub(super) attempt: AttemptEffect,
    pub(super) kind: &'static str,
    pub(super) detail: Value,
    pub(super) warning: Option<String>,
    /// The action claimed the item for the actor (nobody held a live claim): its one event
    /// says so.
    pub(super) claimed: bool,
    /// Taken as it is, without the shared bookkeeping (a note).
    pub(super) as_is: bool,
    /// A new operation the change makes (a correction).
    pub(super) made: Option<Box<Op>>,
}

impl Made {
    pub(super) fn new(op: Op, kind: &'static str, detail: Value) -> Made {
        Made {
            op,
            attempt: AttemptEffect::None,
            kind,
            detail,
            warning: None,
            claimed: false,
            as_is: false,
            made: None,
        }
    }

    pub(super) fn with_attempt(self, attempt: AttemptEffect) -> Made {
        Made { attempt, ..self }
    }
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
