//! `settle serve --http` (manual: The HTTP API): the HTTP API by which automations on other machines and in
//! automation tools write to the ledger without its database credentials.
//!
//! Design:
//! - One axum router. A middleware gives every answer an `X-Request-Id` (the client's, when it
//!   sent a sane one), checks the bearer token against `[automations]` (by SHA-256, in constant
//!   time), takes one request from the token's bucket (429 with `Retry-After` when empty), and
//!   writes one log line per request: its id, method, route, key, automation and status, never
//!   the token.
//! - The caller's ledger is [`Ledger::for_automation`]: role `automation`, its workflows, its
//!   token's fingerprint in every event. The ledger enforces all of it, as it does the staff's
//!   roles; the API only says who is calling.
//! - Writes go through one [`Writer`] (the ledger's group commit); reads straight to the ledger.
//! - `[automations]` is re-read on SIGHUP and when the config file changes; a file that does not
//!   parse leaves the last good list in force.
//! - TLS (rustls) when `--tls-cert` and `--tls-key` are given; plain HTTP otherwise, with a line
//!   at start saying it belongs on localhost or behind a TLS proxy.
//!
//! Rooms: `state.rs` what every handler is handed (`Api`, `Caller`), `auth.rs` tokens and their
//! shared rate, `body.rs` bodies read field by field, `answer.rs` the error object, `writes.rs` the
//! protocol's writes through the ledger's `Writer`, `reads.rs` reads and the staff actions refused
//! here, `tls.rs` HTTPS; `gateway/` the gateway.

mod answer;
pub mod auth;
mod body;
mod gateway;
mod reads;
mod state;
mod tls;
mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, patch, post, put};

use crate::config::Config;
use crate::counters;
use crate::error::{Error, Result};
use crate::ledger::{Ledger, Writer};
use answer::Failure;
use auth::{Automation, Automations};
pub use reads::OPENAPI;
pub use state::{Api, Caller};

pub struct Options {
    pub listen: String,
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The config file to re-read for `[automations]`.
    pub config_path: Option<PathBuf>,
    /// Lanes of the group writer (see `ledger::Writer`).
    pub lanes: usize,
    /// The door of its listener (manual: Limits).
    pub door: Arc<crate::listener::Door>,
}

/// The lanes of the group writer: one. SQLite writes one transaction at a time whatever the
/// lanes, and on PostgreSQL the commits, serialized by the events' NOTIFY anyway, are what more
/// lanes multiply (`cargo bench --bench api` measures it).
pub fn default_lanes(_backend: crate::store::Backend) -> usize {
    1
}

/// The router of the API on `ledger` (a test or a bench may serve it on a listener of its own).
pub fn router(ledger: Ledger, lanes: usize) -> (axum::Router, Api) {
    let api = Api {
        automations: Arc::new(RwLock::new(Arc::new(Automations::from_config(
            ledger.config(),
        )))),
        max_body: ledger.config().max_body,
        writer: Writer::new(&ledger, lanes),
        rates: Arc::default(),
        gateway: Arc::new(gateway::Gateway::new(&ledger)),
        ledger,
    };
    let mut router = axum::Router::new();
    for (path, methods) in ROUTES {
        let mut endpoint = MethodRouter::new();
        for method in methods {
            endpoint = endpoint.merge(handler(method, path));
        }
        router = router.route(path, endpoint);
    }
    let router = router
        .fallback(reads::not_found)
        .method_not_allowed_fallback(|| async {
            Failure::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "not_found",
                "this route does not take that method: GET /openapi.json lists them",
            )
        })
        .layer(axum::middleware::from_fn_with_state(api.clone(), around))
        .layer(axum::extract::DefaultBodyLimit::max(api.max_body))
        .with_state(api.clone());
    (router, api)
}

/// Every route the API answers, with its methods: the router is made from this table, and
/// `assets/openapi.json` describes exactly these (a test holds them together).
pub const ROUTES: [(&str, &[&str]); 10] = [
    ("/v1/operations", &["GET", "POST"]),
    ("/v1/operations/{key}", &["GET"]),
    ("/v1/operations/{key}/start", &["POST"]),
    ("/v1/operations/{key}/attempts", &["POST"]),
    ("/v1/operations/{key}/{action}", &["POST"]),
    ("/v1/runs/{run}", &["GET"]),
    ("/v1/ingest", &["POST"]),
    ("/openapi.json", &["GET"]),
    ("/healthz", &["GET"]),
    (
        "/gateway/{destination}/{action}",
        &["POST", "PUT", "PATCH", "DELETE"],
    ),
];

