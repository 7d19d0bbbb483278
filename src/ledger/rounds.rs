//! The dispatcher's rounds: the outcomes of finished attempts and the starts of new ones, many
//! operations in one transaction (group commit), each still its own compare-and-set with its own
//! audit event. The destinations' retry budgets (SPEC 6) live in the database, so every
//! dispatcher draws on the same ones.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;

use super::{
    Applied, Ask, AttemptReport, CAS_TRIES, Change, Decided, Ledger, SYSTEM_ACTOR, Tried,
    in_transaction,
};
use crate::domain::policy::RetryBudget;
use crate::domain::{Command, Outcome, State, validate_key};
use crate::error::{Error, Result};
use crate::store;

/// An attempt the dispatcher has finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub report: AttemptReport,
    /// Where the outcome was unknown and the destination has a lookup: what the lookup said
    /// (`Some(reference)` found, `None` absent).
    pub lookup: Option<Option<String>>,
}

/// What became of a request to start an operation's next attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Started {
    /// The attempt is recorded as started: send it now.
    Yes { attempt: u32 },
    /// The destination's retry budget is empty: the operation waits in `retry_wait`.
    NoBudget,
    /// Claimed, paused, started by another dispatcher, not due any more, or past the round's limit.
    Refused(String),
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Per finished attempt, in the order given: what its outcome (and lookup) made of it.
    pub finished: Vec<Result<Applied>>,
    /// How many unknown outcomes a lookup settled.
    pub looked_up: usize,
    /// Per key to start, in the order given.
    pub started: Vec<Started>,
}

/// A destination's budget inside one round.
struct Budget {
    bucket: RetryBudget,
    since: DateTime<Utc>,
    version: Option<i64>,
    changed: bool,
}

enum Step<'a> {
    Finish(usize, &'a Finished),
    Start(usize, &'a str),
}

impl Step<'_> {
    fn key(&self) -> &str {
        match self {
            Step::Finish(_, f) => &f.report.key,
            Step::Start(_, k) => k,
        }
    }
}

/// A refusal concerns one operation; anything else (the database) ends the round.
fn per_operation(e: &Error) -> bool {
    matches!(
        e,
        Error::Refused(_) | Error::NotFound(_) | Error::Invalid(_)
    )
}

/// Writes a round's changes: the operations' new rows (a compare-and-set on each; changes to one
/// operation come one after another and make one row), the attempts and the events in order.
/// False when another writer changed one of the operations first.
async fn write_changes(conn: &mut AnyConnection, changes: &[Box<Change>]) -> Result<bool> {
    let mut rows: Vec<(i64, &crate::domain::Op, i64)> = Vec::with_capacity(changes.len());
    for c in changes {
        match rows.last_mut() {
            Some(last) if last.0 == c.id => last.1 = &c.op,
            _ => rows.push((c.id, &c.op, c.expected_version)),
        }
    }
    if !store::update_ops(conn, &rows).await? {
        return Ok(false);
    }
    let opened: Vec<_> = changes
        .iter()
        .filter_map(|c| match c.attempt {
            crate::domain::AttemptEffect::Start { n } => Some((c.id, n, c.actor.as_str(), c.at)),
            _ => None,
        })
        .collect();
    store::start_attempts(conn, &opened).await?;
    let mut closed = Vec::new();
    for (write, whole) in changes.iter().filter_map(|c| c.attempt_write()) {
        if whole {
            store::finish_attempt(conn, &write, true).await?;
        } else {
            closed.push(write);
        }
    }
    store::finish_attempts(conn, &closed).await?;
    let events: Vec<_> = changes.iter().map(|c| c.event()).collect();
    store::insert_events(conn, &events).await?;
    Ok(true)
}

