//! The transition table: every event and staff action against an operation, as one pure function.
//!
//! [`apply`] takes an operation, a command and the context (clock, actor, destination policy)
//! and returns either the new operation with the one audit event it needs, `Ok(None)` when the
//! command is a harmless repeat, or a [`Refusal`] that changes nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::lookup::LookupAnswer;
use super::policy::DestinationPolicy;
use super::state::{Outcome, Resolution, State};
use super::time::{after, format_duration};

/// A lease naming the operator working an item.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// Everything that can happen to an existing operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// The key arrived again with these contents.
    Record {
        payload: String,
        fingerprint: String,
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
    /// A person works the item (SPEC section 5).
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
        )
    }
}

/// A staff action on one operation (SPEC section 5).
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
    /// Reconcile by what the destination's lookup, run at a person's request, answered (SPEC
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
    /// What the actor may do (SPEC 17); the local CLI and automation act as `lead`.
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

fn refuse<T>(text: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(text.into()))
}

fn fmt_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// Applies a command to an operation. `Ok(None)`: nothing to do (a harmless repeat).
pub fn apply(op: &Op, cmd: &Command, ctx: &Ctx) -> Result<Option<Transition>, Refusal> {
    let now = ctx.now;
    let key = &op.key;
    if op.state.is_terminal() {
        return match cmd {
            Command::Staff(StaffAction::Note { .. }) => note(op, cmd, ctx).map(Some),
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
            _ => refuse(format!(
                "{key} is {}: nothing more can be done to it",
                op.state
            )),
        };
    }
    if cmd.is_automatic()
        && let Some(c) = op.claimed_by_other(ctx.actor, now)
        && !matches!(cmd, Command::FinishAttempt { .. } if op.attempt_started_at.is_some())
    {
        return refuse(format!(
            "{key} is claimed by {} until {}: no automatic attempt while a person works it",
            c.by,
            fmt_time(c.expires)
        ));
    }

    let mut next = op.clone();
    next.updated_at = now;
    next.version = op.version + 1;
    let mut attempt = AttemptEffect::None;
    let mut warning = None;
    let kind: &'static str;
    let mut detail = json!({});
    // the action claimed the item for the actor (nobody held a live claim)
    let mut claimed = false;

    match cmd {
        Command::Record {
            payload,
            fingerprint,
        } => {
            if *fingerprint == op.fingerprint
                || Some(fingerprint) == op.conflicting_fingerprint.as_ref()
            {
                return Ok(None);
            }
            next.state = State::Conflict;
            next.conflicting_payload = Some(payload.clone());
            next.conflicting_fingerprint = Some(fingerprint.clone());
            next.reason = Some(format!("contents changed while {}", op.state));
            next.next_attempt_at = None;
            kind = "conflict";
            detail = json!({ "fingerprint": fingerprint, "previous_fingerprint": op.fingerprint });
        }
        Command::StartAttempt => {
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
            attempt = AttemptEffect::Start { n: next.attempts };
            kind = "attempt_started";
            detail = json!({ "attempt": next.attempts });
        }
        Command::FinishAttempt {
            n,
            outcome,
            reference,
            error,
            http_status,
            retry_after,
        } => {
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
                next.first_sent_at = op.first_sent_at.or(Some(now));
            }
            next.attempt_started_at = None;
            attempt = AttemptEffect::Finish {
                n: *n,
                whole,
                outcome: *outcome,
                http_status: *http_status,
                reference: reference.clone(),
                error: error.clone(),
            };
            kind = "attempt";
            detail = json!({ "attempt": n, "outcome": outcome.as_str(), "http_status": http_status,
                             "reference": reference, "error": error });
            next.last_error = error.clone().or(op.last_error.clone());
            if op.state == State::Conflict {
                // The attempt ran with the first contents; the conflict still needs a person.
                if *outcome == Outcome::Accepted {
                    next.reference = reference.clone();
                }
            } else {
                finish_attempt(
                    op,
                    &mut next,
                    *n,
                    *outcome,
                    reference,
                    error,
                    Answered {
                        http_status: *http_status,
                        retry_after: *retry_after,
                    },
                    ctx,
                );
            }
        }
        Command::Sweep => {
            if !op.is_stuck(now, ctx.attempt_timeout) {
                return Ok(None);
            }
            // SPEC 3: by the rule of any unknown outcome. At a destination that deduplicates,
            // inside its horizon, the next attempt with the same key settles it; elsewhere it
            // waits as `unknown` (interrupted), for the dispatcher's lookup or a person.
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
            attempt = AttemptEffect::Finish {
                n: op.attempts,
                whole: false,
                outcome: Outcome::Unknown,
                http_status: None,
                reference: None,
                error,
            };
            kind = "swept";
            detail = json!({ "attempt": op.attempts, "reason": "interrupted" });
        }
        Command::Lookup { answer } => {
            if op.state != State::Unknown {
                return refuse(format!(
                    "{key} is {}: a lookup settles only an unknown outcome",
                    op.state
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
                // it proves nothing: still unknown, now for a person (who can look again)
                LookupAnswer::NoAnswer { why } => {
                    next.reason = Some(format!("looked up at {dest}: no answer ({why})"));
                }
            }
            kind = "looked_up";
            detail = json!({ "found": answer.reference().is_some(), "reference": answer.reference(),
                             "evidence": answer.evidence() });
        }
        Command::Staff(action @ StaffAction::Claim { force_reason }) => {
            staff_check(op, action, ctx).map_err(Why::refusal)?;
            match op.claimed_by_other(ctx.actor, now) {
                Some(c) => {
                    kind = "claim_taken";
                    detail = json!({ "from": c.by, "reason": force_reason });
                }
                None => {
                    kind = "claimed";
                }
            }
            let since = match &op.claim {
                Some(c) if c.by == ctx.actor && c.is_live(now) => c.since,
                _ => now,
            };
            next.claim = Some(Claim {
                by: ctx.actor.into(),
                since,
                expires: lease_end(ctx),
            });
        }
        Command::Staff(action @ StaffAction::Release) => {
            staff_check(op, action, ctx).map_err(Why::refusal)?;
            next.claim = None;
            kind = "released";
        }
        Command::Staff(action @ StaffAction::ReconcileFound { reference, note }) => {
            claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
            attempt = close_open_attempt(op, "interrupted; reconciled by staff");
            next.state = State::Succeeded;
            next.reference = Some(reference.clone());
            // done after all: the old error is history (the attempts keep it), not its reason
            next.reason = None;
            next.attempt_started_at = None;
            kind = "reconciled";
            detail = json!({ "found": true, "reference": reference, "note": note });
        }
        Command::Staff(action @ StaffAction::ReconcileAbsent { note }) => {
            claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
            attempt = close_open_attempt(op, "interrupted; reconciled absent by staff");
            next.state = State::Failed;
            next.reason = Some("reconciled absent".into());
            next.ambiguous = false;
            next.attempt_started_at = None;
            next.claim = held(op, ctx, claimed);
            kind = "reconciled";
            detail = json!({ "found": false, "note": note });
        }
        Command::Staff(action @ StaffAction::Retry { note }) => {
            claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
            if op.state == State::Rejected {
                warning = Some(format!(
                    "{} rejected this request before and may reject it again",
                    op.destination
                ));
            }
            next.state = State::Pending;
            next.next_attempt_at = Some(now);
            next.budget_start = op.attempts;
            next.ambiguous = op.state == State::Unknown;
            next.reason = None;
            next.claim = None;
            kind = "retry_requested";
            detail = json!({ "requested_by": ctx.actor, "note": note });
        }
        Command::Staff(
            action @ StaffAction::Close {
                resolution,
                reference,
                superseded_by,
                note,
            },
        ) => {
            claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
            attempt = close_open_attempt(op, "interrupted; closed by staff");
            next.state = State::Closed;
            // the resolution says why it is closed; the old error stays in the attempts
            next.reason = None;
            next.resolution = Some(*resolution);
            next.superseded_by = superseded_by.clone();
            if *resolution == Resolution::DoneElsewhere {
                next.reference = reference.clone();
            }
            next.attempt_started_at = None;
            kind = "closed";
            detail = json!({ "resolution": resolution.as_str(), "reference": reference,
                             "superseded_by": superseded_by, "note": note });
        }
        Command::Staff(StaffAction::Note { .. }) => return note(op, cmd, ctx).map(Some),
        Command::Staff(action @ StaffAction::LookUp { answer }) => {
            claimed = staff_check(op, action, ctx).map_err(Why::refusal)?;
            next.attempt_started_at = None;
            match answer {
                LookupAnswer::Found { reference, .. } => {
                    attempt = close_open_attempt(op, "interrupted; found by a lookup");
                    next.state = State::Succeeded;
                    next.reference = Some(reference.clone());
                    next.reason = None;
                }
                _ => {
                    attempt = close_open_attempt(op, "interrupted; not found by a lookup");
                    next.state = State::Failed;
                    next.reason = Some(format!("looked up: not at {}", op.destination));
                    next.ambiguous = false;
                    next.claim = held(op, ctx, claimed);
                }
            }
            kind = "reconciled";
            detail = json!({ "found": answer.reference().is_some(), "reference": answer.reference(),
                             "evidence": answer.evidence() });
        }
    }

    if claimed && let Some(d) = detail.as_object_mut() {
        // one event for the claim and the action: its detail says it claimed
        d.insert("claimed".into(), json!(true));
    }
    settle_bookkeeping(op, &mut next, ctx);
    Ok(Some(Transition {
        op: next,
        attempt,
        kind,
        detail,
        warning,
    }))
}

/// What the destination's answer said beside its outcome class.
#[derive(Clone, Copy, Debug, Default)]
struct Answered {
    http_status: Option<u16>,
    retry_after: Option<Duration>,
}

/// The automatic rules for an attempt's outcome (SPEC section 3 and 6).
#[allow(clippy::too_many_arguments)]
fn finish_attempt(
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
    // SPEC 6: a 409 from a deduplicating destination says its first request with this key is
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

fn note(op: &Op, cmd: &Command, ctx: &Ctx) -> Result<Transition, Refusal> {
    let Command::Staff(action @ StaffAction::Note { text }) = cmd else {
        unreachable!("note() is only called with a note")
    };
    staff_check(op, action, ctx).map_err(Why::refusal)?;
    let mut next = op.clone();
    next.updated_at = ctx.now;
    next.version = op.version + 1;
    next.claim = renewed(op, ctx);
    Ok(Transition {
        op: next,
        attempt: AttemptEffect::None,
        kind: "note",
        detail: json!({ "text": text }),
        warning: None,
    })
}

/// When a claim taken or renewed now expires.
fn lease_end(ctx: &Ctx) -> DateTime<Utc> {
    after(ctx.now, ctx.lease)
}

/// The holder's claim with its expiry pushed out (each action of the holder renews the lease).
fn renewed(op: &Op, ctx: &Ctx) -> Option<Claim> {
    op.claim.clone().map(|mut c| {
        if c.by == ctx.actor && c.is_live(ctx.now) {
            c.expires = lease_end(ctx);
        }
        c
    })
}

/// Why a staff action is refused, put into words only when someone reads it (the console asks
/// the rules about every listed row, and most answers there are "no").
pub struct Why<'a> {
    /// What kind of "no" it is, the same for every item (a bulk preview groups by it).
    pub class: &'static str,
    text: Box<dyn FnOnce() -> String + 'a>,
}

impl Why<'_> {
    fn refusal(self) -> Refusal {
        Refusal((self.text)())
    }

    /// The one-line refusal, in words.
    pub fn text(self) -> String {
        (self.text)()
    }
}

