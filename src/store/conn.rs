//! A store and what its statements run in: the pool of either backend, a write transaction
//! ([`in_tx!`], through a [`Tx`]), a pooled connection for reads, and the connection of either
//! that a statement is handed ([`Db`]).

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::driver::{db, pg_error};
use super::open::Backend;
use super::sqlite;
use crate::error::{Error, Result};

/// How a PostgreSQL transaction's change-set statements (`load_ops`, `load_group`,
/// `write_changes`, `attempt_outcomes`) are planned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Plans {
    /// Planned with their values at each call (unnamed): a plan kept on the connection and made
    /// while a table was small (a fresh ledger, before its first autoanalyze) would scan the
    /// whole table for each row once it is not.
    EachCall,
    /// Kept on the connection (named), once [`Store::begin_only_lookups`] has ruled out the
    /// scans, hash and merge joins that make such a plan grow with the table: a plan made under
    /// those settings looks each row up by its key at any size, and is made once instead of at
    /// each call (parsing and planning is a real part of a small group's time).
    Kept,
}

#[derive(Clone, Debug)]
pub(super) enum Pool {
    Sqlite(sqlite::Pool),
    Postgres(PgPool),
}

#[derive(Clone, Debug)]
pub struct Store {
    pub(super) pool: Pool,
    pub(super) shown_url: String,
    /// The hosts of a multi-host URL (or one that asks for a writable host): searched again
    /// when a connection cannot be had, so that the pools follow a failover.
    pub(super) hosts: Option<std::sync::Arc<super::hosts::Hosts>>,
    /// A hot standby the lists, counts and reviews are read from (`read_db`).
    pub(super) replica: Option<std::sync::Arc<Replica>>,
    /// PostgreSQL through PgBouncer in transaction pooling mode (`pgbouncer=true`): a session
    /// lasts one transaction, so no statement is named, every read runs in a transaction of its
    /// own, and changes are polled for rather than listened to.
    pub(super) bouncer: bool,
}

/// A hot standby the lists, counts and reviews are read from (`replica.rs`).
#[derive(Debug)]
pub(crate) struct Replica {
    pub(super) store: Store,
    /// Until when reads go to the primary (a person acted).
    pub(super) primary_until: std::sync::Mutex<Option<std::time::Instant>>,
    /// The lag last measured.
    pub(super) lag: std::sync::Mutex<std::time::Duration>,
}

/// A write transaction: what the ledger's changes run in, and the counts of what it did, added
/// to the process's counters once it commits.
pub(crate) struct Tx {
    pub(super) open: Open,
    tally: Vec<crate::counters::Count>,
}

/// The transaction of either backend.
pub(crate) enum Open {
    Sqlite(sqlite::Tx),
    Postgres(Transaction<'static, Postgres>, Plans),
}

/// A pooled connection, for reads outside a write transaction.
pub(crate) enum Conn {
    Sqlite(sqlite::Conn),
    Postgres(PoolConnection<Postgres>),
    /// Through PgBouncer in transaction mode: a read-only transaction, so that its statements
    /// (each parsed, then bound and run, in two exchanges) stay on one server connection. It
    /// is rolled back when the connection goes back to the pool.
    Pinned(Transaction<'static, Postgres>),
}

/// A connection of either backend, borrowed from a transaction or the pool: what a statement runs
/// on ([`sql::Stmt`]'s `rows`, `row`, `one` and `execute`).
pub(crate) enum Db<'a> {
    Sqlite(&'a mut rusqlite::Connection),
    Postgres(&'a mut sqlx::PgConnection),
}

impl Tx {
    pub(super) fn of(open: Open) -> Tx {
        Tx {
            open,
            tally: Vec::new(),
        }
    }

    /// Counts to add to the process's counters if (and once) this transaction commits.
    pub(crate) fn tally(&mut self, counts: impl IntoIterator<Item = crate::counters::Count>) {
        self.tally.extend(counts);
    }

    pub(crate) fn db(&mut self) -> Db<'_> {
        match &mut self.open {
            Open::Sqlite(t) => Db::Sqlite(t.conn()),
            Open::Postgres(t, _) => Db::Postgres(t),
        }
    }
}

impl Conn {
    pub(crate) fn db(&mut self) -> Db<'_> {
        match self {
            Conn::Sqlite(c) => Db::Sqlite(c),
            Conn::Postgres(c) => Db::Postgres(c),
            Conn::Pinned(t) => Db::Postgres(t),
        }
    }
}

/// Runs `$body` (an expression over `$tx: &mut Tx`, giving `Result<Tried<T>>`) in a write
/// transaction of `$store` and commits what it did; from the start again (up to eight times) when
/// it lost a race to another writer ([`Tried::Raced`]). This is settle's one retry loop: lost
/// compare-and-sets, and PostgreSQL's deadlock and serialization failures (which the statements
/// report as a lost race); SQLite's busy lock is waited out by its timeout. A macro rather than a
/// method taking an async closure: the body borrows the transaction, and the futures of async
/// closures over borrowed arguments cannot yet be shown to be `Send`.
macro_rules! in_tx {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut result = Err($crate::error::Error::Refused(
            "the operation kept changing under us; try again".into(),
        ));
        for _ in 0..$crate::store::TRIES {
            let mut tx = $store.begin().await?;
            let outcome = {
                let $tx: &mut $crate::store::Tx = &mut tx;
                $body
            };
            match outcome {
                Ok($crate::store::Tried::Done(v)) => {
                    tx.commit().await?;
                    result = Ok(v);
                    break;
                }
                Ok($crate::store::Tried::Raced) => tx.rollback().await,
                Err(e) => {
                    tx.rollback().await;
                    result = Err(e);
                    break;
                }
            }
        }
        result
    }};
}
pub(crate) use in_tx;