impl Ledger {
    /// Records `finished` attempts (and their lookups), then starts the next attempt of up to
    /// `limit` of the keys in `start` that are still due and within their destination's retry
    /// budget: all in one transaction, as `actor`. A retry takes its cost from the budget (SPEC 6), a first-try
    /// success refunds one token.
    pub async fn round(
        &self,
        finished: &[Finished],
        start: &[String],
        limit: usize,
        actor: &str,
    ) -> Result<Round> {
        for f in finished {
            validate_key(&f.report.key).map_err(Error::Invalid)?;
            if f.report.outcome.is_none() {
                return Err(Error::Invalid("an attempt needs an outcome".into()));
            }
        }
        // Rows are changed in key order (budgets last), so that two dispatchers' rounds on
        // PostgreSQL wait for each other instead of deadlocking.
        let mut steps: Vec<Step> = finished
            .iter()
            .enumerate()
            .map(|(i, f)| Step::Finish(i, f))
            .chain(
                start
                    .iter()
                    .enumerate()
                    .map(|(i, k)| Step::Start(i, k.as_str())),
            )
            .collect();
        steps.sort_by(|a, b| a.key().cmp(b.key()));
        let round = in_transaction!(self, |conn| self
            .round_in(conn, &steps, finished.len(), start.len(), limit, actor)
            .await)?;
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
        conn: &mut AnyConnection,
        steps: &[Step<'_>],
        n_finished: usize,
        n_start: usize,
        limit: usize,
        actor: &str,
    ) -> Result<Tried<Round>> {
        let now = self.now();
        let mut finished: Vec<Option<Result<Applied>>> = (0..n_finished).map(|_| None).collect();
        let mut started: Vec<Option<Started>> = vec![None; n_start];
        let mut looked_up = 0;
        let mut budgets: BTreeMap<String, Budget> = BTreeMap::new();
        let mut paused: HashMap<String, bool> = HashMap::new();
        let mut starts = 0;
        let keys: Vec<&str> = steps.iter().map(Step::key).collect();
        let mut ops = store::load_ops(conn, &keys).await?;
        // Written together at the end: one statement per kind of row, not per operation.
        let mut changes: Vec<Box<Change>> = Vec::new();
        for step in steps {
            let key = step.key();
            if let Step::Start(i, _) = step
                && starts >= limit
            {
                started[*i] = Some(Started::Refused(format!(
                    "{key}: not started in this round"
                )));
                continue;
            }
            let Some((id, op)) = ops.remove(key) else {
                let missing = Error::NotFound(format!("no operation with key {key}"));
                match step {
                    Step::Finish(i, _) => finished[*i] = Some(Err(missing)),
                    Step::Start(i, _) => started[*i] = Some(Started::Refused(missing.to_string())),
                }
                continue;
            };
            match step {
                Step::Finish(i, f) => {
                    let first_try = op.attempts == op.budget_start + 1;
                    let ask = Ask::Attempt(&f.report);
                    let result = match self.decide(conn, id, &op, actor, &ask, None).await {
                        Ok(Decided::Unchanged(a)) => Ok(a),
                        Ok(Decided::Change(c)) => {
                            let mut applied = c.applied.clone();
                            let lookup = match &f.lookup {
                                Some(found) if c.op.state == State::Unknown => {
                                    let ask = Ask::Cmd(Command::Lookup {
                                        found: found.clone(),
                                    });
                                    match self
                                        .decide(conn, id, &c.op, SYSTEM_ACTOR, &ask, None)
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
                            changes.push(c);
                            if let Some(l) = lookup {
                                looked_up += 1;
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
                    finished[*i] = Some(result);
                }
                Step::Start(i, _) => {
                    let workflow_paused = match paused.get(&op.workflow) {
                        Some(p) => *p,
                        None => {
                            let p = store::workflow(conn, &op.workflow)
                                .await?
                                .is_some_and(|w| w.paused);
                            paused.insert(op.workflow.clone(), p);
                            p
                        }
                    };
                    let retry = op.attempts > op.budget_start
                        && matches!(op.state, State::Pending | State::RetryWait);
                    let left = if retry {
                        let b = self
                            .budget(conn, &mut budgets, &op.destination, now)
                            .await?;
                        match b.bucket.take(op.ambiguous) {
                            Some(left) => Some(left),
                            None => {
                                started[*i] = Some(Started::NoBudget);
                                continue;
                            }
                        }
                    } else {
                        None
                    };
                    let ask = Ask::Cmd(Command::StartAttempt);
                    let decided = self
                        .decide(conn, id, &op, actor, &ask, Some(workflow_paused))
                        .await;
                    started[*i] = Some(match decided {
                        Ok(Decided::Change(c)) if c.op.state == State::InFlight => {
                            if let Some(left) = left {
                                let b = budgets.get_mut(&op.destination).expect("loaded above");
                                b.bucket = left;
                                b.changed = true;
                            }
                            starts += 1;
                            changes.push(c);
                            Started::Yes {
                                attempt: op.attempts + 1,
                            }
                        }
                        Ok(Decided::Change(c)) => Started::Refused(format!(
                            "{key} would become {}: not started",
                            c.op.state
                        )),
                        Ok(Decided::Unchanged(a)) => {
                            Started::Refused(format!("{key} is {}: not started", a.to))
                        }
                        Err(e) if per_operation(&e) => Started::Refused(e.to_string()),
                        Err(e) => return Err(e),
                    });
                }
            }
        }
        if !write_changes(conn, &changes).await? {
            return Ok(Tried::Raced);
        }
        for (destination, b) in &budgets {
            if b.changed
                && !store::save_budget(conn, destination, b.bucket.tokens, b.since, b.version)
                    .await?
            {
                return Ok(Tried::Raced);
            }
        }
        Ok(Tried::Done(Round {
            finished: finished
                .into_iter()
                .map(|r| r.expect("every step answered"))
                .collect(),
            looked_up,
            started: started
                .into_iter()
                .map(|s| s.expect("every step answered"))
                .collect(),
        }))
    }

    /// A destination's budget in this round: loaded once, topped up for the time since.
    async fn budget<'b>(
        &self,
        conn: &mut AnyConnection,
        budgets: &'b mut BTreeMap<String, Budget>,
        destination: &str,
        now: DateTime<Utc>,
    ) -> Result<&'b mut Budget> {
        if !budgets.contains_key(destination) {
            let stored = store::budget(conn, destination).await?;
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
        Ok(match store::budget(&mut conn, destination).await? {
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
