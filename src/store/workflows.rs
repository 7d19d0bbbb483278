//! Workflows and destinations: their pause flags (manual: Staff actions), and what the workflows' stopping
//! thresholds count.

use chrono::{DateTime, Utc};

use super::sql::{Cell, Cells, Stmt, get, get_time, ms, time};
use super::{Db, Store, Tx};
use crate::error::Result;

/// What can be paused: a workflow (by staff or its stopping threshold) or a destination (by staff
/// or an `auth` answer, the manual's Destinations and the dispatcher). Both keep the same row in their own table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pausable {
    Workflow,
    Destination,
}

impl Pausable {
    /// What it is called in messages and errors.
    pub fn noun(self) -> &'static str {
        match self {
            Pausable::Workflow => "workflow",
            Pausable::Destination => "destination",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Pausable::Workflow => "workflows",
            Pausable::Destination => "destinations",
        }
    }
}

/// A workflow's or a destination's pause flag.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WorkflowRow {
    pub name: String,
    pub paused: bool,
    pub paused_reason: Option<String>,
    pub paused_by: Option<String>,
    /// When the pause flag last changed (for an unpaused row: when it was resumed).
    pub paused_at: Option<DateTime<Utc>>,
    pub version: i64,
}

fn workflow_from_row(row: &dyn Cells) -> Result<WorkflowRow> {
    Ok(WorkflowRow {
        name: get(row, "name")?,
        paused: get::<i64>(row, "paused")? != 0,
        paused_reason: get(row, "paused_reason")?,
        paused_by: get(row, "paused_by")?,
        paused_at: get_time(row, "paused_at")?,
        version: get(row, "version")?,
    })
}

const WORKFLOW_COLUMNS: &str = "name, paused, paused_reason, paused_by, paused_at, version";

/// The exceptions at a moment, for one workflow or all: how many, and when the oldest and the
/// newest became exceptions.
pub(crate) struct ExceptionSummary {
    pub count: i64,
    pub oldest: Option<DateTime<Utc>>,
    pub newest: Option<DateTime<Utc>>,
}

async fn pause_row(
    conn: Db<'_>,
    kind: Pausable,
    name: &str,
    hold: bool,
) -> Result<Option<WorkflowRow>> {
    let lock = match (&conn, hold) {
        (Db::Postgres(_), true) => " FOR UPDATE",
        _ => "",
    };
    let stmt = Stmt::new(
        format!(
            "SELECT {WORKFLOW_COLUMNS} FROM {} WHERE name = $1{lock}",
            kind.table()
        ),
        vec![Cell::Text(Some(name))],
    );
    stmt.row(conn, workflow_from_row).await
}

async fn exception_summary(
    conn: Db<'_>,
    workflow: Option<&str>,
    now: DateTime<Utc>,
) -> Result<ExceptionSummary> {
    let columns = "COUNT(*) AS n, MIN(exception_since) AS oldest, MAX(exception_since) AS newest";
    let stmt = match workflow {
        Some(w) => Stmt::new(
            format!(
                "SELECT {columns} FROM operations \
                 WHERE workflow = $1 AND exception_since IS NOT NULL AND exception_since <= $2"
            ),
            vec![Cell::Text(Some(w)), Cell::Int(Some(ms(now)))],
        ),
        None => Stmt::new(
            format!(
                "SELECT {columns} FROM operations WHERE exception_since IS NOT NULL AND exception_since <= $1"
            ),
            vec![Cell::Int(Some(ms(now)))],
        ),
    };
    stmt.one(conn, |row| {
        Ok(ExceptionSummary {
            count: get(row, "n")?,
            oldest: get::<Option<i64>>(row, "oldest")?.map(time),
            newest: get::<Option<i64>>(row, "newest")?.map(time),
        })
    })
    .await
}

impl Tx {
    /// Which of these workflows and destinations are paused now, in one statement: each paused
    /// one as (whether it is a workflow, its name).
    pub(crate) async fn paused_among(
        &mut self,
        workflows: &[&str],
        destinations: &[&str],
    ) -> Result<Vec<(bool, String)>> {
        let list = |first: usize, n: usize| {
            if n == 0 {
                "(NULL)".to_string()
            } else {
                super::sql::marks(super::sql::Marks::Numbered, first, n)
            }
        };
        let sql = format!(
            "SELECT 1 AS w, name FROM workflows WHERE paused = 1 AND name IN {} \
             UNION ALL SELECT 0 AS w, name FROM destinations WHERE paused = 1 AND name IN {}",
            list(1, workflows.len()),
            list(workflows.len() + 1, destinations.len())
        );
        let cells = workflows
            .iter()
            .chain(destinations)
            .map(|n| Cell::Text(Some(*n)))
            .collect();
        Stmt::new(sql, cells)
            .rows(self.db(), |r| {
                Ok((get::<i64>(r, "w")? == 1, get::<String>(r, "name")?))
            })
            .await
    }

