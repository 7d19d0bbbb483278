//! The gateway's request read as the ledger records it (manual: The gateway): the key from
//! `Idempotency-Key`, the workflow from `Settle-Workflow` or the token's only one, the body as
//! the payload.

use axum::http::HeaderMap;
use serde_json::Value;

use super::super::answer::Failure;
use super::super::state::Caller;
use crate::ledger::Intent;

/// A header's text: `None` when it is not there, a 400 naming it when it is not text.
fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Failure> {
    headers
        .get(name)
        .map(|v| {
            v.to_str().map_err(|_| {
                Failure::invalid(format!("header {name}: must be text (A-Z a-z 0-9 . _ : -)"))
            })
        })
        .transpose()
}

/// A header naming the operation (`Settle-Workflow`, `Settle-Step`, `Settle-Run`): checked as
/// the name it gives, an empty one taken as absent where `may_be_empty`.
fn header_name<'h>(
    headers: &'h HeaderMap,
    name: &str,
    may_be_empty: bool,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<Option<&'h str>, Failure> {
    match header_text(headers, name)? {
        Some("") if may_be_empty => Ok(None),
        Some(v) => {
            check(v).map_err(|e| Failure::invalid(format!("header {name}: {e}")))?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// The request as the ledger records it, or a 400 naming what is wrong.
pub(super) fn intent_of(
    caller: &Caller,
    headers: &HeaderMap,
    body: &[u8],
    (destination, action): (String, String),
) -> Result<Intent, Failure> {
    // two keys for one request: which was meant cannot be known, so neither is used
    if headers.get_all("idempotency-key").iter().count() > 1 {
        return Err(Failure::invalid(
            "the Idempotency-Key header is given more than once: one key per request",
        ));
    }
    let key = header_text(headers, "idempotency-key")?.ok_or_else(|| {
        Failure::invalid(
            "the Idempotency-Key header is required: the same key on every repeat of one request",
        )
    })?;
    crate::domain::validate_key(key)
        .map_err(|e| Failure::invalid(format!("header Idempotency-Key: {e}")))?;
    let op_name =
        |what: &'static str| move |v: &str| crate::domain::validate_op_name(what, v, false);
    let workflow = header_name(headers, "settle-workflow", false, op_name("workflow"))?;
    let step = header_name(headers, "settle-step", true, op_name("step"))?;
    let run = header_name(headers, "settle-run", true, crate::domain::validate_run)?;
    let workflow = match (workflow, &caller.workflows) {
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
        .ok()
        .flatten()
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let text =
        std::str::from_utf8(body).map_err(|_| Failure::invalid("the body is not UTF-8 text"))?;
    // the body is the payload, however the tool encoded it: the destination's own `body` says
    // how settle sends it on
    // no body at all: an empty payload; anything else must be what it says it is
    let payload = if body.is_empty() {
        Value::Object(Default::default())
    } else if form {
        crate::domain::form::read_form(text.trim())
            .map_err(|e| Failure::invalid(format!("the form body: {e}")))?
    } else {
        serde_json::from_str(text)
            .map_err(|e| Failure::invalid(format!("the body is not valid JSON: {e}")))?
    };
    Ok(Intent {
        key: key.to_string(),
        workflow,
        // a step named by its action unless told otherwise: the console and a run show it
        step: step.unwrap_or(&action).to_string(),
        destination,
        action,
        payload,
        run: run.map(str::to_string),
    })
}
