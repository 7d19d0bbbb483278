//! `settle sim`: a task system that misbehaves on purpose, so teams can rehearse recovery.
//!
//! `POST /tasks` creates a task from a JSON or a form body (read as Stripe reads `a[b]=v`) and
//! returns its id. With an `Idempotency-Key` and deduplication on, a repeat returns the original
//! task (or `409 already exists` with `--exists-409`, as HubSpot answers; `409` while the first
//! is still being made; `422` when the same key comes with a different body). `GET /tasks?key=K`
//! looks a key up (and shows the body exactly as it arrived and as it was read), as does `POST /search` with a
//! HubSpot-like filter body; both also find a task by a top-level body value, for APIs that take
//! no idempotency key. `GET /stats` counts the tasks really created, per key (with their ids), and
//! the requests that arrived. `--require-header` answers 401 to any other request without that header. Faults come from the profile (`--fault`), the request (an `X-Sim-Fault`
//! header or `_sim_fault` in its body), or a seeded random schedule (`--fault-rate`, `--seed`).
//! An outage (`--outage FROM..TO`: it hangs, refuses connections or answers 503) and a rate limit
//! (`--rate-limit N/s`: 429 above it) make a destination's bad hour to rehearse; `GET /health` is
//! a probe's URL.
//!
//! Rooms: `state.rs` its faults, outages, rate limit, profile and tasks, `create.rs` its creates, `read.rs` its lookups
//! and stats, `health.rs` what an outage and the rate limit answer, and its door.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::routing::{get, post};
use chrono::Utc;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use crate::error::{Error, Result};
use crate::tools::sim::create::create;
use crate::tools::sim::read::{lookup, search, stats};

mod create;
mod health;
mod read;
mod state;

pub use state::{Fault, Outage, OutageKind, Profile, Task};
use state::{Records, Sim};

/// Serves until interrupted. Prints `listening on http://ADDR` first, for scripts and tests.
pub async fn run(listen: &str, state_file: Option<PathBuf>, profile: Profile) -> Result<()> {
    let (door, app) = bind(listen, state_file, profile).await?;
    crate::say!("listening on http://{}", door.addr);
    axum::serve(door, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Error::Invalid(format!("simulator stopped: {e}")))
}

/// Starts a simulator in this process on a free local port (`settle demo --live`); returns its
/// base URL. It serves until the process ends.
pub async fn spawn(profile: Profile) -> Result<String> {
    spawn_holding(profile, &[]).await
}

/// [`spawn`], already holding a task for each of these keys, as if their requests had arrived
/// earlier (the demo's CRM: the records whose answers were lost).
pub async fn spawn_holding(profile: Profile, keys: &[String]) -> Result<String> {
    let (door, app) = bind_holding("127.0.0.1:0", None, profile, keys).await?;
    let addr = door.addr;
    tokio::spawn(async move {
        let _ = axum::serve(door, app).await;
    });
    Ok(format!("http://{addr}"))
}

async fn bind(
    listen: &str,
    state_file: Option<PathBuf>,
    profile: Profile,
) -> Result<(health::Door, axum::Router)> {
    bind_holding(listen, state_file, profile, &[]).await
}

async fn bind_holding(
    listen: &str,
    state_file: Option<PathBuf>,
    profile: Profile,
    keys: &[String],
) -> Result<(health::Door, axum::Router)> {
    let mut records: Records = match &state_file {
        Some(p) if p.exists() => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", p.display())))?;
            serde_json::from_str(&text).map_err(|e| {
                Error::Invalid(format!("{} is not a simulator state: {e}", p.display()))
            })?
        }
        _ => Records::default(),
    };
    for key in keys {
        let id = format!("T-{}", records.tasks.len() + 1);
        records.tasks.push(Task {
            id,
            key: Some(key.clone()),
            body: json!({}),
            received: String::new(),
            headers: Default::default(),
            created_at: Utc::now(),
        });
    }
    let started = std::time::Instant::now();
    let refusing = profile
        .outages
        .iter()
        .filter(|o| o.kind == OutageKind::Refuse)
        .map(|o| (o.from, o.to))
        .collect();
    let sim = Arc::new(Sim {
        rng: Mutex::new(StdRng::seed_from_u64(profile.seed)),
        limit: profile.rate_limit.map(|r| Mutex::new(state::Limit::new(r))),
        profile,
        records: Mutex::new(records),
        running: Mutex::new(Vec::new()),
        state_file,
        seen: Mutex::new(std::collections::HashSet::new()),
        started,
    });
    let guarded = axum::Router::new()
        .route("/tasks", post(create).get(lookup))
        .route("/search", post(search))
        .route("/health", get(health::health))
        .layer(axum::middleware::from_fn_with_state(
            sim.clone(),
            health::guard,
        ));
    let app = guarded.route("/stats", get(stats)).with_state(sim);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::Invalid(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let door = health::Door {
        listener: Some(listener),
        addr,
        started,
        refusing,
    };
    Ok((door, app))
}
