//! The protocol over HTTP (manual: The protocol, The HTTP API): record, start, attempt and ingest, each through the
//! group writer, answered after its commit with what a script reads from `--json`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;

use super::answer::{Answer, Failure, json};
use super::body::{Fields, bytes};
use super::state::{Api, Caller};
use crate::domain::{Outcome, State as OpState};
use crate::error::Error;
use crate::ledger::{AttemptReport, Intent, OperationView, Recorded, Write, Written};

const INTENT_FIELDS: [&str; 8] = [
    "type",
    "key",
    "workflow",
    "step",
    "destination",
    "action",
    "payload",
    "run",
];

/// The operation as it stood after a write: as the group knew it, else asked.
pub(super) async fn view_after(
    caller: &Caller,
    key: &str,
    known: Option<Box<OperationView>>,
) -> Result<OperationView, Failure> {
    match known {
        Some(v) => Ok(*v),
        None => Ok(caller.ledger.read().operation(key, &caller.name).await?),
    }
}

/// `POST /v1/operations`: 201 recorded, 200 already recorded with the same contents, 409
/// `conflict`.
pub async fn record(
    State(api): State<Api>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let body = bytes(body, api.max_body)?;
    let mut f = Fields::parse(&body, &INTENT_FIELDS)?;
    if let Some(t) = f.text("type")?
        && t != "intent"
    {
        return Err(Failure::invalid(
            "field `type`: only \"intent\" is recorded here",
        ));
    }
    let intent = Intent {
        key: f.required("key")?,
        workflow: f.required("workflow")?,
        step: f.text("step")?.unwrap_or_default(),
        destination: f.required("destination")?,
        action: f.required("action")?,
        payload: payload(&mut f)?,
        run: f.text("run")?,
    };
    let key = intent.key.clone();
    let done = api
        .writer
        .write(&caller.ledger, &caller.name, Write::Record(intent))
        .await
        .map_err(|e| match e {
            // new contents under a settled key: the old record stands, nothing to send
            Error::Refused(m) => Failure::new(StatusCode::CONFLICT, "conflict", m),
            other => other.into(),
        })?;
    let Written::Recorded(r) = done.written else {
        return Err(Error::Unavailable("the writer answered another write".into()).into());
    };
    let view = view_after(&caller, &key, done.view).await?;
    match r {
        Recorded::Conflict => Err(Failure::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "{key}: recorded before with other contents: the new ones are kept beside the old as a conflict, an exception, never sent"
            ),
        )),
        Recorded::Created => Ok(json(StatusCode::CREATED, &view.step(None, true))),
        Recorded::Unchanged => {
            let send = !view.state.is_terminal();
            // a corrected key answers from its chain's end (manual: Correcting a request)
            let end = caller.ledger.read().chain_end(&view).await?;
            Ok(json(
                StatusCode::OK,
                &view.step(None, send).corrected(end.as_ref()),
            ))
        }
    }
}

/// The intent's payload: any JSON, `null` included (as the command line and JSON lines take it).
fn payload(f: &mut Fields) -> Result<serde_json::Value, Failure> {
    f.raw("payload")
        .ok_or_else(|| Failure::invalid("field `payload` is required"))
}

