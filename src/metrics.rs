//! Metrics for on-call alerting (manual: Metrics): Prometheus text at `/metrics` and `/healthz`.
//! The ledger's gauges come from the counters schema 8 keeps and first entries of the
//! exceptions' index, so a scrape stays cheap at a million operations; the process's own
//! counters and histograms are `crate::counters`'. `--metrics ADDR` of `settle serve` and
//! `settle dispatch` serves [`router`]; while the database does not answer, `/metrics` still
//! answers (`settle_database_up 0`) and `/healthz` says 503.

use std::fmt::Write;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::domain::State as OpState;
use crate::error::Result;
use crate::ledger::{DispatcherSeen, Ledger, Pausable};

use crate::counters::label;

/// A metric family's `# HELP` and `# TYPE` lines (every gauge of the ledger).
fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// A dispatcher heard from within this long is alive (it says so every 5 seconds).
const ALIVE: i64 = 30;

/// The ledger's gauges as Prometheus text (format 0.0.4): what the database holds now, the same
/// whichever process serves them.
pub async fn render(ledger: &Ledger) -> Result<String> {
    let now = ledger.now();
    let stats = ledger.read().stats().await?;
    let (groups, workflows) = ledger.read().exceptions_by_workflow().await?;
    let mut out = String::new();
    family(
        &mut out,
        "settle_exceptions",
        "Exceptions now, by workflow and state (0 for each workflow's states without any).",
    );
    let mut shown: std::collections::BTreeMap<(&str, &str), i64> = workflows
        .iter()
        .flat_map(|(w, _)| {
            OpState::ALL
                .iter()
                .filter(|s| s.is_exception())
                .map(move |s| ((w.as_str(), s.as_str()), 0))
        })
        .collect();
    for (workflow, state, n) in &groups {
        *shown.entry((workflow, state.as_str())).or_default() += n;
    }
    let config = ledger.config();
    for ((workflow, state), n) in shown {
        let _ = writeln!(
            out,
            "settle_exceptions{{workflow=\"{}\",state=\"{state}\"{}}} {n}",
            label(workflow),
            team_of(config, workflow),
        );
    }
    family(
        &mut out,
        "settle_oldest_exception_seconds",
        "How long the oldest exception of each workflow has waited.",
    );
    for (workflow, since) in &workflows {
        let Some(since) = since else { continue };
        let age = (now - *since).num_seconds().max(0);
        let _ = writeln!(
            out,
            "settle_oldest_exception_seconds{{workflow=\"{}\"{}}} {age}",
            label(workflow),
            team_of(config, workflow)
        );
    }
    family(
        &mut out,
        "settle_runs_stalled",
        "Runs stalled between steps now, by workflow.",
    );
    for (workflow, n, _) in ledger.read().stalled_counts().await? {
        let _ = writeln!(
            out,
            "settle_runs_stalled{{workflow=\"{}\"{}}} {n}",
            label(&workflow),
            team_of(config, &workflow)
        );
    }
    family(&mut out, "settle_operations", "Operations by state.");
    for (state, n) in &stats.by_state {
        let _ = writeln!(out, "settle_operations{{state=\"{}\"}} {n}", state.as_str());
    }
    family(
        &mut out,
        "settle_operations_due",
        "Operations of the config's HTTP destinations due now, waiting for a dispatcher.",
    );
    let _ = writeln!(out, "settle_operations_due {}", stats.due);
    family(
        &mut out,
        "settle_paused",
        "Workflows and destinations paused now (1).",
    );
    for (kind, names) in [
        (Pausable::Workflow, &stats.paused_workflows),
        (Pausable::Destination, &stats.paused_destinations),
    ] {
        for name in names {
            let team = match kind {
                Pausable::Workflow => team_of(config, name),
                Pausable::Destination => String::new(),
            };
            let _ = writeln!(
                out,
                "settle_paused{{kind=\"{}\",name=\"{}\"{team}}} 1",
                kind.noun(),
                label(name)
            );
        }
    }
    dispatcher_gauges(&mut out, &stats.dispatchers);
    channel_gauges(&mut out, &stats.notify_failing);
    breaker_gauges(&mut out, config, &stats.breakers);
    Ok(out)
}

/// `,team="T"` for a workflow a team owns (manual: Owners and notifications), so that an alert
/// on it carries the team and Alertmanager routes it there; nothing for one nobody owns.
fn team_of(config: &crate::config::Config, workflow: &str) -> String {
    match config.owner_of(workflow) {
        Some(team) => format!(",team=\"{}\"", label(team)),
        None => String::new(),
    }
}

/// The channels failing now (manual: Owners and notifications).
fn channel_gauges(out: &mut String, failing: &[String]) {
    family(
        out,
        "settle_notify_channel_failing",
        "1 for each channel whose last try failed while its messages wait.",
    );
    for channel in failing {
        let _ = writeln!(
            out,
            "settle_notify_channel_failing{{channel=\"{}\"}} 1",
            label(channel)
        );
    }
}

/// Each destination's breaker (manual: Recovery that follows the destination): 1 for the state
/// it is in, 0 for the others; a destination of the config never troubled is closed.
fn breaker_gauges(
    out: &mut String,
    config: &crate::config::Config,
    breakers: &[crate::ledger::BreakerView],
) {
    use crate::domain::breaker::BreakerState;
    family(
        out,
        "settle_destination_state",
        "Each destination's breaker: 1 for its state now (closed, open, probing), 0 for the others.",
    );
    let mut states: std::collections::BTreeMap<&str, BreakerState> = (config.destinations.keys())
        .map(|d| (d.as_str(), BreakerState::Closed))
        .collect();
    for b in breakers {
        states.insert(&b.destination, b.state);
    }
    for (destination, now) in states {
        for state in [
            BreakerState::Closed,
            BreakerState::Open,
            BreakerState::Probing,
        ] {
            let _ = writeln!(
                out,
                "settle_destination_state{{destination=\"{}\",state=\"{}\"}} {}",
                label(destination),
                state.as_str(),
                u8::from(state == now)
            );
        }
    }
}

