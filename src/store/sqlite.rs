//! SQLite through its own C API (rusqlite), settle's one SQLite driver. Measured against sqlx's
//! SQLite driver on the dispatcher (the busiest writer; `cargo bench --bench dispatch`, one run
//! each on this machine): at 50 ms destination latency and concurrency 256, 3258 vs 2157 ops/s
//! (0.71x vs 0.48x of a plain HTTP loop), at 0 ms and concurrency 16, 4649 vs 2822 ops/s. sqlx
//! hands every statement to a connection thread and back, and those hand-offs cost more than
//! the statements themselves; here a statement is a call on the caller's thread, prepared once
//! per connection.
//!
//! The calls block: each runs where tokio allows it (`block_in_place` on a multi-threaded
//! runtime, so the other tasks of that worker move on; directly on a single-threaded one).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::sql::{blocking, err};
use crate::error::{Error, Result};

struct Shared {
    path: PathBuf,
    cache_kib: &'static str,
    read_only: bool,
    idle: Mutex<Vec<Connection>>,
    gate: Arc<Semaphore>,
    acquire_timeout: Duration,
}

/// A few connections to one database file, opened as they are needed and kept.
#[derive(Clone)]
pub(crate) struct Pool(Arc<Shared>);

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlitePool")
            .field("path", &self.0.path)
            .finish()
    }
}

/// A connection of the pool; it goes back when dropped.
pub(crate) struct Conn {
    conn: Option<Connection>,
    pool: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for Conn {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("held until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take()
            && let Ok(mut idle) = self.pool.idle.lock()
        {
            idle.push(c);
        }
    }
}

impl Pool {
    pub(crate) fn new(
        path: &Path,
        cache_kib: &'static str,
        read_only: bool,
        max: u32,
        acquire_timeout: Duration,
    ) -> Pool {
        Pool(Arc::new(Shared {
            path: path.to_path_buf(),
            cache_kib,
            read_only,
            idle: Mutex::new(Vec::new()),
            gate: Arc::new(Semaphore::new(max as usize)),
            acquire_timeout,
        }))
    }

    /// A pool of at most `max` connections of its own on the same file.
    pub(crate) fn sibling(&self, max: u32) -> Pool {
        let s = &self.0;
        Pool::new(&s.path, s.cache_kib, s.read_only, max, s.acquire_timeout)
    }

    fn open(&self) -> Result<Connection> {
        let s = &self.0;
        let flags = if s.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&s.path, flags).map_err(err)?;
        // WAL lets readers (the console) run beside a writer; the busy timeout makes concurrent
        // writers queue for the lock instead of failing.
        let wal = if s.read_only {
            ""
        } else {
            "PRAGMA journal_mode = WAL;"
        };
        conn.execute_batch(&format!(
            "{wal} PRAGMA busy_timeout = 15000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA cache_size = {}",
            s.cache_kib
        ))
        .map_err(err)?;
        // the statements of a round and a page, one per size of VALUES list they meet
        conn.set_prepared_statement_cache_capacity(256);
        Ok(conn)
    }

    /// A connection, waiting at most the pool's acquire timeout for a free one.
    pub(crate) async fn acquire(&self) -> Result<Conn> {
        let permit =
            tokio::time::timeout(self.0.acquire_timeout, self.0.gate.clone().acquire_owned())
                .await
                .map_err(|_| Error::Unavailable("database: no connection free in time".into()))?
                .map_err(|_| Error::Unavailable("database: closed".into()))?;
        let idle = self.0.idle.lock().ok().and_then(|mut i| i.pop());
        let conn = match idle {
            Some(c) => c,
            None => blocking(|| self.open())?,
        };
        Ok(Conn {
            conn: Some(conn),
            pool: self.0.clone(),
            _permit: permit,
        })
    }

    /// Closes the idle connections and lets no more be taken.
    pub(crate) fn close(&self) {
        self.0.gate.close();
        if let Ok(mut idle) = self.0.idle.lock() {
            idle.clear();
        }
    }
}

/// A write transaction on one connection: `BEGIN IMMEDIATE` takes the write lock up front, so a
/// read-then-write never fails to upgrade. Rolled back when dropped unfinished.
pub(crate) struct Tx {
    conn: Conn,
    open: bool,
}

impl Tx {
    pub(crate) async fn begin(conn: Conn) -> Result<Tx> {
        blocking(|| conn.execute_batch("BEGIN IMMEDIATE")).map_err(err)?;
        Ok(Tx { conn, open: true })
    }

    pub(crate) fn conn(&mut self) -> &mut Connection {
        &mut self.conn
    }

    pub(crate) fn commit(mut self) -> Result<()> {
        self.open = false;
        blocking(|| self.conn.execute_batch("COMMIT")).map_err(err)
    }

    pub(crate) fn rollback(mut self) {
        self.open = false;
        let _ = blocking(|| self.conn.execute_batch("ROLLBACK"));
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if self.open {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
