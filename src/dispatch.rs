//! `settle dispatch`: runs due operations of the HTTP destinations in the config.
//!
//! For each due operation: start the attempt (a compare-and-set: two dispatchers never both
//! start one), POST the stored payload with the key as `Idempotency-Key`, record the outcome
//! class (SPEC 3 and 6), and where the outcome is unknown at a destination with lookup, look the
//! key up and settle it (audited as `settle`). Claimed items and paused workflows are never
//! touched (the due query leaves them out; starting an attempt re-checks under the lock).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::config::HttpDestination;
use crate::domain::Outcome;
use crate::domain::policy::RetryBudget;
use crate::domain::redact::redact_text;
use crate::error::{Error, Result};
use crate::ledger::{AttemptReport, Ledger};
use crate::store::DueRow;

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

struct Dispatcher {
    ledger: Ledger,
    client: reqwest::Client,
    destinations: HashMap<String, HttpDestination>,
    /// Per destination: the bucket and when it was last refilled.
    budgets: Mutex<HashMap<String, (RetryBudget, std::time::Instant)>>,
    totals: Mutex<Totals>,
}

impl Dispatcher {
    /// One operation: budget, attempt, outcome, lookup.
    /// Returns whether an attempt was made.
    async fn one(&self, due: DueRow) -> Result<bool> {
        let Some(dest) = self.destinations.get(&due.destination) else {
            return Ok(false);
        };
        if due.retry && !self.spend(&due.destination, due.after_unknown) {
            // the budget is empty: the operation waits in retry_wait
            self.totals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .budget_waits += 1;
            return Ok(false);
        }
        match self.ledger.start_attempt(&due.key, DISPATCHER).await {
            Ok(_) => {}
            // someone else started it, claimed it, or paused its workflow meanwhile
            Err(Error::Refused(_) | Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        let payload: Value = serde_json::from_str(&due.payload).unwrap_or(Value::Null);
        let sent = self
            .client
            .post(&dest.url)
            .header("Idempotency-Key", &due.key)
            .timeout(dest.timeout)
            .json(&payload)
            .send()
            .await;
        let seen = classify(sent, dest.timeout).await;
        let report = AttemptReport {
            key: due.key.clone(),
            attempt: None,
            outcome: Some(seen.outcome),
            reference: seen.reference.clone(),
            error: seen.error.clone(),
            http_status: seen.http_status,
            retry_after: seen.retry_after,
        };
        let applied = self.ledger.report_attempt(&report, DISPATCHER).await?;
        tracing::info!(
            key = %due.key,
            destination = %due.destination,
            outcome = seen.outcome.as_str(),
            http = seen.http_status,
            state = applied.to.as_str(),
            error = seen.error.as_deref().map(redact_text).unwrap_or_default(),
            "attempt"
        );
        {
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            t.attempts += 1;
            t.retries += u64::from(due.retry);
            t.succeeded += u64::from(applied.to == crate::State::Succeeded);
        }
        if seen.outcome == Outcome::Accepted && !due.retry {
            let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
            let (b, _) = budgets
                .entry(due.destination.clone())
                .or_insert_with(|| (RetryBudget::full(), std::time::Instant::now()));
            *b = b.refund();
        }
        if applied.to == crate::State::Unknown
            && let Some(template) = &dest.lookup_url
        {
            self.look_up(&due.key, template, dest.timeout).await?;
        }
        Ok(true)
    }

    /// Takes a retry's cost from the destination's bucket (refilled for the time since), or says no.
    fn spend(&self, destination: &str, after_unknown: bool) -> bool {
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        let (b, at) = budgets
            .entry(destination.to_string())
            .or_insert_with(|| (RetryBudget::full(), now));
        *b = b.refill(now - *at);
        *at = now;
        match b.take(after_unknown) {
            Some(left) => {
                *b = left;
                true
            }
            None => false,
        }
    }

    /// Asks the destination whether the work for `key` exists, and settles the outcome by it.
    async fn look_up(&self, key: &str, template: &str, timeout: Duration) -> Result<()> {
        let url = template.replace("{key}", key);
        let found = match self.client.get(&url).timeout(timeout).send().await {
            Ok(r) if r.status() == StatusCode::NOT_FOUND => None,
            Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                Ok(body) => Some(body.get("id").map_or_else(
                    || "found".to_string(),
                    |v| v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )),
                Err(_) => return Ok(()),
            },
            // the lookup itself failed: the outcome stays unknown for a person
            _ => return Ok(()),
        };
        let a = self.ledger.lookup(key, found).await;
        if let Ok(a) = &a {
            tracing::info!(key, state = a.to.as_str(), "looked up");
            self.totals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .looked_up += 1;
        }
        match a {
            Ok(_) | Err(Error::Refused(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Runs until interrupted (SIGINT/SIGTERM: finishes the attempts in flight, starts no more), or
/// with `until_settled` until nothing automation may move is left.
pub async fn run(ledger: Ledger, options: Options) -> Result<Totals> {
    let destinations: HashMap<String, HttpDestination> = ledger
        .config()
        .http_destinations()
        .into_iter()
        .map(|d| (d.name.clone(), d))
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
    let d = Arc::new(Dispatcher {
        ledger: ledger.clone(),
        client,
        destinations,
        budgets: Mutex::new(HashMap::new()),
        totals: Mutex::new(Totals::default()),
    });
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (stop, stopping) = (stop.clone(), stopping.clone());
        tokio::spawn(async move {
            shutdown_signal().await;
            stopping.store(true, std::sync::atomic::Ordering::SeqCst);
            stop.notify_waiters();
        });
    }
    let name = format!("{}-{}", hostname(), std::process::id());
    loop {
        if stopping.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        ledger.heartbeat(&name).await?;
        let due = ledger.due(&names, options.concurrency.max(1) * 4).await?;
        if due.is_empty() {
            if options.until_settled && ledger.unsettled(&names).await? == 0 {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(options.idle) => {}
                _ = stop.notified() => {}
            }
            ledger.sweep().await?;
            continue;
        }
        // A batch at a time, `concurrency` in flight; a signal lets the batch finish.
        let gate = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
        let mut tasks = Vec::new();
        for row in due {
            let (d, gate) = (d.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = gate.acquire_owned().await;
                d.one(row).await
            }));
        }
        let mut progressed = false;
        for t in tasks {
            match t.await {
                Ok(Ok(made)) => progressed |= made,
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(Error::Invalid(format!("a dispatch task failed: {e}"))),
            }
        }
        if !progressed {
            // everything due is waiting for the retry budget (or was taken by another dispatcher)
            tokio::select! {
                _ = tokio::time::sleep(options.idle) => {}
                _ = stop.notified() => {}
            }
        }
    }
    let totals = d.totals.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(totals)
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