/// The dispatchers not yet forgotten: whether each is alive, since when it is silent, and how
/// many are alive. One that stopped cleanly is not listed at all.
fn dispatcher_gauges(out: &mut String, dispatchers: &[DispatcherSeen]) {
    let silent: Vec<(&str, i64)> = dispatchers
        .iter()
        .map(|d| (d.name.as_str(), d.seen_seconds))
        .collect();
    family(
        out,
        "settle_dispatcher_up",
        "Each dispatcher heard from lately (1), or silent (0) until dispatcher_gone_after forgets it.",
    );
    for (name, quiet) in &silent {
        let _ = writeln!(
            out,
            "settle_dispatcher_up{{name=\"{}\"}} {}",
            label(name),
            u8::from(*quiet <= ALIVE)
        );
    }
    family(
        out,
        "settle_dispatcher_last_seen_seconds",
        "Since each dispatcher last said it was alive.",
    );
    for (name, quiet) in &silent {
        let _ = writeln!(
            out,
            "settle_dispatcher_last_seen_seconds{{name=\"{}\"}} {quiet}",
            label(name)
        );
    }
    family(out, "settle_dispatchers_alive", "Dispatchers alive now.");
    let alive = silent.iter().filter(|(_, q)| *q <= ALIVE).count();
    let _ = writeln!(out, "settle_dispatchers_alive {alive}");
}

/// Everything `/metrics` answers: the ledger's gauges where the database answers within
/// `SCRAPE_WAIT`, `settle_database_up`, and this process's own counters, histograms and
/// console sessions (served whether or not the database answers).
pub async fn scrape(ledger: &Ledger, sessions: usize) -> String {
    scrape_keeping(ledger, sessions, &Mutex::new(None)).await
}

/// [`scrape`], keeping the last gauges the database gave in `last`: while it does not answer,
/// they are served as they were (with `settle_database_up 0`), so that no alert on the ledger
/// resolves only because the ledger cannot be read, to fire again, its `for:` begun anew, once
/// it can.
async fn scrape_keeping(ledger: &Ledger, sessions: usize, last: &Mutex<Option<String>>) -> String {
    let gauges = tokio::time::timeout(SCRAPE_WAIT, render(ledger)).await;
    let keep = |g: Option<String>| {
        let mut kept = last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(g) = g {
            *kept = Some(g);
        }
        kept.clone().unwrap_or_default()
    };
    let (mut out, up) = match gauges {
        Ok(Ok(text)) => (keep(Some(text)), 1),
        _ => (keep(None), 0),
    };
    family(
        &mut out,
        "settle_database_up",
        "Whether the database answered this scrape (1) or not (0: the ledger's gauges are the last it gave).",
    );
    let _ = writeln!(out, "settle_database_up {up}");
    family(
        &mut out,
        "settle_console_sessions",
        "Console sessions open now.",
    );
    let _ = writeln!(out, "settle_console_sessions {sessions}");
    crate::counters::render(&mut out);
    out
}

/// How long a scrape waits for the database before it says `settle_database_up 0`.
const SCRAPE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone)]
struct Served {
    ledger: Ledger,
    last: Arc<Mutex<Option<String>>>,
    sessions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// `/metrics` and `/healthz` (200 while the database answers, 503 otherwise). `sessions` is the
/// count of open console sessions the server keeps.
pub fn router(
    ledger: Ledger,
    sessions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> axum::Router {
    axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(Served {
            ledger,
            sessions,
            last: Arc::default(),
        })
}

async fn metrics(State(s): State<Served>) -> Response {
    let open = s.sessions.load(std::sync::atomic::Ordering::Relaxed);
    let text = scrape_keeping(&s.ledger, open, &s.last).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn healthz(State(s): State<Served>) -> Response {
    match tokio::time::timeout(SCRAPE_WAIT, s.ledger.read().latest_event_id()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok\n").into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response(),
    }
}

/// The metrics served while it lives (a task of its own, ended when this is dropped).
pub struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Binds `--metrics ADDR` (one clear line when it cannot) and serves [`router`] there through
/// `door`, first saying where: `WHO: metrics on http://ADDR/metrics`. `sessions`: the open
/// console sessions (none for a process without a console).
pub async fn serve_at(
    ledger: &Ledger,
    at: &str,
    sessions: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    who: &str,
    door: std::sync::Arc<crate::listener::Door>,
) -> Result<Serving> {
    let listener = tokio::net::TcpListener::bind(at)
        .await
        .map_err(|e| crate::error::Error::Invalid(format!("--metrics {at}: {e}")))?;
    let shown = listener
        .local_addr()
        .map_err(|e| crate::error::Error::Invalid(format!("--metrics {at}: {e}")))?;
    crate::say!("{who}: metrics on http://{shown}/metrics");
    let app = router(ledger.clone(), sessions.unwrap_or_default());
    let limits = &ledger.config().limits;
    let deadlines = crate::listener::http::Deadlines {
        headers: limits.header_timeout,
        body: limits.body_timeout,
    };
    Ok(Serving(tokio::spawn(async move {
        let never = std::future::pending::<()>();
        crate::listener::http::serve(listener, door, None, app, deadlines, never).await;
        tracing::warn!(at = %shown, "metrics server ended");
    })))
}
