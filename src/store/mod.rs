//! Storage: SQLite (embedded) and PostgreSQL (shared), one schema, the same queries.
//!
//! Both backends go through sqlx's `Any` driver with bound parameters (`$1` works on both), so the
//! ledger's SQL is written once; what differs per backend (connection set-up, how a write
//! transaction begins, the migrations) is chosen by [`Backend`]. Nothing outside this module
//! writes SQL.

mod direct;
mod migrate;
mod queries;
mod round_store;
mod rows;

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Transaction};

use crate::error::{Error, Result};

pub(crate) use direct::{Direct, run_ready};
pub use migrate::SCHEMA_VERSION;
pub use queries::Cursor;
pub(crate) use queries::*;
pub(crate) use round_store::RoundStore;
pub(crate) use rows::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of_url(url: &str) -> Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(Error::Invalid(format!(
                "unsupported database URL {}: use sqlite://FILE or postgres://USER@HOST/DB",
                display_url(url)
            )))
        }
    }
}

/// A database URL fit to print: any password is masked.
pub fn display_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return crate::domain::escape_text(url).into_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let masked = match rest[..authority_end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!(
                "{}{}:***{}",
                &url[..scheme_end + 3],
                &rest[..colon],
                &rest[at..]
            ),
            None => url.to_string(),
        },
        None => url.to_string(),
    };
    let masked = match masked.find("password=") {
        Some(i) => {
            let end = masked[i..].find('&').map_or(masked.len(), |e| i + e);
            format!("{}password=***{}", &masked[..i], &masked[end..])
        }
        None => masked,
    };
    crate::domain::escape_text(&masked).into_owned()
}

/// Checks a SQLite database file before any pool waits on it, so that a wrong path is one clear
/// line at once rather than a connection timeout: a directory, an unreadable file or a file that
/// is not a SQLite database is refused. A missing file is created (when `create`) readable by its
/// owner only, as it will hold raw payloads; SQLite gives its `-wal` and `-shm` files the same
/// permissions.
fn prepare_sqlite_file(path: &std::path::Path, shown: &str, create: bool) -> Result<()> {
    use std::io::Read;
    let unusable = |why: String| Error::Unavailable(format!("cannot open database {shown}: {why}"));
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(unusable("it is a directory, not a database file".into())),
        Ok(_) => {
            let mut file = std::fs::File::open(path).map_err(|e| unusable(e.to_string()))?;
            let mut head = [0u8; 16];
            let mut got = 0;
            while got < head.len() {
                match file.read(&mut head[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) => return Err(unusable(e.to_string())),
                }
            }
            // an empty file is one SQLite makes a database of
            if got == 0 || &head == b"SQLite format 3\0" {
                Ok(())
            } else {
                Err(unusable("the file is not a SQLite database".into()))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(path) {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(unusable(e.to_string())),
            }
        }
        Err(e) => Err(unusable(e.to_string())),
    }
}

/// The backend's own driver, for the list query the console runs on every page: `Any` copies
/// every cell of every row into its own values, which made a page of 50 rows 1.8x slower.
#[derive(Clone, Debug)]
pub(crate) enum ReadPool {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    read: ReadPool,
    backend: Backend,
    shown_url: String,
    /// The URL as given (it may hold a password): for a listener connection, never printed.
    url: String,
    /// SQLite: the dispatcher's own connection for its rounds.
    direct: Option<std::sync::Arc<Direct>>,
}

/// How a process uses the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Commands, ingest, the demo: SQLite's default page cache.
    Batch,
    /// The console: small caches, few connections.
    Console,
}

impl Profile {
    /// How long to wait for a connection: a command may wait out a busy moment; the console
    /// must notice an outage within a couple of seconds and say so.
    fn acquire_timeout(self) -> Duration {
        match self {
            Profile::Batch => Duration::from_secs(5),
            Profile::Console => Duration::from_secs(2),
        }
    }

