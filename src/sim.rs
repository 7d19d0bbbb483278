//! `settle sim`: a task system that misbehaves on purpose, so teams can rehearse recovery.
//!
//! `POST /tasks` creates a task and returns its id. With an `Idempotency-Key` and deduplication
//! on, a repeat returns the original task (`409` while the first is still being made, `422` when
//! the same key comes with a different body). `GET /tasks?key=K` looks a key up (and shows the
//! body exactly as it arrived); `GET /stats` counts the tasks really created, per key, and the
//! requests that arrived. Faults come from the profile (`--fault`), the request (an `X-Sim-Fault`
//! header or `_sim_fault` in its body), or a seeded random schedule (`--fault-rate`, `--seed`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::fingerprint::canonical_json;
use crate::error::{Error, Result};

/// What can go wrong, on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 422: a business rejection; nothing created.
    Reject,
    /// The task is created, then the connection breaks before the answer.
    DropAfterCommit,
    /// The task is created, then the answer comes after the client has given up.
    LateAfterCommit,
    /// 503 with `Retry-After` before anything is created.
    Unavailable,
    /// The task is created, then a 500.
    ErrorAfterCommit,
    /// 422 whose plain-text body holds a NUL byte (`bad\0request`); nothing created.
    RejectNul,
    /// 422 whose body quotes the request it got, secrets and all; nothing created.
    Echo,
}

impl Fault {
    /// The faults a random schedule draws from (`--fault-rate`).
    pub const ALL: [Fault; 5] = [
        Fault::Reject,
        Fault::DropAfterCommit,
        Fault::LateAfterCommit,
        Fault::Unavailable,
        Fault::ErrorAfterCommit,
    ];

    /// Every fault that can be asked for by name.
    pub const NAMED: [Fault; 7] = [
        Fault::Reject,
        Fault::DropAfterCommit,
        Fault::LateAfterCommit,
        Fault::Unavailable,
        Fault::ErrorAfterCommit,
        Fault::RejectNul,
        Fault::Echo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Reject => "reject",
            Fault::DropAfterCommit => "drop",
            Fault::LateAfterCommit => "late",
            Fault::Unavailable => "unavailable",
            Fault::ErrorAfterCommit => "error",
            Fault::RejectNul => "reject-nul",
            Fault::Echo => "echo",
        }
    }

    pub fn parse(text: &str) -> std::result::Result<Fault, String> {
        Fault::NAMED
            .into_iter()
            .find(|f| f.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown fault '{}': use reject, drop, late, unavailable, error, reject-nul or echo",
                    crate::domain::escape_text(text)
                )
            })
    }
}

/// How this simulated destination behaves.
#[derive(Clone, Debug)]
pub struct Profile {
    pub dedupe: bool,
    pub key_retention: Duration,
    /// Applied to every create (a request header overrides it).
    pub fault: Option<Fault>,
    /// Chance of a random fault per create, drawn from a schedule seeded by `seed`.
    pub fault_rate: f64,
    pub seed: u64,
    /// How long a `late` answer waits.
    pub late: Duration,
    /// The profile's fault hits only the first request of each key (a drill's lost response).
    pub fault_first_only: bool,
    /// How long every create takes (a real destination is not instant).
    pub latency: Duration,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            dedupe: true,
            key_retention: Duration::from_secs(86_400),
            fault: None,
            fault_rate: 0.0,
            seed: 1,
            late: Duration::from_secs(10),
            fault_first_only: false,
            latency: Duration::ZERO,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Task {
    pub id: String,
    pub key: Option<String>,
    pub body: Value,
    /// The request's body exactly as it arrived.
    #[serde(default)]
    pub received: String,
    pub created_at: DateTime<Utc>,
}

/// The business records: what a drill counts.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Records {
    tasks: Vec<Task>,
    /// Every create request that arrived, whatever came of it.
    #[serde(default)]
    requests: u64,
}

struct Sim {
    profile: Profile,
    records: Mutex<Records>,
    /// Keys whose first request is still being made.
    running: Mutex<Vec<String>>,
    rng: Mutex<StdRng>,
    state_file: Option<PathBuf>,
    /// Keys that have been asked for at least once (for `fault_first_only`).
    seen: Mutex<std::collections::HashSet<String>>,
}

