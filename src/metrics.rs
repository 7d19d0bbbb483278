//! Metrics for on-call alerting (manual: Running settle for a team): Prometheus text at `/metrics` and `/healthz`, from
//! the counters schema 8 keeps and first entries of the exceptions' index, so a scrape stays cheap at
//! a million operations. `settle serve --metrics ADDR` serves [`router`].

use std::fmt::Write;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::Result;
use crate::ledger::{Ledger, Pausable};

/// A label value as the text format wants it: backslash, double quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A metric family's `# HELP` and `# TYPE` lines (every settle metric is a gauge).
fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// The metrics as Prometheus text (format 0.0.4). `sessions`: the console sessions open now.
pub async fn render(ledger: &Ledger, sessions: usize) -> Result<String> {
    let now = ledger.now();
    let stats = ledger.read().stats().await?;
    let (groups, oldest) = ledger.read().exceptions_by_workflow().await?;
    let dispatchers = ledger.read().dispatchers().await?;
    let mut out = String::new();
    family(
        &mut out,
        "settle_exceptions",
        "Exceptions now, by workflow and state.",
    );
    for (workflow, state, n) in &groups {
        let _ = writeln!(
            out,
            "settle_exceptions{{workflow=\"{}\",state=\"{}\"}} {n}",
            label(workflow),
            state.as_str()
        );
    }
    family(
        &mut out,
        "settle_oldest_exception_seconds",
        "How long the oldest exception of each workflow has waited.",
    );
    for (workflow, since) in &oldest {
        let age = (now - *since).num_seconds().max(0);
        let _ = writeln!(
            out,
            "settle_oldest_exception_seconds{{workflow=\"{}\"}} {age}",
            label(workflow)
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
            "settle_runs_stalled{{workflow=\"{}\"}} {n}",
            label(&workflow)
        );
    }
    family(&mut out, "settle_operations", "Operations by state.");
    for (state, n) in &stats.by_state {
        let _ = writeln!(out, "settle_operations{{state=\"{}\"}} {n}", state.as_str());
    }
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
            let _ = writeln!(
                out,
                "settle_paused{{kind=\"{}\",name=\"{}\"}} 1",
                kind.noun(),
                label(name)
            );
        }
    }
    family(
        &mut out,
        "settle_dispatcher_last_seen_seconds",
        "Since each dispatcher last said it was alive.",
    );
    for (name, seen) in dispatchers {
        let _ = writeln!(
            out,
            "settle_dispatcher_last_seen_seconds{{name=\"{}\"}} {}",
            label(&name),
            (now - seen).num_seconds().max(0)
        );
    }
    family(
        &mut out,
        "settle_console_sessions",
        "Console sessions open now.",
    );
    let _ = writeln!(out, "settle_console_sessions {sessions}");
    Ok(out)
}

#[derive(Clone)]
struct Served {
    ledger: Ledger,
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
        .with_state(Served { ledger, sessions })
}

async fn metrics(State(s): State<Served>) -> Response {
    let open = s.sessions.load(std::sync::atomic::Ordering::Relaxed);
    match render(&s.ledger, open).await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        // never the database's words to a scraper: they may name hosts
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response(),
    }
}

async fn healthz(State(s): State<Served>) -> Response {
    match s.ledger.read().latest_event_id().await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response(),
    }
}
