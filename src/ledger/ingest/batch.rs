//! A batch of ingested lines in one transaction, or line by line where another writer raced it.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};

use super::report::{IngestProblem, IngestReport};
use crate::error::{Error, Result};
use crate::ledger::change::{Ask, Decided};
use crate::ledger::engine::Batch;
use crate::ledger::{Ledger, Recorded};
use crate::store::Tried;
use crate::store::{self, Tx};

use super::parse::Parsed;

/// What a batch came to (see [`Writing::batch_in`]).
enum Batched {
    Done {
        outcomes: Vec<Result<Taken>>,
        /// None of its keys was stored before it.
        all_new: bool,
    },
    /// Another writer changed one of its operations meanwhile: line by line instead.
    Raced,
    /// A key taken for new was stored already: nothing written.
    Stored,
}

enum Taken {
    Intent(Recorded),
    /// A new attempt, for an operation of this workflow.
    Attempt(String),
    /// An attempt started (`true`), or already started before (`false`).
    Start(bool),
}

impl Parsed {
    /// What a line asks of the operation it names (a start goes line by line, never here).
    fn ask(&self) -> Ask<'_> {
        match self {
            Parsed::Intent(new, _) => Ask::Cmd(crate::domain::Command::Record {
                payload: new.payload.clone(),
                fingerprint: new.fingerprint.clone(),
                run: new.run.clone(),
            }),
            Parsed::Attempt(report) => Ask::Attempt(report),
            Parsed::Start(..) => unreachable!("a batch with a start goes line by line"),
        }
    }

    fn key(&self) -> &str {
        match self {
            Parsed::Intent(op, _) => &op.key,
            Parsed::Attempt(r) => &r.key,
            Parsed::Start(k, _) => k,
        }
    }
}

/// With `assume_new`, the keys whose first line in the batch is an intent: taken for new and not
/// looked up (see [`Writing::batch_in`]).
fn taken_for_new(batch: &[(usize, Parsed)], assume_new: bool) -> HashSet<&str> {
    let mut taken_new = HashSet::new();
    if assume_new {
        let mut seen = HashSet::new();
        for (_, p) in batch {
            let key = p.key();
            if seen.insert(key) && matches!(p, Parsed::Intent(..)) {
                taken_new.insert(key);
            }
        }
    }
    taken_new
}

fn tally(
    report: &mut IngestReport,
    touched: &mut BTreeSet<String>,
    line: usize,
    parsed: &Parsed,
    r: Result<Taken>,
) {
    match r {
        Ok(Taken::Intent(Recorded::Created)) => report.created += 1,
        Ok(Taken::Intent(Recorded::Unchanged)) => report.unchanged += 1,
        Ok(Taken::Intent(Recorded::Conflict)) => {
            report.conflicts += 1;
            if let Parsed::Intent(_, w) = parsed {
                touched.insert(w.clone());
            }
        }
        Ok(Taken::Attempt(workflow)) => {
            report.attempts += 1;
            touched.insert(workflow);
        }
        Ok(Taken::Start(true)) => report.started += 1,
        Ok(Taken::Start(false)) => report.unchanged += 1,
        Err(e) => report.problems.push(IngestProblem {
            line,
            refused: !matches!(e, Error::Invalid(_) | Error::Unstorable(_)),
            message: e.to_string(),
        }),
    }
}

/// The writing side of an ingest: its batches written one after the other, and what they came
/// to so far.
pub(super) struct Writing {
    pub(super) ledger: Ledger,
    pub(super) actor: String,
    pub(super) report: IngestReport,
    /// The workflows whose exceptions the batches changed (their thresholds are asked after).
    pub(super) touched: BTreeSet<String>,
    /// A file of new lines is ingested without looking its keys up first (see `batch_in`);
    /// after a batch that met stored keys, they are looked up again.
    pub(super) assume_new: bool,
}

impl Writing {
    pub(super) fn new(ledger: Ledger, actor: &str) -> Writing {
        Writing {
            ledger,
            actor: actor.to_string(),
            report: IngestReport::default(),
            touched: BTreeSet::new(),
            assume_new: true,
        }
    }

