//! `settle ingest`: JSON lines of intents, starts and attempts (SPEC 11), idempotent, batched in
//! transactions.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::change::Ask;
use super::{AttemptReport, Intent, Ledger, Recorded, Tried, recorded_detail, recorded_event};
use crate::domain::redact::redact_text;
use crate::domain::{Op, Outcome, escape_text};
use crate::error::{Error, Result};
use crate::store::{self, NewEvent, Tx};

/// Lines per transaction: large enough to amortise the commit, small enough to keep locks short.
const BATCH: usize = 500;

/// One line as written: a plain struct rather than an enum tagged by `type`, because serde reads a
/// tagged enum through a buffer that turns numbers written in full (`arbitrary_precision`, which
/// keeps a payload's numbers as given) into maps; which fields each type needs is checked after.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    #[serde(rename = "type")]
    kind: String,
    key: Option<String>,
    workflow: Option<String>,
    step: Option<String>,
    destination: Option<String>,
    action: Option<String>,
    #[serde(default, deserialize_with = "strict_payload")]
    payload: Option<Value>,
    attempt: Option<u32>,
    outcome: Option<Outcome>,
    error: Option<String>,
    http_status: Option<u16>,
    reference: Option<String>,
}

fn strict_payload<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    crate::domain::payload::deserialize_strict(d).map(Some)
}

