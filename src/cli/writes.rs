//! The commands an automation writes with: record, start, attempt, ingest.

use std::time::Duration;
use tokio::io::AsyncBufRead;

use super::common::{clean, duration_arg, invalid, payload_text, required};
use super::output;
use crate::domain::{Outcome, State};
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Intent, Ledger, Recorded};

/// `settle record`: exit 0 only where the caller may go on to `start`.
pub(super) async fn record(
    ledger: &Ledger,
    args: &RecordArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let RecordArgs {
        key,
        workflow,
        step,
        destination,
        action,
        payload,
        run,
        json,
    } = args;
    {
        {
            let text = payload_text(payload, ledger.config().max_payload)?;
            let payload = crate::domain::payload::parse_payload(&text)
                .map_err(|e| invalid(format!("--payload is not valid JSON: {e}")))?;
            let intent = Intent {
                key: key.clone(),
                workflow: workflow.clone(),
                step: step.clone(),
                destination: destination.clone(),
                action: action.clone(),
                payload,
                run: run.clone(),
            };
            let r = match ledger.record(&intent, required(operator)?).await {
                Ok(r) => r,
                Err(e @ Error::Refused(_)) => {
                    // new contents under a terminal key: the old record stands, nothing to send
                    if *json && let Ok(detail) = ledger.read().show(key, viewer).await {
                        output::step(&detail, None, false);
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            let detail = ledger.read().show(key, viewer).await?;
            let state = detail.op.state;
            // a corrected key answers from its chain's end (manual: Correcting a request)
            let end = detail
                .corrected_as
                .as_ref()
                .filter(|_| r == Recorded::Unchanged);
            // a done step answers done with its reference, so a rerun goes on past it (manual: Runs)
            let done = r == Recorded::Unchanged && end.map_or(detail.op.is_done(), |e| e.done);
            // a script that checks the exit code goes on to `start` only after exit 0
            let refusal = match r {
                Recorded::Unchanged if let Some(e) = end.filter(|e| !e.done) => Some(format!(
                    "corrected as {} ({}): do not send this request; the correction answers for it",
                    output::esc(&e.key),
                    e.state
                )),
                Recorded::Conflict => Some(format!(
                    "conflict: new contents kept beside the old, never sent (settle show {})",
                    output::esc(key)
                )),
                Recorded::Unchanged if state.is_terminal() && !done => Some(format!(
                    "already {state}: nothing to send{}",
                    detail
                        .op
                        .reference
                        .as_deref()
                        .map(|r| format!(" (reference {})", output::esc(r)))
                        .unwrap_or_default()
                )),
                _ => None,
            };
            if *json {
                output::step(&detail, None, refusal.is_none() && !done);
            }
            if let Some(why) = refusal {
                crate::tell!("settle: {}: {why}", output::esc(key));
                return Ok(3);
            }
            if !*json {
                let key = output::esc(key);
                match r {
                    Recorded::Created => say!("{key}: recorded ({state})"),
                    _ if done => say!(
                        "{key}: {}done{}: do not send; go on",
                        end.map(|e| format!("corrected as {}, ", output::esc(&e.key)))
                            .unwrap_or_default(),
                        end.map_or(detail.op.reference.as_deref(), |e| e.reference.as_deref())
                            .map(|r| format!(" (reference {})", output::esc(r)))
                            .unwrap_or_default()
                    ),
                    _ => say!(
                        "{key}: already recorded with these contents ({state}); nothing changed"
                    ),
                }
            }
        }
    }
    Ok(0)
}

/// `settle start`: prints the attempt's number when the caller may send now; exit 3 when not.
pub(super) async fn start(
    ledger: &Ledger,
    args: &StartArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let StartArgs { key, json } = args;
    let started = ledger.start_attempt(key, required(operator)?).await;
    let detail = ledger.read().show(key, viewer).await?;
    // only a start this call made lets the caller send
    let send = matches!(&started, Ok(a) if a.kind.is_some() && a.to == State::InFlight);
    let attempt = send.then_some(detail.op.attempts);
    if *json {
        output::step(&detail, attempt, send);
    } else if let Some(n) = attempt {
        say!("{n}");
    }
    match started {
        Ok(_) if send => Ok(0),
        // a corrected key is never sent again: its correction answers for it
        _ if let Some(e) = &detail.corrected_as => {
            crate::tell!(
                "settle: {}: corrected as {} ({}): not started",
                output::esc(key),
                output::esc(&e.key),
                e.state
            );
            Ok(3)
        }
        Ok(a) => {
            crate::tell!("settle: {}: {}: not started", output::esc(key), a.to);
            Ok(3)
        }
        Err(e) => Err(e),
    }
}

/// `settle attempt`: an attempt's outcome recorded.
pub(super) async fn attempt(
    ledger: &Ledger,
    args: &AttemptArgs,
    operator: &Option<String>,
) -> Result<i32> {
    let viewer = operator.as_deref().unwrap_or("");
    let AttemptArgs {
        key,
        outcome,
        attempt,
        reference,
        error,
        http_status,
        retry_after,
        json,
    } = args;
    let report = AttemptReport {
        key: key.clone(),
        attempt: *attempt,
        outcome: Some(Outcome::parse(outcome).map_err(invalid)?),
        reference: reference.clone(),
        error: error.clone(),
        http_status: *http_status,
        retry_after: retry_after
            .as_deref()
            .map(|t| {
                duration_arg(
                    "--retry-after",
                    t,
                    Duration::ZERO,
                    Duration::from_secs(365 * 86_400),
                )
            })
            .transpose()?,
    };
    let a = ledger.report_attempt(&report, required(operator)?).await?;
    if *json {
        let detail = ledger.read().show(key, viewer).await?;
        let n = attempt.unwrap_or_else(|| {
            detail
                .attempt_log
                .last()
                .map_or(detail.op.attempts, |l| l.n)
        });
        output::step(&detail, Some(n), false);
    } else {
        output::applied(&a, "attempt recorded");
    }
    Ok(0)
}

/// `settle ingest FILE`: JSON lines of intents and attempts.
pub(super) async fn ingest(ledger: &Ledger, file: &str, actor: &str) -> Result<i32> {
    let reader: Box<dyn AsyncBufRead + Unpin + Send> = if file == "-" {
        Box::new(tokio::io::BufReader::new(tokio::io::stdin()))
    } else {
        let f = tokio::fs::File::open(file)
            .await
            .map_err(|e| invalid(format!("cannot read {}: {e}", output::esc(file))))?;
        Box::new(tokio::io::BufReader::with_capacity(1 << 16, f))
    };
    let report = ledger.ingest(reader, actor).await?;
    for p in &report.problems {
        crate::tell!("line {}: {}", p.line, clean(&p.message));
    }
    say!(
        "{} line(s): {} recorded, {} unchanged, {} conflict(s), {} started, {} attempt(s); {} malformed, {} refused",
        report.lines,
        report.created,
        report.unchanged,
        report.conflicts,
        report.started,
        report.attempts,
        report.malformed(),
        report.refused()
    );
    Ok(if report.malformed() > 0 {
        2
    } else if report.refused() > 0 {
        3
    } else {
        0
    })
}

/// The arguments of `settle record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The operation's stable key, sent as its idempotency key (1-128 of A-Z a-z 0-9 . _ : -)
    #[arg(long)]
    pub key: String,
    /// The automation it belongs to (pauses and thresholds are per workflow)
    #[arg(long, value_name = "NAME")]
    pub workflow: String,
    /// The step of the workflow, e.g. create-task
    #[arg(long, default_value = "", value_name = "NAME")]
    pub step: String,
    /// The receiving system, as the config names it
    #[arg(long, value_name = "NAME")]
    pub destination: String,
    /// What is asked of it, e.g. create_task
    #[arg(long, value_name = "NAME")]
    pub action: String,
    /// The request's contents: JSON, or @FILE to read it from a file, or - from stdin (a
    /// payload on the command line is visible to other users in `ps`)
    #[arg(long, value_name = "JSON|@FILE|-")]
    pub payload: String,
    /// The run this step belongs to: one execution of the workflow for one case, e.g.
    /// onb-42 (given when the step is first recorded)
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The operation's key
    #[arg(long)]
    pub key: String,
    /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle attempt`.
#[derive(Debug, clap::Args)]
pub struct AttemptArgs {
    /// The operation's key
    #[arg(long)]
    pub key: String,
    /// What happened: accepted (done), rejected (a business error), transient (provably not
    /// done), unknown (could not observe)
    #[arg(long, value_parser = ["accepted", "rejected", "transient", "unknown"])]
    pub outcome: String,
    /// The attempt's number (default: the open attempt, else the next)
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// The destination's reference for the work (with accepted)
    #[arg(long, value_name = "REF")]
    pub reference: Option<String>,
    /// What went wrong, as the destination or the client said it (kept redacted)
    #[arg(long, value_name = "TEXT")]
    pub error: Option<String>,
    /// The HTTP status of the answer, if there was one
    #[arg(long, value_name = "STATUS")]
    pub http_status: Option<u16>,
    /// The destination's Retry-After, e.g. 30s
    #[arg(long, value_name = "DUR")]
    pub retry_after: Option<String>,
    /// Answer as one JSON document: key, state, attempt, send, done, reference, run, next_step
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `settle ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// The JSON lines file, or - for stdin
    pub file: String,
}
