//! What a dispatcher's round (and a single change) asks of the database. One piece of ledger
//! logic runs on either connection: sqlx's (PostgreSQL, and SQLite for everything but rounds)
//! and SQLite's own (a round on SQLite, see [`super::direct`]).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;

use super::Backend;
use super::queries::BudgetRow;
use super::queries::{self, AttemptWrite, Lock, NewEvent, OpRow, Opened};
use super::rows::{AttemptRow, WorkflowRow};
use crate::domain::Op;
use crate::error::Result;

// Only this crate implements and calls it, on futures it awaits where it made them.
#[allow(async_fn_in_trait)]
pub(crate) trait RoundStore {
    /// The operations with these keys, by key, held as `lock` says until the transaction ends.
    async fn load_ops(&mut self, keys: &[&str], lock: Lock) -> Result<HashMap<String, (i64, Op)>>;
    /// See [`queries::due_ops_stmt`].
    async fn due_ops(
        &mut self,
        destinations: &[String],
        starved: &[String],
        now: DateTime<Utc>,
        limit: usize,
        lock: Option<Lock>,
    ) -> Result<Vec<(i64, Op)>>;
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
        now: DateTime<Utc>,
        limit: usize,
        lock: Option<Lock>,
    ) -> Result<Vec<(i64, Op)>> {
        let backend = backend_of(self);
        queries::due_ops(self, destinations, starved, now, limit, backend, lock).await
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