    pub(crate) async fn workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        pause_row(self.db(), Pausable::Workflow, name, false).await
    }

    /// A destination as a caller's start reads it, in one statement: why it is paused (if it
    /// is), and its health as stored (JSON; none: never troubled).
    pub(crate) async fn destination_now(
        &mut self,
        name: &str,
    ) -> Result<(Option<String>, Option<String>)> {
        let stmt = Stmt::new(
            "SELECT (SELECT COALESCE(paused_reason, '') FROM destinations WHERE name = $1 AND paused = 1) AS paused, \
             (SELECT health FROM retry_budgets WHERE destination = $1) AS health"
                .to_string(),
            vec![Cell::Text(Some(name))],
        );
        let row = stmt
            .row(self.db(), |r| Ok((get(r, "paused")?, get(r, "health")?)))
            .await?;
        Ok(row.unwrap_or((None, None)))
    }

    /// A workflow's or destination's pause row, as it stands.
    pub(crate) async fn pause_row(
        &mut self,
        kind: Pausable,
        name: &str,
    ) -> Result<Option<WorkflowRow>> {
        pause_row(self.db(), kind, name, false).await
    }

    /// A workflow's row, made if missing (unpaused, never paused or resumed) and held to the end
    /// of the transaction on PostgreSQL: the rounds of several dispatchers take turns on a
    /// workflow with a stopping threshold. SQLite's write transaction holds the whole database.
    pub(crate) async fn hold_workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        let ensure = Stmt::new(
            "INSERT INTO workflows (name, paused, version) VALUES ($1, 0, 1) ON CONFLICT (name) DO NOTHING",
            vec![Cell::Text(Some(name))],
        );
        ensure.execute(self.db()).await?;
        pause_row(self.db(), Pausable::Workflow, name, true).await
    }

    /// A workflow's exceptions at `now`, and its attempts still running (in flight, inside their
    /// timeout): what its threshold counts, and what may yet become exceptions.
    pub(crate) async fn threshold_counts(
        &mut self,
        workflow: &str,
        now: DateTime<Utc>,
    ) -> Result<(i64, i64)> {
        let stmt = Stmt::new(
            "SELECT COALESCE(SUM(CASE WHEN exception_since <= $2 THEN 1 ELSE 0 END), 0) AS exceptions, \
             COALESCE(SUM(CASE WHEN exception_since > $2 AND state = 'in_flight' THEN 1 ELSE 0 END), 0) AS running \
             FROM operations WHERE workflow = $1 AND exception_since IS NOT NULL",
            vec![Cell::Text(Some(workflow)), Cell::Int(Some(ms(now)))],
        );
        stmt.one(self.db(), |row| {
            Ok((get(row, "exceptions")?, get(row, "running")?))
        })
        .await
    }

    /// Sets a workflow's or destination's pause flag, a compare-and-set on its version (`None`:
    /// the row is new). False when another writer changed it first.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn set_paused(
        &mut self,
        kind: Pausable,
        name: &str,
        paused: bool,
        reason: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool> {
        let mut cells = vec![
            Cell::Text(Some(name)),
            Cell::Int(Some(i64::from(paused))),
            Cell::Text(reason),
            Cell::Text(Some(by)),
            Cell::Int(Some(ms(at))),
        ];
        let table = kind.table();
        let sql = match expected_version {
            None => format!(
                "INSERT INTO {table} (name, paused, paused_reason, paused_by, paused_at, version) \
                 VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (name) DO NOTHING"
            ),
            Some(v) => {
                cells.push(Cell::Int(Some(v)));
                format!(
                    "UPDATE {table} SET paused = $2, paused_reason = $3, paused_by = $4, paused_at = $5, \
                     version = version + 1 WHERE name = $1 AND version = $6"
                )
            }
        };
        let stmt = Stmt::new(sql, cells);
        Ok(stmt.execute(self.db()).await? == 1)
    }

    pub(crate) async fn exception_summary(
        &mut self,
        workflow: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<ExceptionSummary> {
        exception_summary(self.db(), workflow, now).await
    }
}

impl Store {
    /// Whether a workflow or destination is paused now.
    pub(crate) async fn paused_now(&self, kind: Pausable, name: &str) -> Result<bool> {
        let row = pause_row(self.conn().await?.db(), kind, name, false).await?;
        Ok(row.is_some_and(|r| r.paused))
    }

    /// The workflows or destinations paused now, by name.
    pub(crate) async fn paused(&self, kind: Pausable) -> Result<Vec<WorkflowRow>> {
        let stmt = Stmt::new(
            format!(
                "SELECT {WORKFLOW_COLUMNS} FROM {} WHERE paused = 1 ORDER BY name",
                kind.table()
            ),
            Vec::new(),
        );
        stmt.rows(
            super::replica::reads(self).conn().await?.db(),
            workflow_from_row,
        )
        .await
    }
}
