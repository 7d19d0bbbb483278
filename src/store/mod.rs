//! Storage: the only part of settle that knows a database exists.
//!
//! The ledger asks a [`Store`] for named operations, in a write transaction ([`in_tx!`],
//! through a [`Tx`]) or on a pooled connection for reads; it never sees a connection, a pool or
//! SQL. Each backend is one variant and one driver: SQLite (embedded, WAL) through its own C API
//! (`rusqlite`, chosen by measurement: see `sqlite.rs`), and PostgreSQL (shared) through sqlx's
//! native driver. A statement that reads the same on both is written once and run on either
//! ([`sql::Stmt`] on a [`Db`]); where a backend has a better way it has its own: PostgreSQL writes
//! many rows through arrays (`UNNEST`) in one statement and takes due work with `FOR UPDATE SKIP
//! LOCKED`; SQLite writes a change's rows through statements prepared once per connection, inside
//! a `BEGIN IMMEDIATE` transaction that holds the database from its start.
//!
//! The rooms: `columns` (the operation's columns, once), `sql` (statements and rows), `sqlite`
//! (the SQLite driver's connections and transactions), `open` (URLs, files and profiles), `ops`
//! (operations and change sets written), `attempts` (attempts and audit events), `arrays`
//! (PostgreSQL's many rows as arrays), `work` (the dispatcher's due work, budgets and
//! heartbeats), `workflows` (pause flags and thresholds), `pages` (lists, counts and the history
//! readers see), `pg` (what only PostgreSQL has: statements unnamed through PgBouncer, statistics,
//! notifications), `migrate`.

mod arrays;
mod attempts;
mod columns;
mod counts;
mod group_load;
mod history;
mod migrate;
mod open;
mod ops;
mod page_sql;
mod pages;
mod pg;
mod plans;
mod prune;
pub mod review;
mod run_review;
mod run_writes;
mod runs;
mod sql;
mod sqlite;
mod terms;
mod words;
mod work;
mod workflows;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use crate::error::{Error, Result};

pub(crate) use attempts::{AttemptWrite, NewEvent};
pub(crate) use history::EventRow;
pub use migrate::SCHEMA_VERSION;
pub use open::{Backend, Profile, display_url};
use open::{prepare_sqlite_file, sqlite_file};
pub(crate) use pg::Listener;
pub(crate) use plans::Plans;
pub(crate) use prune::Prunable;
pub(crate) use runs::{RunKept, RunOpRow, RunWrite, StoredRun};
pub(crate) use sql::ms;
pub use terms::Cursor;
pub(crate) use terms::{ListQuery, Order};
pub use workflows::Pausable;
pub(crate) use workflows::WorkflowRow;

#[derive(Clone, Debug)]
enum Pool {
    Sqlite(sqlite::Pool),
    Postgres(PgPool),
}

#[derive(Clone, Debug)]
pub struct Store {
    pool: Pool,
    shown_url: String,
    /// The URL as the driver takes it (it may hold a password): for a listener connection,
    /// never printed.
    url: String,
    /// PostgreSQL through PgBouncer in transaction pooling mode (`pgbouncer=true`): a session
    /// lasts one transaction, so no statement is named, every read runs in a transaction of its
    /// own, and changes are polled for rather than listened to.
    bouncer: bool,
}

/// A write transaction: what the ledger's changes run in.
pub(crate) enum Tx {
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
    pub(crate) fn db(&mut self) -> Db<'_> {
        match self {
            Tx::Sqlite(t) => Db::Sqlite(t.conn()),
            Tx::Postgres(t, _) => Db::Postgres(t),
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
        match self {
            Tx::Sqlite(t) => t.commit(),
            Tx::Postgres(t, _) => t.commit().await.map_err(sql::db),
        }
    }

    pub(crate) async fn rollback(self) {
        match self {
            Tx::Sqlite(t) => t.rollback(),
            Tx::Postgres(t, _) => {
                let _ = t.rollback().await;
            }
        }
    }
}

