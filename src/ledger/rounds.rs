//! The dispatcher's rounds: the outcomes of finished attempts and the starts of new ones, many
//! operations in one transaction (group commit), each still its own compare-and-set with its own
//! audit event. The destinations' retry budgets (SPEC 6) live in the database, so every
//! dispatcher draws on the same ones.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;

use super::{
    Applied, Ask, AttemptReport, CAS_TRIES, Change, Decided, Ledger, SYSTEM_ACTOR, Tried,
    in_transaction, write_changes,
};
use crate::domain::policy::RetryBudget;
use crate::domain::{Command, Outcome, State, validate_key};
use crate::error::{Error, Result};
use crate::store::{self, RoundStore};

/// An attempt the dispatcher has finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub report: AttemptReport,
    /// Where the outcome was unknown and the destination has a lookup: what the lookup said
    /// (`Some(reference)` found, `None` absent).
    pub lookup: Option<Option<String>>,
}

/// An attempt a round started: send it now.
#[derive(Clone, Debug, PartialEq)]
pub struct StartedOp {
    pub key: String,
    pub destination: String,
    pub attempt: u32,
    /// An attempt of the current budget was made before.
    pub retry: bool,
    /// The stored request, unredacted: only the dispatcher reads it, to send it.
    pub(crate) payload: String,
}

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

/// A destination's budget inside one round.
struct Budget {
    bucket: RetryBudget,
    since: DateTime<Utc>,
    version: Option<i64>,
    changed: bool,
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
        for f in finished {
            validate_key(&f.report.key).map_err(Error::Invalid)?;
            if f.report.outcome.is_none() {
                return Err(Error::Invalid("an attempt needs an outcome".into()));
            }
        }
        let round = match self.store.direct() {
            // SQLite: the whole round on a blocking thread, on the dispatcher's own connection
            Some(_) => {
                let (ledger, finished, destinations, actor) = (
                    self.clone(),
                    finished.to_vec(),
                    destinations.to_vec(),
                    actor.to_string(),
                );
                tokio::task::spawn_blocking(move || {
                    let direct = ledger.store.direct().expect("SQLite");
                    direct.write(|tx| {
                        let round = ledger.round_in(tx, &finished, &destinations, limit, &actor);
                        Ok(match store::run_ready(round)?? {
                            Tried::Done(round) => Some(round),
                            Tried::Raced => None,
                        })
                    })
                })
                .await
                .map_err(|e| Error::Unavailable(format!("database: a round stopped: {e}")))??
            }
            None => in_transaction!(self, |conn| self
                .round_in(conn, finished, destinations, limit, actor)
                .await)?,
        };
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
        conn: &mut impl RoundStore,
        finished: &[Finished],
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
        let keys: Vec<&str> = finished.iter().map(|f| f.report.key.as_str()).collect();
        let mut own = conn.load_ops(&keys, store::Lock::Wait).await?;
        // The budgets this round may touch, held in name order (PostgreSQL) from here on.
        let touched: std::collections::BTreeSet<&str> = destinations
            .iter()
            .map(String::as_str)
            .chain(own.values().map(|(_, op)| op.destination.as_str()))
            .collect();
        for d in touched {
            self.budget(conn, &mut budgets, d, now).await?;
        }
        for f in finished {
            let key = f.report.key.as_str();
            let Some((id, op)) = own.remove(key) else {
                round
                    .finished
                    .push(Err(Error::NotFound(format!("no operation with key {key}"))));
                continue;
            };
            let first_try = op.attempts == op.budget_start + 1;
            let result = match self
                .decide(conn, id, &op, actor, &Ask::Attempt(&f.report), None)
                .await
            {
                Ok(Decided::Unchanged(a)) => Ok(a),
                Ok(Decided::Change(c)) => {
                    let mut applied = c.applied.clone();
                    let lookup = match &f.lookup {
                        Some(found) if c.op.state == State::Unknown => {
                            let ask = Ask::Cmd(Command::Lookup {
                                found: found.clone(),
                            });
                            match self.decide(conn, id, &c.op, SYSTEM_ACTOR, &ask, None).await {
                                Ok(Decided::Change(l)) => Some(l),
                                Ok(Decided::Unchanged(_)) => None,
                                Err(e) if per_operation(&e) => None,
                                Err(e) => return Err(e),
                            }
                        }
                        _ => None,
                    };
                    changes.push(c);
                    if let Some(l) = lookup {
                        round.looked_up += 1;
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

        // Destinations whose budget cannot pay for a retry: their retries are passed over.
        let starved: Vec<String> = budgets
            .iter()
            .filter(|(_, b)| b.bucket.tokens < RetryBudget::RETRY_COST)
            .map(|(d, _)| d.clone())
            .collect();
        let due = conn
            .due_ops(
                destinations,
                &starved,
                now,
                limit,
                Some(store::Lock::SkipLocked),
            )
            .await?;
        for (id, op) in due {
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
            match self.decide(conn, id, &op, actor, &ask, Some(false)).await {
                Ok(Decided::Change(c)) if c.op.state == State::InFlight => {
                    if let Some(left) = left {
                        let b = budgets.get_mut(&op.destination).expect("loaded above");
                        b.bucket = left;
                        b.changed = true;
                    }
                    changes.push(c);
                    round.started.push(StartedOp {
                        attempt: op.attempts + 1,
                        retry,
                        key: op.key,
                        destination: op.destination,
                        payload: op.payload,
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

    /// A destination's budget in this round: loaded once, topped up for the time since.
    async fn budget<'b>(
        &self,
        conn: &mut impl RoundStore,
        budgets: &'b mut BTreeMap<String, Budget>,
        destination: &str,
        now: DateTime<Utc>,
    ) -> Result<&'b mut Budget> {
        if !budgets.contains_key(destination) {
            let stored = conn.budget(destination, Some(store::Lock::Wait)).await?;
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

    /// A destination's retry budget as it stands now (full when never drawn on).
    pub async fn retry_budget(&self, destination: &str) -> Result<u32> {
        let mut conn = self.pooled().await?;
        let now = self.now();
        Ok(
            match store::budget(&mut conn, destination, self.store.backend(), None).await? {
                Some(row) => {
                    RetryBudget { tokens: row.tokens }
                        .refilled(row.refilled_at, now)
                        .0
                        .tokens
                }
                None => RetryBudget::CAPACITY,
            },
        )
    }
}
