//! What a group of the HTTP API's writes is (see `group/mod.rs`), and one caller's writes of a group
//! in a few statements, as an ingest batch and a dispatcher's round write theirs: one query loads
//! every operation the group names, their attempts and the pause flags (`Tx::load_group`); the
//! rules judge every write in memory, in order; the new operations go in with one statement, every
//! change and every event with one more, the runs' rows once. On PostgreSQL a group is so five
//! round trips (the `BEGIN` with its settings, the load, the insert, the change set, the
//! `COMMIT`), where a statement per write would make the group's transaction as long as its
//! writes are many.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::domain::next_step::Paused;
use crate::domain::{Command, Op};
use crate::error::{Error, Result};
use crate::ledger::budgets::Budgets;
use crate::ledger::change::{Ask, Decided, per_operation};
use crate::ledger::engine::Batch;
use crate::ledger::views::OperationView;
use crate::ledger::{Applied, AttemptReport, Intent, Ledger, Recorded};
use crate::store::{Cursor, Tx, ms};

/// A write the HTTP API asks of the ledger.
#[derive(Clone, Debug)]
pub enum Write {
    Record(Intent),
    Start(String),
    Attempt(AttemptReport),
}

impl Write {
    pub fn key(&self) -> &str {
        match self {
            Write::Record(i) => &i.key,
            Write::Start(k) => k,
            Write::Attempt(r) => &r.key,
        }
    }
}

/// What a write came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    Recorded(Recorded),
    /// The change a start made (or none), and the operation's attempt count after it.
    Started(Applied, u32),
    Reported(Applied),
}

/// A write's answer: what it came to, and the operation as it stood after it (where the group
/// knew it without asking again).
#[derive(Clone, Debug)]
pub struct Answered {
    pub written: Written,
    pub view: Option<Box<OperationView>>,
}

/// A write as a lane holds it: checked, and for a record its operation made.
pub(super) enum Prepared {
    Record(Box<Op>, String),
    Start(String),
    Attempt(AttemptReport),
}

impl Prepared {
    pub(super) fn key(&self) -> &str {
        match self {
            Prepared::Record(op, _) => &op.key,
            Prepared::Start(k) => k,
            Prepared::Attempt(r) => &r.key,
        }
    }
}

/// Each write's answer, or `None` where the writes must be run one by one (a row another writer
/// changed meanwhile, a key stored meanwhile, a workflow with a stopping threshold, whose count
/// must see each start before the next).
pub(super) type GroupAnswers = Option<Vec<Result<Answered>>>;

/// The group writer's judging of one caller's writes, on the ledger's handle.
pub(super) struct Group<'a>(pub(super) &'a Ledger);

