//! `settle dispatch`: runs due operations of the HTTP destinations in the config.
//!
//! In rounds (see [`Ledger::round`]): record the attempts that finished and start due ones in one
//! transaction; then send each started payload as its destination's settings say (SPEC 11a,
//! [`http`]), the key in the idempotency header, and classify the answer; where the outcome is
//! unknown at a destination with a lookup, look the key up, and the next round settles it
//! (audited as `settle`). An `auth` answer pauses its destination in that round. Claimed items
//! and paused workflows or destinations are never started: the due query leaves them out and
//! the rules check again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod http;

pub use http::{Answer, Endpoint, HttpDestination, Observed, classify};

use crate::domain::Outcome;
use crate::domain::redact::OperationRedaction;
use crate::domain::redact::redact_text;
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Finished, Ledger, StartedOp};

/// The actor named on attempts the dispatcher runs.
pub const DISPATCHER: &str = "dispatcher";

#[derive(Clone, Debug)]
pub struct Options {
    /// Operations sent at once.
    pub concurrency: usize,
    /// Stop when nothing automation may move is left (for drills and scripts).
    pub until_settled: bool,
    /// How long to wait between polls for due work.
    pub idle: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: 16,
            until_settled: false,
            idle: Duration::from_millis(200),
        }
    }
}

/// What a run did, for its closing line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub attempts: u64,
    pub retries: u64,
    pub succeeded: u64,
    pub looked_up: u64,
    /// Operations that waited for the retry budget at least once (counted up to about 100,000).
    pub budget_waits: u64,
}

/// An attempt sent and answered, on its way to be recorded.
struct Sent {
    finished: Finished,
    destination: String,
    retry: bool,
}

/// A destination's text as settle keeps it: scrubbed of this operation's sensitive values (an
/// answer may echo the payload) and of the built-in patterns, and with any NUL escaped, since
/// PostgreSQL cannot store one (the same on SQLite, so both backends keep the same text).
fn kept(scrub: &OperationRedaction, text: &str) -> String {
    let text = scrub.text(text);
    if text.contains('\0') {
        text.replace('\0', "\\x00")
    } else {
        text
    }
}

/// Sends one started attempt and, where the outcome is unknown and the destination has a lookup,
/// asks whether the work exists. What the destination said is kept only scrubbed (of this
/// operation's sensitive values and of the secrets read from the environment).
async fn send(
    client: reqwest::Client,
    dest: Arc<HttpDestination>,
    row: StartedOp,
    scrub: OperationRedaction,
) -> Sent {
    let endpoint = dest.endpoint(&row.action);
    let mut seen = match endpoint {
        Some(e) => e.send(&client, &row).await,
        None => Observed {
            outcome: Outcome::Rejected,
            http_status: None,
            reference: None,
            error: Some(format!(
                "not sent: destination {} has no url for action {}",
                dest.name, row.action
            )),
            retry_after: None,
            pause: None,
        },
    };
    let keep = |text: String| match endpoint {
        Some(e) => kept(&scrub, &e.scrub_secrets(text)),
        None => kept(&scrub, &text),
    };
    seen.error = seen.error.map(keep);
    seen.reference = seen.reference.map(keep);
    let lookup = match endpoint {
        Some(e) if seen.outcome == Outcome::Unknown && e.has_lookup() => {
            e.look_up(&client, &row).await.map(|found| found.map(keep))
        }
        _ => None,
    };
    Sent {
        finished: Finished {
            report: AttemptReport {
                key: row.key,
                attempt: None,
                outcome: Some(seen.outcome),
                reference: seen.reference,
                error: seen.error,
                http_status: seen.http_status,
                retry_after: seen.retry_after,
            },
            lookup,
            pause_destination: seen.pause,
        },
        destination: row.destination,
        retry: row.retry,
    }
}

