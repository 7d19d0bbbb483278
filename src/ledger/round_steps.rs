//! A dispatcher's round step by step (see [`Ledger::round`]): hold what it touches, record the
//! finished attempts (and their lookups), pause what reached its stopping threshold, start the
//! due operations its budgets pay for, and write it all at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::budgets::Budget;
use super::change::{Ask, Change, Decided, write_changes};
use super::guards::Guard;
use super::round_types::{Finished, Round, StartedOp, StartedRows, per_operation};
use super::{Applied, Ledger, SYSTEM_ACTOR, Tried};
use crate::domain::policy::RetryBudget;
use crate::domain::{Command, Op, Outcome, State};
use crate::error::{Error, Result};
use crate::store::{self, Tx};

/// What a round has decided so far, written together at the end: one statement per kind of row,
/// not per operation.
#[derive(Default)]
pub(super) struct RoundWork {
    pub(super) round: Round,
    budgets: BTreeMap<String, Budget>,
    guards: BTreeMap<String, Guard>,
    /// Boxed as the rules hand them over (`Decided::Change`), and as `write_changes` takes them.
    #[allow(clippy::vec_box)]
    changes: Vec<Box<Change>>,
    /// Destinations an answer says to pause, with the reason.
    pausing: Vec<(String, String)>,
}

impl Ledger {
    /// Holds what the round touches, in an order every round keeps: its own attempts' rows (in
    /// key order; those in `known` as their starting rounds left them), then the budgets (name
    /// order), then the workflows with a stopping threshold by count (name order); the rows to
    /// start are taken later without waiting. So two rounds never wait for each other in a
    /// circle. Returns its own rows.
    pub(super) async fn hold_for_round(
        &self,
        conn: &mut Tx,
        w: &mut RoundWork,
        finished: &[Finished],
        known: Option<&StartedRows>,
        destinations: &[String],
        now: DateTime<Utc>,
    ) -> Result<HashMap<String, (i64, Op)>> {
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
            self.budget(conn, &mut w.budgets, d, now).await?;
        }
        for (name, wf) in &self.config.workflows {
            let Some(limit) = wf.pause_when.as_ref().and_then(|p| p.unresolved) else {
                continue;
            };
            let row = conn.hold_workflow(name).await?;
            let (exceptions, running) = conn.threshold_counts(name, now).await?;
            w.guards
                .insert(name.clone(), Guard::new(limit, row, exceptions, running));
        }
        Ok(own)
    }

    /// Records each finished attempt on its row (and its lookup's answer, where the outcome is
    /// still unknown), in the order given; a first-try success refunds its budget a token.
    pub(super) async fn record_finished(
        &self,
        conn: &mut Tx,
        w: &mut RoundWork,
        finished: &[Finished],
        mut own: HashMap<String, (i64, Op)>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        for f in finished {
            let key = f.report.key.as_str();
            let Some((id, op)) = own.remove(key) else {
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
            let result = self.record_one(conn, w, f, id, &op, actor, now).await?;
            if first_try
                && f.report.outcome == Some(Outcome::Accepted)
                && result.as_ref().is_ok_and(|a| a.kind.is_some())
            {
                let b = self
                    .budget(conn, &mut w.budgets, &op.destination, now)
                    .await?;
                let refunded = b.bucket.refund();
                b.changed |= refunded != b.bucket;
                b.bucket = refunded;
            }
            w.round.finished.push(result);
        }
        Ok(())
    }

    /// One finished attempt: its outcome decided on its row, then its lookup's answer. A refusal
    /// is the operation's answer; anything else (the database) ends the round.
    #[allow(clippy::too_many_arguments)]
    async fn record_one(
        &self,
        conn: &mut Tx,
        w: &mut RoundWork,
        f: &Finished,
        id: i64,
        op: &Op,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<Applied>> {
        let c = match self
            .decide(conn, id, op, actor, &Ask::Attempt(&f.report), None, None)
            .await
        {
            Ok(Decided::Unchanged(a)) => return Ok(Ok(a)),
            Ok(Decided::Change(c)) => c,
            Err(e) if per_operation(&e) => return Ok(Err(e)),
            Err(e) => return Err(e),
        };
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
        if let Some(g) = w.guards.get_mut(&op.workflow) {
            g.changed(op, &c.op, now);
            if let Some(l) = &lookup {
                g.changed(&c.op, &l.op, now);
            }
        }
        w.changes.push(c);
        if let Some(l) = lookup {
            // settled by it: found or absent (no answer leaves it unknown)
            w.round.looked_up += usize::from(l.op.state != State::Unknown);
            applied = Applied {
                from: applied.from,
                ..l.applied.clone()
            };
            w.changes.push(l);
        }
        Ok(Ok(applied))
    }

    /// A new exception that brings a workflow to its limit pauses it now, in this round: nothing
    /// of it starts after the exception that reached the limit. False: another writer raced us.
    pub(super) async fn pause_at_limits(
        &self,
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
        &self,
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
        let starved: Vec<String> = w
            .budgets
            .iter()
            .filter(|(_, b)| b.bucket.tokens < RetryBudget::RETRY_COST)
            .map(|(d, _)| d.clone())
            .collect();
        let open: Vec<String> = destinations
            .iter()
            .filter(|d| !w.pausing.iter().any(|(p, _)| p == *d))
            .cloned()
            .collect();
        for (id, op) in conn.due_ops(&open, &starved, &full, now, limit).await? {
            if w.guards
                .get(&op.workflow)
                .is_some_and(|g| g.paused_now.is_some() || g.room() <= 0)
            {
                continue;
            }
            self.start_one(conn, w, id, op, actor, now).await?;
        }
        Ok(())
    }

    /// One due operation started, if its budget pays for it (a retry) and the rules let it.
    async fn start_one(
        &self,
        conn: &mut Tx,
        w: &mut RoundWork,
        id: i64,
        op: Op,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let retry = op.attempts > op.budget_start;
        let left = if retry {
            let b = self
                .budget(conn, &mut w.budgets, &op.destination, now)
                .await?;
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
        let ask = Ask::Cmd(Command::StartAttempt);
        match self
            .decide(conn, id, &op, actor, &ask, Some(false), None)
            .await
        {
            Ok(Decided::Change(c)) if c.op.state == State::InFlight => {
                let row = std::sync::Arc::new((id, c.op.clone()));
                if let Some(left) = left {
                    let b = w.budgets.get_mut(&op.destination).expect("loaded above");
                    b.bucket = left;
                    b.changed = true;
                }
                if let Some(g) = w.guards.get_mut(&op.workflow) {
                    g.started += 1;
                }
                w.changes.push(c);
                w.round.started.push(StartedOp {
                    attempt: op.attempts + 1,
                    retry,
                    key: op.key,
                    destination: op.destination,
                    action: op.action,
                    payload: op.payload,
                    row: Some(row),
                });
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
        &self,
        conn: &mut Tx,
        w: &RoundWork,
        now: DateTime<Utc>,
    ) -> Result<Tried<()>> {
        if !write_changes(self, conn, &w.changes).await? {
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
                }])
                .await?;
            }
        }
        for (destination, reason) in &w.pausing {
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
        for (destination, b) in &w.budgets {
            if b.changed
                && !conn
                    .save_budget(destination, b.bucket.tokens, b.since, b.version)
                    .await?
            {
                return Ok(Tried::Raced);
            }
        }
        Ok(Tried::Done(()))
    }
}
