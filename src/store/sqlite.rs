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
    /// Whether this pool's commits leave the WAL's checkpoints to [`checkpoints`].
    no_checkpoints: bool,
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

/// The checkpoints of a pool that makes none itself, on a thread of their own: every 100 ms, as
/// much of the WAL as no reader still needs is copied into the database (`PASSIVE`: it never
/// waits for a reader or a writer, and takes no writer's lock), until the pool is gone. Whether
/// the thread started.
fn checkpoints(pool: std::sync::Weak<Shared>) -> bool {
    let spawned = std::thread::Builder::new()
        .name("settle-checkpoints".into())
        .spawn(move || {
            let mut conn: Option<Connection> = None;
            loop {
                std::thread::sleep(Duration::from_millis(100));
                let Some(shared) = pool.upgrade() else { return };
                if conn.is_none() {
                    conn = Connection::open(&shared.path).ok();
                }
                drop(shared);
                if let Some(c) = &conn
                    && let Err(e) = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                {
                    tracing::warn!(error = %e, "the WAL's checkpoint failed; trying again");
                    conn = None;
                }
            }
        });
    if let Err(e) = &spawned {
        tracing::warn!(error = %e, "the WAL's checkpoints could not start a thread: left to commits");
    }
    spawned.is_ok()
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
            no_checkpoints: false,
        }))
    }

    /// A pool of at most `max` connections of its own on the same file, for one busy writer: its
    /// commits never copy the WAL back into the database (a checkpoint, with its sync of the
    /// file, inside a commit stalled every write queued behind it); a thread of its own does
    /// that while the pool lives ([`checkpoints`]).
    pub(crate) fn sibling(&self, max: u32) -> Pool {
        let s = &self.0;
        let make = |no_checkpoints| {
            Pool(Arc::new(Shared {
                path: s.path.clone(),
                cache_kib: s.cache_kib,
                read_only: s.read_only,
                idle: Mutex::new(Vec::new()),
                gate: Arc::new(Semaphore::new(max as usize)),
                acquire_timeout: s.acquire_timeout,
                no_checkpoints,
            }))
        };
        if s.read_only {
            return make(false);
        }
        // no connection is open yet: where the thread cannot start, the pool checkpoints itself
        let pool = make(true);
        match checkpoints(Arc::downgrade(&pool.0)) {
            true => pool,
            false => make(false),
        }
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
             PRAGMA cache_size = {}; PRAGMA wal_autocheckpoint = {}",
            s.cache_kib,
            if s.no_checkpoints { 0 } else { 1000 }
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