/// Runs until interrupted (SIGINT/SIGTERM: finishes the attempts in flight, starts no more), or
/// with `until_settled` until nothing automation may move is left.
///
/// Up to `concurrency` attempts are in flight. Each round records every attempt that finished
/// since the last one and starts as many new ones as there are free places, in one transaction:
/// under load many operations share a commit, and an idle dispatcher still records at once.
pub async fn run(ledger: Ledger, options: Options) -> Result<Totals> {
    // the environment is read once, here: a missing variable stops the run before anything
    let env = |name: &str| std::env::var(name).ok();
    let destinations: HashMap<String, Arc<HttpDestination>> = ledger
        .config()
        .http_destinations()
        .into_iter()
        .map(|(name, d)| {
            Ok((
                name.to_string(),
                Arc::new(HttpDestination::resolve(name, d, &env)?),
            ))
        })
        .collect::<Result<_>>()?;
    if destinations.is_empty() {
        return Err(Error::Invalid(
            "no destination in the config has a `url`: nothing to dispatch".into(),
        ));
    }
    // After a crash nothing stays in flight forever.
    ledger.sweep().await?;
    let names: Vec<String> = destinations.keys().cloned().collect();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopping = Arc::new(AtomicBool::new(false));
    {
        let (stop, stopping) = (stop.clone(), stopping.clone());
        tokio::spawn(async move {
            shutdown_signal().await;
            stopping.store(true, Ordering::SeqCst);
            stop.notify_waiters();
        });
    }
    let name = format!("{}-{}", hostname(), std::process::id());
    let concurrency = options.concurrency.max(1);
    let (done, mut answers) = tokio::sync::mpsc::unbounded_channel::<Sent>();
    let mut in_flight = 0usize;
    let mut answered: Vec<Sent> = Vec::new();
    let mut totals = Totals::default();
    let mut beat: Option<Instant> = None;
    let mut outage: Option<Instant> = None;
    // A database call in the loop. An outage is waited out: the answers in hand are kept and
    // recorded once the database is back (only a stop request gives up on them; the next start's
    // sweep then makes those attempts `unknown`). Any other error ends the run.
    macro_rules! db {
        ($call:expr) => {
            match $call.await {
                Ok(v) => {
                    if let Some(since) = outage.take() {
                        tracing::info!(after_ms = since.elapsed().as_millis() as u64, "database reachable again");
                        crate::tell!("settle: database reachable again");
                    }
                    v
                }
                Err(Error::Unavailable(why)) if !stopping.load(Ordering::SeqCst) => {
                    if outage.is_none() {
                        tracing::warn!(error = %why, kept = answered.len(), "database unreachable");
                        crate::tell!("settle: {}: keeping {} answer(s) in hand, retrying", crate::domain::escape_text(&why), answered.len());
                        outage = Some(Instant::now());
                    }
                    idle(&stop, OUTAGE_PAUSE).await;
                    continue;
                }
                Err(e) => return Err(e),
            }
        };
    }
    // destinations this run paused on an `auth` answer (said once each)
    let mut paused_here: std::collections::HashSet<String> = std::collections::HashSet::new();
    // operations that waited for the retry budget at least once
    let mut deferred: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        while let Ok(s) = answers.try_recv() {
            answered.push(s);
            in_flight -= 1;
        }
        if beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
            db!(ledger.heartbeat(&name));
            beat = Some(Instant::now());
        }
        let stopping_now = stopping.load(Ordering::SeqCst);
        let free = if stopping_now {
            0
        } else {
            concurrency - in_flight
        };
        let worth_a_round = !answered.is_empty() || (free > 0 && db!(ledger.anything_due(&names)));
        if !worth_a_round {
            if in_flight > 0 {
                in_flight -= wait_for_answer(&mut answers, &mut answered).await;
                continue;
            }
            if stopping_now || (options.until_settled && db!(ledger.unsettled(&names)) == 0) {
                break;
            }
            idle(&stop, options.idle).await;
            db!(ledger.sweep());
            continue;
        }
        let finished: Vec<Finished> = answered.iter().map(|s| s.finished.clone()).collect();
        let round = match ledger.round(&finished, &names, free, DISPATCHER).await {
            // an answer the database would not store must not hold back the others
            Err(Error::Unstorable(why)) if !finished.is_empty() => {
                db!(one_by_one(&ledger, &finished, &names, &why))
            }
            other => db!(async { other }),
        };
        let recorded = answered.len();
        for (sent, applied) in answered.drain(..).zip(round.finished) {
            log_attempt(&sent, &applied);
            if let Some(reason) = &sent.finished.pause_destination
                && paused_here.insert(sent.destination.clone())
            {
                let d = crate::domain::escape_text(&sent.destination);
                tracing::warn!(destination = %sent.destination, reason = %reason, "destination paused");
                crate::tell!(
                    "settle: destination {d} paused: {}; `settle resume --destination {d}` lifts it",
                    crate::domain::escape_text(reason)
                );
            }
            totals.attempts += 1;
            totals.retries += u64::from(sent.retry);
            totals.succeeded += u64::from(applied.is_ok_and(|a| a.to == crate::State::Succeeded));
        }
        totals.looked_up += round.looked_up as u64;
        // a long-running dispatcher keeps at most this many keys for its closing line
        if deferred.len() < 100_000 {
            deferred.extend(round.waiting_for_budget);
        }
        let launched = round.started.len();
        for op in round.started {
            let Some(dest) = destinations.get(&op.destination).cloned() else {
                continue;
            };
            let (client, done) = (client.clone(), done.clone());
            let scrub = ledger.answer_scrubber(&op);
            in_flight += 1;
            tokio::spawn(async move {
                let _ = done.send(send(client, dest, op, scrub).await);
            });
        }
        if launched == 0 && recorded == 0 {
            // everything due waits for the retry budget, or another dispatcher took it
            if in_flight > 0 {
                in_flight -= wait_for_answer(&mut answers, &mut answered).await;
            } else {
                idle(&stop, options.idle).await;
            }
        }
    }
    totals.budget_waits = deferred.len() as u64;
    Ok(totals)
}

