//! The gateway's answers to a request it sent: the destination's own status and body, passed on
//! as they came (`Settle-Origin: destination`), or settle's word where the destination gave
//! none (a timeout, a broken connection, a request that never left) or its outcome could not be
//! recorded.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::super::answer::Failure;
use super::replay;
use crate::dispatch::Raw;
use crate::domain::{Outcome, State as OpState};
use crate::error::Error;
use crate::ledger::{AttemptReport, OperationView};

/// What the caller of a sent request is told the operation is: the ledger's view after its
/// outcome was recorded, or the state an answer that settles it is being recorded as.
pub(super) enum Shown {
    Recorded(Box<OperationView>),
    Settling(OpState),
}

/// The answer when a sent attempt's outcome could not be recorded.
pub(super) fn unrecorded(key: &str, e: Error, wait: u64) -> Failure {
    Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
        format!(
            "{key}: sent, but its outcome could not be recorded ({}): it is held as in flight and not sent again",
            match e {
                Error::Unavailable(_) => "the ledger's database is unreachable".to_string(),
                other => other.to_string(),
            }
        ),
    )
    .retry_after(wait)
    .with_state(OpState::InFlight)
}

/// The answer to the request that was sent: the destination's own status and body; a timeout
/// or a broken connection 504 `outcome_unknown`; a request that never left 503 or 400. A
/// redirect is settle's to answer (its `Location` is never handed on, or a tool would follow
/// it past settle): 504 `outcome_unknown` for a 303, 503 for the others, which pause the
/// destination.
pub(super) fn first_answer(shown: &Shown, report: &AttemptReport, raw: Option<Raw>) -> Response {
    let raw = raw.filter(|r| !crate::dispatch::is_redirect(r.status));
    let mut response = match raw {
        Some(raw) => {
            let mut r = (
                StatusCode::from_u16(raw.status).unwrap_or(StatusCode::BAD_GATEWAY),
                raw.body,
            )
                .into_response();
            if let Some(t) = raw
                .content_type
                .and_then(|t| HeaderValue::from_str(&t).ok())
            {
                r.headers_mut().insert(header::CONTENT_TYPE, t);
            }
            r.headers_mut()
                .insert(ORIGIN, HeaderValue::from_static("destination"));
            r
        }
        None => {
            let why = report.error.as_deref().unwrap_or("no answer");
            let key = &report.key;
            let state = match shown {
                Shown::Recorded(view) => view.state,
                Shown::Settling(state) => *state,
            };
            match (report.outcome, shown) {
                (Some(Outcome::Unknown), Shown::Recorded(view)) => Failure::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    "outcome_unknown",
                    match view.state {
                        OpState::RetryWait => format!(
                            "{key}: {why}: the outcome is not known; {} deduplicates, so a repeat after Retry-After sends it again with the same key",
                            view.destination
                        ),
                        // its lookup settled it at once
                        OpState::Succeeded => format!(
                            "{key}: {why}; looked up at {}: done{}: a repeat gets it, nothing is sent again",
                            view.destination,
                            view.reference
                                .as_deref()
                                .map(|r| format!(" (reference {r})"))
                                .unwrap_or_default()
                        ),
                        OpState::Failed => format!(
                            "{key}: {why}; looked up at {}: not there: a repeat sends it again",
                            view.destination
                        ),
                        _ => format!(
                            "{key}: {why}: the outcome is not known; held for review, not resent ({})",
                            view.next_step
                        ),
                    },
                ),
                (Some(Outcome::Transient), _) => Failure::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    format!("{key}: {why}"),
                ),
                _ => Failure::invalid(format!("{key}: {why}")),
            }
            .with_state(state)
            .into_response()
        }
    };
    match shown {
        Shown::Recorded(view) => replay::mark(&mut response, view, false),
        Shown::Settling(state) => replay::mark_state(&mut response, *state, false),
    }
    response
}

/// Who wrote a gateway's answer: `settle`, or the `destination`.
pub(super) const ORIGIN: &str = "settle-origin";
