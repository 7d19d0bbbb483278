//! The gateway (manual: The gateway): `POST|PUT|PATCH|DELETE /gateway/{destination}/{action}`, where an
//! automation tool that retries blindly sends its request with an `Idempotency-Key`, and settle
//! records it, sends it once, keeps the outcome and answers every repeat from the ledger.
//!
//! Design:
//! - One request is the protocol of the manual's protocol in one call: **record** the intent (the body is the
//!   payload; a changed body under the key is a conflict, never sent), **start** an attempt by
//!   the same compare-and-set a dispatcher's round uses (so the gateway and a dispatcher never
//!   both send one operation), **send** it exactly as the dispatcher does
//!   ([`crate::dispatch::attempt`]: the destination's url, method, body and headers, secrets
//!   from settle's environment; nothing of the caller's own headers travels), and record the
//!   **outcome** (with its lookup, or the pause an `auth` answer asks for, as a round records
//!   them). Record, start and outcome go through the API's group writer.
//! - A request whose start is refused is answered from the operation as the ledger holds it
//!   ([`replay`]): the stored reference after a success, 409 while in flight or after an unknown
//!   outcome, the stored rejection, 503 before the next attempt is due or while paused.
//! - A `failed` operation is confirmed not done: its caller's repeat asks for it again, so it is
//!   made `pending` ([`Ledger::resend`]) and sent, unless a person holds it.
//! - The destinations are resolved once, when the router is made; one whose `${NAME}` is not
//!   set answers 503 naming the variable, and the rest of the API serves on.
//!
//! Rooms: `destinations.rs` the destinations it sends to, resolved once; `request.rs` the request
//! read as the ledger records it; `sent.rs` the answers to a request that was sent; `replay.rs`
//! every answer to a request not sent, from the ledger's state.

mod destinations;
mod replay;
mod request;
mod sent;

pub use destinations::Gateway;
use request::intent_of;
use sent::{ORIGIN, Shown, first_answer, unrecorded};

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::answer::{Answer, Failure};
use super::body::bytes;
use super::state::{Api, Caller};
use super::writes::view_after;
use crate::dispatch::{HttpDestination, Raw};
use crate::domain::State as OpState;
use crate::error::Error;
use crate::ledger::{AttemptReport, Finished, OperationView, Recorded, StartedOp, Write, Written};

/// The handler of every method of the gateway's route. Every answer says who wrote it in
/// `Settle-Origin`: `destination` for the destination's own status and body, passed on as they
/// came, `settle` for everything settle answers itself (whose error body also says
/// `"origin": "settle"`), so that a tool can tell a destination's 500 from settle's own failure.
pub async fn send(
    state: State<Api>,
    caller: Caller,
    target: Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // a destination the config names, never what a path makes up
    let (dest, action) = &target.0;
    let known = state.0.gateway.endpoint(dest, action).is_ok();
    let destination = if known { dest.clone() } else { "(none)".into() };
    let mut response = match answer(state, caller, target, headers, body).await {
        Ok(r) => r,
        Err(f) => f.into_response(),
    };
    if !response.headers().contains_key(ORIGIN) {
        response
            .headers_mut()
            .insert(ORIGIN, HeaderValue::from_static("settle"));
    }
    let said = counted(&response);
    crate::counters::inc(crate::counters::GATEWAY_ANSWERS, &[&destination, said]);
    response
}

/// What the gateway's answer was, as `settle_gateway_answers_total` counts it: the
/// destination's own (`sent`), a replay of the recorded outcome, a conflict of contents, or
/// settle's own refusal or failure.
fn counted(response: &Response) -> &'static str {
    let h = response.headers();
    if h.get("settle-replayed").is_some() {
        "replayed"
    } else if h.get(ORIGIN).is_some_and(|v| v == "destination") {
        "sent"
    } else if h.get("settle-state").is_some_and(|v| v == "conflict") {
        "conflict"
    } else if response.status().is_server_error() {
        "failed"
    } else {
        "refused"
    }
}

