//! The gateway's answers to a request it does not send (manual: The gateway): what the ledger holds
//! for the key, as the caller's retry must read it.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::super::answer::{Failure, json};
use super::super::state::Caller;
use crate::dispatch::Endpoint;
use crate::domain::{Resolution, State};
use crate::ledger::OperationView;

/// 422: the key came with other contents; they are kept beside the old as a conflict.
pub fn conflict(key: &str) -> Failure {
    Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "conflict",
        format!(
            "{key}: recorded before with another body: the new one is kept beside the old as a conflict, an exception, and neither is sent"
        ),
    )
}

/// The answer to a request that is not sent, from the operation as the ledger holds it (`why`:
/// the ledger's own refusal of the start, when it gave one).
pub async fn answer(
    caller: &Caller,
    view: &OperationView,
    why: Option<&str>,
    endpoint: &Endpoint,
) -> Response {
    let (mut response, replayed) = match decide(caller, view, why, endpoint).await {
        Ok(replay) => (replay, true),
        Err(f) => (f.with_state(view.state).into_response(), false),
    };
    mark(&mut response, view, replayed);
    response
}

/// A replay (`Ok`: a success or a rejection, from the ledger), or the refusal that says why
/// nothing was sent.
async fn decide(
    caller: &Caller,
    view: &OperationView,
    why: Option<&str>,
    endpoint: &Endpoint,
) -> Result<Response, Failure> {
    let key = &view.key;
    let done_elsewhere = view.resolution == Some(Resolution::DoneElsewhere);
    if view.state == State::Succeeded || done_elsewhere {
        let body = replay_body(endpoint.reference_pointer(), view.reference.as_deref());
        return Ok(json(StatusCode::OK, &body));
    }
    if view.state == State::Closed
        && let Some(end) = caller.ledger.read().chain_end(view).await?
    {
        return corrected(caller, view, &end, endpoint).await;
    }
    if view.state == State::Closed {
        let how = view.resolution.map_or("closed", |r| r.as_str());
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "refused",
            format!("{key}: closed by a person ({how}): not sent"),
        ));
    }
    if view.state == State::Conflict {
        return Err(conflict(key));
    }
    if let Some(by) = &view.claimed_by {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "claimed",
            format!("{key}: claimed by {by}, who is working it: not sent while they hold it"),
        ));
    }
    let paused = |reason: String| {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, "paused", reason).retry_after(60)
    };
    if view.destination_paused {
        return Err(paused(format!(
            "{key}: destination {} is paused: not sent (`settle resume --destination {}` lifts it)",
            view.destination, view.destination
        )));
    }
    if view.workflow_paused {
        return Err(paused(format!(
            "{key}: workflow {} is paused: not sent",
            view.workflow
        )));
    }
    match view.state {
        State::InFlight => Err(Failure::new(
            StatusCode::CONFLICT,
            "in_flight",
            format!("{key}: the first request is still running: not sent again; repeat after Retry-After"),
        )
        .retry_after(endpoint.timeout.as_secs_f64().ceil() as u64)),
        State::Unknown => Err(Failure::new(
            StatusCode::CONFLICT,
            "outcome_unknown",
            format!(
                "{key}: the outcome of the last attempt is not known: held for review, not resent ({})",
                view.next_step
            ),
        )),
        // a replay too: the stored rejection
        State::Rejected => Ok(rejection(caller, view)
            .await
            .with_state(State::Rejected)
            .into_response()),
        State::Pending | State::RetryWait => Err(not_due(view, why)),
        _ => Err(Failure::new(
            StatusCode::CONFLICT,
            "refused",
            format!("{key}: {}: not sent; {}", view.state, view.next_step),
        )),
    }
}

/// A corrected key (manual: Correcting a request): the answer of its chain's end, never a send:
/// the end's replay once it succeeded, its rejection replayed, else 409 while it is under way.
async fn corrected(
    caller: &Caller,
    view: &OperationView,
    end: &crate::ledger::ChainEnd,
    endpoint: &Endpoint,
) -> Result<Response, Failure> {
    let key = &view.key;
    if end.done {
        let body = replay_body(endpoint.reference_pointer(), end.reference.as_deref());
        return Ok(json(StatusCode::OK, &body));
    }
    if end.state == State::Rejected {
        let end_view = caller
            .ledger
            .read()
            .operation(&end.key, &caller.name)
            .await?;
        return Ok(rejection(caller, &end_view)
            .await
            .with_state(State::Rejected)
            .into_response());
    }
    let under_way = matches!(
        end.state,
        State::Pending | State::RetryWait | State::InFlight
    );
    let failure = Failure::new(
        StatusCode::CONFLICT,
        if under_way { "in_flight" } else { "refused" },
        format!(
            "{key}: corrected as {} ({}): this request is not sent; the correction answers for it",
            end.key, end.state
        ),
    );
    Err(if under_way {
        failure.retry_after(endpoint.timeout.as_secs_f64().ceil() as u64)
    } else {
        failure
    })
}