/// The fields of a line of type `kind` that another type owns.
fn foreign_fields(line: &RawLine) -> Vec<&'static str> {
    let intent = [
        ("workflow", line.workflow.is_some()),
        ("step", line.step.is_some()),
        ("destination", line.destination.is_some()),
        ("action", line.action.is_some()),
        ("payload", line.payload.is_some()),
    ];
    let attempt = [
        ("attempt", line.attempt.is_some()),
        ("outcome", line.outcome.is_some()),
        ("error", line.error.is_some()),
        ("http_status", line.http_status.is_some()),
        ("reference", line.reference.is_some()),
    ];
    // a start line has a key and an attempt number only
    let start: Vec<(&'static str, bool)> = intent.iter().chain(&attempt[1..]).copied().collect();
    let other: &[(&'static str, bool)] = match line.kind.as_str() {
        "intent" => &attempt,
        "start" => &start,
        _ => &intent,
    };
    other
        .iter()
        .filter(|(_, set)| *set)
        .map(|(f, _)| *f)
        .collect()
}

/// What a batch came to (see [`Ledger::batch_in`]).
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

enum Parsed {
    Intent(Box<Op>, String),
    Attempt(AttemptReport),
    /// Start attempt N of this key (the caller will send it).
    Start(String, u32),
}

/// One line that was not taken, with its number and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestProblem {
    pub line: usize,
    /// A refusal (the ledger said no) rather than a malformed line.
    pub refused: bool,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestReport {
    pub lines: usize,
    pub created: usize,
    pub unchanged: usize,
    pub conflicts: usize,
    pub attempts: usize,
    pub started: usize,
    pub problems: Vec<IngestProblem>,
}

impl IngestReport {
    pub fn malformed(&self) -> usize {
        self.problems.iter().filter(|p| !p.refused).count()
    }
    pub fn refused(&self) -> usize {
        self.problems.iter().filter(|p| p.refused).count()
    }
}

impl Ledger {
    fn parse_line(&self, text: &str) -> std::result::Result<Parsed, String> {
        let line: RawLine = serde_json::from_str(text).map_err(|e| {
            // serde quotes the offending value: it goes through redaction like everything else.
            escape_text(&redact_text(&e.to_string())).into_owned()
        })?;
        let foreign = foreign_fields(&line);
        let missing = |fields: &[(&str, bool)]| -> std::result::Result<(), String> {
            let absent: Vec<&str> = fields
                .iter()
                .filter(|(_, set)| !set)
                .map(|(f, _)| *f)
                .collect();
            if absent.is_empty() {
                Ok(())
            } else {
                Err(format!("an {} line needs {}", line.kind, absent.join(", ")))
            }
        };
        match line.kind.as_str() {
            "intent" | "attempt" | "start" if !foreign.is_empty() => {
                return Err(format!(
                    "an {} line has no field {}",
                    line.kind,
                    foreign.join(", ")
                ));
            }
            "intent" => missing(&[
                ("key", line.key.is_some()),
                ("workflow", line.workflow.is_some()),
                ("destination", line.destination.is_some()),
                ("action", line.action.is_some()),
                ("payload", line.payload.is_some()),
            ])?,
            "attempt" => missing(&[
                ("key", line.key.is_some()),
                ("attempt", line.attempt.is_some()),
                ("outcome", line.outcome.is_some()),
            ])?,
            "start" => missing(&[
                ("key", line.key.is_some()),
                ("attempt", line.attempt.is_some()),
            ])?,
            other => {
                return Err(format!(
                    "unknown type '{}': use intent, start or attempt",
                    escape_text(&redact_text(other))
                ));
            }
        }
        let key = line.key.unwrap_or_default();
        if line.kind == "start" {
            crate::domain::validate_key(&key)?;
            return match line.attempt {
                Some(0) | None => Err("attempts are numbered from 1".into()),
                Some(n) => Ok(Parsed::Start(key, n)),
            };
        }
        Ok(if line.kind == "intent" {
            let intent = Intent {
                key,
                workflow: line.workflow.unwrap_or_default(),
                step: line.step.unwrap_or_default(),
                destination: line.destination.unwrap_or_default(),
                action: line.action.unwrap_or_default(),
                payload: line.payload.unwrap_or_default(),
            };
            let op = self.prepare(&intent).map_err(|e| e.to_string())?;
            Parsed::Intent(Box::new(op), intent.workflow)
        } else {
            let attempt = line.attempt.unwrap_or_default();
            if attempt == 0 {
                return Err("attempts are numbered from 1".into());
            }
            let report = AttemptReport {
                key,
                attempt: Some(attempt),
                outcome: line.outcome,
                reference: line.reference,
                error: line.error,
                http_status: line.http_status,
                retry_after: None,
            };
            super::check_report(&report).map_err(|e| e.to_string())?;
            Parsed::Attempt(report)
        })
    }

    /// Reads JSON lines and records each; a bad line is reported with its number and the
    /// valid lines are kept. Re-ingesting the same input changes nothing.
    ///
    /// Reading and parsing (this task) run beside writing (a task of its own, a batch at a time
    /// through a channel two batches deep), so the next batch is parsed while the database
    /// stores the last.
    pub async fn ingest<R: AsyncBufRead + Unpin>(
        &self,
        reader: R,
        actor: &str,
    ) -> Result<IngestReport> {
        let (batches, mut queued) = tokio::sync::mpsc::channel::<Vec<(usize, Parsed)>>(2);
        let writer = {
            let ledger = self.clone();
            let actor = actor.to_string();
            tokio::spawn(async move {
                let mut written = IngestReport::default();
                let mut touched = BTreeSet::new();
                // a file of new lines is ingested without looking its keys up first (see
                // `batch_in`); after a batch that met stored keys, they are looked up again
                let mut assume_new = true;
                while let Some(mut batch) = queued.recv().await {
                    ledger
                        .ingest_batch(
                            &mut batch,
                            &actor,
                            &mut written,
                            &mut touched,
                            &mut assume_new,
                        )
                        .await?;
                }
                Ok::<_, Error>((written, touched))
            })
        };
        let read = self.read_lines(reader, &batches).await;
        drop(batches);
        let written = writer
            .await
            .map_err(|e| Error::Unavailable(format!("ingest stopped: {e}")))?;
        // the writer's error first: a read that stopped because the writer did says less
        let (written, touched) = written?;
        let mut report = read?;
        report.created = written.created;
        report.unchanged = written.unchanged;
        report.conflicts = written.conflicts;
        report.attempts = written.attempts;
        report.started = written.started;
        report.problems.extend(written.problems);
        for w in touched {
            self.check_threshold(&w).await?;
        }
        report.problems.sort_by_key(|p| p.line);
        Ok(report)
    }

    /// Reads and parses lines, handing them on in batches; the report holds the lines read and
    /// the malformed ones.
    async fn read_lines<R: AsyncBufRead + Unpin>(
        &self,
        mut reader: R,
        batches: &tokio::sync::mpsc::Sender<Vec<(usize, Parsed)>>,
    ) -> Result<IngestReport> {
        let mut report = IngestReport::default();
        let mut bytes = Vec::new();
        let mut batch: Vec<(usize, Parsed)> = Vec::with_capacity(BATCH);
        let mut number = 0;
        // room for the largest payload, written out with escapes, and the line's other fields
        let line_limit = self.config.max_payload.saturating_mul(2) + 64 * 1024;
        loop {
            // Bytes, line by line: a line that is not UTF-8 is that line's problem, not the run's.
            bytes.clear();
            let (read, whole) = read_line_within(&mut reader, &mut bytes, line_limit)
                .await
                .map_err(|e| Error::Invalid(format!("cannot read input: {e}")))?;
            if read == 0 {
                break;
            }
            number += 1;
            report.lines = number;
            if !whole {
                // read past, never held: a line this long holds a payload over the limit
                report.problems.push(IngestProblem {
                    line: number,
                    refused: false,
                    message: format!(
                        "the line is {}; a payload may be at most {} (max_payload): nothing of it is stored",
                        crate::domain::payload::size_text(read),
                        crate::domain::payload::size_text(self.config.max_payload)
                    ),
                });
                continue;
            }
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
            }
            let text = match std::str::from_utf8(&bytes) {
                Ok(t) => t,
                Err(e) => {
                    report.problems.push(IngestProblem {
                        line: number,
                        refused: false,
                        message: format!(
                            "invalid UTF-8 (at byte {} of the line)",
                            e.valid_up_to() + 1
                        ),
                    });
                    continue;
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            match self.parse_line(text) {
                Ok(p) => batch.push((number, p)),
                Err(message) => report.problems.push(IngestProblem {
                    line: number,
                    refused: false,
                    message,
                }),
            }
            if batch.len() >= BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if batches.send(full).await.is_err() {
                    // the writer stopped: its error is the run's
                    return Ok(report);
                }
            }
        }
        if !batch.is_empty() {
            let _ = batches.send(batch).await;
        }
        Ok(report)
    }

    async fn ingest_batch(
        &self,
        batch: &mut Vec<(usize, Parsed)>,
        actor: &str,
        report: &mut IngestReport,
        touched: &mut BTreeSet<String>,
        assume_new: &mut bool,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // The whole batch in one transaction, a round trip per kind of row; if another writer
        // raced us, or the database would not store a line's value, each line on its own.
        let mut local = IngestReport::default();
        let mut local_touched = BTreeSet::new();
        let mut tx = self.store.begin().await?;
        // a start follows the rules of `settle start` (budget, pauses), one line at a time
        let tried = if batch.iter().any(|(_, p)| matches!(p, Parsed::Start(..))) {
            Ok(Tried::Raced)
        } else {
            let mut tried = self.batch_in(&mut tx, batch, actor, *assume_new).await;
            if let Ok(Batched::Stored) = tried {
                // a key taken for new was stored already: the batch again, every key looked up
                tx.rollback().await;
                tx = self.store.begin().await?;
                tried = self.batch_in(&mut tx, batch, actor, false).await;
            }
            match tried {
                Ok(Batched::Done { outcomes, all_new }) => {
                    *assume_new = all_new;
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
                    let r = store::in_tx!(self.store, |tx| self
                        .ingest_one(tx, parsed, actor)
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
        report.created += local.created;
        report.unchanged += local.unchanged;
        report.conflicts += local.conflicts;
        report.attempts += local.attempts;
        report.started += local.started;
        report.problems.extend(local.problems);
        touched.extend(local_touched);
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
        batch: &[(usize, Parsed)],
        actor: &str,
        assume_new: bool,
    ) -> Result<Batched> {
        fn key_of(p: &Parsed) -> &str {
            match p {
                Parsed::Intent(op, _) => &op.key,
                Parsed::Attempt(r) => &r.key,
                Parsed::Start(k, _) => k,
            }
        }
        let mut taken_new: std::collections::HashSet<&str> = std::collections::HashSet::new();
        if assume_new {
            let mut seen = std::collections::HashSet::new();
            for (_, p) in batch {
                let key = key_of(p);
                if seen.insert(key) && matches!(p, Parsed::Intent(..)) {
                    taken_new.insert(key);
                }
            }
        }
        let mut keys: Vec<&str> = batch
            .iter()
            .map(|(_, p)| key_of(p))
            .filter(|k| !taken_new.contains(k))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let loaded = tx.load_ops(&keys, false).await?;
        let all_new = loaded.is_empty();
        let known_ids: Vec<i64> = loaded.values().map(|(id, _)| *id).collect();
        let mut known = tx.attempt_outcomes(&known_ids).await?;
        let mut ops: HashMap<&str, (i64, Cow<Op>)> = loaded
            .iter()
            .map(|(k, (id, op))| (k.as_str(), (*id, Cow::Borrowed(op))))
            .collect();

        // Every line in memory first, in order: the first intent line of a new key makes its
        // operation (numbered -1, -2, ... until the database numbers it; stamped with the time
        // its line was read), and what later lines do to it lands on that row, so a new
        // operation is written once, in its final state.
        let mut made: Vec<&Op> = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut changes: Vec<Box<super::change::Change>> = Vec::new();
        for (_, parsed) in batch {
            if let Parsed::Intent(op, _) = parsed
                && !ops.contains_key(op.key.as_str())
            {
                let temp = -(made.len() as i64) - 1;
                made.push(op);
                ops.insert(&op.key, (temp, Cow::Borrowed(&**op)));
                outcomes.push(Ok(Taken::Intent(Recorded::Created)));
                continue;
            }
            let key = key_of(parsed);
            let Some((id, op)) = ops.get(key) else {
                outcomes.push(Err(Error::NotFound(format!("no operation with key {key}"))));
                continue;
            };
            let id = *id;
            let ask = match parsed {
                Parsed::Intent(new, _) => Ask::Cmd(super::Command::Record {
                    payload: new.payload.clone(),
                    fingerprint: new.fingerprint.clone(),
                }),
                Parsed::Attempt(report) => Ask::Attempt(report),
                Parsed::Start(..) => unreachable!("a batch with a start goes line by line"),
            };
            let decided = self
                .decide(tx, id, op, actor, &ask, None, Some(&known))
                .await;
            let outcome = match decided {
                Ok(super::change::Decided::Unchanged(_)) => Ok(Taken::Intent(Recorded::Unchanged)),
                Ok(super::change::Decided::Change(c)) => {
                    if let crate::domain::AttemptEffect::Finish { n, outcome, .. } = &c.attempt {
                        known.insert((id, *n), Some(*outcome));
                    }
                    ops.insert(key, (id, Cow::Owned(c.op.clone())));
                    let taken = match parsed {
                        Parsed::Intent(..) => Taken::Intent(Recorded::Conflict),
                        Parsed::Attempt(_) | Parsed::Start(..) => {
                            Taken::Attempt(c.applied.workflow.clone())
                        }
                    };
                    changes.push(c);
                    Ok(taken)
                }
                Err(e @ (Error::Refused(_) | Error::NotFound(_) | Error::Invalid(_))) => Err(e),
                Err(e) => return Err(e),
            };
            outcomes.push(outcome);
        }

        // the new operations in one statement, their `recorded` events in another (before the
        // events of what later lines did to them)
        let mut ids = Vec::with_capacity(made.len());
        if !made.is_empty() {
            let rows: Vec<&Op> = made.iter().map(|op| &*ops[op.key.as_str()].1).collect();
            let numbered: HashMap<String, i64> = tx
                .insert_ops(&rows)
                .await?
                .into_iter()
                .map(|(id, k)| (k, id))
                .collect();
            if numbered.len() != made.len() {
                // a key taken for new was stored before, or another writer made one meanwhile
                return Ok(if assume_new {
                    Batched::Stored
                } else {
                    Batched::Raced
                });
            }
            ids.extend(made.iter().map(|op| numbered[&op.key]));
            let details: Vec<String> = made.iter().map(|op| recorded_detail(op)).collect();
            let events: Vec<NewEvent> = made
                .iter()
                .zip(&ids)
                .zip(&details)
                .map(|((op, id), detail)| recorded_event(*id, op, actor, detail))
                .collect();
            tx.insert_events(&events).await?;
        }
        for c in &mut changes {
            if c.id < 0 {
                c.id = ids[(-c.id - 1) as usize];
                c.made_here = true;
            }
        }
        if !changes.is_empty() && !super::change::write_changes(tx, &changes).await? {
            return Ok(Batched::Raced);
        }
        Ok(Batched::Done { outcomes, all_new })
    }

    /// `Some(recorded)` for an intent or a repeated attempt, `None` with the workflow for a new attempt.
    async fn ingest_one(
        &self,
        conn: &mut Tx,
        parsed: &Parsed,
        actor: &str,
    ) -> Result<Tried<Taken>> {
        Ok(match parsed {
            Parsed::Intent(op, _) => match self.record_in(conn, op, actor).await? {
                Tried::Done(r) => Tried::Done(Taken::Intent(r)),
                Tried::Raced => Tried::Raced,
            },
            Parsed::Attempt(report) => match self
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
                match self.start_in(conn, key, actor).await? {
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

/// Reads one line (up to and with its `\n`) into `out`, keeping at most `limit` bytes of it; the
/// rest of a longer line is read past and dropped. Returns the bytes read and whether the whole
/// line was kept.
async fn read_line_within<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<(usize, bool)> {
    let (mut read, mut whole) = (0, true);
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok((read, whole));
        }
        let (n, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if whole {
            if out.len() + n > limit {
                whole = false;
                out.clear();
            } else {
                out.extend_from_slice(&buf[..n]);
            }
        }
        reader.consume(n);
        read += n;
        if end {
            return Ok((read, whole));
        }
    }
}