/// What a refusal is made into: words for a person ([`Why`]), or nothing where only the yes or
/// no is wanted (`()`: [`offered`] asks about every listed row, and most answers are "no").
pub trait Reason<'a>: Sized {
    fn new(class: &'static str, why: impl FnOnce() -> String + 'a) -> Self;
}

impl<'a> Reason<'a> for Why<'a> {
    fn new(class: &'static str, why: impl FnOnce() -> String + 'a) -> Self {
        Why {
            class,
            text: Box::new(why),
        }
    }
}

impl<'a> Reason<'a> for () {
    fn new(_: &'static str, _: impl FnOnce() -> String + 'a) -> Self {}
}

fn deny<'a, T, R: Reason<'a>>(
    class: &'static str,
    why: impl FnOnce() -> String + 'a,
) -> Result<T, R> {
    Err(R::new(class, why))
}

/// Every rule a staff action must pass on this operation now (SPEC 5), and nothing else: the
/// one place they are written. `apply` asks it before it changes anything, and [`offered`]
/// asks it for each action, so what the console offers is what the ledger accepts.
/// `Ok(true)`: the action claims the item for the actor (nobody holds a live claim).
pub fn staff_check<'a, R: Reason<'a>>(
    op: &'a Op,
    action: &'a StaffAction,
    ctx: &'a Ctx,
) -> Result<bool, R> {
    let key = &op.key;
    let now = ctx.now;
    // SPEC 17's roles come first: a viewer takes no action, taking over a claim is a lead's
    if !ctx.role.acts() {
        return deny("not for a viewer", move || {
            format!(
                "{} is a viewer: a viewer reads, and takes no action",
                ctx.actor
            )
        });
    }
    if !ctx.role.leads()
        && let StaffAction::Claim {
            force_reason: Some(_),
        } = action
        && let Some(c) = op.claimed_by_other(ctx.actor, now)
    {
        return deny("needs a lead", move || {
            format!(
                "{key} is claimed by {}: taking a claim over is for a lead",
                c.by
            )
        });
    }
    if op.state.is_terminal() && !matches!(action, StaffAction::Note { .. }) {
        return deny("already terminal", move || {
            format!("{key} is {}: nothing more can be done to it", op.state)
        });
    }
    // Staff actions other than claim, release and note act for the holder of the claim. When
    // nobody holds a live claim the action claims the item for the actor in the same
    // transition, so that acting never needs a separate claim step and two people can still
    // never both act; a live claim of another refuses it.
    let hold = || -> Result<bool, R> {
        match &op.claim {
            Some(c) if c.is_live(now) && c.by == ctx.actor => Ok(false),
            Some(c) if c.is_live(now) => deny("claimed by another", move || {
                format!(
                    "{key} is claimed by {} until {}: take it over first",
                    c.by,
                    fmt_time(c.expires)
                )
            }),
            _ => Ok(true),
        }
    };
    let stuck = || op.is_stuck(now, ctx.attempt_timeout);
    match action {
        StaffAction::Claim { force_reason } => {
            match (op.claimed_by_other(ctx.actor, now), force_reason) {
                (Some(c), None) => deny("claimed by another", move || {
                    format!(
                        "{key} is claimed by {} until {}; take it over only with --force --reason",
                        c.by,
                        fmt_time(c.expires)
                    )
                }),
                (Some(_), Some(reason)) if reason.trim().is_empty() => {
                    deny("needs a reason", || {
                        "taking over a live claim needs a reason".into()
                    })
                }
                _ => Ok(false),
            }
        }
        StaffAction::Release => match &op.claim {
            Some(c) if c.by == ctx.actor => Ok(false),
            Some(c) if c.is_live(now) => deny("claimed by another", move || {
                format!("{key} is claimed by {}, not by you", c.by)
            }),
            _ => deny("not claimed by you", move || {
                format!("{key} is not claimed by you")
            }),
        },
        StaffAction::ReconcileFound { reference, .. } => {
            let claims = hold()?;
            if !(matches!(op.state, State::Unknown | State::Failed | State::Conflict) || stuck()) {
                return deny("not in a state it applies to", move || {
                    format!(
                        "{key} is {}: reconcile --found applies to unknown, failed, conflict or a stuck in_flight",
                        op.state
                    )
                });
            }
            if reference.trim().is_empty() {
                return deny("needs a reference", || {
                    "reconcile --found needs the destination's reference".into()
                });
            }
            Ok(claims)
        }
        StaffAction::ReconcileAbsent { .. } => {
            let claims = hold()?;
            if !(op.state == State::Unknown || stuck()) {
                return deny("not in a state it applies to", move || {
                    format!(
                        "{key} is {}: reconcile --absent applies to unknown or a stuck in_flight",
                        op.state
                    )
                });
            }
            Ok(claims)
        }
        StaffAction::Retry { .. } => {
            let claims = hold()?;
            match op.state {
                State::Failed | State::Rejected => Ok(claims),
                State::Unknown if ctx.policy.dedupes_at(op.first_sent_at, now) => Ok(claims),
                State::Unknown => deny(
                    "unknown at a destination that does not deduplicate",
                    move || {
                        format!(
                            "{key}'s outcome is unknown and {} {}: a retry could do it twice; check {} and reconcile first",
                            op.destination,
                            if ctx.policy.dedupes {
                                "is past its key retention"
                            } else {
                                "does not deduplicate"
                            },
                            op.destination
                        )
                    },
                ),
                s => deny("not in a state it applies to", move || {
                    format!(
                        "{key} is {s}: retry applies to failed, rejected or a deduplicated unknown"
                    )
                }),
            }
        }
        StaffAction::Close {
            resolution,
            reference,
            superseded_by,
            note,
        } => {
            let claims = hold()?;
            if op.state == State::InFlight && !stuck() {
                return deny("attempt running", move || {
                    format!("{key} has an attempt running: wait for its outcome before closing")
                });
            }
            if note.trim().is_empty() {
                return deny("needs a note", || {
                    "close needs a note saying what was done".into()
                });
            }
            match resolution {
                Resolution::DoneElsewhere
                    if reference.as_deref().is_none_or(|r| r.trim().is_empty()) =>
                {
                    deny("needs a reference", || {
                        "close --resolution done_elsewhere needs --reference REF".into()
                    })
                }
                Resolution::Superseded if superseded_by.is_none() => {
                    deny("needs the new key", || {
                        "close --resolution superseded needs --superseded-by KEY".into()
                    })
                }
                Resolution::Superseded if superseded_by.as_deref() == Some(key.as_str()) => {
                    deny("supersedes itself", || {
                        "an operation cannot supersede itself".into()
                    })
                }
                _ => Ok(claims),
            }
        }
        StaffAction::Note { text } => {
            if text.trim().is_empty() {
                return deny("needs a note", || "a note needs some text".into());
            }
            Ok(false)
        }
        StaffAction::LookUp { answer } => {
            let claims = hold()?;
            if !ctx.policy.can_look_up {
                return deny("no lookup configured", move || {
                    format!(
                        "{} has no lookup settle can run (no lookup_url in the config): check it there, then reconcile",
                        op.destination
                    )
                });
            }
            let applies = match answer {
                LookupAnswer::Found { .. } => {
                    matches!(op.state, State::Unknown | State::Failed) || stuck()
                }
                _ => op.state == State::Unknown || stuck(),
            };
            if !applies {
                return deny("not in a state it applies to", move || {
                    format!(
                        "{key} is {}: a lookup settles an unknown outcome, a stuck in_flight or (when found) a failed one",
                        op.state
                    )
                });
            }
            if let LookupAnswer::NoAnswer { why } = answer {
                return deny("no answer", move || {
                    format!(
                        "{key}: the lookup at {} gave no answer ({why}): nothing to reconcile, it stays {}",
                        op.destination, op.state
                    )
                });
            }
            Ok(claims)
        }
    }
}

