//! Attempts and audit events as a write transaction writes and reads them: events are appended
//! in order (on SQLite in runs of many rows to a statement, on PostgreSQL as one statement over
//! arrays); an attempt is opened when it starts and closed with its outcome.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::arrays::{Array, array_marks, pg_query};
use super::columns::Kind;
use super::sql::{Cell, Stmt, db, get, get_time, ms, rows_of_marks, time};
use super::{Open, Tx};
use crate::domain::{Outcome, State};
use crate::error::Result;

/// An audit event to append.
pub(crate) struct NewEvent<'a> {
    pub operation_id: Option<i64>,
    pub workflow: Option<&'a str>,
    pub at: DateTime<Utc>,
    pub actor: &'a str,
    pub kind: &'a str,
    pub from_state: Option<State>,
    pub to_state: Option<State>,
    pub detail: &'a str,
    /// The id of the person's action that wrote it (manual: Taking an action back), or that an
    /// undo took back.
    pub action: Option<&'a str>,
    /// What taking the action back restores (JSON), on the action's own events.
    pub restore: Option<&'a str>,
}

impl<'a> NewEvent<'a> {
    /// The event of a change to one operation.
    pub(crate) fn on_operation(
        id: i64,
        at: DateTime<Utc>,
        actor: &'a str,
        kind: &'a str,
        from_state: Option<State>,
        to_state: State,
        detail: &'a str,
    ) -> NewEvent<'a> {
        NewEvent {
            operation_id: Some(id),
            workflow: None,
            at,
            actor,
            kind,
            from_state,
            to_state: Some(to_state),
            detail,
            action: None,
            restore: None,
        }
    }

    pub(super) fn cells(&self) -> [Cell<'a>; 10] {
        [
            Cell::Int(self.operation_id),
            Cell::Text(self.workflow),
            Cell::Int(Some(ms(self.at))),
            Cell::Text(Some(self.actor)),
            Cell::Text(Some(self.kind)),
            Cell::Text(self.from_state.map(|s| s.as_str())),
            Cell::Text(self.to_state.map(|s| s.as_str())),
            Cell::Text(Some(self.detail)),
            Cell::Text(self.action),
            Cell::Text(self.restore),
        ]
    }
}

/// An attempt's outcome: closing an open attempt, or one made elsewhere (opened and closed at
/// once).
pub(crate) struct AttemptWrite<'a> {
    pub operation_id: i64,
    pub n: u32,
    pub actor: &'a str,
    pub at: DateTime<Utc>,
    pub outcome: Outcome,
    pub http_status: Option<u16>,
    pub reference: Option<&'a str>,
    pub error: Option<&'a str>,
}

impl<'a> AttemptWrite<'a> {
    /// Operation, number, time, outcome, status, reference, error.
    pub(super) fn cells(&self) -> [Cell<'a>; 7] {
        [
            Cell::Int(Some(self.operation_id)),
            Cell::Int(Some(i64::from(self.n))),
            Cell::Int(Some(ms(self.at))),
            Cell::Text(Some(self.outcome.as_str())),
            Cell::Int(self.http_status.map(i64::from)),
            Cell::Text(self.reference),
            Cell::Text(self.error),
        ]
    }
}

/// One attempt as stored (error and reference still raw: the ledger redacts them).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttemptRow {
    pub n: u32,
    pub actor: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: Option<Outcome>,
    pub http_status: Option<u16>,
    pub reference: Option<String>,
    pub error: Option<String>,
}

pub(crate) const ATTEMPT_COLUMNS: &str =
    "n, actor, started_at, finished_at, outcome, http_status, reference, error";

/// A stored attempt's outcome (`None` while it is open).
fn outcome_of(row: &dyn super::sql::Cells) -> Result<Option<Outcome>> {
    let outcome: Option<String> = get(row, "outcome")?;
    outcome
        .map(|o| Outcome::parse(&o).map_err(|_| super::sql::corrupt("outcome")))
        .transpose()
}

pub(crate) fn attempt_from_row(row: &dyn super::sql::Cells) -> Result<AttemptRow> {
    Ok(AttemptRow {
        n: get::<i64>(row, "n")? as u32,
        actor: get(row, "actor")?,
        started_at: time(get(row, "started_at")?),
        finished_at: get_time(row, "finished_at")?,
        outcome: outcome_of(row)?,
        http_status: get::<Option<i64>>(row, "http_status")?.map(|s| s as u16),
        reference: get(row, "reference")?,
        error: get(row, "error")?,
    })
}

const EVENT_KINDS: [Kind; 10] = [
    Kind::Int,
    Kind::Text,
    Kind::Int,
    Kind::Text,
    Kind::Text,
    Kind::Text,
    Kind::Text,
    Kind::Text,
    Kind::Text,
    Kind::Text,
];
const EVENT_INSERT: &str = "INSERT INTO events (operation_id, workflow, at, actor, kind, from_state, to_state, detail, action, restore)";

