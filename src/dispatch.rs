//! `settle dispatch`: runs due operations of the HTTP destinations in the config.
//!
//! In rounds (see [`Ledger::round`]): record the attempts that finished and start due ones in one
//! transaction; then POST each started payload with the key as `Idempotency-Key` and classify the
//! answer (SPEC 3 and 6); where the outcome is unknown at a destination with lookup, look the key
//! up, and the next round settles it (audited as `settle`). Claimed items and paused workflows
//! are never started: the due query leaves them out and the rules check again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::config::HttpDestination;
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

/// The outcome class of one HTTP exchange (SPEC section 3).
pub struct Observed {
    pub outcome: Outcome,
    pub http_status: Option<u16>,
    pub reference: Option<String>,
    pub error: Option<String>,
    pub retry_after: Option<Duration>,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Classifies an answer: confirmed (2xx), refused (4xx), provably not done (409 while the first
/// is still running, 429, 503), or unknown (other 5xx, or no readable answer).
pub async fn classify(
    result: std::result::Result<reqwest::Response, reqwest::Error>,
    timeout: Duration,
) -> Observed {
    let unknown = |error: String, status: Option<u16>| Observed {
        outcome: Outcome::Unknown,
        http_status: status,
        reference: None,
        error: Some(error),
        retry_after: None,
    };
    let resp = match result {
        Ok(r) => r,
        Err(e) if e.is_connect() => {
            return Observed {
                outcome: Outcome::Transient,
                http_status: None,
                reference: None,
                error: Some("connect error: the request was not sent".into()),
                retry_after: None,
            };
        }
        Err(e) if e.is_timeout() => {
            return unknown(format!("no answer within {}s", timeout.as_secs_f32()), None);
        }
        Err(_) => return unknown("the connection broke before the answer".into(), None),
    };
    let status = resp.status();
    let code = Some(status.as_u16());
    let after = retry_after(resp.headers());
    match status {
        s if s.is_success() => match resp.json::<Value>().await {
            Ok(body) => Observed {
                outcome: Outcome::Accepted,
                http_status: code,
                reference: body
                    .get("id")
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                error: None,
                retry_after: None,
            },
            Err(_) => unknown(
                format!("HTTP {} but the answer could not be read", status.as_u16()),
                code,
            ),
        },
        StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            Observed {
                outcome: Outcome::Transient,
                http_status: code,
                reference: None,
                error: Some(format!("HTTP {}: not done, try later", status.as_u16())),
                retry_after: after.or(Some(Duration::from_secs(1))),
            }
        }
        s if s.is_client_error() => {
            let text = resp.text().await.unwrap_or_default();
            let text: String = text.chars().take(300).collect();
            Observed {
                outcome: Outcome::Rejected,
                http_status: code,
                reference: None,
                error: Some(format!("HTTP {}: {text}", s.as_u16())),
                retry_after: None,
            }
        }
        s => unknown(format!("HTTP {}: outcome not known", s.as_u16()), code),
    }
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
/// asks whether the work exists.
async fn send(
    client: reqwest::Client,
    dest: Arc<HttpDestination>,
    row: StartedOp,
    scrub: OperationRedaction,
) -> Sent {
    let sent = client
        .post(&dest.url)
        .header("Idempotency-Key", &row.key)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(dest.timeout)
        .body(row.payload)
        .send()
        .await;
    let mut seen = classify(sent, dest.timeout).await;
    seen.error = seen.error.map(|e| kept(&scrub, &e));
    seen.reference = seen.reference.map(|r| kept(&scrub, &r));
    let lookup = match (&dest.lookup_url, seen.outcome) {
        (Some(template), Outcome::Unknown) => {
            look_up(&client, &template.replace("{key}", &row.key), dest.timeout)
                .await
                .map(|found| found.map(|r| kept(&scrub, &r)))
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
        },
        destination: row.destination,
        retry: row.retry,
    }
}

/// Asks the destination whether the work exists: `Some(Some(reference))` found, `Some(None)`
/// absent, `None` when the lookup itself failed (the outcome then stays unknown for a person).
async fn look_up(client: &reqwest::Client, url: &str, timeout: Duration) -> Option<Option<String>> {
    match client.get(url).timeout(timeout).send().await {
        Ok(r) if r.status() == StatusCode::NOT_FOUND => Some(None),
        Ok(r) if r.status().is_success() => {
            let body = r.json::<Value>().await.ok()?;
            Some(Some(body.get("id").map_or_else(
                || "found".to_string(),
                |v| v.as_str().map_or_else(|| v.to_string(), str::to_string),
            )))
        }
        _ => None,
    }
}

/// Runs until interrupted (SIGINT/SIGTERM: finishes the attempts in flight, starts no more), or
/// with `until_settled` until nothing automation may move is left.
///
/// Up to `concurrency` attempts are in flight. Each round records every attempt that finished
/// since the last one and starts as many new ones as there are free places, in one transaction:
/// under load many operations share a commit, and an idle dispatcher still records at once.
pub async fn run(ledger: Ledger, options: Options) -> Result<Totals> {
    let destinations: HashMap<String, Arc<HttpDestination>> = ledger
        .config()
        .http_destinations()
        .into_iter()
        .map(|d| (d.name.clone(), Arc::new(d)))
        .collect();
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