impl Sim {
    fn persist(&self, records: &Records) {
        let Some(path) = &self.state_file else { return };
        let tmp = path.with_extension("tmp");
        if let Ok(text) = serde_json::to_string(records)
            && std::fs::write(&tmp, text).is_ok()
        {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    fn has_task(&self, key: Option<&str>) -> bool {
        let Some(k) = key else { return false };
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records.tasks.iter().any(|t| t.key.as_deref() == Some(k))
    }

    fn fault_for(
        &self,
        headers: &HeaderMap,
        body: &Value,
        key: Option<&str>,
    ) -> std::result::Result<Option<Fault>, String> {
        // asked for by the request: an `X-Sim-Fault` header, or `_sim_fault` in the body (what a
        // dispatcher sends is the payload, so a drill can pick each operation's fault)
        let asked = match headers.get("x-sim-fault") {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| "bad X-Sim-Fault header".to_string())?,
            ),
            None => body.get("_sim_fault").and_then(Value::as_str),
        };
        if let Some(text) = asked {
            return if text == "none" {
                Ok(None)
            } else {
                Fault::parse(text).map(Some)
            };
        }
        if let Some(f) = self.profile.fault {
            if self.profile.fault_first_only {
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                let first = key.is_none_or(|k| seen.insert(k.to_string()));
                return Ok(first.then_some(f));
            }
            return Ok(Some(f));
        }
        if self.profile.fault_rate > 0.0 {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            if rng.random_bool(self.profile.fault_rate.clamp(0.0, 1.0)) {
                return Ok(Some(Fault::ALL[rng.random_range(0..Fault::ALL.len())]));
            }
        }
        Ok(None)
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

/// A response whose body fails after the status line: the client sees the connection break
/// before it has the answer.
fn broken() -> Response {
    Response::builder()
        .status(StatusCode::CREATED)
        .body(Body::from_stream(ErrorOnce))
        .unwrap_or_default()
}

/// A body stream that fails at once.
struct ErrorOnce;

impl futures_core::Stream for ErrorOnce {
    type Item = std::result::Result<axum::body::Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "dropped on purpose",
        ))))
    }
}

async fn create(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    if !sim.profile.latency.is_zero() {
        tokio::time::sleep(sim.profile.latency).await;
    }
    sim.records
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .requests += 1;
    let received = String::from_utf8_lossy(&raw).into_owned();
    let body: Value = match serde_json::from_str(&received) {
        Ok(v) => v,
        Err(e) => {
            return answer(
                StatusCode::BAD_REQUEST,
                json!({ "error": format!("the body is not JSON: {e}") }),
            );
        }
    };
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let fault = match sim.fault_for(&headers, &body, key.as_deref()) {
        Ok(f) => f,
        Err(e) => return answer(StatusCode::BAD_REQUEST, json!({ "error": e })),
    };
    match fault {
        Some(Fault::RejectNul) => {
            return (StatusCode::UNPROCESSABLE_ENTITY, "bad\0request").into_response();
        }
        Some(Fault::Echo) => {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("invalid request: {received}"),
            )
                .into_response();
        }
        Some(Fault::Unavailable) => {
            let mut r = answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({ "error": "try again later" }),
            );
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
            return r;
        }
        // Validation runs on new work; a deduplicated replay gets the stored answer instead.
        Some(Fault::Reject) if !(sim.profile.dedupe && sim.has_task(key.as_deref())) => {
            return answer(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({ "error": "rejected: due date is in the past" }),
            );
        }
        _ => {}
    }
    let now = Utc::now();
    let task = {
        let mut records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
        if sim.profile.dedupe
            && let Some(k) = &key
        {
            if sim
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(k)
            {
                return answer(
                    StatusCode::CONFLICT,
                    json!({ "error": "the first request with this key is still running" }),
                );
            }
            let since = crate::domain::time::before(now, sim.profile.key_retention);
            if let Some(t) = records
                .tasks
                .iter()
                .find(|t| t.key.as_ref() == Some(k) && t.created_at > since)
            {
                if canonical_json(&t.body) != canonical_json(&body) {
                    return answer(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        json!({ "error": "idempotency key reused with a different body" }),
                    );
                }
                return answer(StatusCode::OK, json!({ "id": t.id, "duplicate": true }));
            }
        }
        let task = Task {
            id: format!("T-{}", records.tasks.len() + 1),
            key: key.clone(),
            body,
            received,
            created_at: now,
        };
        records.tasks.push(task.clone());
        sim.persist(&records);
        task
    };
    match fault {
        Some(Fault::DropAfterCommit) => broken(),
        Some(Fault::ErrorAfterCommit) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": "internal error" }),
        ),
        Some(Fault::LateAfterCommit) => {
            // The task is "still being made" until the late answer goes out, whether or not the
            // client is still there to read it (a server does not know it left).
            if let Some(k) = key.clone() {
                let running = Running::new(sim.clone(), k);
                let late = sim.profile.late;
                tokio::spawn(async move {
                    tokio::time::sleep(late).await;
                    drop(running);
                });
            }
            tokio::time::sleep(sim.profile.late).await;
            answer(StatusCode::CREATED, json!({ "id": task.id }))
        }
        _ => answer(StatusCode::CREATED, json!({ "id": task.id })),
    }
}