    /// `PRAGMA cache_size` in KiB (negative, as SQLite reads it).
    fn sqlite_cache(self) -> &'static str {
        match self {
            Profile::Batch => "-2000",
            Profile::Console => "-256",
        }
    }
}

/// WAL lets readers (the console) run beside a writer; the busy timeout makes concurrent writers
/// queue for the lock instead of failing.
const SQLITE_PRAGMAS: [&str; 4] = [
    "PRAGMA journal_mode = WAL",
    "PRAGMA busy_timeout = 15000",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
];

pub(crate) type Tx = Transaction<'static, Any>;

impl Store {
    /// Opens the database and applies the embedded migrations.
    pub async fn open(url: &str) -> Result<Store> {
        Store::open_with(url, Profile::Batch).await
    }

    /// Opens the database for a long-running reader (the console): fewer connections and a small
    /// SQLite page cache each, so its memory stays flat however large the ledger grows.
    pub async fn open_with(url: &str, profile: Profile) -> Result<Store> {
        install_default_drivers();
        let backend = Backend::of_url(url)?;
        let shown_url = display_url(url);
        let (connect_url, max) = match backend {
            Backend::Sqlite if url.contains(":memory:") => {
                return Err(Error::Invalid(
                    "settle keeps its ledger in a file: use sqlite://FILE".into(),
                ));
            }
            Backend::Sqlite if url.contains("mode=") => (url.to_string(), 4),
            Backend::Sqlite => (
                format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' }),
                4,
            ),
            Backend::Postgres => (url.to_string(), 8),
        };
        if backend == Backend::Sqlite {
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(&connect_url)
                .map_err(|e| Error::db(&format!("cannot open database {shown_url}"), e))?;
            prepare_sqlite_file(options.get_filename(), &shown_url, !url.contains("mode="))?;
        }
        let max = if profile == Profile::Console { 2 } else { max };
        let cache = format!("PRAGMA cache_size = {}", profile.sqlite_cache());
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            // a local file needs no ping before each transaction; a server connection may have died
            .test_before_acquire(backend == Backend::Postgres)
            .acquire_timeout(profile.acquire_timeout())
            .after_connect(move |conn, _meta| {
                let cache = cache.clone();
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        for pragma in SQLITE_PRAGMAS {
                            sqlx::query(pragma).execute(&mut *conn).await?;
                        }
                        sqlx::query(&cache).execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
            .connect(&connect_url)
            .await
            .map_err(|e| Error::db(&format!("cannot open database {shown_url}"), e))?;
        let mut direct = None;
        let read = match backend {
            Backend::Sqlite => {
                let options = sqlx::sqlite::SqliteConnectOptions::from_str(&connect_url)
                    .map_err(|e| Error::db(&format!("cannot open database {shown_url}"), e))?;
                direct = Some(std::sync::Arc::new(Direct::new(
                    options.get_filename().to_path_buf(),
                    profile.sqlite_cache(),
                )));
                let options = options
                    .busy_timeout(Duration::from_secs(15))
                    .pragma("cache_size", profile.sqlite_cache());
                ReadPool::Sqlite(
                    sqlx::sqlite::SqlitePoolOptions::new()
                        .max_connections(2)
                        // a local file needs no ping before each page
                        .test_before_acquire(false)
                        .acquire_timeout(profile.acquire_timeout())
                        .connect_lazy_with(options),
                )
            }
            Backend::Postgres => ReadPool::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(profile.acquire_timeout())
                    .connect_lazy(&connect_url)
                    .map_err(|e| Error::db(&format!("cannot open database {shown_url}"), e))?,
            ),
        };
        let store = Store {
            pool,
            read,
            backend,
            shown_url,
            url: url.to_string(),
            direct,
        };
        migrate::migrate(&store).await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL with any password masked.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Waits for the next change notification (PostgreSQL `LISTEN settle_events`); `None` on
    /// SQLite, which is polled instead, or when the listener cannot connect.
    pub(crate) async fn listener(&self) -> Option<sqlx::postgres::PgListener> {
        if self.backend != Backend::Postgres {
            return None;
        }
        let mut l = sqlx::postgres::PgListener::connect(&self.url).await.ok()?;
        l.listen("settle_events").await.ok()?;
        Some(l)
    }

    /// SQLite: the connection the dispatcher's rounds write through (see [`Direct`]).
    pub(crate) fn direct(&self) -> Option<&Direct> {
        self.direct.as_deref()
    }

    pub(crate) fn read_pool(&self) -> &ReadPool {
        &self.read
    }

    /// A write transaction. SQLite's takes the write lock up front (`BEGIN IMMEDIATE`), so a
    /// read-then-write never fails to upgrade; PostgreSQL relies on the version compare-and-set.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        let tx = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        };
        tx.map_err(|e| self.err(e))
    }

    pub(crate) fn err(&self, e: sqlx::Error) -> Error {
        Error::db(&format!("database {}", self.shown_url), e)
    }

    pub async fn close(&self) {
        if let Some(d) = &self.direct {
            d.close();
        }
        match &self.read {
            ReadPool::Sqlite(p) => p.close().await,
            ReadPool::Postgres(p) => p.close().await,
        }
        self.pool.close().await;
    }
}

/// What the store's own tests start from.
#[cfg(test)]
pub(crate) mod fixture {
    use chrono::{DateTime, Utc};