async fn answer(
    State(api): State<Api>,
    caller: Caller,
    Path(target): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let body = bytes(body, api.max_body)?;
    let (dest, endpoint) = api.gateway.endpoint(&target.0, &target.1)?;
    let intent = intent_of(&caller, &headers, &body, target)?;
    let key = intent.key.clone();
    let payload = crate::domain::fingerprint::canonical_json(&intent.payload);
    // the record and the start in one group, most often one commit
    let (recorded, started) = api
        .writer
        .write_two(
            &caller.ledger,
            &caller.name,
            Write::Record(intent),
            Write::Start(key.clone()),
        )
        .await;
    let recorded = match recorded {
        Ok(r) => r,
        // new contents under a settled key: the old record stands, nothing to send
        Err(Error::Refused(m)) => {
            let refused = Failure::new(StatusCode::UNPROCESSABLE_ENTITY, "conflict", m);
            return Ok(
                match caller.ledger.read().operation(&key, &caller.name).await {
                    Ok(view) => {
                        let mut r = refused.with_state(view.state).into_response();
                        replay::mark(&mut r, &view, false);
                        r
                    }
                    Err(_) => refused.into_response(),
                },
            );
        }
        Err(other) => return Err(other.into()),
    };
    if recorded.written == Written::Recorded(Recorded::Conflict) {
        let mut r = replay::conflict(&key)
            .with_state(OpState::Conflict)
            .into_response();
        replay::mark_state(&mut r, OpState::Conflict, false);
        return Ok(r);
    }
    let (n, view) = match started_attempt(&caller, &key, started).await? {
        Ok(begun) => begun,
        Err((view, _)) if view.state == OpState::Failed && view.claimed_by.is_none() => {
            // confirmed not done: the repeat asks for it again
            match caller.ledger.resend(&key, &caller.name).await {
                Ok(_) | Err(Error::Refused(_)) => {}
                Err(e) => return Err(e.into()),
            }
            let again = write(&api, &caller, Write::Start(key.clone())).await;
            match started_attempt(&caller, &key, again).await? {
                Ok(begun) => begun,
                Err((view, why)) => {
                    return Ok(replay::answer(&caller, &view, why.as_deref(), &endpoint).await);
                }
            }
        }
        Err((view, why)) => {
            return Ok(replay::answer(&caller, &view, why.as_deref(), &endpoint).await);
        }
    };
    let row = StartedOp {
        key: key.clone(),
        destination: dest.name.clone(),
        action: view.action.clone(),
        attempt: n,
        retry: n > 1,
        payload,
        row: None,
    };
    // Sent and recorded in a task of its own: a caller that hangs up (its own timeout, as a
    // tool's retry begins) cancels this handler, never the attempt it started, which would
    // otherwise stay in flight until the sweep.
    let wait = endpoint.timeout.as_secs().max(1);
    let (tell, told) = tokio::sync::oneshot::channel();
    tokio::spawn(send_and_record(api, caller, dest, row, wait, tell));
    let (shown, report, raw) = match told.await {
        Ok(done) => done?,
        Err(_) => {
            return Err(Error::Unavailable("the gateway's attempt ended abruptly".into()).into());
        }
    };
    Ok(first_answer(&shown, &report, raw))
}

/// What a sent request's caller is answered from: the operation, the attempt's report and the
/// destination's answer as it came.
type Sent = Result<(Shown, AttemptReport, Option<Raw>), Failure>;

/// The state an attempt's outcome settles its operation in whatever its policy
/// ([`Outcome::settles`]), where nothing else is to be recorded beside it; `None` where the
/// rules decide, or a lookup or a pause goes with it.
fn settles(finished: &Finished) -> Option<OpState> {
    if finished.lookup.is_some() || finished.pause_destination.is_some() {
        return None;
    }
    finished.report.outcome?.settles()
}

