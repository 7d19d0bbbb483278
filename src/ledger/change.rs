//! The judging of the write engine (see `engine.rs`): the rules ([`crate::domain::apply`]) say
//! what an ask does to an operation held in a transaction; the change holds the new row, the
//! attempt's effect and the audit event, for a batch to write.

use chrono::{DateTime, Utc};

use super::{AttemptReport, KnownAttempts, Ledger};
use crate::counters::{self, Count};
use crate::domain::{AttemptEffect, Command, Ctx, Op, Outcome, StaffAction, State, apply};
use crate::error::{Error, Result};
use crate::ledger::Applied;
use crate::store::{AttemptWrite, NewEvent, Tx};

pub(super) enum Ask<'a> {
    Cmd(Command),
    Attempt(&'a AttemptReport),
}

impl Ask<'_> {
    /// The key of the operation this ask makes (a correction's), which the batch must hold too:
    /// it is refused where that key is taken.
    pub(super) fn makes(&self) -> Option<&str> {
        match self {
            Ask::Cmd(Command::Staff(StaffAction::Correct { corrected_as, .. })) => {
                Some(corrected_as)
            }
            _ => None,
        }
    }
}

/// What the rules made of an ask, before anything is written.
pub(super) enum Decided {
    Unchanged(Applied),
    Change(Box<Change>),
}

/// A decided change to one operation: its new row, its attempt's effect and its audit event.
pub(super) struct Change {
    pub(super) id: i64,
    pub(super) expected_version: i64,
    pub(super) at: DateTime<Utc>,
    pub(super) actor: String,
    pub(super) kind: &'static str,
    pub(super) from: State,
    pub(super) detail: String,
    pub(super) applied: Applied,
    pub(super) attempt: crate::domain::AttemptEffect,
    pub(super) op: Op,
    /// The operation's row is written with this change set (an ingest batch made it): its row
    /// already holds the final state, only the attempts and events are left to write.
    pub(super) made_here: bool,
    /// What it adds to the process's counters once written.
    pub(super) tally: Vec<Count>,
    /// Automatic recovery stopped here and a team is told of it: an automation's change (never a
    /// person's) opened an exception (manual: Owners and notifications).
    pub(super) notice: bool,
    /// A new operation the change makes (a correction, manual: Correcting a request), written
    /// with the batch.
    pub(super) made: Option<Box<Op>>,
    /// The id of the person's action (manual: Taking an action back): its own for one action,
    /// the batch's for each item of a bulk action, the action taken back for an undo.
    pub(super) action: Option<String>,
    /// What taking the action back restores (JSON), for a person's action.
    pub(super) restore: Option<String>,
}

impl Change {
    pub(super) fn event(&self) -> NewEvent<'_> {
        NewEvent {
            action: self.action.as_deref(),
            restore: self.restore.as_deref(),
            ..NewEvent::on_operation(
                self.id,
                self.at,
                &self.actor,
                self.kind,
                Some(self.from),
                self.op.state,
                &self.detail,
            )
        }
    }

    /// This change is an item of the person's action `id` (a bulk action's batch, an undo's
    /// action taken back): its event and its answer say so.
    pub(super) fn of_action(&mut self, id: &str) {
        self.action = Some(id.to_string());
        self.applied.action = Some(id.to_string());
    }

    pub(super) fn attempt_write(&self) -> Option<(AttemptWrite<'_>, bool)> {
        match &self.attempt {
            crate::domain::AttemptEffect::Finish {
                n,
                whole,
                outcome,
                http_status,
                reference,
                error,
            } => Some((
                AttemptWrite {
                    operation_id: self.id,
                    n: *n,
                    actor: &self.actor,
                    at: self.at,
                    outcome: *outcome,
                    http_status: *http_status,
                    reference: reference.as_deref(),
                    error: error.as_deref(),
                },
                *whole,
            )),
            _ => None,
        }
    }
}

impl Ledger {
    /// The transition rules' context for `actor` at `now` with this destination's policy: what
    /// deciding a change and asking what a person may do both need (no pause, a fixed jitter;
    /// a decision sets its own).
    pub(super) fn rules_ctx<'a>(
        &'a self,
        actor: &'a str,
        policy: &'a crate::domain::DestinationPolicy,
        now: DateTime<Utc>,
    ) -> Ctx<'a> {
        Ctx {
            now,
            actor,
            policy,
            lease: self.config.lease,
            attempt_timeout: self.config.attempt_timeout,
            paused: false,
            jitter: 0.5,
            role: self.role(),
        }
    }
}

