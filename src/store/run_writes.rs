//! A run's row as a write transaction holds and writes it (schema 12): held in run order, the
//! kept part written for many runs in one statement on PostgreSQL, a person's action as a
//! compare-and-set on its version.

use std::collections::HashMap;

use super::arrays::{Array, pg_query};
use super::columns;
use super::runs::{RUN_COLUMNS, RunOpRow, RunWrite, StoredRun, run_from_row, select_run_ops};
use super::sql::{Cell, Stmt, db, ms, opt_ms};
use super::{Open, Tx};
use crate::domain::run_action::RunRow;
use crate::error::Result;

impl Tx {
    /// The rows of these runs that exist, held until the transaction ends (PostgreSQL, in run
    /// order): the writers of one run's operations take turns keeping its row.
    pub(crate) async fn lock_runs(&mut self, runs: &[&str]) -> Result<HashMap<String, StoredRun>> {
        let mut found = HashMap::new();
        match &mut self.open {
            Open::Sqlite(_) => {
                let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run = $1");
                for run in runs {
                    let stmt = Stmt::new(sql.as_str(), vec![Cell::Text(Some(*run))]);
                    if let Some(r) = stmt.row(self.db(), run_from_row).await? {
                        found.insert(r.row.run.clone(), r);
                    }
                }
            }
            Open::Postgres(t, _) => {
                let sql = format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE run = ANY($1) ORDER BY run FOR UPDATE"
                );
                // planned for each call (see `Tx::load_ops`)
                let rows = sqlx::query(&sql)
                    .bind(runs)
                    .persistent(false)
                    .fetch_all(&mut **t)
                    .await
                    .map_err(db)?;
                for r in &rows {
                    let r = run_from_row(r)?;
                    found.insert(r.row.run.clone(), r);
                }
            }
        }
        Ok(found)
    }

    /// The rows of these runs, made where they do not exist yet, and held until the transaction
    /// ends (in run order; PostgreSQL: one statement that inserts or locks each): by run, the row
    /// and whether this transaction made it (then every operation of the run is this
    /// transaction's own). `new`: each run with its workflow and first operation's time.
    pub(crate) async fn make_or_hold_runs(
        &mut self,
        new: &[(&str, &str, chrono::DateTime<chrono::Utc>)],
    ) -> Result<HashMap<String, (StoredRun, bool)>> {
        let mut out = HashMap::new();
        match &mut self.open {
            Open::Sqlite(_) => {
                // one writer at a time: what is not there is this transaction's to make
                let names: Vec<&str> = new.iter().map(|(r, _, _)| *r).collect();
                let locked = self.lock_runs(&names).await?;
                let mut made = Vec::new();
                for (run, workflow, started) in new {
                    match locked.get(*run) {
                        Some(r) => {
                            out.insert(r.row.run.clone(), (r.clone(), false));
                        }
                        None => made.push((*run, *workflow, *started)),
                    }
                }
                for (run, workflow, started) in made {
                    Stmt::new(
                        "INSERT INTO runs (run, workflow, started_at) VALUES ($1, $2, $3)",
                        vec![
                            Cell::Text(Some(run)),
                            Cell::Text(Some(workflow)),
                            Cell::Int(Some(ms(started))),
                        ],
                    )
                    .execute(self.db())
                    .await?;
                    out.insert(run.to_string(), (fresh(run, workflow, started), true));
                }
            }
            Open::Postgres(t, _) => {
                let mut sorted = new.to_vec();
                sorted.sort_by_key(|(r, _, _)| *r);
                let sql = format!(
                    "INSERT INTO runs (run, workflow, started_at) \
                     SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[]) ORDER BY 1 \
                     ON CONFLICT (run) DO UPDATE SET run = EXCLUDED.run \
                     RETURNING {RUN_COLUMNS}, (xmax = 0) AS made"
                );
                let arrays = vec![
                    Array::Text(sorted.iter().map(|(r, _, _)| Some(*r)).collect()),
                    Array::Text(sorted.iter().map(|(_, w, _)| Some(*w)).collect()),
                    Array::Int(sorted.iter().map(|(_, _, t)| Some(ms(*t))).collect()),
                ];
                for r in pg_query(&sql, arrays)
                    .fetch_all(&mut **t)
                    .await
                    .map_err(db)?
                {
                    let made: bool = sqlx::Row::try_get(&r, "made").map_err(db)?;
                    let row = run_from_row(&r)?;
                    out.insert(row.row.run.clone(), (row, made));
                }
            }
        }
        Ok(out)
    }

    /// The operations of these runs, as this transaction sees them.
    pub(crate) async fn ops_of_runs(&mut self, runs: &[&str]) -> Result<Vec<RunOpRow>> {
        select_run_ops(self.db(), runs).await
    }

    /// Writes what the ledger keeps of these runs: a new run's row, or the kept part of one.
    pub(crate) async fn keep_runs(&mut self, runs: &[RunWrite<'_>]) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let sets = "waiting_since = excluded.waiting_since, after_step = excluded.after_step, \
             next_step = excluded.next_step, stalled_at = excluded.stalled_at, \
             done_at = excluded.done_at";
        match &mut self.open {
            Open::Sqlite(_) => {
                let sql = format!(
                    "INSERT INTO runs (run, workflow, started_at, waiting_since, after_step, \
                     next_step, stalled_at, done_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                     ON CONFLICT (run) DO UPDATE SET {sets}"
                );
                for w in runs {
                    Stmt::new(sql.as_str(), run_cells(w).to_vec())
                        .execute(self.db())
                        .await?;
                }
            }
            Open::Postgres(t, _) => {
                let kinds = [
                    "TEXT", "TEXT", "BIGINT", "BIGINT", "TEXT", "TEXT", "BIGINT", "BIGINT",
                ];
                let marks: Vec<String> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, k)| format!("${}::{k}[]", i + 1))
                    .collect();
                let sql = format!(
                    "INSERT INTO runs (run, workflow, started_at, waiting_since, after_step, \
                     next_step, stalled_at, done_at) SELECT * FROM UNNEST({}) \
                     ON CONFLICT (run) DO UPDATE SET {}",
                    marks.join(", "),
                    sets.replace("excluded.", "EXCLUDED.")
                );
                let rows: Vec<[Cell; 8]> = runs.iter().map(run_cells).collect();
                let arrays = (0..8)
                    .map(|i| {
                        let kind = if kinds[i] == "TEXT" {
                            columns::Kind::Text
                        } else {
                            columns::Kind::Int
                        };
                        Array::of(kind, rows.iter().map(|r| r[i]))
                    })
                    .collect();
                pg_query(&sql, arrays).execute(&mut **t).await.map_err(db)?;
            }
        }
        Ok(())
    }

    /// A run's own row after a person's action: a compare-and-set on its version. False when
    /// another writer changed it first.
    pub(crate) async fn write_run(&mut self, row: &RunRow, expected: i64) -> Result<bool> {
        let claim = row.claim.as_ref();
        let n = Stmt::new(
            "UPDATE runs SET claimed_by = $1, claim_expires_at = $2, closed_at = $3, \
             resolution = $4, version = $5 WHERE run = $6 AND version = $7",
            vec![
                Cell::Text(claim.map(|c| c.by.as_str())),
                Cell::Int(claim.map(|c| ms(c.expires))),
                Cell::Int(opt_ms(row.closed_at)),
                Cell::Text(row.resolution.map(|r| r.as_str())),
                Cell::Int(Some(row.version)),
                Cell::Text(Some(row.run.as_str())),
                Cell::Int(Some(expected)),
            ],
        )
        .execute(self.db())
        .await?;
        Ok(n == 1)
    }
}

/// A run's row as it is made: nobody holds it, nothing kept yet.
fn fresh(run: &str, workflow: &str, started: chrono::DateTime<chrono::Utc>) -> StoredRun {
    StoredRun {
        row: RunRow {
            run: run.into(),
            workflow: workflow.into(),
            started_at: started,
            claim: None,
            closed_at: None,
            resolution: None,
            version: 0,
        },
        kept: Default::default(),
    }
}

fn run_cells<'a>(w: &RunWrite<'a>) -> [Cell<'a>; 8] {
    [
        Cell::Text(Some(w.run)),
        Cell::Text(Some(w.workflow)),
        Cell::Int(Some(ms(w.started_at))),
        Cell::Int(opt_ms(w.kept.waiting_since)),
        Cell::Text(w.kept.after_step.as_deref()),
        Cell::Text(w.kept.next_step.as_deref()),
        Cell::Int(opt_ms(w.kept.stalled_at)),
        Cell::Int(opt_ms(w.kept.done_at)),
    ]
}
