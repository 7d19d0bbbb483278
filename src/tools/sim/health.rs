//! The simulated destination's health, for drills of an outage and a rate limit: windows of its
//! run in which it hangs, refuses connections or answers 503 (`--outage FROM..TO`,
//! `--outage-kind`), and a limit of requests a second above which it answers 429 with
//! `Retry-After: 1` (`--rate-limit N/s`). Both apply to every route but `/stats`, which a drill
//! reads throughout; `GET /health` answers 200 when neither stands in the way (a probe's URL).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::json;

use crate::tools::sim::create::answer;
use crate::tools::sim::state::{Outage, OutageKind, Sim, outage_at};

/// Before every route but `/stats`: the outage under way and the rate limit, each answering for
/// the destination when it stands in the way. A create it answers is counted among the requests
/// that arrived.
pub(super) async fn guard(State(sim): State<Arc<Sim>>, req: Request, next: Next) -> Response {
    let is_create = req.method() == Method::POST && req.uri().path() == "/tasks";
    let since = sim.started.elapsed();
    let refusing = sim
        .profile
        .outages
        .iter()
        .any(|o| o.kind == OutageKind::Refuse);
    // a probe of its health is counted apart: the outage's and the limit's counts are the
    // requests of the work
    let probe = req.uri().path() == "/health";
    if probe {
        count(&sim, "probes");
    }
    let stood = match outage_at(&sim.profile.outages, since) {
        Some(o) => Some(down(&sim, o, since, !probe).await),
        None => limited(&sim, !probe),
    };
    let mut response = match stood {
        Some(r) => {
            if is_create {
                sim.records
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .requests += 1;
            }
            r
        }
        None => next.run(req).await,
    };
    if refusing {
        // each request on a connection of its own, so that one sent in a refusing window meets
        // it (a kept connection would carry it past the closed door)
        response
            .headers_mut()
            .insert("connection", HeaderValue::from_static("close"));
    }
    response
}

/// The answer of a destination that is down, counted as such.
async fn down(sim: &Sim, o: Outage, since: Duration, counted: bool) -> Response {
    if counted {
        count(sim, "outage");
    }
    match o.kind {
        // taken and held: the client gives up first (its future is dropped with the connection);
        // a client that waits past the window and an hour more gets a 504, nothing made
        OutageKind::Hang => {
            tokio::time::sleep(o.to.saturating_sub(since) + Duration::from_secs(3600)).await;
            answer(StatusCode::GATEWAY_TIMEOUT, json!({ "error": "hung" }))
        }
        // a request that reached a refusing simulator came on a connection made before the
        // window; the connection breaks before an answer
        OutageKind::Refuse => crate::tools::sim::create::broken(),
        OutageKind::Unavailable => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": "service unavailable" }),
        ),
    }
}

/// A 429 when the rate limit stands in the way.
fn limited(sim: &Sim, counted: bool) -> Option<Response> {
    let limit = sim.limit.as_ref()?;
    let taken = limit
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take(Instant::now());
    if taken {
        return None;
    }
    if counted {
        count(sim, "limited");
    }
    let mut r = answer(
        StatusCode::TOO_MANY_REQUESTS,
        json!({ "error": "rate limit exceeded" }),
    );
    r.headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    Some(r)
}

fn count(sim: &Sim, what: &str) {
    let mut records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    *records.health.entry(what.to_string()).or_default() += 1;
}

/// `GET /health`: 200 whenever the guard lets it through.
pub(super) async fn health() -> Response {
    answer(StatusCode::OK, json!({ "ok": true }))
}

/// The simulator's listener: closed for every refusing window (connections are refused, as by a
/// stopped server), open again after it on the same address.
pub(super) struct Door {
    pub(super) listener: Option<tokio::net::TcpListener>,
    pub(super) addr: std::net::SocketAddr,
    pub(super) started: Instant,
    /// The refusing windows, from the start.
    pub(super) refusing: Vec<(Duration, Duration)>,
}

impl Door {
    /// The refusing window under way, or the time until the next one starts.
    fn window(&self) -> Result<Duration, Option<Duration>> {
        let since = self.started.elapsed();
        if let Some((_, to)) = self
            .refusing
            .iter()
            .find(|(from, to)| *from <= since && since < *to)
        {
            return Ok(*to - since);
        }
        Err(self
            .refusing
            .iter()
            .filter(|(from, _)| *from > since)
            .map(|(from, _)| *from - since)
            .min())
    }
}

impl axum::serve::Listener for Door {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.window() {
                Ok(left) => {
                    // closed: the kernel refuses connections to a port nobody listens on
                    self.listener = None;
                    tokio::time::sleep(left).await;
                }
                Err(next) => {
                    let Some(listener) = self.listener.as_ref() else {
                        match tokio::net::TcpListener::bind(self.addr).await {
                            Ok(l) => self.listener = Some(l),
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                        continue;
                    };
                    let until = next.unwrap_or(Duration::from_secs(86_400));
                    tokio::select! {
                        got = listener.accept() => {
                            if let Ok(pair) = got {
                                return pair;
                            }
                            // out of handles or the like: a moment, then again
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        _ = tokio::time::sleep(until) => {}
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
