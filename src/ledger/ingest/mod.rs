//! `settle ingest`: JSON lines of intents, starts and attempts (manual: The protocol), idempotent, batched in
//! transactions.
//!
//! Rooms: `parse.rs` a line read, `batch.rs` the batches written, `report.rs` what it tells its
//! caller.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

mod batch;

mod parse;
mod report;

use batch::Writing;
use parse::Parsed;
pub use report::{IngestProblem, IngestReport};

use super::Ledger;
use crate::error::{Error, Result};

/// Lines per transaction: large enough to amortise the commit, small enough to keep locks short.
const BATCH: usize = 500;

/// Reads JSON lines and records each (see [`Ledger::ingest`]).
pub(super) async fn ingest<R: AsyncBufRead + Unpin>(
    ledger: &Ledger,
    reader: R,
    actor: &str,
) -> Result<IngestReport> {
    let (batches, mut queued) = tokio::sync::mpsc::channel::<Vec<(usize, Parsed)>>(2);
    let writer = {
        let mut writing = Writing::new(ledger.clone(), actor);
        tokio::spawn(async move {
            while let Some(mut batch) = queued.recv().await {
                writing.batch(&mut batch).await?;
            }
            Ok::<_, Error>((writing.report, writing.touched))
        })
    };
    let read = read_lines(ledger, reader, &batches).await;
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
        ledger.check_threshold(&w).await?;
    }
    report.problems.sort_by_key(|p| p.line);
    Ok(report)
}

/// Reads and parses lines, handing them on in batches; the report holds the lines read and
/// the malformed ones.
async fn read_lines<R: AsyncBufRead + Unpin>(
    ledger: &Ledger,
    mut reader: R,
    batches: &tokio::sync::mpsc::Sender<Vec<(usize, Parsed)>>,
) -> Result<IngestReport> {
    let mut report = IngestReport::default();
    let mut bytes = Vec::new();
    let mut batch: Vec<(usize, Parsed)> = Vec::with_capacity(BATCH);
    let mut number = 0;
    // room for the largest payload, written out with escapes, and the line's other fields
    let line_limit = ledger.config.max_payload.saturating_mul(2) + 64 * 1024;
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
                    crate::domain::payload::size_text(ledger.config.max_payload)
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
        match parse::parse_line(ledger, text) {
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
