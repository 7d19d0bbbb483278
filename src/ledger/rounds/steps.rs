//! A dispatcher's round step by step (see [`Rounds::round`]): hold what it touches, record the
//! finished attempts (and their lookups), pause what reached its stopping threshold, start the
//! due operations its budgets pay for, and write it all at once.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::Rounds;
use super::types::{Finished, StartedOp, StartedRows};
use super::work::RoundWork;
use crate::domain::{Command, Op, Outcome, State};
use crate::error::{Error, Result};
use crate::ledger::change::{Ask, Decided, per_operation};
use crate::ledger::engine::Batch;
use crate::ledger::guards::Guard;
use crate::ledger::{Applied, SYSTEM_ACTOR};
use crate::store::Tried;
use crate::store::{self, Tx};

impl Rounds<'_> {
    /// Holds what the round touches, in an order every round keeps: its own attempts' rows (in
    /// key order; those in `known` as their starting rounds left them), then the budgets (name
    /// order), then the workflows with a stopping threshold by count (name order); the rows to
    /// start are taken later without waiting. So two rounds never wait for each other in a
    /// circle. Its own rows are held in the round's batch.
    pub(super) async fn hold_for_round(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        finished: &[Finished],
        known: Option<&StartedRows>,
        destinations: &[String],
        now: DateTime<Utc>,
    ) -> Result<()> {
        conn.lookups_by_key().await?;
        let mut own = HashMap::new();
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
        let touched: BTreeSet<&str> = destinations
            .iter()
            .map(String::as_str)
            .chain(own.values().map(|(_, op)| op.destination.as_str()))
            .collect();
        for d in touched {
            w.budgets.of(conn, d, now).await?;
        }
        for (name, wf) in &self.0.config.workflows {
            let Some(limit) = wf.pause_when.as_ref().and_then(|p| p.unresolved) else {
                continue;
            };
            let row = conn.hold_workflow(name).await?;
            let (exceptions, running) = conn.threshold_counts(name, now).await?;
            w.guards
                .insert(name.clone(), Guard::new(limit, row, exceptions, running));
        }
        w.batch = Batch::of(own);
        Ok(())
    }

    /// Records each finished attempt on its row (and its lookup's answer, where the outcome is
    /// still unknown), in the order given; a first-try success refunds its budget a token.
    pub(super) async fn record_finished(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        finished: &[Finished],
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // a key's attempt finishes once a round: a second report of it is not this round's
        let mut seen = HashSet::new();
        for f in finished {
            let key = f.report.key.as_str();
            let row = w.batch.row(key).map(|(_, op)| op.clone());
            let Some(op) = row.filter(|_| seen.insert(key)) else {
                w.round
                    .finished
                    .push(Err(Error::NotFound(format!("no operation with key {key}"))));
                continue;
            };
            if let Some(reason) = &f.pause_destination
                && !w.pausing.iter().any(|(d, _)| *d == op.destination)
            {
                w.pausing.push((op.destination.clone(), reason.clone()));
            }
            let first_try = op.attempts == op.budget_start + 1;
            let result = self.record_one(conn, w, f, &op, actor, now).await?;
            self.observe(conn, w, f, &op, now).await?;
            if first_try
                && f.report.outcome == Some(Outcome::Accepted)
                && result.as_ref().is_ok_and(|a| a.kind.is_some())
            {
                let b = w.budgets.of(conn, &op.destination, now).await?;
                let refunded = b.bucket.refund();
                b.changed |= refunded != b.bucket;
                b.bucket = refunded;
            }
            w.round.finished.push(result);
        }
        Ok(())
    }

    /// One finished attempt: its outcome judged on its row, then its lookup's answer on the row
    /// as that left it. A refusal is the operation's answer; anything else (the database) ends
    /// the round.
    async fn record_one(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        f: &Finished,
        op: &Op,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<Applied>> {
        let key = op.key.as_str();
        let ask = Ask::Attempt(&f.report);
        let c = match w.batch.judge(self.0, conn, key, actor, &ask, None).await {
            Ok(Decided::Unchanged(a)) => return Ok(Ok(a)),
            Ok(Decided::Change(c)) => c,
            Err(e) if per_operation(&e) => return Ok(Err(e)),
            Err(e) => return Err(e),
        };
        let mut applied = c.applied.clone();
        if let Some(g) = w.guards.get_mut(&op.workflow) {
            g.changed(op, &c.op, now);
        }
        let unknown = c.op.state == State::Unknown;
        w.batch.take(c);
        let Some(answer) = f.lookup.as_ref().filter(|_| unknown) else {
            return Ok(Ok(applied));
        };
        let ask = Ask::Cmd(Command::Lookup {
            answer: answer.clone(),
        });
        let l = match w
            .batch
            .judge(self.0, conn, key, SYSTEM_ACTOR, &ask, None)
            .await
        {
            Ok(Decided::Change(l)) => l,
            Ok(Decided::Unchanged(_)) => return Ok(Ok(applied)),
            Err(e) if per_operation(&e) => return Ok(Ok(applied)),
            Err(e) => return Err(e),
        };
        if let (Some(g), Some((_, before))) = (w.guards.get_mut(&op.workflow), w.batch.row(key)) {
            g.changed(before, &l.op, now);
        }
        // settled by it: found or absent (no answer leaves it unknown)
        w.round.looked_up += usize::from(l.op.state != State::Unknown);
        applied = Applied {
            from: applied.from,
            ..l.applied.clone()
        };
        w.batch.take(l);
        Ok(Ok(applied))
    }

    /// A new exception that brings a workflow to its limit pauses it now, in this round: nothing
    /// of it starts after the exception that reached the limit. False: another writer raced us.
    pub(super) async fn pause_at_limits(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        for (name, g) in w.guards.iter_mut() {
            let paused = g.row.as_ref().is_some_and(|wf| wf.paused);
            if paused || !g.new_exception || g.exceptions < g.limit as i64 {
                continue;
            }
            let reason = format!(
                "stopping threshold: {} unresolved exceptions (limit {})",
                g.exceptions, g.limit
            );
            let version = g.row.as_ref().map(|wf| wf.version);
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
                return Ok(false);
            }
            g.paused_now = Some(reason);
        }
        Ok(true)
    }

    /// Starts up to `limit` due operations of `destinations`, oldest due first, within their
    /// destinations' retry budgets and their workflows' thresholds; retries at a destination
    /// whose budget is empty are passed over, so that first attempts behind them still go.
    pub(super) async fn start_due(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        destinations: &[String],
        limit: usize,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // workflows with no room for another attempt: their due operations are left for later
        let full: Vec<String> = w
            .guards
            .iter()
            .filter(|(_, g)| g.paused_now.is_none() && g.room() <= 0)
            .map(|(name, _)| name.clone())
            .collect();
        // destinations whose budget cannot pay for a retry: their retries are passed over
        let starved = w.budgets.starved();
        let open: Vec<String> = destinations
            .iter()
            .filter(|d| !w.pausing.iter().any(|(p, _)| p == *d))
            .cloned()
            .collect();
        self.start_allowed(conn, w, &open, (&starved, &full), limit, actor, now)
            .await
    }

    /// One due operation started, if its budget pays for it (a retry) and the rules let it.
    pub(super) async fn start_one(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        id: i64,
        op: Op,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let retry = op.attempts > op.budget_start;
        let left = if retry {
            let b = w.budgets.of(conn, &op.destination, now).await?;
            match b.bucket.take(op.ambiguous) {
                Some(left) => Some(left),
                None => {
                    w.round.waiting_for_budget.push(op.key.clone());
                    return Ok(());
                }
            }
        } else {
            None
        };
        // the due query left out paused workflows
        let key = op.key.clone();
        w.batch.add(id, op);
        let ask = Ask::Cmd(Command::StartAttempt);
        match w
            .batch
            .judge(self.0, conn, &key, actor, &ask, Some(false))
            .await
        {
            Ok(Decided::Change(c)) if c.op.state == State::InFlight => {
                let row = std::sync::Arc::new((id, c.op.clone()));
                if let Some(left) = left {
                    let b = w.budgets.loaded(&c.op.destination).expect("loaded above");
                    b.bucket = left;
                    b.changed = true;
                }
                if let Some(g) = w.guards.get_mut(&c.op.workflow) {
                    g.started += 1;
                }
                w.round.started.push(StartedOp {
                    attempt: c.op.attempts,
                    retry,
                    key,
                    destination: c.op.destination.clone(),
                    action: c.op.action.clone(),
                    payload: c.op.payload.clone(),
                    row: Some(row),
                });
                w.batch.take(c);
                Ok(())
            }
            // claimed or changed since the query: not this round's to start
            Ok(_) => Ok(()),
            Err(e) if per_operation(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes what the round decided: the changes, then the pauses' audit events (after the
    /// exceptions that caused them), the destinations an answer paused, and the budgets.
    pub(super) async fn write_round(
        self,
        conn: &mut Tx,
        w: &mut RoundWork,
        now: DateTime<Utc>,
    ) -> Result<Tried<()>> {
        if w.batch.write(self.0, conn, SYSTEM_ACTOR).await?.is_none() {
            return Ok(Tried::Raced);
        }
        for (name, g) in &w.guards {
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
                    action: None,
                    restore: None,
                }])
                .await?;
            }
        }
        for (destination, reason) in &w.pausing {
            let paused = self
                .0
                .set_paused_in(
                    conn,
                    store::Pausable::Destination,
                    destination,
                    true,
                    Some(reason),
                    SYSTEM_ACTOR,
                    "auto_paused",
                    None,
                )
                .await?;
            if matches!(paused, Tried::Raced) {
                return Ok(Tried::Raced);
            }
        }
        if !w.budgets.save(conn).await? {
            return Ok(Tried::Raced);
        }
        if crate::ledger::health::destinations_told(self.0) {
            let notices: Vec<store::Notice> = (w.round.breakers.iter())
                .map(|(d, c)| crate::ledger::health::breaker_notice(d, c, SYSTEM_ACTOR, now))
                .collect();
            conn.add_notices(&notices).await?;
        }
        Ok(Tried::Done(()))
    }
}