impl Store {
    /// Opens the database and applies the embedded migrations.
    pub async fn open(url: &str) -> Result<Store> {
        Store::open_with(url, Profile::Batch).await
    }

    /// Opens the database for a process that uses it as `profile` says, and migrates it.
    pub async fn open_with(url: &str, profile: Profile) -> Result<Store> {
        let backend = Backend::of_url(url)?;
        let shown_url = display_url(url);
        let cannot = |e| sql::pg_error(&format!("cannot open database {shown_url}"), e);
        let max = profile.connections(backend);
        let (url, bouncer) = match backend {
            Backend::Postgres => open::pg_url(url)?,
            Backend::Sqlite => (url.to_string(), false),
        };
        let url = url.as_str();
        let pool = match backend {
            Backend::Sqlite if url.contains(":memory:") => {
                return Err(Error::Invalid(
                    "settle keeps its ledger in a file: use sqlite://FILE".into(),
                ));
            }
            Backend::Sqlite => {
                let (path, read_only) = sqlite_file(url);
                prepare_sqlite_file(&path, &shown_url, !read_only)?;
                let pool = sqlite::Pool::new(
                    &path,
                    profile.sqlite_cache(),
                    read_only,
                    max,
                    profile.acquire_timeout(),
                );
                // the first connection says at once whether the file can be used
                drop(pool.acquire().await.map_err(|e| {
                    Error::Unavailable(format!("cannot open database {shown_url}: {e}"))
                })?);
                Pool::Sqlite(pool)
            }
            Backend::Postgres => {
                // settle stores no floats, and a stock PgBouncer refuses this parameter
                let mut options = url
                    .parse::<PgConnectOptions>()
                    .map_err(cannot)?
                    .extra_float_digits(None);
                if bouncer {
                    options = options.statement_cache_capacity(0);
                    pg::name_no_statements();
                }
                Pool::Postgres(
                    PgPoolOptions::new()
                        .max_connections(max)
                        .idle_timeout(profile.idle_timeout())
                        // a server connection may have died since it was last used
                        .test_before_acquire(true)
                        .acquire_timeout(profile.acquire_timeout())
                        .connect_with(options)
                        .await
                        .map_err(cannot)?,
                )
            }
        };
        let store = Store {
            pool,
            shown_url,
            url: url.to_string(),
            bouncer,
        };
        migrate::migrate(&store).await?;
        Ok(store)
    }

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
                PgPoolOptions::new()
                    .max_connections(2)
                    .min_connections(0)
                    .idle_timeout(None)
                    .test_before_acquire(false)
                    .acquire_timeout(p.options().get_acquire_timeout())
                    .connect_lazy_with((*p.connect_options()).clone()),
            ),
        };
        Store {
            pool,
            shown_url: self.shown_url.clone(),
            url: self.url.clone(),
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

    fn err(&self, e: sqlx::Error) -> Error {
        sql::pg_error(&format!("database {}", self.shown_url), e)
    }

    /// A write transaction. SQLite's takes the write lock up front (`BEGIN IMMEDIATE`), so a
    /// read-then-write never fails to upgrade; PostgreSQL relies on the version compare-and-set.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        match &self.pool {
            Pool::Sqlite(p) => Ok(Tx::Sqlite(sqlite::Tx::begin(p.acquire().await?).await?)),
            Pool::Postgres(p) => p
                .begin()
                .await
                .map(|t| Tx::Postgres(t, Plans::EachCall))
                .map_err(|e| self.err(e)),
        }
    }

    /// A pooled connection for reads.
    pub(crate) async fn conn(&self) -> Result<Conn> {
        match &self.pool {
            Pool::Sqlite(p) => p.acquire().await.map(Conn::Sqlite),
            Pool::Postgres(p) if self.bouncer => p
                .begin_with("BEGIN READ ONLY")
                .await
                .map(Conn::Pinned)
                .map_err(|e| self.err(e)),
            Pool::Postgres(p) => p
                .acquire()
                .await
                .map(Conn::Postgres)
                .map_err(|e| self.err(e)),
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod store_tests;