    use super::{NewEvent, Opened, Store, insert_op};
    use crate::domain::{Op, State};

    /// A SQLite store holding one pending operation, `k-1`, and the change that starts its
    /// first attempt: its new row, the attempt opened and the audit event.
    pub(crate) struct OnePending {
        _dir: tempfile::TempDir,
        pub store: Store,
        pub id: i64,
        pub next: Op,
        pub at: DateTime<Utc>,
    }

    impl OnePending {
        pub(crate) async fn new() -> OnePending {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("t.db").display());
            let store = Store::open(&url).await.unwrap();
            let at = Utc::now();
            let op = Op::new(
                "k-1",
                "w",
                "",
                "tasks",
                "create_task",
                "{}".into(),
                "fp".into(),
                at,
            );
            let mut tx = store.begin().await.unwrap();
            let id = insert_op(&mut tx, &op).await.unwrap().unwrap();
            tx.commit().await.unwrap();
            let next = Op {
                state: State::InFlight,
                attempts: 1,
                version: 1,
                ..op
            };
            OnePending {
                _dir: dir,
                store,
                id,
                next,
                at,
            }
        }

        pub(crate) fn opened(&self) -> [Opened<'static>; 1] {
            [(self.id, 1, "dispatcher", self.at)]
        }

        pub(crate) fn event(&self) -> NewEvent<'static> {
            NewEvent::on_operation(
                self.id,
                self.at,
                "dispatcher",
                "attempt_started",
                Some(State::Pending),
                State::InFlight,
                "{}",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            display_url("postgres://app:s3cret@db:5432/settle"),
            "postgres://app:***@db:5432/settle"
        );
        assert_eq!(
            display_url("postgres://db/settle?password=s3cret&x=1"),
            "postgres://db/settle?password=***&x=1"
        );
        assert_eq!(display_url("sqlite://settle.db"), "sqlite://settle.db");
        assert_eq!(
            display_url("postgres://app@db/settle"),
            "postgres://app@db/settle"
        );
    }

    #[test]
    fn only_known_schemes() {
        assert_eq!(Backend::of_url("sqlite://x.db").unwrap(), Backend::Sqlite);
        assert_eq!(
            Backend::of_url("postgresql://h/d").unwrap(),
            Backend::Postgres
        );
        assert_eq!(Backend::of_url("mysql://h/d").unwrap_err().exit_code(), 2);
    }
}
