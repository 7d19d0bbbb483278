//! Runs (manual: Runs): a run's operations, found by the run they were recorded with (index
//! `operations_run`), and the run's own row (schema 12), kept in the transaction that records or
//! settles one of its operations: who holds the run, whether a person closed it, and the wait
//! between declared steps by which the stalled runs are found (partial index `runs_waiting`).

use chrono::{DateTime, Utc};

use super::Store;
use super::columns;
use super::sql::{Cell, Cells, Stmt, db, get, get_time, ms};
use crate::domain::run_action::RunRow;
use crate::domain::{Claim, Op, Resolution, State};
use crate::error::{Error, Result};

/// A run's row as stored: its own part, and what the ledger keeps of its steps.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredRun {
    pub row: RunRow,
    pub kept: RunKept,
}

/// What the ledger keeps in a run's row from its operations (see schema 12).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RunKept {
    pub waiting_since: Option<DateTime<Utc>>,
    pub after_step: Option<String>,
    pub next_step: Option<String>,
    pub stalled_at: Option<DateTime<Utc>>,
    pub done_at: Option<DateTime<Utc>>,
}

/// One operation of a run, as keeping the run's row needs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunOpRow {
    pub run: String,
    pub key: String,
    pub step: String,
    pub state: State,
    pub resolution: Option<Resolution>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub exception_since: Option<DateTime<Utc>>,
    pub superseded_by: Option<String>,
}

/// A run's row to write: new (`started_at` and `workflow` taken) or kept.
pub(crate) struct RunWrite<'a> {
    pub run: &'a str,
    pub workflow: &'a str,
    pub started_at: DateTime<Utc>,
    pub kept: &'a RunKept,
}

pub(super) const RUN_COLUMNS: &str = "run, workflow, started_at, waiting_since, after_step, next_step, \
     stalled_at, done_at, claimed_by, claim_expires_at, closed_at, resolution, version";

pub(super) fn run_from_row(r: &dyn Cells) -> Result<StoredRun> {
    let resolution: Option<String> = get(r, "resolution")?;
    let started_at = get_time(r, "started_at")?.unwrap_or_default();
    let claim = match (
        get::<Option<String>>(r, "claimed_by")?,
        get_time(r, "claim_expires_at")?,
    ) {
        (Some(by), Some(expires)) => Some(Claim {
            by,
            since: started_at,
            expires,
        }),
        _ => None,
    };
    Ok(StoredRun {
        row: RunRow {
            run: get(r, "run")?,
            workflow: get(r, "workflow")?,
            started_at,
            claim,
            closed_at: get_time(r, "closed_at")?,
            resolution: resolution
                .map(|s| Resolution::parse(&s).map_err(Error::Unavailable))
                .transpose()?,
            version: get(r, "version")?,
        },
        kept: RunKept {
            waiting_since: get_time(r, "waiting_since")?,
            after_step: get(r, "after_step")?,
            next_step: get(r, "next_step")?,
            stalled_at: get_time(r, "stalled_at")?,
            done_at: get_time(r, "done_at")?,
        },
    })
}

pub(super) fn run_op_from_row(r: &dyn Cells) -> Result<RunOpRow> {
    let state: String = get(r, "state")?;
    let resolution: Option<String> = get(r, "resolution")?;
    Ok(RunOpRow {
        run: get(r, "run")?,
        key: get(r, "key")?,
        step: get(r, "step")?,
        state: State::parse(&state).map_err(Error::Unavailable)?,
        resolution: resolution
            .map(|s| Resolution::parse(&s).map_err(Error::Unavailable))
            .transpose()?,
        created_at: get_time(r, "created_at")?.unwrap_or_default(),
        updated_at: get_time(r, "updated_at")?.unwrap_or_default(),
        exception_since: get_time(r, "exception_since")?,
        superseded_by: get(r, "superseded_by")?,
    })
}

impl Store {
    /// Every operation of `run`, in the order they were recorded.
    pub(crate) async fn ops_of_run(&self, run: &str) -> Result<Vec<(i64, Op)>> {
        let stmt = Stmt::new(
            format!(
                "SELECT {} FROM operations WHERE run = $1 ORDER BY id",
                columns::select()
            ),
            vec![Cell::Text(Some(run))],
        );
        stmt.rows(self.conn().await?.db(), columns::decode).await
    }

    /// The row of `run`, if it was ever recorded.
    pub(crate) async fn run_row(&self, run: &str) -> Result<Option<StoredRun>> {
        Stmt::new(
            format!("SELECT {RUN_COLUMNS} FROM runs WHERE run = $1"),
            vec![Cell::Text(Some(run))],
        )
        .row(self.conn().await?.db(), run_from_row)
        .await
    }

    /// The runs waiting between declared steps whose wait began at or before the cutoff of their
    /// workflow (`cutoffs`: workflow to the latest start of a wait that has stalled by now;
    /// `other`: the cutoff of any other workflow), not closed: the stalled runs, oldest stall
    /// first (a range of the partial index `runs_waiting`, never a scan of the runs). At most
    /// `limit`, after `after` (a wait's start and the run's id).
    pub(crate) async fn stalled_runs(
        &self,
        cutoffs: &[(String, DateTime<Utc>)],
        other: DateTime<Utc>,
        after: Option<(DateTime<Utc>, i64)>,
        limit: i64,
    ) -> Result<Vec<(i64, StoredRun)>> {
        let (cond, mut cells) = stalled_condition(cutoffs, other);
        let mut sql = format!("SELECT id, {RUN_COLUMNS} FROM runs WHERE {cond}");
        if let Some((at, id)) = after {
            let n = cells.len();
            sql.push_str(&format!(
                " AND (waiting_since, id) > (${}, ${})",
                n + 1,
                n + 2
            ));
            cells.push(Cell::Int(Some(ms(at))));
            cells.push(Cell::Int(Some(id)));
        }
        sql.push_str(&format!(
            " ORDER BY waiting_since, id LIMIT ${}",
            cells.len() + 1
        ));
        cells.push(Cell::Int(Some(limit)));
        Stmt::new(sql, cells)
            .rows(self.conn().await?.db(), |r| {
                Ok((get(r, "id")?, run_from_row(r)?))
            })
            .await
    }