/// PostgreSQL: the events of [`EVENT_KINDS`] arrays from parameter `$first` on, appended in the
/// arrays' order.
pub(super) fn pg_event_insert(first: usize) -> String {
    format!(
        "{EVENT_INSERT} SELECT operation_id, workflow, at, actor, kind, from_state, to_state, detail, action, restore \
         FROM UNNEST({}) WITH ORDINALITY AS v(operation_id, workflow, at, actor, kind, from_state, to_state, detail, action, restore, i) \
         ORDER BY i",
        array_marks(first, &EVENT_KINDS)
    )
}

impl Tx {
    /// Appends audit events, in order.
    pub(crate) async fn insert_events(&mut self, events: &[NewEvent<'_>]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        match &mut self.open {
            Open::Sqlite(_) => {
                for run in runs(events) {
                    sqlite_events(run).execute(self.db()).await?;
                }
            }
            Open::Postgres(t, _) => {
                let sql = pg_event_insert(1);
                let arrays = event_arrays(events);
                pg_query(&sql, arrays).execute(&mut **t).await.map_err(db)?;
            }
        }
        Ok(())
    }

    /// Every stored attempt of these operations: `(operation id, number)` to its outcome
    /// (`None` while open).
    pub(crate) async fn attempt_outcomes(
        &mut self,
        ids: &[i64],
    ) -> Result<HashMap<(i64, u32), Option<Outcome>>> {
        let mut out = HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let decode = |r: &dyn super::sql::Cells| -> Result<((i64, u32), Option<Outcome>)> {
            Ok((
                (get(r, "operation_id")?, get::<i64>(r, "n")? as u32),
                outcome_of(r)?,
            ))
        };
        let keep = self.keeps_plans();
        match &mut self.open {
            Open::Sqlite(_) => {
                for id in ids {
                    let stmt = Stmt::new(
                        "SELECT operation_id, n, outcome FROM attempts WHERE operation_id = ?",
                        vec![Cell::Int(Some(*id))],
                    );
                    out.extend(stmt.rows(self.db(), decode).await?);
                }
            }
            Open::Postgres(t, _) => {
                let rows = sqlx::query(
                    "SELECT operation_id, n, outcome FROM attempts WHERE operation_id = ANY($1)",
                )
                .bind(ids)
                // planned for each call unless kept, like `load_ops`
                .persistent(keep)
                .fetch_all(&mut **t)
                .await
                .map_err(db)?;
                for r in &rows {
                    let (k, v) = decode(r)?;
                    out.insert(k, v);
                }
            }
        }
        Ok(out)
    }

    /// Attempt `n` of an operation.
    pub(crate) async fn attempt(&mut self, op_id: i64, n: u32) -> Result<Option<AttemptRow>> {
        let stmt = Stmt::new(
            format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE operation_id = $1 AND n = $2"),
            vec![Cell::Int(Some(op_id)), Cell::Int(Some(i64::from(n)))],
        );
        stmt.row(self.db(), attempt_from_row).await
    }
}

/// Rows to write on SQLite, as statements: runs of [`RUN`] rows, then the rest in runs of
/// halving sizes (64, 32, ..., 1): 30 rows are four statements, not thirty.
pub(super) fn runs<T>(rows: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        let size = std::iter::successors(Some(RUN), |s| (*s > 1).then_some(s / 2))
            .find(|s| *s <= rest.len())?;
        let (run, after) = rest.split_at(size);
        rest = after;
        Some(run)
    })
}

/// The most rows to a statement on SQLite. Runs of a power of two keep the prepared-statement
/// cache to eight statements a table, whatever the batch's size, and a group of the API's
/// writes (tens of rows) to a handful of statements: each is a round trip to the connection's
/// thread.
const RUN: usize = 128;

fn sqlite_events<'a>(events: &[NewEvent<'a>]) -> Stmt<'a> {
    Stmt::new(
        format!("{EVENT_INSERT} VALUES {}", rows_of_marks(events.len(), 10)),
        events.iter().flat_map(|e| e.cells()).collect(),
    )
}

pub(super) fn event_arrays<'a>(events: &[NewEvent<'a>]) -> Vec<Array<'a>> {
    let rows: Vec<[Cell<'a>; 10]> = events.iter().map(NewEvent::cells).collect();
    EVENT_KINDS
        .iter()
        .enumerate()
        .map(|(i, k)| Array::of(*k, rows.iter().map(|r| r[i])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn rows_go_in_runs_of_halving_sizes() {
        let sizes = |n: usize| runs(&vec![0u8; n]).map(<[u8]>::len).collect::<Vec<_>>();
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(1), [1]);
        assert_eq!(sizes(30), [16, 8, 4, 2]);
        assert_eq!(sizes(128), [128]);
        assert_eq!(sizes(300), [128, 128, 32, 8, 4]);
        let rows: Vec<u32> = (0..77).collect();
        let back: Vec<u32> = runs(&rows).flatten().copied().collect();
        assert_eq!(back, rows, "every row once, in order");
    }
}