/// What one try at a write transaction came to.
pub(crate) enum Tried<T> {
    Done(T),
    /// Another writer changed what this one read first: roll back and try again.
    Raced,
}

/// How many times a write transaction is tried when another writer changed its rows first.
pub(crate) const TRIES: usize = 8;

impl Tx {
    pub(crate) async fn commit(self) -> Result<()> {
        match self.open {
            Open::Sqlite(t) => t.commit()?,
            Open::Postgres(t, _) => t.commit().await.map_err(db)?,
        }
        if !self.tally.is_empty() {
            crate::counters::add(self.tally);
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) {
        match self.open {
            Open::Sqlite(t) => t.rollback(),
            Open::Postgres(t, _) => {
                let _ = t.rollback().await;
            }
        }
    }
}

impl Store {
    /// A store of its own on the same database for one writer (the HTTP API's lanes): its
    /// connection (and a second for a read inside its transaction: a threshold's stalled runs),
    /// made on the runtime that calls this (each lane runs on a thread and a runtime
    /// of its own, so that its round trips never wait behind the requests the server answers),
    /// and not pinged before each transaction (a dead connection fails the group, whose writes
    /// are then run alone on a new one). Nothing is migrated: the main store did that.
    pub(crate) fn for_writer(&self) -> Store {
        let pool = match &self.pool {
            Pool::Sqlite(p) => Pool::Sqlite(p.sibling(2)),
            Pool::Postgres(p) => Pool::Postgres(
                match &self.hosts {
                    Some(hosts) => hosts.pool_options(),
                    None => PgPoolOptions::new(),
                }
                .max_connections(2)
                .min_connections(0)
                .idle_timeout(None)
                .test_before_acquire(false)
                .acquire_timeout(p.options().get_acquire_timeout())
                .connect_lazy_with((*p.connect_options()).clone()),
            ),
        };
        if let (Pool::Postgres(p), Some(hosts)) = (&pool, &self.hosts) {
            hosts.keep(p);
        }
        Store {
            pool,
            shown_url: self.shown_url.clone(),
            hosts: self.hosts.clone(),
            replica: None,
            bouncer: self.bouncer,
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// The URL with any password masked.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(p) => p.close(),
            Pool::Postgres(p) => p.close().await,
        }
    }

    /// A pool's error, as the ledger reports it; with more than one host (or a writable one
    /// asked for), the hosts are searched again in the background, and a host that takes no
    /// writes any more is an outage to wait out, not a refusal.
    pub(super) fn err(&self, e: sqlx::Error) -> Error {
        let error = pg_error(&format!("database {}", self.shown_url), e);
        match &self.hosts {
            Some(hosts) => {
                hosts.search();
                match error {
                    Error::Refused(why) => Error::Unavailable(why),
                    other => other,
                }
            }
            None => error,
        }
    }

    /// A write transaction. SQLite's takes the write lock up front (`BEGIN IMMEDIATE`), so a
    /// read-then-write never fails to upgrade; PostgreSQL relies on the version compare-and-set.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        match &self.pool {
            Pool::Sqlite(p) => Ok(Tx::of(Open::Sqlite(
                sqlite::Tx::begin(p.acquire().await?).await?,
            ))),
            Pool::Postgres(p) => watched(self, p.begin())
                .await
                .map(|t| Tx::of(Open::Postgres(t, Plans::EachCall))),
        }
    }

    /// A pooled connection for reads.
    pub(crate) async fn conn(&self) -> Result<Conn> {
        match &self.pool {
            Pool::Sqlite(p) => p.acquire().await.map(Conn::Sqlite),
            Pool::Postgres(p) if self.bouncer => watched(self, p.begin_with("BEGIN READ ONLY"))
                .await
                .map(Conn::Pinned),
            Pool::Postgres(p) => watched(self, p.acquire()).await.map(Conn::Postgres),
        }
    }
}

/// A connection from the pool, its error as the ledger reports it; with more than one host,
/// one slow to come sets the hosts searched (a failover under way) while the wait goes on.
async fn watched<T>(
    store: &Store,
    connect: impl std::future::Future<Output = std::result::Result<T, sqlx::Error>>,
) -> Result<T> {
    let mut connect = std::pin::pin!(connect);
    let Some(hosts) = &store.hosts else {
        return connect.await.map_err(|e| store.err(e));
    };
    match tokio::time::timeout(super::hosts::SLOW, &mut connect).await {
        Ok(done) => done.map_err(|e| store.err(e)),
        Err(_) => {
            hosts.search();
            connect.await.map_err(|e| store.err(e))
        }
    }
}