/// The claim an action leaves on an item that stays open: the actor's, renewed or newly taken.
fn held(op: &Op, ctx: &Ctx, claimed: bool) -> Option<Claim> {
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

fn close_open_attempt(op: &Op, error: &str) -> AttemptEffect {
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

/// A staff action as a person picks it (a key in the console), before its details are asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    Claim,
    /// Take over another's live claim (asks a reason).
    TakeOver,
    Release,
    ReconcileFound,
    ReconcileAbsent,
    Retry,
    Close,
    Note,
    /// Look the item up at its destination now, then reconcile by the answer (SPEC 16).
    LookUp,
}

impl Offer {
    pub const ALL: [Offer; 9] = [
        Offer::Claim,
        Offer::TakeOver,
        Offer::Release,
        Offer::ReconcileFound,
        Offer::ReconcileAbsent,
        Offer::Retry,
        Offer::Close,
        Offer::Note,
        Offer::LookUp,
    ];

    /// The command this action becomes with well-formed details: what [`offered`] tries.
    pub fn sample(self) -> StaffAction {
        match self {
            Offer::Claim => StaffAction::Claim { force_reason: None },
            Offer::TakeOver => StaffAction::Claim {
                force_reason: Some("taking over".into()),
            },
            Offer::Release => StaffAction::Release,
            Offer::ReconcileFound => StaffAction::ReconcileFound {
                reference: "REF".into(),
                note: None,
            },
            Offer::ReconcileAbsent => StaffAction::ReconcileAbsent { note: None },
            Offer::Retry => StaffAction::Retry { note: None },
            Offer::Close => StaffAction::Close {
                resolution: Resolution::Abandoned,
                reference: None,
                superseded_by: None,
                note: "note".into(),
            },
            Offer::Note => StaffAction::Note {
                text: "note".into(),
            },
            Offer::LookUp => StaffAction::LookUp {
                answer: LookupAnswer::Found {
                    reference: "REF".into(),
                    http_status: 200,
                },
            },
        }
    }
}

/// A set of offers, one bit each: carried on every listed row, so it costs no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offers(u16);

impl Offers {
    pub fn contains(self, o: Offer) -> bool {
        self.0 & (1 << o as u8) != 0
    }

    pub fn insert(&mut self, o: Offer) {
        self.0 |= 1 << o as u8;
    }

    pub fn iter(self) -> impl Iterator<Item = Offer> {
        Offer::ALL.into_iter().filter(move |o| self.contains(*o))
    }
}

impl FromIterator<Offer> for Offers {
    fn from_iter<I: IntoIterator<Item = Offer>>(offers: I) -> Self {
        let mut set = Offers::default();
        offers.into_iter().for_each(|o| set.insert(o));
        set
    }
}

/// As a list of names (`list --json`'s `actions`).
impl Serialize for Offers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Each offer's sample, in `Offer::ALL`'s order: made once (the list asks for every row).
static SAMPLES: std::sync::LazyLock<[StaffAction; 9]> =
    std::sync::LazyLock::new(|| Offer::ALL.map(Offer::sample));

/// The staff actions `ctx.actor` may take on `op` now (SPEC 5 and 13): exactly those
/// [`staff_check`] (the rules `apply` enforces) passes with well-formed details, so that what the
/// console offers can never disagree with what the ledger does. A claim is offered only where it changes
/// something (not to its holder), a take-over only over another's live claim.
pub fn offered(op: &Op, ctx: &Ctx) -> Offers {
    let others = op.claimed_by_other(ctx.actor, ctx.now).is_some();
    let mine = op
        .claim
        .as_ref()
        .is_some_and(|c| c.by == ctx.actor && c.is_live(ctx.now));
    Offer::ALL
        .into_iter()
        .filter(|o| match o {
            Offer::Claim => !others && !mine,
            Offer::TakeOver => others,
            _ => true,
        })
        .filter(|o| staff_check::<()>(op, &SAMPLES[*o as usize], ctx).is_ok())
        .collect()
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
