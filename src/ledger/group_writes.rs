//! What a group of the HTTP API's writes is (see `group.rs`), and one caller's writes of a group
//! in a few statements, as an ingest batch and a dispatcher's round write theirs: one query loads
//! every operation the group names, their attempts and the pause flags (`Tx::load_group`); the
//! rules judge every write in memory, in order; the new operations go in with one statement, every
//! change and every event with one more, the runs' rows once. On PostgreSQL a group is so five
//! round trips (the `BEGIN` with its settings, the load, the insert, the change set, the
//! `COMMIT`), where a statement per write would make the group's transaction as long as its
//! writes are many.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::change::{self, Ask, Decided};
use super::views::OperationView;
use super::{Applied, AttemptReport, Intent, Ledger, Recorded};
use crate::domain::next_step::Paused;
use crate::domain::{Command, Op};
use crate::error::{Error, Result};
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
pub(super) type Batch = Option<Vec<Result<Answered>>>;

impl Ledger {
    /// `writes`, all by `actor` through this handle, in `tx` (see the module's design).
    pub(super) async fn write_batch(
        &self,
        tx: &mut Tx,
        actor: &str,
        writes: &[&Prepared],
    ) -> Result<Batch> {
        let now = self.now();
        let (loaded, mut known, paused) = group_reads(tx, writes).await?;
        let fresh = fresh_ops(writes, &loaded, now);
        if self.counts_each_start(writes, &loaded) {
            return Ok(None);
        }
        let mut ops: HashMap<&str, (i64, Cow<Op>)> = loaded
            .iter()
            .map(|(k, (id, op))| (k.as_str(), (*id, Cow::Borrowed(op))))
            .collect();
        let mut made: Vec<&Op> = Vec::new();
        let mut changes: Vec<Box<change::Change>> = Vec::new();
        let mut budgets = BTreeMap::new();
        let mut outcomes = Vec::with_capacity(writes.len());
        let mut after: Vec<Option<(i64, Op)>> = Vec::with_capacity(writes.len());
        let mut fresh = fresh.iter();
        for w in writes {
            let key = w.key();
            let outcome = match w {
                Prepared::Record(..) if !ops.contains_key(key) => {
                    let op = fresh.next().expect("made above, in order");
                    let temp = -(made.len() as i64) - 1;
                    made.push(op);
                    ops.insert(&op.key, (temp, Cow::Borrowed(op)));
                    Ok(Written::Recorded(Recorded::Created))
                }
                _ => {
                    let (id, op) = match ops.get(key) {
                        Some((id, op)) => (*id, op.as_ref()),
                        None => {
                            outcomes.push(Err(match w {
                                Prepared::Start(_) => {
                                    super::start::not_there_to_start(tx, key, now).await?
                                }
                                _ => Error::NotFound(format!("no operation with key {key}")),
                            }));
                            after.push(None);
                            continue;
                        }
                    };
                    let flags = paused_of(&paused, op);
                    match self
                        .judge(tx, id, op, actor, w, flags, &known, &mut budgets, now)
                        .await
                    {
                        Ok((written, Some(c))) => {
                            if let crate::domain::AttemptEffect::Finish { n, outcome, .. } =
                                &c.attempt
                            {
                                known.insert((id, *n), Some(*outcome));
                            }
                            ops.insert(key, (id, Cow::Owned(c.op.clone())));
                            changes.push(c);
                            Ok(written)
                        }
                        Ok((written, None)) => Ok(written),
                        Err(e) if super::round_types::per_operation(&e) => Err(e),
                        Err(e) => return Err(e),
                    }
                }
            };
            after.push(ops.get(key).map(|(id, op)| (*id, op.clone().into_owned())));
            outcomes.push(outcome);
        }
        let Some(made_ids) = self
            .write_judged(tx, actor, &made, &ops, &mut changes, &budgets)
            .await?
        else {
            return Ok(None);
        };
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
                        Box::new(self.view(op, cursor, actor, flags, now))
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
                self.config
                    .workflows
                    .get(&op.workflow)
                    .is_some_and(|w| w.pause_when.is_some())
            })
    }

    /// What the group judged, written: the new operations and their events, every change, the
    /// runs' rows, the budgets spent. The new operations' ids, or `None` where another writer
    /// came first (nothing of the group then stands).
    async fn write_judged(
        &self,
        tx: &mut Tx,
        actor: &str,
        made: &[&Op],
        ops: &HashMap<&str, (i64, Cow<'_, Op>)>,
        changes: &mut [Box<change::Change>],
        budgets: &BTreeMap<String, super::budgets::Budget>,
    ) -> Result<Option<Vec<i64>>> {
        let Some((made_ids, details)) = super::ingest::insert_made(self, tx, made, ops).await?
        else {
            return Ok(None);
        };
        change::number_made(changes, &made_ids);
        let recorded = super::ingest::made_events(made, &made_ids, &details, actor);
        if !change::write_after(tx, recorded, changes).await? {
            return Ok(None);
        }
        let made_rows = made.iter().map(|op| &*ops[op.key.as_str()].1);
        let touched = change::touched_by(made_rows, changes);
        self.keep_runs(tx, &touched, true).await?;
        for (destination, b) in budgets.iter().filter(|(_, b)| b.changed) {
            if !tx
                .save_budget(destination, b.bucket.tokens, b.since, b.version)
                .await?
            {
                return Ok(None);
            }
        }
        Ok(Some(made_ids))
    }

    /// One write on a loaded operation, by the rules of its single call: what it came to, and
    /// its change (none where it changes nothing).
    #[allow(clippy::too_many_arguments)]
    async fn judge(
        &self,
        tx: &mut Tx,
        id: i64,
        op: &Op,
        actor: &str,
        write: &Prepared,
        paused: Paused,
        known: &super::KnownAttempts,
        budgets: &mut BTreeMap<String, super::budgets::Budget>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(Written, Option<Box<change::Change>>)> {
        let ask = match write {
            Prepared::Record(new, _) => Ask::Cmd(Command::Record {
                payload: new.payload.clone(),
                fingerprint: new.fingerprint.clone(),
                run: new.run.clone(),
            }),
            Prepared::Start(_) => Ask::Cmd(Command::StartAttempt),
            Prepared::Attempt(report) => Ask::Attempt(report),
        };
        let decided = self
            .decide(tx, id, op, actor, &ask, Some(paused.workflow), Some(known))
            .await?;
        let c = match decided {
            Decided::Unchanged(a) => {
                return Ok((
                    match write {
                        Prepared::Record(..) => Written::Recorded(Recorded::Unchanged),
                        Prepared::Start(_) => Written::Started(a, op.attempts),
                        Prepared::Attempt(_) => Written::Reported(a),
                    },
                    None,
                ));
            }
            Decided::Change(c) => c,
        };
        let written = match write {
            Prepared::Record(..) => Written::Recorded(Recorded::Conflict),
            Prepared::Attempt(_) => Written::Reported(c.applied.clone()),
            Prepared::Start(key) => {
                if paused.destination {
                    let d = &op.destination;
                    return Err(Error::Refused(format!(
                        "{key}: destination {d} is paused: `settle resume --destination {d}` lifts it"
                    )));
                }
                self.pay_for_retry(tx, budgets, op, now).await?;
                Written::Started(c.applied.clone(), c.op.attempts)
            }
        };
        Ok((written, Some(c)))
    }
}

/// What a group's writes read before they are judged, in one call (`Tx::load_group`): the
/// operations by key, their attempts where a report needs them, and the pause flags of their
/// workflows and destinations and of those the records name.
async fn group_reads(
    tx: &mut Tx,
    writes: &[&Prepared],
) -> Result<(HashMap<String, (i64, Op)>, super::KnownAttempts, PauseFlags)> {
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

/// The operations a group makes (its records of keys not stored), stamped now as `record_in`
/// stamps one.
fn fresh_ops(
    writes: &[&Prepared],
    loaded: &HashMap<String, (i64, Op)>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<Op> {
    writes
        .iter()
        .filter_map(|w| match w {
            Prepared::Record(op, _) if !loaded.contains_key(&op.key) => {
                let mut op = (**op).clone();
                op.created_at = now;
                op.updated_at = now;
                op.next_attempt_at = Some(now);
                Some(op)
            }
            _ => None,
        })
        .collect()
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
