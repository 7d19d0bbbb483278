//! One attempt sent as the dispatcher sends it, and what the dispatcher's run shares: its
//! options and totals, the answers kept scrubbed.

use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::http::{HttpDestination, Observed, Raw};
use crate::domain::redact::OperationRedaction;
use crate::domain::{LookupAnswer, Outcome};
use crate::ledger::{AttemptReport, Finished, StartedOp};

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
pub(super) struct Sent {
    pub(super) finished: Finished,
    pub(super) destination: String,
    pub(super) retry: bool,
}

/// A destination's text as settle keeps it: scrubbed of this operation's sensitive values (an
/// answer may echo the payload) and of the built-in patterns, and with any NUL escaped, since
/// PostgreSQL cannot store one (the same on SQLite, so both backends keep the same text).
pub(super) fn kept(scrub: &OperationRedaction, text: &str) -> String {
    let text = scrub.text(text);
    if text.contains('\0') {
        text.replace('\0', "\\x00")
    } else {
        text
    }
}

/// A lookup's answer as settle keeps it: its reference scrubbed like any text of the destination.
pub(crate) fn kept_answer(answer: LookupAnswer, keep: &dyn Fn(String) -> String) -> LookupAnswer {
    match answer {
        LookupAnswer::Found {
            reference,
            http_status,
        } => LookupAnswer::Found {
            reference: keep(reference),
            http_status,
        },
        other => other,
    }
}

/// Sends one started attempt and, where the outcome is unknown and the destination has a lookup,
/// asks whether the work exists. What the destination said is kept only scrubbed (of this
/// operation's sensitive values and of the secrets read from the environment).
pub(super) async fn send(
    client: reqwest::Client,
    dest: Arc<HttpDestination>,
    row: StartedOp,
    scrub: OperationRedaction,
) -> Sent {
    let (finished, _) = attempt(&client, &dest, &row, &scrub).await;
    Sent {
        finished,
        destination: row.destination,
        retry: row.retry,
    }
}

/// One started attempt sent as the dispatcher sends it (manual: Destinations and the dispatcher), and looked up where its
/// outcome is unknown and the destination has a lookup: the attempt's report for the ledger,
/// kept only scrubbed, and the answer as it came (the gateway hands it to its caller).
pub async fn attempt(
    client: &reqwest::Client,
    dest: &HttpDestination,
    row: &StartedOp,
    scrub: &OperationRedaction,
) -> (Finished, Option<Raw>) {
    let endpoint = dest.sender(&row.action);
    let (mut seen, raw) = match endpoint {
        Some(e) => {
            let began = std::time::Instant::now();
            let answered = e.exchange(client, row).await;
            let took = began.elapsed();
            crate::counters::observe(crate::counters::ATTEMPT_SECONDS, &[&dest.name], took);
            answered
        }
        None => (
            Observed {
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
            None,
        ),
    };
    let keep = |text: String| match endpoint {
        Some(e) => kept(scrub, &e.scrub_secrets(text)),
        None => kept(scrub, &text),
    };
    seen.error = seen.error.map(keep);
    seen.reference = seen.reference.map(keep);
    let lookup = match endpoint {
        Some(e) if seen.outcome == Outcome::Unknown && e.has_lookup() => {
            e.look_up(client, row).await.map(|a| kept_answer(a, &keep))
        }
        _ => None,
    };
    let finished = Finished {
        report: AttemptReport {
            key: row.key.clone(),
            attempt: None,
            outcome: Some(seen.outcome),
            reference: seen.reference,
            error: seen.error,
            http_status: seen.http_status,
            retry_after: seen.retry_after,
        },
        lookup,
        pause_destination: seen.pause,
    };
    (finished, raw)
}

/// What a task spawned by the dispatcher hands back.
pub(super) enum Done {
    /// An attempt sent and answered.
    Attempt(Sent),
    /// An interrupted attempt looked up at its destination.
    LookedUp { key: String, answer: LookupAnswer },
    /// A destination's `probe_url` asked while its breaker probes.
    Probed {
        destination: String,
        signal: crate::domain::breaker::Signal,
    },
}

/// One concise line per attempt. The error is the destination's answer as it was kept (scrubbed
/// of this operation's values when it arrived); the log file escapes what is left.
pub(super) fn log_attempt(sent: &Sent, applied: &crate::error::Result<crate::ledger::Applied>) {
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
            refused = %crate::domain::redact::redact_text(&e.to_string()),
            "attempt not recorded"
        ),
    }
}

/// Says on stderr and in the log that a destination's breaker opened or closed.
pub(super) fn told_breakers(changes: &[(String, crate::domain::breaker::Change)]) {
    for (destination, change) in changes {
        let d = crate::domain::escape_text(destination);
        let to = match change {
            crate::domain::breaker::Change::Opened { .. } => "open",
            crate::domain::breaker::Change::Closed => "closed",
        };
        crate::counters::inc(crate::counters::BREAKER_TRANSITIONS, &[destination, to]);
        match change {
            crate::domain::breaker::Change::Opened { why } => {
                tracing::warn!(destination = %destination, why = %why, "breaker open");
                crate::tell!(
                    "settle: {d} is struggling ({}): nothing more is sent there until a probe finds it well",
                    crate::domain::escape_text(why)
                );
            }
            crate::domain::breaker::Change::Closed => {
                tracing::info!(destination = %destination, "breaker closed");
                crate::tell!("settle: {d} answers again: sending resumes at its starting pace");
            }
        }
    }
}