/// Records finished attempts a round each, starting nothing: after the database refused a round
/// whole for a value it cannot store, so that one such answer does not hold back the rest. The
/// one it refuses stays unrecorded (said in the log); its attempt is swept to `unknown` later.
async fn one_by_one(
    ledger: &Ledger,
    finished: &[Finished],
    names: &[String],
    why: &str,
) -> Result<crate::ledger::Round> {
    tracing::warn!(error = %why, "a round was refused; recording its answers one by one");
    let mut round = crate::ledger::Round::default();
    for f in finished {
        match ledger
            .round(std::slice::from_ref(f), names, 0, DISPATCHER)
            .await
        {
            Ok(r) => {
                round.looked_up += r.looked_up;
                round.finished.extend(r.finished);
            }
            Err(e @ Error::Unstorable(_)) => round.finished.push(Err(e)),
            Err(e) => return Err(e),
        }
    }
    Ok(round)
}

/// Waits for the next answer, for at most a heartbeat's interval (the heartbeat goes on while a
/// slow destination answers). Returns how many answers arrived (0 or 1).
async fn wait_for_answer(
    answers: &mut tokio::sync::mpsc::UnboundedReceiver<Sent>,
    answered: &mut Vec<Sent>,
) -> usize {
    match tokio::time::timeout(HEARTBEAT, answers.recv()).await {
        Ok(Some(s)) => {
            answered.push(s);
            1
        }
        _ => 0,
    }
}

/// How long to wait before trying an unreachable database again.
const OUTAGE_PAUSE: Duration = Duration::from_secs(1);

/// How often a running dispatcher says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(5);

async fn idle(stop: &tokio::sync::Notify, pause: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(pause) => {}
        _ = stop.notified() => {}
    }
}

/// One concise line per attempt. The error is the destination's answer as it was kept (scrubbed
/// of this operation's values when it arrived); the log file escapes what is left.
fn log_attempt(sent: &Sent, applied: &Result<crate::ledger::Applied>) {
    let r = &sent.finished.report;
    let error = r.error.as_deref().unwrap_or_default();
    match applied {
        Ok(a) => tracing::info!(
            key = %r.key,
            destination = %sent.destination,
            outcome = r.outcome.map_or("unknown", |o| o.as_str()),
            http = r.http_status,
            state = a.to.as_str(),
            error,
            "attempt"
        ),
        Err(e) => tracing::warn!(
            key = %r.key,
            destination = %sent.destination,
            outcome = r.outcome.map_or("unknown", |o| o.as_str()),
            http = r.http_status,
            error,
            refused = %redact_text(&e.to_string()),
            "attempt not recorded"
        ),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "dispatcher".into())
}