/// Asks the rules what `ask` does to `op` (held in this transaction), writing nothing: the
/// judging of the write engine (`Batch::judge` is its one caller).
#[allow(clippy::too_many_arguments)]
pub(super) async fn decide(
    ledger: &Ledger,
    conn: &mut Tx,
    id: i64,
    op: &Op,
    actor: &str,
    ask: &Ask<'_>,
    paused: Option<bool>,
    known: Option<&KnownAttempts>,
) -> Result<Decided> {
    // outside an automation's workflows an operation is not there for it (its workflow is not
    // named); a key it records that another workflow holds is taken, no more is said
    ledger.check_scope(&op.workflow).map_err(|_| match ask {
        Ask::Cmd(Command::Record { .. }) => {
            Error::Refused(format!("the key {} is taken: choose another key", op.key))
        }
        _ => Error::NotFound(format!("no operation with key {}", op.key)),
    })?;
    let now = ledger.now();
    let key = op.key.as_str();
    let cmd = match ask {
        Ask::Cmd(c) => c.clone(),
        Ask::Attempt(r) => match attempt_command(conn, id, op, r, known).await? {
            Some(cmd) => cmd,
            None => return Ok(unchanged(op)),
        },
    };
    let paused = match paused {
        Some(p) => p,
        None => {
            matches!(cmd, Command::StartAttempt)
                && conn.workflow(&op.workflow).await?.is_some_and(|w| w.paused)
        }
    };
    let policy = ledger.config.destination(&op.destination);
    let ctx = Ctx {
        paused,
        jitter: rand::random::<f64>(),
        ..ledger.rules_ctx(actor, &policy, now)
    };
    let Some(t) = apply(op, &cmd, &ctx)? else {
        return Ok(unchanged(op));
    };
    if let Some(made) = &t.made {
        crate::domain::payload::check_size(made.payload.len(), ledger.config.max_payload)
            .map_err(|why| Error::Invalid(format!("{}: {why}", made.key)))?;
    }
    // Every set of contents this key has held (and the one arriving, for a conflict): their
    // sensitive values never reach the append-only events.
    let mut payloads = vec![op.payload.as_str()];
    payloads.extend(t.made.as_ref().map(|m| m.payload.as_str()));
    payloads.extend(t.op.conflicting_payload.as_deref());
    payloads.extend(op.conflicting_payload.as_deref());
    let redaction = ledger
        .redactor
        .scrubber_of(&op.destination, &op.action, &payloads);
    let mut detail = redaction.json(&t.detail);
    // a session's events hold the key it authenticated with (manual: Running settle for a team)
    ledger.sign(&mut detail);
    let detail = detail.to_string();
    let tally = tally(&cmd, op, &t.op, &t.attempt);
    let (action, restore) = person_action(&cmd, op, &t.op, t.made.as_deref());
    let notice = !cmd.is_persons()
        && t.op.state.is_exception()
        && !op.state.is_exception()
        && ledger.config.told_of(&op.workflow).is_some();
    Ok(Decided::Change(Box::new(Change {
        id,
        expected_version: op.version,
        at: now,
        actor: actor.to_string(),
        kind: t.kind,
        from: op.state,
        detail,
        applied: Applied {
            key: key.into(),
            workflow: op.workflow.clone(),
            from: op.state,
            to: t.op.state,
            kind: Some(t.kind),
            warning: t.warning.map(|w| redaction.text(&w)),
            action: action.clone(),
        },
        attempt: t.attempt,
        op: t.op,
        made_here: false,
        tally,
        notice,
        made: t.made,
        action,
        restore,
    })))
}

/// Nothing to change: the operation as it stands.
fn unchanged(op: &Op) -> Decided {
    Decided::Unchanged(Applied {
        key: op.key.clone(),
        workflow: op.workflow.clone(),
        from: op.state,
        to: op.state,
        kind: None,
        warning: None,
        action: None,
    })
}

