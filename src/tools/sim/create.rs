//! The simulated destination's create: faults, deduplication by key, and the late answer.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::fingerprint::canonical_json;
use crate::tools::sim::state::{Fault, Profile, Records, Sim, Task};

pub(super) fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

/// A response whose body fails after the status line: the client sees the connection break
/// before it has the answer.
pub(super) fn broken() -> Response {
    Response::builder()
        .status(StatusCode::CREATED)
        .body(Body::from_stream(ErrorOnce))
        .unwrap_or_default()
}

/// A body stream that fails at once.
pub(super) struct ErrorOnce;

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
pub(super) fn unauthorized(sim: &Sim, headers: &HeaderMap) -> Option<Response> {
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
pub(super) fn read_body(headers: &HeaderMap, received: &str) -> std::result::Result<Value, String> {
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return serde_json::from_str(received).map_err(|e| format!("the body is not JSON: {e}"));
    }
    crate::domain::form::read_form(received)
}

pub(super) async fn create(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    let latency = sim.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
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
    if let Some(f) = fault {
        let mut records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
        *records.faults.entry(f.as_str().to_string()).or_default() += 1;
    }
    if let Some(r) = early_answer(&sim, fault, key.as_deref(), &received, &headers) {
        return r;
    }
    let now = Utc::now();
    let task = {
        let mut records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = &key
            && let Some(r) = replayed(&sim, &records, k, &body, now)
        {
            return r;
        }
        let task = Task {
            id: format!("T-{}", records.tasks.len() + 1),
            key: key.clone(),
            body,
            received,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                .collect(),
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

/// The answer a fault gives before any work is done (or a rejection of new work), if any.
pub(super) fn early_answer(
    sim: &Sim,
    fault: Option<Fault>,
    key: Option<&str>,
    received: &str,
    headers: &HeaderMap,
) -> Option<Response> {
    match fault {
        Some(Fault::Lost) => Some(broken()),
        Some(Fault::RejectNul) => {
            Some((StatusCode::UNPROCESSABLE_ENTITY, "bad\0request").into_response())
        }
        Some(Fault::Echo) => Some(
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "invalid request: {received} (headers: {})",
                    headers
                        .iter()
                        .map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v.as_bytes())))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
                .into_response(),
        ),
        Some(Fault::Unavailable) => {
            let mut r = answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({ "error": "try again later" }),
            );
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
            Some(r)
        }
        // Validation runs on new work; a deduplicated replay gets the stored answer instead.
        Some(Fault::Reject) if !(sim.profile.dedupe && sim.has_task(key)) => Some(answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "error": "rejected: due date is in the past" }),
        )),
        _ => None,
    }
}

/// Where the destination deduplicates: the answer to a request whose key it knows (still
/// running, reused with other contents, or a replay of the stored task), if any.
pub(super) fn replayed(
    sim: &Sim,
    records: &Records,
    k: &str,
    body: &Value,
    now: DateTime<Utc>,
) -> Option<Response> {
    if !sim.profile.dedupe {
        return None;
    }
    if sim
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|r| r == k)
    {
        return Some(answer(
            StatusCode::CONFLICT,
            json!({ "error": "the first request with this key is still running" }),
        ));
    }
    let since = crate::domain::time::before(now, sim.profile.key_retention);
    if let Some(t) = records
        .tasks
        .iter()
        .find(|t| t.key.as_deref() == Some(k) && t.created_at > since)
    {
        if canonical_json(&t.body) != canonical_json(body) {
            return Some(answer(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({ "error": "idempotency key reused with a different body" }),
            ));
        }
        if sim.profile.exists_409 {
            return Some(answer(
                StatusCode::CONFLICT,
                json!({
                    "status": "error",
                    "category": "CONFLICT",
                    "message": format!("Contact already exists. Existing ID: {}", t.id),
                }),
            ));
        }
        return Some(answer(
            StatusCode::OK,
            json!({ "id": t.id, "duplicate": true }),
        ));
    }
    None
}

/// The answer to a create that made a task, in the profile's status.
pub(super) fn created(profile: &Profile, id: &str) -> Response {
    match profile.answer {
        204 => StatusCode::NO_CONTENT.into_response(),
        200 => answer(StatusCode::OK, json!({ "id": id })),
        _ => answer(StatusCode::CREATED, json!({ "id": id })),
    }
}

/// Marks a key as still being made for as long as it lives.
pub(super) struct Running(pub(super) Arc<Sim>, String);

impl Running {
    pub(super) fn new(sim: Arc<Sim>, key: String) -> Running {
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