/// Marks a key as still being made for as long as it lives.
struct Running(Arc<Sim>, String);

impl Running {
    fn new(sim: Arc<Sim>, key: String) -> Running {
        sim.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(key.clone());
        Running(sim, key)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k| *k != self.1);
    }
}

#[derive(Deserialize)]
struct KeyQuery {
    key: String,
}

async fn lookup(State(sim): State<Arc<Sim>>, Query(q): Query<KeyQuery>) -> Response {
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    match records
        .tasks
        .iter()
        .find(|t| t.key.as_deref() == Some(q.key.as_str()))
    {
        Some(t) => answer(
            StatusCode::OK,
            json!({ "id": t.id, "key": q.key, "received": t.received }),
        ),
        None => answer(
            StatusCode::NOT_FOUND,
            json!({ "error": "no task with that key" }),
        ),
    }
}

async fn stats(State(sim): State<Arc<Sim>>) -> Response {
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    for t in &records.tasks {
        *by_key.entry(t.key.clone().unwrap_or_default()).or_default() += 1;
    }
    answer(
        StatusCode::OK,
        json!({ "tasks": records.tasks.len(), "by_key": by_key, "requests": records.requests }),
    )
}

/// Serves until interrupted. Prints `listening on http://ADDR` first, for scripts and tests.
pub async fn run(listen: &str, state_file: Option<PathBuf>, profile: Profile) -> Result<()> {
    let (listener, app) = bind(listen, state_file, profile).await?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Invalid(e.to_string()))?;
    crate::say!("listening on http://{addr}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Error::Invalid(format!("simulator stopped: {e}")))
}

/// Starts a simulator in this process on a free local port (`settle demo --live`); returns its
/// base URL. It serves until the process ends.
pub async fn spawn(profile: Profile) -> Result<String> {
    let (listener, app) = bind("127.0.0.1:0", None, profile).await?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Invalid(e.to_string()))?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

async fn bind(
    listen: &str,
    state_file: Option<PathBuf>,
    profile: Profile,
) -> Result<(tokio::net::TcpListener, axum::Router)> {
    let records = match &state_file {
        Some(p) if p.exists() => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", p.display())))?;
            serde_json::from_str(&text).map_err(|e| {
                Error::Invalid(format!("{} is not a simulator state: {e}", p.display()))
            })?
        }
        _ => Records::default(),
    };
    let sim = Arc::new(Sim {
        rng: Mutex::new(StdRng::seed_from_u64(profile.seed)),
        profile,
        records: Mutex::new(records),
        running: Mutex::new(Vec::new()),
        state_file,
        seen: Mutex::new(std::collections::HashSet::new()),
    });
    let app = axum::Router::new()
        .route("/tasks", post(create).get(lookup))
        .route("/stats", get(stats))
        .with_state(sim);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::Invalid(format!("cannot listen on {listen}: {e}")))?;
    Ok((listener, app))
}
