//! The review's rows of runs (manual: Runs, The review after a release): how many runs started, were done,
//! were closed and stalled (then rerun) in a window, each a range of an index of the runs' row;
//! and the steps of the latest runs started in it, for the time from one step settling to the
//! next being recorded.

use chrono::{DateTime, Utc};

use super::Store;
use super::runs::RunOpRow;
use super::sql::{Cell, Stmt, get, ms};
use crate::error::Result;

/// The runs of a window by what happened to them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RunCounts {
    pub started: i64,
    pub done: i64,
    pub closed: i64,
    /// Stalled in the window and then rerun (a run stalled now is counted apart).
    pub stalled_then_rerun: i64,
}

/// The most runs whose steps the review reads for its step times.
pub(crate) const RUNS_SAMPLED: i64 = 10_000;

impl Store {
    /// How many runs (of `workflow`, or all) started, were done, closed, and stalled and were
    /// rerun in `[since, until]`.
    pub(crate) async fn run_counts(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        workflow: Option<&str>,
    ) -> Result<RunCounts> {
        let count = |column: &str| {
            let mut cells = vec![Cell::Int(Some(ms(since))), Cell::Int(Some(ms(until)))];
            let mut sql =
                format!("(SELECT COUNT(*) FROM runs WHERE {column} >= $1 AND {column} <= $2");
            if let Some(w) = workflow {
                cells.push(Cell::Text(Some(w)));
                sql.push_str(" AND workflow = $3");
            }
            sql.push(')');
            (sql, cells)
        };
        let (started, cells) = count("started_at");
        let (done, _) = count("done_at");
        let (closed, _) = count("closed_at");
        let (stalled, _) = count("stalled_at");
        Stmt::new(
            format!(
                "SELECT {started} AS started, {done} AS done, {closed} AS closed, \
                 {stalled} AS stalled"
            ),
            cells,
        )
        .one(super::replica::reads(self).conn().await?.db(), |r| {
            Ok(RunCounts {
                started: get(r, "started")?,
                done: get(r, "done")?,
                closed: get(r, "closed")?,
                stalled_then_rerun: get(r, "stalled")?,
            })
        })
        .await
    }

    /// How many runs stalled between the lower and the upper cutoffs (each a workflow's latest
    /// start of a wait, see `stalled_runs`) and are stalled still.
    pub(crate) async fn count_stalled_between(
        &self,
        upper: &[(String, DateTime<Utc>)],
        upper_other: DateTime<Utc>,
        lower: &[(String, DateTime<Utc>)],
        lower_other: DateTime<Utc>,
    ) -> Result<i64> {
        let (cond, mut cells) = super::runs::stalled_condition(upper, upper_other);
        let from = super::runs::cutoff_case(&mut cells, lower, lower_other);
        self.scalar(Stmt::new(
            format!("SELECT COUNT(*) AS n FROM runs WHERE {cond} AND waiting_since > {from}"),
            cells,
        ))
        .await
    }

    /// The operations of the latest [`RUNS_SAMPLED`] runs started in `[since, until]`, with
    /// each run's workflow.
    pub(crate) async fn steps_of_recent_runs(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        workflow: Option<&str>,
    ) -> Result<Vec<(String, RunOpRow)>> {
        let mut cells = vec![
            Cell::Int(Some(ms(since))),
            Cell::Int(Some(ms(until))),
            Cell::Int(Some(RUNS_SAMPLED)),
        ];
        let mut only = String::new();
        if let Some(w) = workflow {
            cells.push(Cell::Text(Some(w)));
            only.push_str(" AND workflow = $4");
        }
        Stmt::new(
            format!(
                "SELECT r.workflow AS run_workflow, o.run, o.key, o.step, o.state, o.resolution, \
                 o.created_at, o.updated_at, o.exception_since, o.superseded_by \
                 FROM (SELECT run, workflow FROM runs WHERE started_at >= $1 AND started_at <= $2{only} \
                   ORDER BY started_at DESC LIMIT $3) r \
                 JOIN operations o ON o.run = r.run ORDER BY o.id"
            ),
            cells,
        )
        .rows(super::replica::reads(self).conn().await?.db(), |r| {
            Ok((get(r, "run_workflow")?, super::runs::run_op_from_row(r)?))
        })
        .await
    }
}