/// The handler of one route and method of [`ROUTES`].
fn handler(method: &str, path: &str) -> MethodRouter<Api> {
    match (method, path) {
        ("POST", "/v1/operations") => post(writes::record),
        ("GET", "/v1/operations") => get(reads::list),
        ("GET", "/v1/operations/{key}") => get(reads::show),
        ("POST", "/v1/operations/{key}/start") => post(writes::start),
        ("POST", "/v1/operations/{key}/attempts") => post(writes::attempt),
        ("POST", "/v1/operations/{key}/{action}") => post(reads::staff),
        ("GET", "/v1/runs/{run}") => get(reads::run),
        ("POST", "/v1/ingest") => post(writes::ingest),
        ("GET", "/openapi.json") => get(reads::openapi),
        ("GET", "/healthz") => get(reads::healthz),
        ("POST", "/gateway/{destination}/{action}") => post(gateway::send),
        ("PUT", "/gateway/{destination}/{action}") => put(gateway::send),
        ("PATCH", "/gateway/{destination}/{action}") => patch(gateway::send),
        ("DELETE", "/gateway/{destination}/{action}") => delete(gateway::send),
        _ => unreachable!("every route of ROUTES has its handler: {method} {path}"),
    }
}

/// A request id as a client may send one: up to 64 of `[A-Za-z0-9._-]`.
fn sane_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
    .then(|| s.to_string())
}

fn new_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Who a request comes from: `Ok(None)` for the open routes, the automation otherwise.
fn authenticate(api: &Api, req: &Request) -> std::result::Result<Option<Automation>, Failure> {
    let path = req.uri().path();
    if path == "/healthz" || path == "/openapi.json" {
        return Ok(None);
    }
    let unauthorized = |why: &str| Failure::new(StatusCode::UNAUTHORIZED, "unauthorized", why);
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return Err(unauthorized(
            "a bearer token is required (Authorization: Bearer TOKEN)",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(auth::bearer)
        .ok_or_else(|| unauthorized("the Authorization header must be `Bearer TOKEN`"))?;
    let all = api
        .automations
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let who = all
        .find(token)
        .cloned()
        .ok_or_else(|| unauthorized("this token is not one of [automations]"))?;
    Ok(Some(who))
}

/// The caller's rate: one budget across every settle process on the ledger
/// (manual: Running settle for a team).
async fn within_rate(api: &Api, who: &Automation) -> std::result::Result<(), Failure> {
    match api.rates.take_shared(&api.ledger, who).await {
        Ok(()) => Ok(()),
        Err(wait) => Err(Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "{} is over its rate ({}/s, burst {}): try again after the Retry-After seconds",
                who.name, who.rate, who.burst
            ),
        )
        .retry_after(wait.as_secs_f64().ceil().max(1.0) as u64)),
    }
}

