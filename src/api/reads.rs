//! What an automation reads over HTTP (manual: The HTTP API), redacted as everywhere: one operation as `show
//! --json` gives it, a page of operations, a run; and the staff actions it is refused.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;

use super::answer::{Answer, Failure, json};
use super::body::{Fields, bytes};
use super::state::{Api, Caller};
use crate::domain::filter::Filter;
use crate::domain::{Resolution, StaffAction};
use crate::ledger::{Cursor, ListFilter, OperationView, Scope};

/// The most operations one page holds.
pub const MAX_LIMIT: usize = 1000;

/// `GET /v1/operations/{key}`: `show --json`'s document.
pub async fn show(State(api): State<Api>, caller: Caller, Path(key): Path<String>) -> Answer {
    // an outcome the gateway answered before its commit is read as answered
    api.writer
        .settled(&key, std::time::Duration::from_secs(2))
        .await;
    let detail = caller.ledger.read().show(&key, &caller.name).await?;
    Ok(json(StatusCode::OK, &detail))
}

/// `GET /v1/runs/{run}`: `run show --json`'s document.
pub async fn run(caller: Caller, Path(run): Path<String>) -> Answer {
    let view = caller.ledger.read().run(&run, &caller.name).await?;
    Ok(json(StatusCode::OK, &view))
}

#[derive(Serialize)]
struct PageAnswer {
    operations: Vec<OperationView>,
    next_cursor: Option<String>,
}

/// A page's cursor as the API hands it out: the row's time and id.
fn cursor_text(c: &Cursor) -> String {
    format!("{}_{}", c.at, c.id)
}

/// A cursor as the API hands them out (`next_cursor`): the row's time and id, each 1-18 digits,
/// joined by `_`; nothing else is one.
fn parse_cursor(text: &str) -> Result<Cursor, Failure> {
    let bad = || {
        Failure::invalid(
            "parameter `cursor`: not a cursor this API gave (use next_cursor as it came)",
        )
    };
    let number = |part: &str| -> Result<i64, Failure> {
        if (1..=18).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let (at, id) = text.split_once('_').ok_or_else(bad)?;
    Ok(Cursor {
        group: None,
        at: number(at)?,
        id: number(id)?,
    })
}

/// `GET /v1/operations?where=FILTER&limit=N&cursor=C`: every operation of the caller's
/// workflows the filter matches, oldest first, a page at a time.
pub async fn list(caller: Caller, Query(pairs): Query<Vec<(String, String)>>) -> Answer {
    let mut q: HashMap<String, String> = HashMap::new();
    for (name, value) in pairs {
        if !["where", "limit", "cursor"].contains(&name.as_str()) {
            return Err(Failure::invalid(format!(
                "parameter `{}` is not one of where, limit, cursor",
                crate::domain::escape_text(&name)
            )));
        }
        if q.insert(name.clone(), value).is_some() {
            return Err(Failure::invalid(format!(
                "parameter `{name}` is given twice: give it once"
            )));
        }
    }
    let query = Filter::parse(q.get("where").map_or("", String::as_str))
        .map_err(|e| Failure::invalid(format!("parameter `where`: {e}")))?;
    let limit = match q.get("limit") {
        None => 100,
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                Failure::invalid(format!("parameter `limit`: a number from 1 to {MAX_LIMIT}"))
            })?,
    };
    // an empty cursor is the first page's
    let after = q
        .get("cursor")
        .filter(|c| !c.is_empty())
        .map(|c| parse_cursor(c))
        .transpose()?;
    let filter = ListFilter {
        scope: Scope::All,
        query,
        ..Default::default()
    };
    let page = caller
        .ledger
        .read()
        .list(&filter, &caller.name, after, limit)
        .await?;
    let answer = PageAnswer {
        next_cursor: page.next.as_ref().map(cursor_text),
        operations: page.items,
    };
    Ok(json(StatusCode::OK, &answer))
}

/// `POST /v1/operations/{key}/{action}` for a staff action (claim, release, reconcile, retry,
/// close, note): asked of the ledger like any other, which refuses an automation (403).
pub async fn staff(
    State(api): State<Api>,
    caller: Caller,
    Path((key, verb)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    // an automation is refused before anything it sent is read
    caller.ledger.may_act(&caller.name)?;
    let body = bytes(body, api.max_body)?;
    let mut f = if body.iter().all(u8::is_ascii_whitespace) {
        Fields::parse(b"{}", &[])?
    } else {
        Fields::parse(&body, &["note", "reference", "resolution", "superseded_by"])?
    };
    let note = f.text("note")?;
    let action = match verb.as_str() {
        "claim" => StaffAction::Claim { force_reason: None },
        "release" => StaffAction::Release,
        "retry" => StaffAction::Retry { note },
        "note" => StaffAction::Note {
            text: note.unwrap_or_default(),
        },
        "reconcile" => match f.text("reference")? {
            Some(reference) => StaffAction::ReconcileFound { reference, note },
            None => StaffAction::ReconcileAbsent { note },
        },
        "close" => StaffAction::Close {
            resolution: Resolution::parse(&f.required("resolution")?)
                .map_err(|e| Failure::invalid(format!("field `resolution`: {e}")))?,
            reference: f.text("reference")?,
            superseded_by: f.text("superseded_by")?,
            note: note.unwrap_or_default(),
        },
        _ => return Err(not_found().await),
    };
    let applied = caller
        .ledger
        .staff()
        .act(&key, &caller.name, action)
        .await?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "key": applied.key, "state": applied.to.as_str() }),
    ))
}

/// `GET /healthz`: 200 while the database answers, else 503.
pub async fn healthz(State(api): State<Api>) -> Answer {
    api.ledger.read().latest_event_id().await?;
    Ok(json(StatusCode::OK, &serde_json::json!({ "status": "ok" })))
}

/// The OpenAPI 3.1 description of this API, as `assets/openapi.json` holds it.
pub const OPENAPI: &str = include_str!("../../assets/openapi.json");

/// `GET /openapi.json`.
pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

/// Any other path or method: 404 with the error object.
pub async fn not_found() -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route: GET /openapi.json lists them",
    )
}
