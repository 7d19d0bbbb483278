//! SQLite through its own C API (rusqlite), settle's one SQLite driver, rather than sqlx's: sqlx
//! hands every statement to a connection thread and back, and on the dispatcher those hand-offs
//! cost more than the statements themselves; here a statement is a call on the caller's thread,
//! prepared once per connection.
//!
//! The calls block: each runs where tokio allows it (`block_in_place` on a multi-threaded
//! runtime, so the other tasks of that worker move on; directly on a single-threaded one).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Set by [`checkpoints`] once the WAL has grown past [`WAL_RESTART`]: the next write
    /// transaction first checkpoints what is left, so that it starts the WAL over.
    restart_wanted: AtomicBool,
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
///
/// SQLite starts the WAL over only when a write transaction begins with every frame copied back;
/// under a steady stream of writes one always committed during the checkpoint, and the WAL grew
/// without end, each checkpoint slower than the last. So once it holds [`WAL_RESTART`] frames, the
/// writer's next transaction checkpoints first what committed since (a `PASSIVE` one again:
/// never waiting on a reader; where one still reads an older snapshot, the next time).
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
                if let Some(c) = &conn
                    && let Err(e) = checkpoint(c, &shared, WAL_RESTART)
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

/// The frames the WAL may hold before the writer is asked to start it over ([`checkpoints`]):
/// 64 MB of 4 KiB pages.
const WAL_RESTART: i64 = 16_384;

/// One of [`checkpoints`]: where the WAL then holds more than `limit` frames, the pool's next
/// write transaction is asked to start it over. The frames the WAL held.
fn checkpoint(c: &Connection, pool: &Shared, limit: i64) -> rusqlite::Result<i64> {
    let frames: i64 = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))?;
    if frames > limit {
        pool.restart_wanted.store(true, Ordering::Relaxed);
    }
    Ok(frames)
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
            restart_wanted: AtomicBool::new(false),
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
                restart_wanted: AtomicBool::new(false),
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
        if conn.pool.restart_wanted.swap(false, Ordering::Relaxed) {
            // what committed since the last checkpoint, so that this transaction starts the WAL
            // over (see `checkpoints`)
            let done =
                blocking(|| conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())));
            if let Err(e) = done {
                tracing::warn!(error = %e, "the WAL's checkpoint failed; trying again");
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A write transaction of the writer's pool that adds a page's worth of rows, committed
    /// after `meanwhile` ran.
    async fn write(pool: &Pool, meanwhile: impl FnOnce()) {
        let mut tx = Tx::begin(pool.acquire().await.unwrap()).await.unwrap();
        tx.conn()
            .execute("INSERT INTO t (v) VALUES (randomblob(3000))", [])
            .unwrap();
        meanwhile();
        tx.commit().unwrap();
    }

    /// Under a steady stream of writes a checkpoint runs while one is under way, so the WAL is
    /// never wholly copied back when the next begins, and SQLite never starts it over: once a
    /// checkpoint sees it past its limit, the writer's next transaction copies back what is left
    /// first, and the WAL starts over (a few frames, not all it held).
    #[tokio::test]
    async fn a_wal_past_its_limit_starts_over_at_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let main = Pool::new(&path, "-2000", false, 2, Duration::from_secs(5));
        main.acquire()
            .await
            .unwrap()
            .execute_batch("CREATE TABLE t (v BLOB)")
            .unwrap();
        // the writer's pool, without its thread of checkpoints: this test runs them
        let writer = Pool(Arc::new(Shared {
            path: path.clone(),
            cache_kib: "-2000",
            read_only: false,
            idle: Mutex::new(Vec::new()),
            gate: Arc::new(Semaphore::new(2)),
            acquire_timeout: Duration::from_secs(5),
            no_checkpoints: true,
            restart_wanted: AtomicBool::new(false),
        }));
        let other = Connection::open(&path).unwrap();
        let frames = |limit| checkpoint(&other, &writer.0, limit).unwrap();
        for _ in 0..30 {
            write(&writer, || ()).await;
        }
        write(&writer, || assert!(frames(1_000) >= 30)).await;
        for _ in 0..30 {
            write(&writer, || ()).await;
        }
        // the WAL went on growing from where it was, and is now past the limit
        let mut grown = 0;
        write(&writer, || grown = frames(50)).await;
        assert!(grown > 60, "the WAL went on growing: {grown} frames");
        assert!(writer.0.restart_wanted.load(Ordering::Relaxed));
        write(&writer, || ()).await;
        assert!(!writer.0.restart_wanted.load(Ordering::Relaxed));
        let after = frames(1_000);
        assert!(
            after < 10,
            "the WAL started over: {after} frames, was {grown}"
        );
    }
}