    /// How many runs are stalled now, by workflow, with the starts of its oldest and newest
    /// waits.
    pub(crate) async fn count_stalled(
        &self,
        cutoffs: &[(String, DateTime<Utc>)],
        other: DateTime<Utc>,
    ) -> Result<Vec<(String, i64, DateTime<Utc>, DateTime<Utc>)>> {
        let (cond, cells) = stalled_condition(cutoffs, other);
        Stmt::new(
            format!(
                "SELECT workflow, COUNT(*) AS n, MIN(waiting_since) AS oldest, \
                 MAX(waiting_since) AS newest FROM runs \
                 WHERE {cond} GROUP BY workflow ORDER BY workflow"
            ),
            cells,
        )
        .rows(super::replica::reads(self).conn().await?.db(), |r| {
            Ok((
                get(r, "workflow")?,
                get(r, "n")?,
                get_time(r, "oldest")?.unwrap_or_default(),
                get_time(r, "newest")?.unwrap_or_default(),
            ))
        })
        .await
    }

    /// A page of runs in the order they started (newest first), before the id `before`,
    /// optionally of one workflow.
    pub(crate) async fn runs_page(
        &self,
        workflow: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<(i64, StoredRun)>> {
        let mut cond = vec!["1 = 1".to_string()];
        let mut cells = Vec::new();
        if let Some(w) = workflow {
            cells.push(Cell::Text(Some(w)));
            cond.push(format!("workflow = ${}", cells.len()));
        }
        if let Some(id) = before {
            cells.push(Cell::Int(Some(id)));
            cond.push(format!("id < ${}", cells.len()));
        }
        cells.push(Cell::Int(Some(limit)));
        Stmt::new(
            format!(
                "SELECT id, {RUN_COLUMNS} FROM runs WHERE {} ORDER BY id DESC LIMIT ${}",
                cond.join(" AND "),
                cells.len()
            ),
            cells,
        )
        .rows(self.conn().await?.db(), |r| {
            Ok((get(r, "id")?, run_from_row(r)?))
        })
        .await
    }

    /// The operations of these runs, as keeping their rows needs them (one round trip on
    /// PostgreSQL).
    pub(crate) async fn ops_of_runs(&self, runs: &[&str]) -> Result<Vec<RunOpRow>> {
        let mut conn = self.conn().await?;
        select_run_ops(conn.db(), runs).await
    }
}

/// The condition of a stalled run: waiting since at or before its workflow's cutoff, not closed
/// (the partial index's own condition, word for word).
pub(super) fn stalled_condition(
    cutoffs: &[(String, DateTime<Utc>)],
    other: DateTime<Utc>,
) -> (String, Vec<Cell<'_>>) {
    let mut cells = Vec::new();
    let cutoff = cutoff_case(&mut cells, cutoffs, other);
    (
        format!("waiting_since IS NOT NULL AND closed_at IS NULL AND waiting_since <= {cutoff}"),
        cells,
    )
}

/// Each workflow's time (and `other` for the rest), as one expression over the row's workflow;
/// its parameters are pushed onto `cells`.
pub(super) fn cutoff_case<'a>(
    cells: &mut Vec<Cell<'a>>,
    cutoffs: &'a [(String, DateTime<Utc>)],
    other: DateTime<Utc>,
) -> String {
    let mut arms = String::new();
    for (w, t) in cutoffs {
        cells.push(Cell::Text(Some(w.as_str())));
        cells.push(Cell::Int(Some(ms(*t))));
        arms.push_str(&format!(" WHEN ${} THEN ${}", cells.len() - 1, cells.len()));
    }
    cells.push(Cell::Int(Some(ms(other))));
    if arms.is_empty() {
        format!("${}", cells.len())
    } else {
        format!("CASE workflow{arms} ELSE ${} END", cells.len())
    }
}

const RUN_OP_COLUMNS: &str =
    "run, key, step, state, resolution, created_at, updated_at, exception_since, superseded_by";

pub(super) async fn select_run_ops(conn: super::Db<'_>, runs: &[&str]) -> Result<Vec<RunOpRow>> {
    let mut out = Vec::new();
    match conn {
        super::Db::Sqlite(c) => {
            let sql = format!("SELECT {RUN_OP_COLUMNS} FROM operations WHERE run = $1 ORDER BY id");
            for run in runs {
                let stmt = Stmt::new(sql.as_str(), vec![Cell::Text(Some(*run))]);
                out.extend(
                    stmt.rows(super::Db::Sqlite(&mut *c), run_op_from_row)
                        .await?,
                );
            }
        }
        super::Db::Postgres(c) => {
            let sql =
                format!("SELECT {RUN_OP_COLUMNS} FROM operations WHERE run = ANY($1) ORDER BY id");
            // planned for each call (see `Tx::load_ops`): a plan kept from a nearly empty table
            // scans the whole table once it is not
            let rows = sqlx::query(&sql)
                .bind(runs)
                .persistent(false)
                .fetch_all(c)
                .await
                .map_err(db)?;
            for r in &rows {
                out.push(run_op_from_row(r)?);
            }
        }
    }
    Ok(out)
}