impl Group<'_> {
    /// `writes`, all by `actor` through this handle, in `tx` (see the module's design).
    pub(super) async fn write(
        &self,
        tx: &mut Tx,
        actor: &str,
        writes: &[&Prepared],
    ) -> Result<GroupAnswers> {
        let now = self.0.now();
        let (loaded, known, paused) = group_reads(tx, writes).await?;
        if self.counts_each_start(writes, &loaded) {
            return Ok(None);
        }
        let mut batch = Batch::of(loaded).recording().knowing(known);
        let mut budgets = Budgets::default();
        let mut outcomes = Vec::with_capacity(writes.len());
        let mut after: Vec<Option<(i64, Op)>> = Vec::with_capacity(writes.len());
        for w in writes {
            let key = w.key();
            let outcome = match w {
                Prepared::Record(op, _) if batch.row(key).is_none() => {
                    batch.make(Cow::Owned(stamped(op, now)));
                    Ok(Written::Recorded(Recorded::Created))
                }
                _ if batch.row(key).is_none() => Err(match w {
                    Prepared::Start(_) => {
                        crate::ledger::start::not_there_to_start(tx, key, now).await?
                    }
                    _ => Error::NotFound(format!("no operation with key {key}")),
                }),
                _ => match self
                    .judge(tx, &mut batch, actor, w, &paused, &mut budgets, now)
                    .await
                {
                    Ok(written) => Ok(written),
                    Err(e) if per_operation(&e) => Err(e),
                    Err(e) => return Err(e),
                },
            };
            after.push(batch.row(key).map(|(id, op)| (id, op.clone())));
            outcomes.push(outcome);
        }
        let Some(made_ids) = batch.write(self.0, tx, actor).await? else {
            return Ok(None);
        };
        if !budgets.save(tx).await? {
            return Ok(None);
        }
        Ok(Some(
            self.answers(outcomes, after, &made_ids, &paused, actor, now),
        ))
    }

    /// Each write's answer, with the operation as it stood after it.
    fn answers(
        &self,
        outcomes: Vec<Result<Written>>,
        after: Vec<Option<(i64, Op)>>,
        made_ids: &[i64],
        paused: &PauseFlags,
        actor: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Result<Answered>> {
        let real = |id: i64| {
            if id < 0 {
                made_ids[(-id - 1) as usize]
            } else {
                id
            }
        };
        outcomes
            .into_iter()
            .zip(after)
            .map(|(outcome, op)| {
                outcome.map(|written| Answered {
                    written,
                    view: op.map(|(id, op)| {
                        let cursor = Cursor {
                            group: None,
                            at: ms(op.created_at),
                            id: real(id),
                        };
                        let flags = paused_of(paused, &op);
                        Box::new(self.0.read().view(op, cursor, actor, flags, now))
                    }),
                })
            })
            .collect()
    }

    /// Whether the group must run write by write: it starts an operation of a workflow with a
    /// stopping threshold, whose count must see each start before the next.
    fn counts_each_start(&self, writes: &[&Prepared], loaded: &HashMap<String, (i64, Op)>) -> bool {
        writes.iter().any(|w| matches!(w, Prepared::Start(_)))
            && loaded.values().any(|(_, op)| {
                self.0
                    .config
                    .workflows
                    .get(&op.workflow)
                    .is_some_and(|w| w.pause_when.is_some())
            })
    }

    /// One write on an operation the batch holds, by the rules of its single call: what it came
    /// to; its change, where it makes one, taken by the batch.
    #[allow(clippy::too_many_arguments)]
    async fn judge(
        &self,
        tx: &mut Tx,
        batch: &mut Batch<'_>,
        actor: &str,
        write: &Prepared,
        paused: &PauseFlags,
        budgets: &mut Budgets,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Written> {
        let ask = match write {
            Prepared::Record(new, _) => Ask::Cmd(Command::Record {
                payload: new.payload.clone(),
                fingerprint: new.fingerprint.clone(),
                run: new.run.clone(),
            }),
            Prepared::Start(_) => Ask::Cmd(Command::StartAttempt),
            Prepared::Attempt(report) => Ask::Attempt(report),
        };
        let key = write.key();
        let op = batch
            .row(key)
            .map(|(_, op)| op.clone())
            .expect("held, asked above");
        let flags = paused_of(paused, &op);
        let c = match batch
            .judge(self.0, tx, key, actor, &ask, Some(flags.workflow))
            .await?
        {
            Decided::Unchanged(a) => {
                return Ok(match write {
                    Prepared::Record(..) => Written::Recorded(Recorded::Unchanged),
                    Prepared::Start(_) => Written::Started(a, op.attempts),
                    Prepared::Attempt(_) => Written::Reported(a),
                });
            }
            Decided::Change(c) => c,
        };
        let written = match write {
            Prepared::Record(..) => Written::Recorded(Recorded::Conflict),
            Prepared::Attempt(_) => Written::Reported(c.applied.clone()),
            Prepared::Start(key) => {
                if flags.destination {
                    let d = &op.destination;
                    return Err(Error::Refused(format!(
                        "{key}: destination {d} is paused: `settle resume --destination {d}` lifts it"
                    )));
                }
                let policy = self.0.config.breaker(&op.destination);
                if let Some((why, until)) = budgets
                    .let_through(tx, &op.destination, &policy, now)
                    .await?
                {
                    return Err(crate::ledger::start::held_by_breaker(
                        key,
                        &op.destination,
                        &why,
                        until,
                        now,
                    ));
                }
                budgets.pay_for_retry(tx, &op, now).await?;
                Written::Started(c.applied.clone(), c.op.attempts)
            }
        };
        batch.take(c);
        Ok(written)
    }
}

/// What a group's writes read before they are judged, in one call (`Tx::load_group`): the
/// operations by key, their attempts where a report needs them, and the pause flags of their
/// workflows and destinations and of those the records name.
async fn group_reads(
    tx: &mut Tx,
    writes: &[&Prepared],
) -> Result<(
    HashMap<String, (i64, Op)>,
    crate::ledger::KnownAttempts,
    PauseFlags,
)> {
    let mut keys: Vec<&str> = writes.iter().map(|w| w.key()).collect();
    keys.sort_unstable();
    keys.dedup();
    let (mut workflows, mut destinations) = (Vec::new(), Vec::new());
    for w in writes {
        if let Prepared::Record(op, _) = w {
            workflows.push(op.workflow.as_str());
            destinations.push(op.destination.as_str());
        }
    }
    let with_attempts = writes.iter().any(|w| matches!(w, Prepared::Attempt(_)));
    let reads = tx
        .load_group(&keys, &workflows, &destinations, with_attempts)
        .await?;
    Ok((reads.ops, reads.attempts, pause_flags(reads.paused)))
}

/// A new operation of a group, stamped now as a record of one is.
fn stamped(op: &Op, now: chrono::DateTime<chrono::Utc>) -> Op {
    let mut op = op.clone();
    op.created_at = now;
    op.updated_at = now;
    op.next_attempt_at = Some(now);
    op
}

/// The paused workflows and destinations among those a group names (any other is not paused).
#[derive(Default)]
struct PauseFlags {
    workflows: HashSet<String>,
    destinations: HashSet<String>,
}

/// The flags of the paused workflows and destinations, as [`Tx::load_group`] read them (any
/// other is not paused).
fn pause_flags(paused: Vec<(bool, String)>) -> PauseFlags {
    let mut flags = PauseFlags::default();
    for (is_workflow, name) in paused {
        let of = match is_workflow {
            true => &mut flags.workflows,
            false => &mut flags.destinations,
        };
        of.insert(name);
    }
    flags
}

fn paused_of(flags: &PauseFlags, op: &Op) -> Paused {
    Paused {
        workflow: flags.workflows.contains(&op.workflow),
        destination: flags.destinations.contains(&op.destination),
    }
}