/// Every request: its id, its caller, its log line.
async fn around(State(api): State<Api>, mut req: Request, next: Next) -> Response {
    let began = Instant::now();
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(sane_id)
        .unwrap_or_else(new_id);
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("(no route)".to_string(), |m| m.as_str().to_string());
    // a key or run named in the path (the gateway's: its Idempotency-Key), logged only when it
    // is a valid name (never customer data)
    let path = req.uri().path();
    let named = if path.starts_with("/gateway/") {
        req.headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
    } else {
        path.split('/').nth(3)
    }
    .filter(|k| crate::domain::validate_key(k).is_ok())
    .map(str::to_string);
    let who = match authenticate(&api, &req) {
        Ok(Some(w)) => within_rate(&api, &w).await.map(|()| Some(w)),
        other => other,
    };
    let automation = who
        .as_ref()
        .ok()
        .and_then(|w| w.as_ref())
        .map(|w| w.name.clone());
    let mut response = match who {
        Err(f) => f.into_response(),
        Ok(who) => {
            if let Some(w) = who {
                let ledger = api.ledger.for_automation(w.identity(), w.workflows.clone());
                req.extensions_mut().insert(Caller {
                    name: w.name.clone(),
                    ledger,
                    workflows: w.workflows.clone(),
                });
            }
            next.run(req).await
        }
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    let code = response.status().as_u16().to_string();
    counters::inc(counters::HTTP_REQUESTS, &[&route, &code]);
    counters::observe(counters::HTTP_SECONDS, &[&route], began.elapsed());
    tracing::info!(
        request_id = %id,
        method = %method,
        route = %route,
        key = named.as_deref().unwrap_or("-"),
        automation = automation.as_deref().unwrap_or("-"),
        status = response.status().as_u16(),
        ms = format_args!("{:.2}", began.elapsed().as_secs_f64() * 1000.0),
        "http"
    );
    response
}

/// Runs the API until SIGTERM or SIGINT. Prints where it listens first.
pub async fn run(ledger: Ledger, options: Options) -> Result<()> {
    let socket = tokio::net::TcpListener::bind(&options.listen)
        .await
        .map_err(|e| Error::Invalid(format!("--http {}: {e}", options.listen)))?;
    let addr: SocketAddr = socket
        .local_addr()
        .map_err(|e| Error::Invalid(format!("--http {}: {e}", options.listen)))?;
    let (app, api) = router(ledger, options.lanes);
    let n = api.automations.read().map(|a| a.len()).unwrap_or(0);
    if let Some(path) = options.config_path.clone() {
        tokio::spawn(reload(api.clone(), path));
    }
    let acceptor = match &options.tls {
        Some((cert, key)) => {
            let acceptor = tls::acceptor(cert, key)?;
            crate::say!("settle serve: HTTP API on https://{addr}/ ({n} automation(s))");
            Some(acceptor)
        }
        None => {
            crate::say!("settle serve: HTTP API on http://{addr}/ ({n} automation(s))");
            crate::say!(
                "settle serve: plain HTTP: keep it on localhost or behind a TLS proxy, or give --tls-cert and --tls-key"
            );
            None
        }
    };
    let limits = &api.ledger.config().limits;
    let deadlines = crate::listener::http::Deadlines {
        headers: limits.header_timeout,
        body: limits.body_timeout,
    };
    crate::listener::http::serve(
        socket,
        options.door.clone(),
        acceptor,
        app,
        deadlines,
        crate::signals::terminated(),
    )
    .await;
    tracing::info!(%addr, "http: listening ended");
    // the outcomes the gateway answered before their commit go in before settle stops
    if !api.writer.drain(std::time::Duration::from_secs(10)).await {
        tracing::warn!(
            "http: writes still queued at the stop: their operations stay in flight until their timeout"
        );
    }
    Ok(())
}

/// Re-reads `[automations]` on SIGHUP and when the file changes (checked every 500 ms).
async fn reload(api: Api, path: PathBuf) {
    let mut changes = crate::signals::config_changes(path.clone());
    while let Some(why) = changes.recv().await {
        match Config::load(&path) {
            Ok(c) => {
                let all = Automations::from_config(&c);
                let n = all.len();
                *api.automations.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(all);
                tracing::info!(why, automations = n, "http: automations re-read");
                crate::tell!("settle serve: automations re-read ({why}): {n}");
            }
            Err(e) => {
                let text = crate::domain::escape_text(&e.to_string()).into_owned();
                tracing::warn!(why, error = %text, "http: automations not re-read");
                crate::tell!("settle serve: {text}; the last good automations stay");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_describes_every_route_and_no_other() {
        let doc: serde_json::Value =
            serde_json::from_str(OPENAPI).expect("assets/openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().expect("paths");
        let mut described: Vec<(String, String)> = paths
            .iter()
            .flat_map(|(p, ops)| {
                ops.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (p.clone(), m.to_uppercase()))
            })
            .collect();
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .flat_map(|(p, ms)| ms.iter().map(move |m| (p.to_string(), m.to_string())))
            .collect();
        described.sort();
        served.sort();
        assert_eq!(described, served);
        // and the router is made of them: building it finds a handler for each
        crate::ledger::with_scratch_ledger(|ledger| async move {
            let _ = router(ledger, 1);
        });
    }
}
