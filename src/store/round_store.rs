//! What a dispatcher's round (and a single change) asks of the database. One piece of ledger
//! logic runs on either connection: sqlx's (PostgreSQL, and SQLite for everything but rounds)
//! and SQLite's own (a round on SQLite, see [`super::direct`]).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;

use super::Backend;
use super::queries::BudgetRow;
use super::queries::{self, AttemptWrite, Lock, NewEvent, OpRow, Opened};
use super::rows::{AttemptRow, WorkflowRow, get, workflow_from_row};
use crate::domain::Op;
use crate::error::Result;

// Only this crate implements and calls it, on futures it awaits where it made them.
#[allow(async_fn_in_trait)]
pub(crate) trait RoundStore {
    /// The operations with these keys, by key, held as `lock` says until the transaction ends.
    async fn load_ops(&mut self, keys: &[&str], lock: Lock) -> Result<HashMap<String, (i64, Op)>>;
    /// See [`queries::due_ops_stmt`].
    /// Due operations of `destinations`, leaving out retries at the `starved` ones and every
    /// operation of the `held` workflows (no room left under their stopping threshold).
    #[allow(clippy::too_many_arguments)]
    async fn due_ops(
        &mut self,
        destinations: &[String],
        starved: &[String],
        held: &[String],
        now: DateTime<Utc>,
        limit: usize,
        lock: Option<Lock>,
    ) -> Result<Vec<(i64, Op)>>;
    /// A workflow's row, made if missing and held to the end of the transaction (PostgreSQL).
    async fn hold_workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>>;
    /// A workflow's exceptions now and its attempts still running.
    async fn threshold_counts(&mut self, workflow: &str, now: DateTime<Utc>) -> Result<(i64, i64)>;
    /// Sets a workflow's pause flag (compare-and-set on its version); false when it changed.
    async fn set_paused(
        &mut self,
        name: &str,
        paused: bool,
        reason: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool>;
    async fn insert_event(&mut self, event: &NewEvent<'_>) -> Result<()>;
    async fn budget(&mut self, destination: &str, lock: Option<Lock>) -> Result<Option<BudgetRow>>;
    /// False when another writer changed the budget first.
    async fn save_budget(
        &mut self,
        destination: &str,
        tokens: u32,
        refilled_at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool>;
    async fn attempt(&mut self, op_id: i64, n: u32) -> Result<Option<AttemptRow>>;
    async fn workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>>;
    /// See [`queries::write_rows`]: false when an operation changed meanwhile.
    async fn write_rows(
        &mut self,
        ops: &[OpRow<'_>],
        opened: &[Opened<'_>],
        closed: &[AttemptWrite<'_>],
        events: &[NewEvent<'_>],
    ) -> Result<bool>;
    /// Writes an attempt made elsewhere, with its outcome.
    async fn write_whole_attempt(&mut self, attempt: &AttemptWrite<'_>) -> Result<()>;
}

fn backend_of(conn: &AnyConnection) -> Backend {
    if conn.backend_name() == "SQLite" {
        Backend::Sqlite
    } else {
        Backend::Postgres
    }
}

impl RoundStore for AnyConnection {
    async fn load_ops(&mut self, keys: &[&str], lock: Lock) -> Result<HashMap<String, (i64, Op)>> {
        let backend = backend_of(self);
        queries::load_ops(self, keys, backend, lock).await
    }

    async fn due_ops(
        &mut self,
        destinations: &[String],
        starved: &[String],
        held: &[String],
        now: DateTime<Utc>,
        limit: usize,
        lock: Option<Lock>,
    ) -> Result<Vec<(i64, Op)>> {
        let backend = backend_of(self);
        queries::due_ops(self, destinations, starved, held, now, limit, backend, lock).await
    }

    async fn hold_workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        let lock = queries::lock_clause(backend_of(self), Lock::Wait);
        queries::ensure_workflow_stmt(name)
            .query()
            .execute(&mut *self)
            .await
            .map_err(queries::db)?;
        let row = queries::workflow_locked_stmt(name, lock)
            .query()
            .fetch_optional(&mut *self)
            .await
            .map_err(queries::db)?;
        row.as_ref().map(workflow_from_row).transpose()
    }

    async fn threshold_counts(&mut self, workflow: &str, now: DateTime<Utc>) -> Result<(i64, i64)> {
        let row = queries::threshold_counts_stmt(workflow, now)
            .query()
            .fetch_one(&mut *self)
            .await
            .map_err(queries::db)?;
        Ok((get(&row, "exceptions")?, get(&row, "running")?))
    }

    async fn set_paused(
        &mut self,
        name: &str,
        paused: bool,
        reason: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool> {
        queries::set_paused(self, name, paused, reason, by, at, expected_version).await
    }

    async fn insert_event(&mut self, event: &NewEvent<'_>) -> Result<()> {
        queries::insert_event(self, event).await
    }

    async fn budget(&mut self, destination: &str, lock: Option<Lock>) -> Result<Option<BudgetRow>> {
        let backend = backend_of(self);
        queries::budget(self, destination, backend, lock).await
    }

    async fn save_budget(
        &mut self,
        destination: &str,
        tokens: u32,
        refilled_at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool> {
        queries::save_budget(self, destination, tokens, refilled_at, expected_version).await
    }

    async fn attempt(&mut self, op_id: i64, n: u32) -> Result<Option<AttemptRow>> {
        queries::attempt(self, op_id, n).await
    }

    async fn workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        queries::workflow(self, name).await
    }

    async fn write_rows(
        &mut self,
        ops: &[OpRow<'_>],
        opened: &[Opened<'_>],
        closed: &[AttemptWrite<'_>],
        events: &[NewEvent<'_>],
    ) -> Result<bool> {
        queries::write_rows(self, ops, opened, closed, events).await
    }

    async fn write_whole_attempt(&mut self, attempt: &AttemptWrite<'_>) -> Result<()> {
        queries::insert_whole_attempt(self, attempt).await
    }
}