/// `POST /v1/operations/{key}/start`: 200 with the attempt to send, or 409 `refused` saying why.
pub async fn start(
    State(api): State<Api>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    Fields::none(&bytes(body, api.max_body)?)?;
    let done = match api
        .writer
        .write(&caller.ledger, &caller.name, Write::Start(key.clone()))
        .await
    {
        Ok(done) => done,
        // refused by its state: a corrected key is answered for by its correction
        Err(Error::Refused(why)) => {
            let view = caller.ledger.read().operation(&key, &caller.name).await?;
            return Err(match caller.ledger.read().chain_end(&view).await? {
                Some(end) => corrected(&key, &end.key, &end.state.to_string()),
                None => Failure::new(StatusCode::CONFLICT, "refused", why),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let Written::Started(applied, n) = done.written else {
        return Err(Error::Unavailable("the writer answered another write".into()).into());
    };
    let view = view_after(&caller, &key, done.view).await?;
    if applied.kind.is_some() && applied.to == OpState::InFlight {
        return Ok(json(StatusCode::OK, &view.step(Some(n), true)));
    }
    if let Some(end) = caller.ledger.read().chain_end(&view).await? {
        return Err(corrected(&key, &end.key, &end.state.to_string()));
    }
    let reference = view
        .reference
        .as_deref()
        .map(|r| format!(" (reference {r})"))
        .unwrap_or_default();
    Err(Failure::new(
        StatusCode::CONFLICT,
        "refused",
        format!(
            "{key}: {}{reference}: not started; {}",
            view.state, view.next_step
        ),
    ))
}

/// 409 for a start of `key`, corrected as `end` (in `state`): never sent again.
fn corrected(key: &str, end: &str, state: &str) -> Failure {
    Failure::new(
        StatusCode::CONFLICT,
        "refused",
        format!("{key}: corrected as {end} ({state}): not started; the correction answers for it"),
    )
    .corrected_as(end)
}

/// `POST /v1/operations/{key}/attempts`: 200 with the new state; 409 when that attempt is
/// already finished.
pub async fn attempt(
    State(api): State<Api>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let body = bytes(body, api.max_body)?;
    let mut f = Fields::parse(
        &body,
        &[
            "attempt",
            "outcome",
            "reference",
            "error",
            "http_status",
            "retry_after",
        ],
    )?;
    let outcome = f.required("outcome")?;
    let report = AttemptReport {
        key: key.clone(),
        attempt: f
            .number("attempt", 1, u64::from(u32::MAX))?
            .map(|n| n as u32),
        outcome: Some(
            Outcome::parse(&outcome)
                .map_err(|e| Failure::invalid(format!("field `outcome`: {e}")))?,
        ),
        reference: f.text("reference")?,
        error: f.text("error")?,
        http_status: f.number("http_status", 100, 599)?.map(|n| n as u16),
        retry_after: f
            .number("retry_after", 0, 365 * 86_400)?
            .map(std::time::Duration::from_secs),
    };
    let n = report.attempt;
    let done = api
        .writer
        .write(&caller.ledger, &caller.name, Write::Attempt(report))
        .await?;
    let view = view_after(&caller, &key, done.view).await?;
    Ok(json(
        StatusCode::OK,
        &view.step(n.or(Some(view.attempts)), false),
    ))
}

#[derive(Serialize)]
struct LineResult {
    line: usize,
    ok: bool,
    /// A refusal (the ledger said no) rather than a malformed line.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

#[derive(Serialize)]
struct IngestAnswer {
    lines: usize,
    recorded: usize,
    unchanged: usize,
    conflicts: usize,
    started: usize,
    attempts: usize,
    malformed: usize,
    refused: usize,
    results: Vec<LineResult>,
}

/// `POST /v1/ingest`: JSON lines, as `settle ingest` takes them; a result per line.
pub async fn ingest(
    State(api): State<Api>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let body = bytes(body, api.max_body)?;
    if body.is_empty() {
        return Err(Failure::invalid(
            "the body is required: JSON lines, one intent, start or attempt a line",
        ));
    }
    let report = caller
        .ledger
        .ingest(std::io::Cursor::new(body.clone()), &caller.name)
        .await?;
    let blank: Vec<bool> = body
        .split(|b| *b == b'\n')
        .map(|l| l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let results = (1..=report.lines)
        .filter(|n| !blank.get(n - 1).copied().unwrap_or(false))
        .map(|n| match report.problems.iter().find(|p| p.line == n) {
            Some(p) => LineResult {
                line: n,
                ok: false,
                refused: Some(p.refused),
                message: Some(crate::domain::escape_text(&p.message).into_owned()),
            },
            None => LineResult {
                line: n,
                ok: true,
                refused: None,
                message: None,
            },
        })
        .collect();
    let answer = IngestAnswer {
        lines: report.lines,
        recorded: report.created,
        unchanged: report.unchanged,
        conflicts: report.conflicts,
        started: report.started,
        attempts: report.attempts,
        malformed: report.malformed(),
        refused: report.refused(),
        results,
    };
    Ok(json(StatusCode::OK, &answer).into_response())
}