    /// One batch in one transaction, or line by line where another writer raced it.
    pub(super) async fn batch(&mut self, batch: &mut Vec<(usize, Parsed)>) -> Result<()> {
        let actor = self.actor.clone();
        let actor = actor.as_str();
        if batch.is_empty() {
            return Ok(());
        }
        // The whole batch in one transaction, a round trip per kind of row; if another writer
        // raced us, or the database would not store a line's value, each line on its own.
        let mut local = IngestReport::default();
        let mut local_touched = BTreeSet::new();
        let mut tx = self.ledger.store.begin().await?;
        // a start follows the rules of `settle start` (budget, pauses), one line at a time
        let tried = if batch.iter().any(|(_, p)| matches!(p, Parsed::Start(..))) {
            Ok(Tried::Raced)
        } else {
            let mut tried = self.batch_in(&mut tx, batch, actor, self.assume_new).await;
            if let Ok(Batched::Stored) = tried {
                // a key taken for new was stored already: the batch again, every key looked up
                tx.rollback().await;
                tx = self.ledger.store.begin().await?;
                tried = self.batch_in(&mut tx, batch, actor, false).await;
            }
            match tried {
                Ok(Batched::Done { outcomes, all_new }) => {
                    self.assume_new = all_new;
                    Ok(Tried::Done(outcomes))
                }
                Ok(Batched::Raced | Batched::Stored) => Ok(Tried::Raced),
                Err(e) => Err(e),
            }
        };
        match tried {
            Ok(Tried::Done(outcomes)) => {
                tx.commit().await?;
                for ((n, parsed), r) in batch.iter().zip(outcomes) {
                    tally(&mut local, &mut local_touched, *n, parsed, r);
                }
            }
            Ok(Tried::Raced) | Err(Error::Unstorable(_)) => {
                tx.rollback().await;
                for (n, parsed) in batch.iter() {
                    let r = store::in_tx!(self.ledger.store, |tx| self
                        .one(tx, parsed, actor)
                        .await
                        .map(|t| match t {
                            Tried::Done(r) => Tried::Done(Ok(r)),
                            Tried::Raced => Tried::Raced,
                        }));
                    let r = match r {
                        Ok(Ok(r)) => Ok(r),
                        Ok(Err(e)) | Err(e) => Err(e),
                    };
                    if let Err(Error::Unavailable(_)) = &r {
                        return r.map(|_| ());
                    }
                    tally(&mut local, &mut local_touched, *n, parsed, r);
                }
            }
            Err(e) => {
                tx.rollback().await;
                return Err(e);
            }
        }
        let report = &mut self.report;
        report.created += local.created;
        report.unchanged += local.unchanged;
        report.conflicts += local.conflicts;
        report.attempts += local.attempts;
        report.started += local.started;
        report.problems.extend(local.problems);
        self.touched.extend(local_touched);
        batch.clear();
        Ok(())
    }

