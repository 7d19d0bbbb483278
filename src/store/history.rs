//! What readers see of the past: one operation's attempts and audit events, and the activity
//! feed of the newest events with their operations.

use chrono::{DateTime, Utc};

use super::Store;
use super::attempts::{ATTEMPT_COLUMNS, AttemptRow, attempt_from_row};
use super::sql::{Cell, Cells, Stmt, get, time};
use super::terms::{Arg, cells, mark, where_clause};
use crate::error::Result;

/// One audit event as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EventRow {
    pub id: i64,
    pub operation_id: Option<i64>,
    pub workflow: Option<String>,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub kind: String,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub detail: String,
    /// The id of the person's action that wrote it, or that this undo took back.
    pub action: Option<String>,
}

fn event_from_row(row: &dyn Cells) -> Result<EventRow> {
    Ok(EventRow {
        id: get(row, "id")?,
        operation_id: get(row, "operation_id")?,
        workflow: get(row, "workflow")?,
        at: time(get(row, "at")?),
        actor: get(row, "actor")?,
        kind: get(row, "kind")?,
        from_state: get(row, "from_state")?,
        to_state: get(row, "to_state")?,
        detail: get(row, "detail")?,
        action: get(row, "action")?,
    })
}

const EVENT_COLUMNS: &str =
    "id, operation_id, workflow, at, actor, kind, from_state, to_state, detail, action";

/// An event's operation, as the activity feed needs it: its key, and what redacts the detail
/// (destination, action, payload and any conflicting payload).
pub(crate) struct EventSubject {
    pub key: String,
    pub destination: String,
    pub action: String,
    pub payload: String,
    pub conflicting_payload: Option<String>,
}

impl Store {
    /// An operation's attempts, in order.
    pub(crate) async fn attempts_of(&self, op_id: i64) -> Result<Vec<AttemptRow>> {
        let stmt = Stmt::new(
            format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE operation_id = $1 ORDER BY n"),
            vec![Cell::Int(Some(op_id))],
        );
        stmt.rows(self.conn().await?.db(), attempt_from_row).await
    }

    /// An operation's audit events, in order.
    pub(crate) async fn events_of(&self, op_id: i64) -> Result<Vec<EventRow>> {
        let stmt = Stmt::new(
            format!("SELECT {EVENT_COLUMNS} FROM events WHERE operation_id = $1 ORDER BY id"),
            vec![Cell::Int(Some(op_id))],
        );
        stmt.rows(self.conn().await?.db(), event_from_row).await
    }

    /// A run's own audit events (a person's claim, release, note or close of the run), in order:
    /// the events of its workflow that name no operation, whose detail names the run.
    pub(crate) async fn events_of_run(&self, workflow: &str, run: &str) -> Result<Vec<EventRow>> {
        let stmt = Stmt::new(
            format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE operation_id IS NULL AND workflow = $1 \
                 AND kind LIKE 'run\\_%' ESCAPE '\\' ORDER BY id"
            ),
            vec![Cell::Text(Some(workflow))],
        );
        let rows = stmt.rows(self.conn().await?.db(), event_from_row).await?;
        Ok(rows
            .into_iter()
            .filter(|e| {
                serde_json::from_str::<serde_json::Value>(&e.detail)
                    .is_ok_and(|d| d.get("run").and_then(|r| r.as_str()) == Some(run))
            })
            .collect())
    }

    /// The newest audit events, newest first, with their operation.
    pub(crate) async fn recent_events(
        &self,
        limit: i64,
        q: &crate::domain::activity_filter::ActivityFilter,
    ) -> Result<Vec<(EventRow, Option<EventSubject>)>> {
        let mut args: Vec<Arg> = Vec::new();
        let mut cond: Vec<String> = Vec::new();
        let mut any_of = |column: &str, values: &[String], args: &mut Vec<Arg>| {
            let marks: Vec<String> = values
                .iter()
                .map(|v| mark(args, Arg::Text(v.clone())))
                .collect();
            cond.push(format!("{column} IN ({})", marks.join(", ")));
        };
        if !q.actors.is_empty() {
            any_of("actor", &q.actors, &mut args);
        }
        if !q.kinds.is_empty() {
            any_of("kind", &q.kinds, &mut args);
        }
        if !q.automation {
            cond.push(crate::domain::activity_filter::PEOPLE_ONLY.into());
        }
        let limit = mark(&mut args, Arg::Int(limit));
        let sql = format!(
            "SELECT e.id, e.operation_id, e.workflow, e.at, e.actor, e.kind, e.from_state, e.to_state, e.detail, \
             e.action, o.key AS op_key, o.destination AS op_destination, o.action AS op_action, o.payload AS op_payload, \
             o.conflicting_payload AS op_conflicting_payload \
             FROM (SELECT * FROM events{} ORDER BY id DESC LIMIT {limit}) e \
             LEFT JOIN operations o ON o.id = e.operation_id ORDER BY e.id DESC",
            where_clause(&cond)
        );
        let stmt = Stmt::new(sql, cells(&args));
        stmt.rows(self.conn().await?.db(), |r| {
            let e = event_from_row(r)?;
            let subject = match get::<Option<String>>(r, "op_key")? {
                Some(key) => Some(EventSubject {
                    key,
                    destination: get(r, "op_destination")?,
                    action: get(r, "op_action")?,
                    payload: get(r, "op_payload")?,
                    conflicting_payload: get(r, "op_conflicting_payload")?,
                }),
                None => None,
            };
            Ok((e, subject))
        })
        .await
    }

    /// The newest audit event's id (0 when there is none): what the console polls.
    pub(crate) async fn latest_event_id(&self) -> Result<i64> {
        self.scalar(Stmt::new(
            "SELECT COALESCE(MAX(id), 0) AS n FROM events",
            Vec::new(),
        ))
        .await
    }
}
