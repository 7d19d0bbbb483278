//! The simulated destination's lookups and search (by key), and its counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::tools::sim::create::{answer, unauthorized};
use crate::tools::sim::state::{Sim, Task};
use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub(super) struct KeyQuery {
    pub(super) key: String,
}

/// The task made for a key: by its idempotency key, or (for APIs that take none) by a top-level
/// text value of its body.
pub(super) fn find<'a>(tasks: &'a [Task], key: &str) -> Vec<&'a Task> {
    tasks
        .iter()
        .filter(|t| {
            t.key.as_deref() == Some(key)
                || t.body
                    .as_object()
                    .is_some_and(|m| m.values().any(|v| v.as_str() == Some(key)))
        })
        .collect()
}

pub(super) async fn lookup(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    Query(q): Query<KeyQuery>,
) -> Response {
    if let Some(refused) = unauthorized(&sim, &headers) {
        return refused;
    }
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    match find(&records.tasks, &q.key).first() {
        Some(t) => answer(
            StatusCode::OK,
            json!({ "id": t.id, "key": q.key, "received": t.received, "body": t.body,
                    "headers": t.headers }),
        ),
        None => answer(
            StatusCode::NOT_FOUND,
            json!({ "error": "no task with that key" }),
        ),
    }
}

/// `POST /search` as HubSpot's search API: `{"filterGroups":[{"filters":[{"propertyName":..,
/// "operator":"EQ","value":K}]}]}` answers `{"total":N,"results":[{"id":..,"properties":{..}}]}`
/// (an empty list when nothing matches: never a 404).
pub(super) async fn search(
    State(sim): State<Arc<Sim>>,
    headers: HeaderMap,
    Json(query): Json<Value>,
) -> Response {
    if let Some(refused) = unauthorized(&sim, &headers) {
        return refused;
    }
    let values: Vec<&str> = query
        .pointer("/filterGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("filters")?.as_array())
        .flatten()
        .filter_map(|f| f.get("value")?.as_str())
        .collect();
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    let mut results: Vec<Value> = values
        .iter()
        .flat_map(|v| find(&records.tasks, v))
        .map(|t| json!({ "id": t.id, "properties": t.body }))
        .collect();
    results.dedup();
    answer(
        StatusCode::OK,
        json!({ "total": results.len(), "results": results }),
    )
}

pub(super) async fn stats(State(sim): State<Arc<Sim>>) -> Response {
    let records = sim.records.lock().unwrap_or_else(|p| p.into_inner());
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids_by_key: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for t in &records.tasks {
        let key = t.key.clone().unwrap_or_default();
        ids_by_key.entry(key.clone()).or_default().push(&t.id);
        *by_key.entry(key).or_default() += 1;
    }
    answer(
        StatusCode::OK,
        json!({ "tasks": records.tasks.len(), "by_key": by_key, "ids_by_key": ids_by_key,
                "requests": records.requests, "faults": records.faults,
                "limited": records.health.get("limited").copied().unwrap_or(0),
                "outage": records.health.get("outage").copied().unwrap_or(0),
                "probes": records.health.get("probes").copied().unwrap_or(0),
                "in_outage": crate::tools::sim::state::outage_at(&sim.profile.outages, sim.started.elapsed()).is_some(),
                "first_task_at": records.tasks.iter().map(|t| t.created_at).min(),
                "last_task_at": records.tasks.iter().map(|t| t.created_at).max() }),
    )
}
