//! `settle sim`: a task system that misbehaves on purpose, so teams can rehearse recovery.
//!
//! `POST /tasks` creates a task from a JSON or a form body (read as Stripe reads `a[b]=v`) and
//! returns its id. With an `Idempotency-Key` and deduplication on, a repeat returns the original
//! task (or `409 already exists` with `--exists-409`, as HubSpot answers; `409` while the first
//! is still being made; `422` when the same key comes with a different body). `GET /tasks?key=K`
//! looks a key up (and shows the body exactly as it arrived and as it was read), as does `POST /search` with a
//! HubSpot-like filter body; both also find a task by a top-level body value, for APIs that take
//! no idempotency key. `GET /stats` counts the tasks really created, per key, and the requests
//! that arrived. `--require-header` answers 401 to any other request without that header. Faults come from the profile (`--fault`), the request (an `X-Sim-Fault`
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
    /// Every request but `/stats` needs this header (lower-case name, value), else 401.
    pub require_header: Option<(String, String)>,
    /// The status of a successful create: 201 (default), 200, or 204 with no body.
    pub answer: u16,
    /// A repeated key answers `409 already exists` (HubSpot) instead of the original task.
    pub exists_409: bool,
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
            require_header: None,
            answer: 201,
            exists_409: false,
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

/// A 401 when the profile requires a header this request lacks.
fn unauthorized(sim: &Sim, headers: &HeaderMap) -> Option<Response> {
    let (name, value) = sim.profile.require_header.as_ref()?;
    let sent = headers.get(name.as_str()).and_then(|v| v.to_str().ok());
    (sent != Some(value.as_str())).then(|| {
        answer(
            StatusCode::UNAUTHORIZED,
            json!({ "error": "authentication required: the credentials are missing or wrong" }),
        )
    })
}

/// A request body as the destination reads it: JSON, or a form (nested `a[b][0]=v` keys become
/// objects, values stay text, as Stripe reads them).
fn read_body(headers: &HeaderMap, received: &str) -> std::result::Result<Value, String> {
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return serde_json::from_str(received).map_err(|e| format!("the body is not JSON: {e}"));
    }
    let mut root = Value::Object(Default::default());
    for pair in received.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (form_decode(k)?, form_decode(v)?);
        let (head, rest) = k.split_once('[').unwrap_or((&k, ""));
        let mut path = vec![head.to_string()];
        path.extend(
            rest.split('[')
                .filter(|p| !p.is_empty())
                .map(|p| p.trim_end_matches(']').to_string()),
        );
        let mut at = &mut root;
        for (i, part) in path.iter().enumerate() {
            let Value::Object(map) = at else {
                return Err(format!("form key {k} nests under a value"));
            };
            at = map.entry(part.clone()).or_insert_with(|| {
                if i + 1 == path.len() {
                    Value::Null
                } else {
                    Value::Object(Default::default())
                }
            });
        }
        *at = Value::String(v);
    }
    Ok(root)
}

fn form_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| "bad percent-encoding in the form".to_string())?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "the form is not UTF-8".to_string())
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
    if let Some(refused) = unauthorized(&sim, &headers) {
        return refused;
    }
    let received = String::from_utf8_lossy(&raw).into_owned();
    let body: Value = match read_body(&headers, &received) {
        Ok(v) => v,
        Err(e) => return answer(StatusCode::BAD_REQUEST, json!({ "error": e })),
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
                if sim.profile.exists_409 {
                    return answer(
                        StatusCode::CONFLICT,
                        json!({
                            "status": "error",
                            "category": "CONFLICT",
                            "message": format!("Contact already exists. Existing ID: {}", t.id),
                        }),
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
            created(&sim.profile, &task.id)
        }
        _ => created(&sim.profile, &task.id),
    }
}

/// The answer to a create that made a task, in the profile's status.
fn created(profile: &Profile, id: &str) -> Response {
    match profile.answer {
        204 => StatusCode::NO_CONTENT.into_response(),
        200 => answer(StatusCode::OK, json!({ "id": id })),
        _ => answer(StatusCode::CREATED, json!({ "id": id })),
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

/// The task made for a key: by its idempotency key, or (for APIs that take none) by a top-level
/// text value of its body.
fn find<'a>(tasks: &'a [Task], key: &str) -> Vec<&'a Task> {
    tasks
        .iter()
        .filter(|t| {
            t.key.as_deref() == Some(key)
                || t.body
                    .as_object()
                    .is_some_and(|m| m.values().any(|v| v.as_str() == Some(key)))
        })
        .collect()
}

async fn lookup(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    Query(q): Query<KeyQuery>,
) -> Response {
    if let Some(refused) = unauthorized(&sim, &headers) {
        return refused;
    }
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    match find(&records.tasks, &q.key).first() {
        Some(t) => answer(
            StatusCode::OK,
            json!({ "id": t.id, "key": q.key, "received": t.received, "body": t.body }),
        ),
        None => answer(
            StatusCode::NOT_FOUND,
            json!({ "error": "no task with that key" }),
        ),
    }
}

/// `POST /search` as HubSpot's search API: `{"filterGroups":[{"filters":[{"propertyName":..,
/// "operator":"EQ","value":K}]}]}` answers `{"total":N,"results":[{"id":..,"properties":{..}}]}`
/// (an empty list when nothing matches: never a 404).
async fn search(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    Json(query): Json<Value>,
) -> Response {
    if let Some(refused) = unauthorized(&sim, &headers) {
        return refused;
    }
    let values: Vec<&str> = query
        .pointer("/filterGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("filters")?.as_array())
        .flatten()
        .filter_map(|f| f.get("value")?.as_str())
        .collect();
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    let mut results: Vec<Value> = values
        .iter()
        .flat_map(|v| find(&records.tasks, v))
        .map(|t| json!({ "id": t.id, "properties": t.body }))
        .collect();
    results.dedup();
    answer(
        StatusCode::OK,
        json!({ "total": results.len(), "results": results }),
    )
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
    spawn_holding(profile, &[]).await
}

/// [`spawn`], already holding a task for each of these keys, as if their requests had arrived
/// earlier (the demo's CRM: the records whose answers were lost).
pub async fn spawn_holding(profile: Profile, keys: &[String]) -> Result<String> {
    let (listener, app) = bind_holding("127.0.0.1:0", None, profile, keys).await?;
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
    bind_holding(listen, state_file, profile, &[]).await
}

async fn bind_holding(
    listen: &str,
    state_file: Option<PathBuf>,
    profile: Profile,
    keys: &[String],
) -> Result<(tokio::net::TcpListener, axum::Router)> {
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
            created_at: Utc::now(),
        });
    }
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
        .route("/search", post(search))
        .route("/stats", get(stats))
        .with_state(sim);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::Invalid(format!("cannot listen on {listen}: {e}")))?;
    Ok((listener, app))
}
