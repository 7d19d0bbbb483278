//! `settle ingest`: JSON lines of intents and attempts, idempotent, batched in transactions.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;
use sqlx::AnyConnection;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::{Ask, AttemptReport, CAS_TRIES, Intent, Ledger, Recorded, Tried, in_transaction};
use crate::domain::redact::redact_text;
use crate::domain::{Op, Outcome, State, escape_text};
use crate::error::{Error, Result};
use crate::store::{self, NewEvent};
use serde_json::json;

/// Lines per transaction: large enough to amortise the commit, small enough to keep locks short.
const BATCH: usize = 500;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Intent {
        key: String,
        workflow: String,
        #[serde(default)]
        step: String,
        destination: String,
        action: String,
        payload: Value,
    },
    Attempt {
        key: String,
        attempt: u32,
        outcome: Outcome,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        http_status: Option<u16>,
        #[serde(default)]
        reference: Option<String>,
    },
}

enum Taken {
    Intent(Recorded),
    /// A new attempt, for an operation of this workflow.
    Attempt(String),
}

enum Parsed {
    Intent(Box<Op>, String),
    Attempt(AttemptReport),
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
        let line: Line = serde_json::from_str(text).map_err(|e| {
            // serde quotes the offending value: it goes through redaction like everything else.
            escape_text(&redact_text(&e.to_string())).into_owned()
        })?;
        Ok(match line {
            Line::Intent {
                key,
                workflow,
                step,
                destination,
                action,
                payload,
            } => {
                let intent = Intent {
                    key,
                    workflow,
                    step,
                    destination,
                    action,
                    payload,
                };
                let op = self.prepare(&intent).map_err(|e| e.to_string())?;
                Parsed::Intent(Box::new(op), intent.workflow)
            }
            Line::Attempt {
                key,
                attempt,
                outcome,
                error,
                http_status,
                reference,
            } => {
                crate::domain::validate_key(&key)?;
                if attempt == 0 {
                    return Err("attempts are numbered from 1".into());
                }
                Parsed::Attempt(AttemptReport {
                    key,
                    attempt: Some(attempt),
                    outcome: Some(outcome),
                    reference,
                    error,
                    http_status,
                    retry_after: None,
                })
            }
        })
    }

    /// Reads JSON lines and records each; a bad line is reported with its number and the
    /// valid lines are kept. Re-ingesting the same input changes nothing.
    pub async fn ingest<R: AsyncBufRead + Unpin>(
        &self,
        reader: R,
        actor: &str,
    ) -> Result<IngestReport> {
        let mut report = IngestReport::default();
        let mut lines = reader.lines();
        let mut batch: Vec<(usize, Parsed)> = Vec::with_capacity(BATCH);
        let mut touched = BTreeSet::new();
        let mut number = 0;
        loop {
            let next = lines
                .next_line()
                .await
                .map_err(|e| Error::Invalid(format!("cannot read input: {e}")))?;
            let Some(text) = next else { break };
            number += 1;
            report.lines = number;
            if text.trim().is_empty() {
                continue;
            }
            match self.parse_line(&text) {
                Ok(p) => batch.push((number, p)),
                Err(message) => report.problems.push(IngestProblem {
                    line: number,
                    refused: false,
                    message,
                }),
            }
            if batch.len() >= BATCH {
                self.ingest_batch(&mut batch, actor, &mut report, &mut touched)
                    .await?;
            }
        }
        self.ingest_batch(&mut batch, actor, &mut report, &mut touched)
            .await?;
        for w in touched {
            self.check_threshold(&w).await?;
        }
        report.problems.sort_by_key(|p| p.line);
        Ok(report)
    }

    async fn ingest_batch(
        &self,
        batch: &mut Vec<(usize, Parsed)>,
        actor: &str,
        report: &mut IngestReport,
        touched: &mut BTreeSet<String>,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // The whole batch in one transaction; if another writer raced us, each line on its own.
        let mut tx = self.store.begin().await?;
        let mut local = IngestReport::default();
        let mut local_touched = BTreeSet::new();
        let mut whole = true;
        let mut start = 0;
        'lines: while start < batch.len() {
            // A run of intents: the new keys go in with one statement, their events with another.
            let run = batch[start..]
                .iter()
                .take_while(|(_, p)| matches!(p, Parsed::Intent(..)))
                .count();
            let created = match self
                .insert_new(&mut tx, &batch[start..start + run], actor)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            };
            let end = start + run.max(1);
            for (k, (n, parsed)) in batch[start..end].iter().enumerate() {
                if created.get(k) == Some(&true) {
                    let r = Ok(Taken::Intent(Recorded::Created));
                    tally(&mut local, &mut local_touched, *n, parsed, r);
                    continue;
                }
                match self.ingest_one(&mut tx, parsed, actor).await {
                    Ok(Tried::Done(r)) => tally(&mut local, &mut local_touched, *n, parsed, Ok(r)),
                    Ok(Tried::Raced) => {
                        whole = false;
                        break 'lines;
                    }
                    Err(e @ (Error::Refused(_) | Error::NotFound(_) | Error::Invalid(_))) => {
                        tally(&mut local, &mut local_touched, *n, parsed, Err(e))
                    }
                    Err(e) => {
                        let _ = tx.rollback().await;
                        return Err(e);
                    }
                }
            }
            start = end;
        }
        if whole {
            tx.commit().await.map_err(|e| self.store.err(e))?;
        } else {
            let _ = tx.rollback().await;
            local = IngestReport::default();
            local_touched.clear();
            for (n, parsed) in batch.iter() {
                let r = in_transaction!(self, |conn| self
                    .ingest_one(conn, parsed, actor)
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
        report.created += local.created;
        report.unchanged += local.unchanged;
        report.conflicts += local.conflicts;
        report.attempts += local.attempts;
        report.problems.extend(local.problems);
        touched.extend(local_touched);
        batch.clear();
        Ok(())
    }

    /// Inserts the operations of a run of intent lines that are new, with their `recorded`
    /// events, many to a statement. Says per line whether it created its operation; the others (a
    /// key stored before, or repeated within the run) are left for [`Ledger::record_in`].
    async fn insert_new(
        &self,
        conn: &mut AnyConnection,
        run: &[(usize, Parsed)],
        actor: &str,
    ) -> Result<Vec<bool>> {
        if run.len() < 2 {
            return Ok(vec![false; run.len()]);
        }
        let now = self.now();
        let ops: Vec<Op> = run
            .iter()
            .filter_map(|(_, p)| match p {
                Parsed::Intent(op, _) => Some(Op {
                    created_at: now,
                    updated_at: now,
                    next_attempt_at: Some(now),
                    ..(**op).clone()
                }),
                Parsed::Attempt(_) => None,
            })
            .collect();
        let refs: Vec<&Op> = ops.iter().collect();
        let mut ids: std::collections::HashMap<String, i64> = store::insert_ops(conn, &refs)
            .await?
            .into_iter()
            .map(|(id, k)| (k, id))
            .collect();
        let mut created = Vec::with_capacity(ops.len());
        let mut new = Vec::new();
        for op in &ops {
            // the first line with a key created it; a repeat is the rules' to judge
            match ids.remove(&op.key) {
                Some(id) => {
                    created.push(true);
                    new.push((id, json!({ "fingerprint": op.fingerprint }).to_string()));
                }
                None => created.push(false),
            }
        }
        let events: Vec<NewEvent> = new
            .iter()
            .map(|(id, detail)| {
                NewEvent::on_operation(*id, now, actor, "recorded", None, State::Pending, detail)
            })
            .collect();
        store::insert_events(conn, &events).await?;
        Ok(created)
    }

    /// `Some(recorded)` for an intent or a repeated attempt, `None` with the workflow for a new attempt.
    async fn ingest_one(
        &self,
        conn: &mut AnyConnection,
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
        Err(e) => report.problems.push(IngestProblem {
            line,
            refused: !matches!(e, Error::Invalid(_)),
            message: e.to_string(),
        }),
    }
}