/// The stored rejection replayed: the destination's status, its error as settle keeps it.
async fn rejection(caller: &Caller, view: &OperationView) -> Failure {
    let status = match caller.ledger.read().show(&view.key, &caller.name).await {
        Ok(detail) => detail
            .attempt_log
            .iter()
            .rev()
            .find_map(|a| a.http_status)
            .and_then(|s| StatusCode::from_u16(s).ok())
            .filter(|s| s.is_client_error()),
        Err(_) => None,
    };
    let error = view.last_error.as_deref().unwrap_or("rejected");
    Failure::new(
        status.unwrap_or(StatusCode::UNPROCESSABLE_ENTITY),
        "rejected",
        format!(
            "{}: {} rejected it: {error}; not sent again (correct it at the source)",
            view.key, view.destination
        ),
    )
}

/// Seconds until the operation's next attempt is due; `None` when it is due now, or has none.
fn until_due(view: &OperationView) -> Option<f64> {
    view.next_attempt_at
        .map(|t| (t - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0)
        .filter(|w| *w > 0.0)
}

/// 503 before the next attempt is due, while the workflow is at its threshold, or while the
/// destination's retry budget is spent.
fn not_due(view: &OperationView, why: Option<&str>) -> Failure {
    let key = &view.key;
    match (until_due(view), why) {
        (Some(wait), _) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "{key}: {}: its next attempt is due in {wait:.1}s; not sent before then",
                view.state
            ),
        )
        .retry_after(wait.ceil() as u64),
        (None, Some(w)) if w.contains("stopping threshold") => {
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, "paused", w).retry_after(60)
        }
        // the retry budget is spent, or another caller's start came first
        (None, w) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            w.unwrap_or("not started: try again"),
        )
        .retry_after(5),
    }
}

/// The body of a replayed success: the stored reference at the destination's `reference`
/// pointer (`/id` gives `{"id": "T-17"}`, `/data/id` gives `{"data": {"id": ...}}`).
pub fn replay_body(pointer: &str, reference: Option<&str>) -> Value {
    let Some(reference) = reference else {
        return Value::Object(Map::new());
    };
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    if parts.is_empty() {
        return Value::Object(Map::new());
    }
    parts
        .iter()
        .rev()
        .fold(Value::String(reference.to_string()), |inner, name| {
            let mut m = Map::new();
            m.insert(name.clone(), inner);
            Value::Object(m)
        })
}

/// What every gateway answer carries: `Settle-State` (the operation's state after the
/// request), `Settle-Replayed: true` on a replay, and `Retry-After` while a retry waits.
/// (`Settle-Origin`, who wrote the answer, is the route's: see `gateway::send`.)
pub fn mark_state(response: &mut Response, state: State, replayed: bool) {
    let h = response.headers_mut();
    h.insert("settle-state", HeaderValue::from_static(state.as_str()));
    if replayed {
        h.insert("settle-replayed", HeaderValue::from_static("true"));
    }
}

/// [`mark_state`] from the operation, with the `Retry-After` of one that waits for its next
/// attempt.
pub fn mark(response: &mut Response, view: &OperationView, replayed: bool) {
    mark_state(response, view.state, replayed);
    let h = response.headers_mut();
    if view.state == State::RetryWait && !h.contains_key(header::RETRY_AFTER) {
        let wait = until_due(view).unwrap_or(0.0);
        h.insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.ceil().max(1.0) as u64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_puts_the_reference_where_the_destination_put_it() {
        assert_eq!(
            replay_body("/id", Some("T-17")),
            serde_json::json!({"id": "T-17"})
        );
        assert_eq!(
            replay_body("/data/a~1b", Some("9")),
            serde_json::json!({"data": {"a/b": "9"}})
        );
        assert_eq!(replay_body("", Some("9")), serde_json::json!({}));
        assert_eq!(replay_body("/id", None), serde_json::json!({}));
    }
}