    /// A batch of lines in one transaction, what each line came to in order. One query loads
    /// every operation the batch names and another their stored attempts; the new keys go in with
    /// one statement and their events with another; repeats and attempts are judged by the rules
    /// in memory, line after line, and every change is written with one call. A line whose key is
    /// already stored with the same contents costs its share of a lookup, no write.
    ///
    /// With `assume_new`, the keys whose first line in the batch is an intent are taken for new
    /// and not looked up (a file of new work: the lookup of 500 keys that are not there was a
    /// quarter of a batch on PostgreSQL); if one of them was stored after all, nothing is
    /// written (`Batched::Stored`) and the batch is tried again the ordinary way.
    async fn batch_in(
        &self,
        tx: &mut Tx,
        batch_lines: &[(usize, Parsed)],
        actor: &str,
        assume_new: bool,
    ) -> Result<Batched> {
        let taken_new = taken_for_new(batch_lines, assume_new);
        let mut keys: Vec<&str> = batch_lines
            .iter()
            .map(|(_, p)| p.key())
            .filter(|k| !taken_new.contains(k))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let loaded = tx.load_ops(&keys, false).await?;
        let all_new = loaded.is_empty();
        let known_ids: Vec<i64> = loaded.values().map(|(id, _)| *id).collect();
        let known = tx.attempt_outcomes(&known_ids).await?;
        let mut batch = Batch::of(loaded).recording().knowing(known);

        // Every line in memory first, in order: the first intent line of a new key makes its
        // operation (stamped with the time its line was read), and what later lines do to it
        // lands on that row, so a new operation is written once, in its final state.
        let mut outcomes = Vec::with_capacity(batch_lines.len());
        for (_, parsed) in batch_lines {
            if let Parsed::Intent(op, _) = parsed
                && batch.row(&op.key).is_none()
            {
                batch.make(Cow::Borrowed(&**op));
                outcomes.push(Ok(Taken::Intent(Recorded::Created)));
                continue;
            }
            let ask = parsed.ask();
            let outcome = match batch
                .judge(&self.ledger, tx, parsed.key(), actor, &ask, None)
                .await
            {
                Ok(Decided::Unchanged(_)) => Ok(Taken::Intent(Recorded::Unchanged)),
                Ok(Decided::Change(c)) => {
                    let taken = match parsed {
                        Parsed::Intent(..) => Taken::Intent(Recorded::Conflict),
                        Parsed::Attempt(_) | Parsed::Start(..) => {
                            Taken::Attempt(c.applied.workflow.clone())
                        }
                    };
                    batch.take(c);
                    Ok(taken)
                }
                Err(
                    e @ (Error::Refused(_)
                    | Error::Forbidden(_)
                    | Error::NotFound(_)
                    | Error::Invalid(_)),
                ) => Err(e),
                Err(e) => return Err(e),
            };
            outcomes.push(outcome);
        }
        // the new operations in one statement, every change and event in one more, the runs'
        // rows once for the batch
        if batch.write(&self.ledger, tx, actor).await?.is_none() {
            // a key taken for new was stored before, or another writer made one meanwhile
            return Ok(if assume_new {
                Batched::Stored
            } else {
                Batched::Raced
            });
        }
        Ok(Batched::Done { outcomes, all_new })
    }

    /// `Some(recorded)` for an intent or a repeated attempt, `None` with the workflow for a new attempt.
    async fn one(&self, conn: &mut Tx, parsed: &Parsed, actor: &str) -> Result<Tried<Taken>> {
        Ok(match parsed {
            Parsed::Intent(op, _) => match self.ledger.record_in(conn, op, actor).await? {
                Tried::Done(r) => Tried::Done(Taken::Intent(r)),
                Tried::Raced => Tried::Raced,
            },
            Parsed::Attempt(report) => match self
                .ledger
                .act_in(conn, &report.key, actor, &Ask::Attempt(report))
                .await?
            {
                Tried::Done(a) if a.kind.is_some() => Tried::Done(Taken::Attempt(a.workflow)),
                Tried::Done(_) => Tried::Done(Taken::Intent(Recorded::Unchanged)),
                Tried::Raced => Tried::Raced,
            },
            Parsed::Start(key, n) => {
                let Some((_, op)) = conn.hold_op(key).await? else {
                    return Err(Error::NotFound(format!("no operation with key {key}")));
                };
                // Idempotent for history: a start whose attempt has finished (this file was
                // ingested before) changes nothing. A start whose attempt is still open was made
                // by another caller, or by one that crashed before reporting: it must not send
                // again, so it is refused, as `settle start` refuses it.
                let open = op.attempts == *n && op.state == crate::domain::State::InFlight;
                if op.attempts >= *n && !open {
                    return Ok(Tried::Done(Taken::Start(false)));
                }
                if open {
                    return Err(Error::Refused(format!(
                        "{key}: is in_flight: attempt {n} was started and has no outcome yet"
                    )));
                }
                if op.attempts + 1 != *n {
                    return Err(Error::Refused(format!(
                        "{key}: attempt {n} cannot start: the last one started is {}",
                        op.attempts
                    )));
                }
                match self.ledger.start_in(conn, key, actor).await? {
                    Tried::Done((a, _)) if a.kind.is_some() => Tried::Done(Taken::Start(true)),
                    Tried::Done((a, _)) => {
                        return Err(Error::Refused(format!(
                            "{key}: not started: it is {}",
                            a.to
                        )));
                    }
                    Tried::Raced => Tried::Raced,
                }
            }
        })
    }
}
