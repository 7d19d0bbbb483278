//! SQLite through its own C API (rusqlite, on the very library sqlx links), for the dispatcher's
//! rounds: a round's dozen statements run on one blocking thread, with statements prepared once.
//! Through sqlx each statement is handed to a connection thread and back, and those hand-offs
//! were most of a round's time against a fast destination. The SQL is the store's, shared with
//! the sqlx path; everything else in settle goes through sqlx.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, Statement};

use super::queries::{
    self, AttemptWrite, Cell, Lock, Marks, NewEvent, OpRow, Opened, Stmt, attempt_stmt,
    budget_stmt, due_ops_stmt, finish_attempts_stmt, insert_events_stmt, load_ops_stmt,
    save_budget_stmt, start_attempts_stmt, update_ops_stmt, whole_attempt_stmt, workflow_stmt,
};
use super::round_store::RoundStore;
use super::rows::{
    AttemptRow, Cells, Col, WorkflowRow, attempt_from_row, get, op_from_row, workflow_from_row,
};
use crate::domain::Op;
use crate::domain::redact::redact_text;
use crate::error::{Error, Result};

fn err(e: rusqlite::Error) -> Error {
    // Driver messages can quote values; they go through redaction like everything else.
    Error::Unavailable(format!(
        "database: {}",
        redact_text(&e.to_string()).replace('\n', " ")
    ))
}

impl Cells for rusqlite::Row<'_> {
    fn int(&self, col: Col) -> Result<Option<i64>> {
        match col {
            Col::Name(n) => self.get::<_, Option<i64>>(n),
            Col::At(i) => self.get::<_, Option<i64>>(i),
        }
        .map_err(err)
    }

    fn text(&self, col: Col) -> Result<Option<String>> {
        match col {
            Col::Name(n) => self.get::<_, Option<String>>(n),
            Col::At(i) => self.get::<_, Option<String>>(i),
        }
        .map_err(err)
    }
}

/// The dispatcher's own SQLite connection, opened at its first round.
#[derive(Debug)]
pub(crate) struct Direct {
    path: PathBuf,
    cache_kib: &'static str,
    conn: Mutex<Option<Connection>>,
}

/// How many times a round is tried again when another writer changed an operation first.
const TRIES: usize = 8;

impl Direct {
    pub(crate) fn new(path: PathBuf, cache_kib: &'static str) -> Direct {
        Direct {
            path,
            cache_kib,
            conn: Mutex::new(None),
        }
    }