/// Sends one started attempt, records its outcome and tells the caller through `tell`.
///
/// An answer that settles the operation (accepted, rejected) is told as soon as its outcome is
/// queued in the writer's lane, before that lane's group commits: every later request under the
/// key is judged after it (one lane a key, in order), so a repeat gets the replay, never a
/// second send; should settle stop before the commit, the operation stays in flight and is
/// `unknown` at its timeout, held for review, as when settle stops during the send itself. The
/// destination's answer is the caller's; the record is settle's, and follows it by one group.
/// Any other outcome is told after it is recorded (its state is the rules' to decide).
async fn send_and_record(
    api: Api,
    caller: Caller,
    dest: Arc<HttpDestination>,
    row: StartedOp,
    // the Retry-After of an outcome that could not be recorded: the destination's timeout
    wait: u64,
    tell: tokio::sync::oneshot::Sender<Sent>,
) {
    let scrub = caller.ledger.answer_scrubber(&row);
    let (mut finished, raw) =
        crate::dispatch::attempt(&api.gateway.client, &dest, &row, &scrub).await;
    finished.report.attempt = Some(row.attempt);
    if let Some(state) = settles(&finished) {
        let write = Write::Attempt(finished.report.clone());
        let queued = match api.writer.queue(&caller.ledger, &caller.name, write).await {
            Ok(queued) => queued,
            Err(e) => {
                let _ = tell.send(Err(unrecorded(&row.key, e, wait)));
                return;
            }
        };
        let _ = tell.send(Ok((Shown::Settling(state), finished.report, raw)));
        if let Err(e) = queued.answered().await {
            tracing::error!(
                key = row.key,
                error = %e,
                "gateway: the destination's answer was given, its outcome not recorded: in flight until its timeout, then unknown"
            );
        }
        return;
    }
    let recorded = report(&api, &caller, &row.destination, finished.clone()).await;
    let _ = tell.send(
        recorded
            .map(|view| (Shown::Recorded(Box::new(view)), finished.report, raw))
            .map_err(|e| unrecorded(&row.key, e, wait)),
    );
}

/// What a start came to: the attempt to send and the operation, or the operation and the
/// ledger's reason (where it gave one) why nothing is sent.
async fn started_attempt(
    caller: &Caller,
    key: &str,
    started: crate::error::Result<crate::ledger::Answered>,
) -> Result<Result<(u32, OperationView), (OperationView, Option<String>)>, Failure> {
    match started {
        Ok(s) => {
            let view = view_after(caller, key, s.view).await?;
            match s.written {
                Written::Started(applied, n)
                    if applied.kind.is_some() && applied.to == OpState::InFlight =>
                {
                    Ok(Ok((n, view)))
                }
                _ => Ok(Err((view, None))),
            }
        }
        Err(Error::Refused(why)) => {
            let view = caller.ledger.read().operation(key, &caller.name).await?;
            Ok(Err((view, Some(why))))
        }
        Err(e) => Err(e.into()),
    }
}

/// One write of the protocol through the API's group writer.
async fn write(
    api: &Api,
    caller: &Caller,
    write: Write,
) -> crate::error::Result<crate::ledger::Answered> {
    api.writer.write(&caller.ledger, &caller.name, write).await
}

/// Records a sent attempt's outcome, as a dispatcher's round would: through the group writer,
/// or, with a lookup's answer or a pause to record beside it, as a round of its own.
async fn report(
    api: &Api,
    caller: &Caller,
    destination: &str,
    finished: Finished,
) -> crate::error::Result<OperationView> {
    let key = finished.report.key.clone();
    if finished.lookup.is_none() && finished.pause_destination.is_none() {
        let done = write(api, caller, Write::Attempt(finished.report)).await?;
        if let Some(v) = done.view {
            return Ok(*v);
        }
    } else {
        let round = caller
            .ledger
            .rounds()
            .round_knowing(
                std::slice::from_ref(&finished),
                &Default::default(),
                &[destination.to_string()],
                0,
                &caller.name,
            )
            .await?;
        if let Some(Err(e)) = round.finished.into_iter().next() {
            return Err(e);
        }
    }
    caller.ledger.read().operation(&key, &caller.name).await
}