/// A person's action: an id of its own and what taking it back restores; none for anything
/// else (manual: Taking an action back).
fn person_action(
    cmd: &Command,
    before: &Op,
    after: &Op,
    made: Option<&Op>,
) -> (Option<String>, Option<String>) {
    let Command::Staff(a) = cmd else {
        return (None, None);
    };
    let note = matches!(a, StaffAction::Note { .. });
    let mut restore = crate::domain::Restore::of(before, after, note);
    restore.corrected_as = made.map(|m| (m.key.clone(), m.version));
    (Some(new_action_id()), serde_json::to_string(&restore).ok())
}

/// A new id for one person's action: `a-` and 40 random bits, short enough to type.
pub(crate) fn new_action_id() -> String {
    format!("a-{:010x}", rand::random::<u64>() >> 24)
}

/// What a change counts (manual: Metrics): the attempt it finishes, by outcome; the lookup it
/// records; the person's action; the exception it opens.
fn tally(cmd: &Command, was: &Op, now: &Op, attempt: &AttemptEffect) -> Vec<Count> {
    let mut counts = Vec::new();
    let dest = was.destination.as_str();
    if let AttemptEffect::Finish { outcome, .. } = attempt {
        counts.push(Count::of(counters::ATTEMPTS, &[dest, outcome.as_str()]));
    }
    let looked = match cmd {
        Command::Lookup { answer } => Some(answer),
        Command::Staff(StaffAction::LookUp { answer }) => Some(answer),
        _ => None,
    };
    if let Some(answer) = looked {
        counts.push(Count::of(counters::LOOKUPS, &[dest, answer.as_str()]));
    }
    if let Command::Staff(action) = cmd {
        counts.push(Count::of(counters::STAFF_ACTIONS, &[verb(action)]));
    }
    if now.state.is_exception() && !was.state.is_exception() {
        counts.push(Count::of(
            counters::EXCEPTIONS_OPENED,
            &[&now.workflow, now.state.as_str()],
        ));
    }
    counts
}

/// A person's action as the metrics name it.
fn verb(action: &StaffAction) -> &'static str {
    match action {
        StaffAction::Claim { .. } => "claim",
        StaffAction::Release => "release",
        StaffAction::ReconcileFound { .. } | StaffAction::ReconcileAbsent { .. } => "reconcile",
        StaffAction::Retry { .. } => "retry",
        StaffAction::Close { .. } => "close",
        StaffAction::Note { .. } => "note",
        StaffAction::LookUp { .. } => "lookup",
        StaffAction::Correct { .. } => "correct",
    }
}

/// What an attempt's report asks of `op`: finish its attempt, or nothing (`None`) where it
/// repeats one recorded with the same outcome; refused where it contradicts one.
async fn attempt_command(
    conn: &mut Tx,
    id: i64,
    op: &Op,
    r: &AttemptReport,
    known: Option<&KnownAttempts>,
) -> Result<Option<Command>> {
    let key = op.key.as_str();
    let outcome = r.outcome.unwrap_or(Outcome::Unknown);
    let open = op.attempt_started_at.is_some();
    let n = r
        .attempt
        .unwrap_or(if open { op.attempts } else { op.attempts + 1 });
    if n == 0 {
        return Err(Error::Invalid("attempts are numbered from 1".into()));
    }
    if n <= op.attempts && !(open && n == op.attempts) {
        // A repeat of a recorded attempt is harmless; a different outcome is not.
        let stored = match known {
            Some(k) => k.get(&(id, n)).copied(),
            None => conn.attempt(id, n).await?.map(|a| a.outcome),
        };
        return match stored {
            Some(o) if o == Some(outcome) => Ok(None),
            Some(o) => Err(Error::Refused(format!(
                "{key}: attempt {n} is already recorded as {}",
                o.map_or("open", |o| o.as_str())
            ))),
            None => Err(Error::Refused(format!(
                "{key}: attempt {n} is not recorded"
            ))),
        };
    }
    Ok(Some(Command::FinishAttempt {
        n,
        outcome,
        reference: r.reference.clone(),
        error: r.error.clone(),
        http_status: r.http_status,
        retry_after: r.retry_after,
    }))
}

/// A refusal concerns one operation; anything else (the database) ends a batch of many.
pub(super) fn per_operation(e: &Error) -> bool {
    matches!(
        e,
        Error::Refused(_) | Error::Forbidden(_) | Error::NotFound(_) | Error::Invalid(_)
    )
}