    fn open(&self) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        conn.execute_batch(&format!(
            "PRAGMA busy_timeout = 15000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA cache_size = {}",
            self.cache_kib
        ))
        .map_err(err)?;
        // a round's statements, one per size of VALUES list it has met
        conn.set_prepared_statement_cache_capacity(128);
        Ok(conn)
    }

    /// Closes the connection (the next round opens it again).
    pub(crate) fn close(&self) {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`: the write lock from the start), again
    /// from the start when it lost a compare-and-set race. Blocks: call it off the async threads.
    pub(crate) fn write<T>(
        &self,
        mut body: impl FnMut(&mut DirectTx<'_>) -> Result<Option<T>>,
    ) -> Result<T> {
        // A round that panicked rolled its transaction back as it unwound: the connection is fine.
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(self.open()?);
        }
        let conn = guard.as_mut().expect("opened above");
        for _ in 0..TRIES {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            let mut direct = DirectTx { tx };
            match body(&mut direct)? {
                Some(v) => {
                    direct.tx.commit().map_err(err)?;
                    return Ok(v);
                }
                // dropping the transaction rolls it back
                None => continue,
            }
        }
        Err(Error::Refused(
            "the operation kept changing under us; try again".into(),
        ))
    }
}

/// A write transaction on the dispatcher's own connection.
pub(crate) struct DirectTx<'c> {
    tx: rusqlite::Transaction<'c>,
}

fn bind(stmt: &mut Statement<'_>, cells: &[Cell<'_>]) -> Result<()> {
    // `$n` names a parameter; `?` takes the next one
    let numbered = stmt.parameter_name(1).is_some();
    for (i, cell) in cells.iter().enumerate() {
        let index = if numbered {
            match stmt.parameter_index(&format!("${}", i + 1)).map_err(err)? {
                Some(index) => index,
                None => continue,
            }
        } else {
            i + 1
        };
        match cell {
            Cell::Int(v) => stmt.raw_bind_parameter(index, v),
            Cell::Text(v) => stmt.raw_bind_parameter(index, v),
        }
        .map_err(err)?;
    }
    Ok(())
}

impl DirectTx<'_> {
    fn execute(&self, s: &Stmt<'_>) -> Result<usize> {
        let mut stmt = self.tx.prepare_cached(&s.sql).map_err(err)?;
        bind(&mut stmt, &s.cells)?;
        stmt.raw_execute().map_err(err)
    }

    fn rows<T>(
        &self,
        s: &Stmt<'_>,
        mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.tx.prepare_cached(&s.sql).map_err(err)?;
        bind(&mut stmt, &s.cells)?;
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(err)? {
            out.push(f(row)?);
        }
        Ok(out)
    }
}

impl RoundStore for DirectTx<'_> {
    async fn load_ops(&mut self, keys: &[&str], _lock: Lock) -> Result<HashMap<String, (i64, Op)>> {
        let mut found = HashMap::with_capacity(keys.len());
        for key in keys {
            // one statement per key: prepared once, whatever the number of keys
            let stmt = load_ops_stmt(Marks::InOrder, std::slice::from_ref(key), "");
            for (id, op) in self.rows(&stmt, |r| op_from_row(r))? {
                found.insert(op.key.clone(), (id, op));
            }
        }
        Ok(found)
    }

    async fn due_ops(
        &mut self,
        destinations: &[String],
        starved: &[String],
        held: &[String],
        now: DateTime<Utc>,
        limit: usize,
        _lock: Option<Lock>,
    ) -> Result<Vec<(i64, Op)>> {
        match due_ops_stmt(destinations, starved, held, now, limit, "") {
            Some(stmt) => self.rows(&stmt, |r| op_from_row(r)),
            None => Ok(Vec::new()),
        }
    }

    async fn hold_workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        // the write transaction already holds the whole database
        self.execute(&queries::ensure_workflow_stmt(name))?;
        Ok(self
            .rows(&workflow_stmt(name), |r| workflow_from_row(r))?
            .pop())
    }

    async fn threshold_counts(&mut self, workflow: &str, now: DateTime<Utc>) -> Result<(i64, i64)> {
        let stmt = queries::threshold_counts_stmt(workflow, now);
        self.rows(&stmt, |r| Ok((get(r, "exceptions")?, get(r, "running")?)))?
            .pop()
            .ok_or_else(|| Error::Unavailable("database: no count came back".into()))
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
        let stmt = queries::set_paused_stmt(name, paused, reason, by, at, expected_version);
        Ok(self.execute(&stmt)? == 1)
    }

    async fn insert_event(&mut self, event: &NewEvent<'_>) -> Result<()> {
        self.execute(&insert_events_stmt(
            Marks::InOrder,
            std::slice::from_ref(event),
        ))?;
        Ok(())
    }

    async fn budget(
        &mut self,
        destination: &str,
        _lock: Option<Lock>,
    ) -> Result<Option<queries::BudgetRow>> {
        let stmt = budget_stmt(destination, "");
        Ok(self.rows(&stmt, |r| queries::budget_from_row(r))?.pop())
    }

    async fn save_budget(
        &mut self,
        destination: &str,
        tokens: u32,
        refilled_at: DateTime<Utc>,
        expected_version: Option<i64>,
    ) -> Result<bool> {
        let stmt = save_budget_stmt(destination, tokens, refilled_at, expected_version);
        Ok(self.execute(&stmt)? == 1)
    }

    async fn attempt(&mut self, op_id: i64, n: u32) -> Result<Option<AttemptRow>> {
        Ok(self
            .rows(&attempt_stmt(op_id, n), |r| attempt_from_row(r))?
            .pop())
    }

    async fn workflow(&mut self, name: &str) -> Result<Option<WorkflowRow>> {
        Ok(self
            .rows(&workflow_stmt(name), |r| workflow_from_row(r))?
            .pop())
    }

    async fn write_rows(
        &mut self,
        ops: &[OpRow<'_>],
        opened: &[Opened<'_>],
        closed: &[AttemptWrite<'_>],
        events: &[NewEvent<'_>],
    ) -> Result<bool> {
        // row by row: each statement prepared once, whatever the size of the round
        let one = Marks::InOrder;
        for op in ops {
            if self.execute(&update_ops_stmt(one, std::slice::from_ref(op)))? != 1 {
                return Ok(false);
            }
        }
        for a in opened {
            self.execute(&start_attempts_stmt(one, std::slice::from_ref(a)))?;
        }
        for a in closed {
            self.execute(&finish_attempts_stmt(one, std::slice::from_ref(a)))?;
        }
        for e in events {
            self.execute(&insert_events_stmt(one, std::slice::from_ref(e)))?;
        }
        Ok(true)
    }

    async fn write_whole_attempt(&mut self, attempt: &AttemptWrite<'_>) -> Result<()> {
        self.execute(&whole_attempt_stmt(attempt))?;
        Ok(())
    }
}

/// Runs a future that never waits (one whose awaits are all on a [`DirectTx`]) to its end.
pub(crate) fn run_ready<F: std::future::Future>(f: F) -> Result<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Ok(v),
        std::task::Poll::Pending => Err(Error::Unavailable(
            "database: a direct SQLite round waited on something it cannot".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::State;
    use crate::store::fixture::OnePending;

    /// A round on the dispatcher's own connection is a compare-and-set on every operation: a
    /// stale version is tried again and then refused, and leaves nothing behind.
    #[tokio::test]
    async fn a_stale_round_is_refused_and_leaves_nothing() {
        let f = OnePending::new().await;
        let (opened, event) = (f.opened(), f.event());
        let direct = f.store.direct().expect("SQLite");
        let write = |expected: i64| {
            direct.write(|tx| {
                let ops = [(f.id, &f.next, expected)];
                let done =
                    run_ready(tx.write_rows(&ops, &opened, &[], std::slice::from_ref(&event)))??;
                Ok(done.then_some(()))
            })
        };
        let counts = || {
            direct.write(|tx| {
                let count = |table: &str| -> Result<i64> {
                    tx.tx
                        .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                        .map_err(err)
                };
                Ok(Some((count("attempts")?, count("events")?)))
            })
        };

        assert!(
            matches!(write(7), Err(Error::Refused(_))),
            "stored version is 0"
        );
        assert_eq!(counts().unwrap(), (0, 0));
        write(0).unwrap();
        assert_eq!(counts().unwrap(), (1, 1));
        let mut tx = f.store.begin().await.unwrap();
        let (_, stored) = crate::store::load_op(&mut tx, "k-1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((stored.state, stored.version), (State::InFlight, 1));
    }
}
