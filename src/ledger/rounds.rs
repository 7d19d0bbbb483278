//! The dispatcher's rounds: the outcomes of finished attempts and the starts of new ones, many
//! operations in one transaction (group commit), each still its own compare-and-set with its own
//! audit event. The destinations' retry budgets (SPEC 6) live in the database, so every
//! dispatcher draws on the same ones.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::change::{Ask, Change, Decided, write_changes};
use super::{Applied, AttemptReport, Ledger, SYSTEM_ACTOR, Tried};
use crate::domain::policy::RetryBudget;
use crate::domain::{Command, Outcome, State, validate_key};
use crate::error::{Error, Result};
use crate::store::{self, Tx};

/// An attempt the dispatcher has finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub report: AttemptReport,
    /// Where the outcome was unknown and the destination has a lookup: what the lookup said.
    pub lookup: Option<crate::domain::LookupAnswer>,
    /// The destination refused the credentials (an `auth` answer, SPEC 11a): the round pauses
    /// the destination, with this reason, and starts nothing more there.
    pub pause_destination: Option<String>,
}

/// An attempt a round started: send it now.
#[derive(Clone, Debug, PartialEq)]
pub struct StartedOp {
    pub key: String,
    pub destination: String,
    pub action: String,
    pub attempt: u32,
    /// An attempt of the current budget was made before.
    pub retry: bool,
    /// The stored request, unredacted: only the dispatcher reads it, to send it.
    pub(crate) payload: String,
    /// The operation as the round that started it left it (its row id): the round that records
    /// the attempt's answer decides on it instead of reading the row again, unless another
    /// writer changed the row meanwhile (its compare-and-set then fails and the round is tried
    /// again on what the database holds).
    pub(crate) row: Option<std::sync::Arc<(i64, crate::domain::Op)>>,
}

/// The operations a dispatcher started, by key, as their rounds left them.
pub type StartedRows = std::collections::HashMap<String, std::sync::Arc<(i64, crate::domain::Op)>>;

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Per finished attempt, in the order given: what its outcome (and lookup) made of it.
    pub finished: Vec<Result<Applied>>,
    /// How many unknown outcomes a lookup settled.
    pub looked_up: usize,
    /// The attempts started, oldest due first.
    pub started: Vec<StartedOp>,
    /// Due retries left in `retry_wait` because their destination's budget is empty.
    pub waiting_for_budget: Vec<String>,
}

impl Round {
    /// The rows of the operations this round started, as it left them: what a later round
    /// that records their answers may decide on ([`Ledger::round_knowing`]).
    pub fn started_rows(&self) -> StartedRows {
        self.started
            .iter()
            .filter_map(|s| Some((s.key.clone(), s.row.clone()?)))
            .collect()
    }
}

/// A destination's budget inside one round.
struct Budget {
    bucket: RetryBudget,
    since: DateTime<Utc>,
    version: Option<i64>,
    changed: bool,
}

/// A workflow with a stopping threshold by count (SPEC 7), as one round sees it: its exceptions
/// and the attempts of it still running, kept up to date with the round's own changes.
struct Guard {
    limit: u64,
    row: Option<crate::store::WorkflowRow>,
    exceptions: i64,
    running: i64,
    /// An operation of it became an exception in this round.
    new_exception: bool,
    /// Paused in this round, with this reason (its audit event is written with the round's).
    paused_now: Option<String>,
    started: i64,
}

impl Guard {
    /// A workflow's guard as the database holds it now, before this round changes anything.
    fn new(
        limit: u64,
        row: Option<crate::store::WorkflowRow>,
        exceptions: i64,
        running: i64,
    ) -> Guard {
        Guard {
            limit,
            row,
            exceptions,
            running,
            new_exception: false,
            paused_now: None,
            started: 0,
        }
    }

    fn changed(
        &mut self,
        before: &crate::domain::Op,
        after: &crate::domain::Op,
        now: DateTime<Utc>,
    ) {
        // by state, not by the time it was stamped (a change is stamped by a later reading of
        // the clock than the round's): an exception state, or an attempt past its timeout
        let exception = |op: &crate::domain::Op| {
            op.state.is_exception() || (op.state == State::InFlight && op.is_exception(now))
        };
        let (was, is) = (exception(before), exception(after));
        self.exceptions += i64::from(is) - i64::from(was);
        let running =
            |op: &crate::domain::Op, exception: bool| op.state == State::InFlight && !exception;
        self.running += i64::from(running(after, is)) - i64::from(running(before, was));
        self.new_exception |= is && !was;
    }

