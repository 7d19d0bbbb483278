//! The gateway's request read as the ledger records it (SPEC 21): the key from
//! `Idempotency-Key`, the workflow from `Settle-Workflow` or the token's only one, the body as
//! the payload.

use axum::http::HeaderMap;
use serde_json::Value;

use super::super::Caller;
use super::super::answer::Failure;
use crate::dispatch::Endpoint;
use crate::ledger::Intent;

/// A header's text, when it is there and is text.
fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The request as the ledger records it, or a 400 naming what is wrong.
pub(super) fn intent_of(
    caller: &Caller,
    headers: &HeaderMap,
    body: &[u8],
    (destination, action): (String, String),
    endpoint: &Endpoint,
) -> Result<Intent, Failure> {
    let key = header_text(headers, "idempotency-key").ok_or_else(|| {
        Failure::invalid(
            "the Idempotency-Key header is required: the same key on every repeat of one request",
        )
    })?;
    crate::domain::validate_key(key)
        .map_err(|e| Failure::invalid(format!("header Idempotency-Key: {e}")))?;
    let workflow = match (header_text(headers, "settle-workflow"), &caller.workflows) {
        (Some(w), _) => w.to_string(),
        (None, Some(mine)) if mine.len() == 1 => mine[0].clone(),
        (None, scope) => {
            let which = scope
                .as_ref()
                .map_or("every workflow".to_string(), |w| w.join(", "));
            return Err(Failure::invalid(format!(
                "the Settle-Workflow header is required: this token writes {which}"
            )));
        }
    };
    let form = header_text(headers, "content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let text =
        std::str::from_utf8(body).map_err(|_| Failure::invalid("the body is not UTF-8 text"))?;
    let payload = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else if form && endpoint.takes_form() {
        crate::domain::form::read_form(text.trim())
            .map_err(|e| Failure::invalid(format!("the form body: {e}")))?
    } else if form {
        return Err(Failure::invalid(format!(
            "destination {destination} takes JSON: send the body as application/json"
        )));
    } else {
        serde_json::from_str(text)
            .map_err(|e| Failure::invalid(format!("the body is not valid JSON: {e}")))?
    };
    Ok(Intent {
        key: key.to_string(),
        workflow,
        // a step named by its action unless told otherwise: the console and a run show it
        step: header_text(headers, "settle-step")
            .filter(|s| !s.is_empty())
            .unwrap_or(&action)
            .to_string(),
        destination,
        action,
        payload,
        run: header_text(headers, "settle-run")
            .filter(|r| !r.is_empty())
            .map(str::to_string),
    })
}