    /// How many more attempts of it may start: never more than could become the exceptions that
    /// are still short of the limit, so that with a destination that rejects everything exactly
    /// `limit` requests reach it, at any concurrency. A workflow resumed while over its limit
    /// sends one at a time: its next exception pauses it again with nothing else in flight.
    fn room(&self) -> i64 {
        let limit = self.limit as i64;
        let allowance = if self.exceptions < limit {
            limit - self.exceptions
        } else {
            1
        };
        allowance - self.running - self.started
    }
}

/// A refusal concerns one operation; anything else (the database) ends the round.
fn per_operation(e: &Error) -> bool {
    matches!(
        e,
        Error::Refused(_) | Error::NotFound(_) | Error::Invalid(_)
    )
}

impl Ledger {
    /// Records `finished` attempts (and their lookups), then starts up to `limit` due operations
    /// of `destinations`, oldest due first, within their destinations' retry budgets: all in one
    /// transaction, as `actor`. A retry takes its cost from the budget (SPEC 6), a first-try
    /// success refunds one token; retries at a destination whose budget is empty are passed over,
    /// so that first attempts behind them still go. On PostgreSQL the rows to start are taken
    /// with `SKIP LOCKED`: several dispatchers share the work and never start one operation twice.
    pub async fn round(
        &self,
        finished: &[Finished],
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Round> {
        self.round_knowing(finished, &StartedRows::new(), destinations, limit, actor)
            .await
    }

    /// [`Ledger::round`], deciding the finished attempts of `started` on the rows their own
    /// rounds left (see [`StartedOp::row`]): a round of a busy dispatcher then reads only the
    /// rows it starts. A row another writer changed meanwhile makes the first try lose its
    /// compare-and-set; the next reads every row again.
    pub async fn round_knowing(
        &self,
        finished: &[Finished],
        started: &StartedRows,
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Round> {
        for f in finished {
            validate_key(&f.report.key).map_err(Error::Invalid)?;
            if f.report.outcome.is_none() {
                return Err(Error::Invalid("an attempt needs an outcome".into()));
            }
        }
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let round = store::in_tx!(self.store, |tx| {
            let first = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let known = if first { Some(started) } else { None };
            self.round_in(tx, finished, known, destinations, limit, actor)
                .await
        })?;
        let mut workflows: Vec<&str> = round
            .finished
            .iter()
            .flatten()
            .filter(|a| a.to != a.from && a.to.is_exception())
            .map(|a| a.workflow.as_str())
            .collect();
        workflows.sort_unstable();
        workflows.dedup();
        for w in workflows {
            self.check_threshold(w).await?;
        }
        Ok(round)
    }

    async fn round_in(
        &self,
        conn: &mut Tx,
        finished: &[Finished],
        known: Option<&StartedRows>,
        destinations: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Tried<Round>> {
        let now = self.now();
        let mut round = Round::default();
        let mut budgets: BTreeMap<String, Budget> = BTreeMap::new();
        // Written together at the end: one statement per kind of row, not per operation.
        let mut changes: Vec<Box<Change>> = Vec::new();

        // Its own attempts' rows first, waiting for each in key order; the rows to start are then
        // taken without waiting. After that a round waits for nothing but a budget row, so two
        // rounds never wait for each other in a circle.
        conn.lookups_by_key().await?;
        let mut own = std::collections::HashMap::new();
        let keys: Vec<&str> = finished
            .iter()
            .map(|f| f.report.key.as_str())
            .filter(|k| match known.and_then(|k2| k2.get(*k)) {
                Some(row) => {
                    own.insert(k.to_string(), (row.0, row.1.clone()));
                    false
                }
                None => true,
            })
            .collect();
        own.extend(conn.load_ops(&keys, true).await?);
        // The budgets this round may touch, held in name order (PostgreSQL) from here on.
        let touched: std::collections::BTreeSet<&str> = destinations
            .iter()
            .map(String::as_str)
            .chain(own.values().map(|(_, op)| op.destination.as_str()))
            .collect();
        for d in touched {
            self.budget(conn, &mut budgets, d, now).await?;
        }
        // The workflows with a stopping threshold by count, held in name order (after the
        // budgets, as every round takes them): rounds of several dispatchers take turns on each.
        let mut guards: BTreeMap<String, Guard> = BTreeMap::new();
        for (name, w) in &self.config.workflows {
            let Some(limit) = w.pause_when.as_ref().and_then(|p| p.unresolved) else {
                continue;
            };
            let row = conn.hold_workflow(name).await?;
            let (exceptions, running) = conn.threshold_counts(name, now).await?;
            guards.insert(name.clone(), Guard::new(limit, row, exceptions, running));
        }
        // destinations an answer says to pause, with the reason
        let mut pausing: Vec<(String, String)> = Vec::new();
        for f in finished {
            let key = f.report.key.as_str();
            let Some((id, op)) = own.remove(key) else {
                round
                    .finished
                    .push(Err(Error::NotFound(format!("no operation with key {key}"))));
                continue;
            };
            if let Some(reason) = &f.pause_destination
                && !pausing.iter().any(|(d, _)| *d == op.destination)
            {
                pausing.push((op.destination.clone(), reason.clone()));
            }
            let first_try = op.attempts == op.budget_start + 1;
            let result = match self
                .decide(conn, id, &op, actor, &Ask::Attempt(&f.report), None, None)
                .await
            {
                Ok(Decided::Unchanged(a)) => Ok(a),
                Ok(Decided::Change(c)) => {
                    let mut applied = c.applied.clone();
                    let lookup = match &f.lookup {
                        Some(answer) if c.op.state == State::Unknown => {
                            let ask = Ask::Cmd(Command::Lookup {
                                answer: answer.clone(),
                            });
                            match self
                                .decide(conn, id, &c.op, SYSTEM_ACTOR, &ask, None, None)
                                .await
                            {
                                Ok(Decided::Change(l)) => Some(l),
                                Ok(Decided::Unchanged(_)) => None,
                                Err(e) if per_operation(&e) => None,
                                Err(e) => return Err(e),
                            }
                        }
                        _ => None,
                    };
                    if let Some(g) = guards.get_mut(&op.workflow) {
                        g.changed(&op, &c.op, now);
                        if let Some(l) = &lookup {
                            g.changed(&c.op, &l.op, now);
                        }
                    }
                    changes.push(c);
                    if let Some(l) = lookup {
                        // settled by it: found or absent (no answer leaves it unknown)
                        round.looked_up += usize::from(l.op.state != State::Unknown);
                        applied = Applied {
                            from: applied.from,
                            ..l.applied.clone()
                        };
                        changes.push(l);
                    }
                    Ok(applied)
                }
                Err(e) if per_operation(&e) => Err(e),
                Err(e) => return Err(e),
            };
            if first_try
                && f.report.outcome == Some(Outcome::Accepted)
                && result.as_ref().is_ok_and(|a| a.kind.is_some())
            {
                let b = self
                    .budget(conn, &mut budgets, &op.destination, now)
                    .await?;
                let refunded = b.bucket.refund();
                b.changed |= refunded != b.bucket;
                b.bucket = refunded;
            }
            round.finished.push(result);
        }

        // A new exception that brings a workflow to its limit pauses it now, in this round:
        // nothing of it starts after the exception that reached the limit.
        for (name, g) in guards.iter_mut() {
            let paused = g.row.as_ref().is_some_and(|w| w.paused);
            if paused || !g.new_exception || g.exceptions < g.limit as i64 {
                continue;
            }
            let reason = format!(
                "stopping threshold: {} unresolved exceptions (limit {})",
                g.exceptions, g.limit
            );
            let version = g.row.as_ref().map(|w| w.version);
            if !conn
                .set_paused(
                    store::Pausable::Workflow,
                    name,
                    true,
                    Some(&reason),
                    SYSTEM_ACTOR,
                    now,
                    version,
                )
                .await?
            {
                return Ok(Tried::Raced);
            }
            g.paused_now = Some(reason);
        }
        // Workflows with no room for another attempt: their due operations are left for later.
        let held: Vec<String> = guards
            .iter()
            .filter(|(_, g)| g.paused_now.is_none() && g.room() <= 0)
            .map(|(name, _)| name.clone())
            .collect();

        // Destinations whose budget cannot pay for a retry: their retries are passed over.
        let starved: Vec<String> = budgets
            .iter()
            .filter(|(_, b)| b.bucket.tokens < RetryBudget::RETRY_COST)
            .map(|(d, _)| d.clone())
            .collect();
        let open: Vec<String> = destinations
            .iter()
            .filter(|d| !pausing.iter().any(|(p, _)| p == *d))
            .cloned()
            .collect();
        let due = conn.due_ops(&open, &starved, &held, now, limit).await?;
        for (id, op) in due {
            if guards
                .get(&op.workflow)
                .is_some_and(|g| g.paused_now.is_some() || g.room() <= 0)
            {
                continue;
            }
            let retry = op.attempts > op.budget_start;
            let left = if retry {
                let b = self
                    .budget(conn, &mut budgets, &op.destination, now)
                    .await?;
                match b.bucket.take(op.ambiguous) {
                    Some(left) => Some(left),
                    None => {
                        round.waiting_for_budget.push(op.key.clone());
                        continue;
                    }
                }
            } else {
                None
            };
            // the due query left out paused workflows
            let ask = Ask::Cmd(Command::StartAttempt);
            match self
                .decide(conn, id, &op, actor, &ask, Some(false), None)
                .await
            {
                Ok(Decided::Change(c)) if c.op.state == State::InFlight => {
                    let row = std::sync::Arc::new((id, c.op.clone()));
                    if let Some(left) = left {
                        let b = budgets.get_mut(&op.destination).expect("loaded above");
                        b.bucket = left;
                        b.changed = true;
                    }
                    if let Some(g) = guards.get_mut(&op.workflow) {
                        g.started += 1;
                    }
                    changes.push(c);
                    round.started.push(StartedOp {
                        attempt: op.attempts + 1,
                        retry,
                        key: op.key,
                        destination: op.destination,
                        action: op.action,
                        payload: op.payload,
                        row: Some(row),
                    });
                }
                // claimed or changed since the query: not this round's to start
                Ok(_) => {}
                Err(e) if per_operation(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if !write_changes(conn, &changes).await? {
            return Ok(Tried::Raced);
        }
        // the pauses' audit events after the exceptions that caused them
        for (name, g) in &guards {
            if let Some(reason) = &g.paused_now {
                let detail = serde_json::json!({ "reason": reason }).to_string();
                conn.insert_events(&[store::NewEvent {
                    operation_id: None,
                    workflow: Some(name),
                    at: now,
                    actor: SYSTEM_ACTOR,
                    kind: "auto_paused",
                    from_state: None,
                    to_state: None,
                    detail: &detail,
                }])
                .await?;
            }
        }
        for (destination, reason) in &pausing {
            let paused = self
                .set_paused_in(
                    conn,
                    store::Pausable::Destination,
                    destination,
                    true,
                    Some(reason),
                    SYSTEM_ACTOR,
                    "auto_paused",
                )
                .await?;
            if matches!(paused, Tried::Raced) {
                return Ok(Tried::Raced);
            }
        }
        for (destination, b) in &budgets {
            if b.changed
                && !conn
                    .save_budget(destination, b.bucket.tokens, b.since, b.version)
                    .await?
            {
                return Ok(Tried::Raced);
            }
        }
        Ok(Tried::Done(round))
    }

    /// Starts the next attempt of one operation for a caller that sends it itself (`settle
    /// start`, SPEC 11), under the rules a dispatcher's round applies: only a due `pending` or
    /// `retry_wait` operation, never one claimed by someone else or of a paused workflow or
    /// destination, and a
    /// retry only when its destination's budget pays for it (it takes the cost, as a round does).
    /// Two callers starting one operation at once: one starts it, the other is refused (the
    /// operation is in flight). Returns the change; the attempt's number is the operation's
    /// attempt count after it.
    pub async fn start_attempt(&self, key: &str, actor: &str) -> Result<Applied> {
        validate_key(key).map_err(Error::Invalid)?;
        super::check_name("actor", actor, false)?;
        store::in_tx!(self.store, |tx| self.start_in(tx, key, actor).await).map(|(a, _)| a)
    }

    /// SPEC 11's `start` for a caller that sends itself: the number of the attempt it may send
    /// now, or `Error::Refused` saying why not (as [`Ledger::start_attempt`] decides).
    pub async fn start(&self, key: &str, actor: &str) -> Result<u32> {
        validate_key(key).map_err(Error::Invalid)?;
        super::check_name("actor", actor, false)?;
        let (a, n) = store::in_tx!(self.store, |tx| self.start_in(tx, key, actor).await)?;
        if a.kind.is_some() && a.to == State::InFlight {
            Ok(n)
        } else {
            Err(Error::Refused(format!("{key}: {}: not started", a.to)))
        }
    }

    pub(super) async fn start_in(
        &self,
        tx: &mut Tx,
        key: &str,
        actor: &str,
    ) -> Result<Tried<(Applied, u32)>> {
        let now = self.now();
        let Some((id, op)) = tx.hold_op(key).await? else {
            return Err(Error::NotFound(format!("no operation with key {key}")));
        };
        let ask = Ask::Cmd(Command::StartAttempt);
        let change = match self.decide(tx, id, &op, actor, &ask, None, None).await? {
            Decided::Unchanged(a) => return Ok(Tried::Done((a, op.attempts))),
            Decided::Change(c) => c,
        };
        if let Some(p) = tx
            .pause_row(store::Pausable::Destination, &op.destination)
            .await?
            .filter(|p| p.paused)
        {
            let why = p.paused_reason.unwrap_or_default();
            let d = &op.destination;
            return Err(Error::Refused(format!(
                "{key}: destination {d} is paused ({why}): `settle resume --destination {d}` lifts it"
            )));
        }
        self.threshold_room(tx, key, &op.workflow, now).await?;
        let mut budgets = BTreeMap::new();
        if op.attempts > op.budget_start {
            let b = self.budget(tx, &mut budgets, &op.destination, now).await?;
            let Some(left) = b.bucket.take(op.ambiguous) else {
                return Err(Error::Refused(format!(
                    "{key}: the retry budget of {} is spent ({} tokens left): it waits in {}",
                    op.destination, b.bucket.tokens, op.state
                )));
            };
            b.bucket = left;
            b.changed = true;
        }
        if !write_changes(tx, std::slice::from_ref(&change)).await? {
            return Ok(Tried::Raced);
        }
        for (destination, b) in &budgets {
            if !tx
                .save_budget(destination, b.bucket.tokens, b.since, b.version)
                .await?
            {
                return Ok(Tried::Raced);
            }
        }
        Ok(Tried::Done((change.applied, change.op.attempts)))
    }

    /// A caller's start under its workflow's stopping threshold by count (SPEC 7), as a round
    /// applies it: refused when the attempts running could already bring the workflow to its
    /// limit, so that scripts starting one at a time never send more than the limit allows.
    async fn threshold_room(
        &self,
        tx: &mut Tx,
        key: &str,
        workflow: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let Some(limit) = self
            .config
            .workflows
            .get(workflow)
            .and_then(|w| w.pause_when.as_ref())
            .and_then(|p| p.unresolved)
        else {
            return Ok(());
        };
        let row = tx.hold_workflow(workflow).await?;
        let (exceptions, running) = tx.threshold_counts(workflow, now).await?;
        if Guard::new(limit, row, exceptions, running).room() > 0 {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "{key}: workflow {workflow} is at its stopping threshold ({exceptions} unresolved, \
             {running} attempt(s) running, limit {limit}): start again when one of them settles"
        )))
    }

    /// A destination's budget in this round: loaded once, topped up for the time since.
    async fn budget<'b>(
        &self,
        conn: &mut Tx,
        budgets: &'b mut BTreeMap<String, Budget>,
        destination: &str,
        now: DateTime<Utc>,
    ) -> Result<&'b mut Budget> {
        if !budgets.contains_key(destination) {
            let stored = conn.budget(destination).await?;
            let (bucket, since, version) = match stored {
                Some(row) => (
                    RetryBudget { tokens: row.tokens },
                    row.refilled_at,
                    Some(row.version),
                ),
                None => (RetryBudget::full(), now, None),
            };
            let (bucket, since) = bucket.refilled(since, now);
            budgets.insert(
                destination.to_string(),
                Budget {
                    bucket,
                    since,
                    version,
                    changed: false,
                },
            );
        }
        Ok(budgets.get_mut(destination).expect("inserted above"))
    }

    /// What scrubs a destination's answer to one started operation before it is stored, logged or
    /// printed: the built-in patterns and the sensitive values of the payload that was sent, which
    /// a destination may echo back (SPEC 8, 11a).
    pub fn answer_scrubber(&self, op: &StartedOp) -> crate::domain::redact::OperationRedaction {
        self.redactor
            .scrubber(&op.destination, &op.action, &op.payload)
    }

    /// A destination's retry budget as it stands now (full when never drawn on).
    pub async fn retry_budget(&self, destination: &str) -> Result<u32> {
        let now = self.now();
        Ok(match self.store.budget(destination).await? {
            Some(row) => {
                RetryBudget { tokens: row.tokens }
                    .refilled(row.refilled_at, now)
                    .0
                    .tokens
            }
            None => RetryBudget::CAPACITY,
        })
    }
}
