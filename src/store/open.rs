//! What opening a store takes: the backend a URL names, the URL fit to print, the SQLite file
//! checked before any pool waits on it, and the profile of the process that uses the database.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

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

/// A database URL fit to print: its password masked, whatever it holds; the user, hosts and
/// database shown as written (a person needs them to tell which database).
pub fn display_url(url: &str) -> String {
    crate::domain::escape_text(&crate::domain::url::shown_url(url)).into_owned()
}

/// A PostgreSQL URL as the driver takes it, and whether it reaches the server through PgBouncer
/// in transaction pooling mode (`pgbouncer=true`, as other tools spell it). The option is
/// settle's own, so it is taken out before the driver sees the URL (which would warn of it).
pub(super) fn pg_url(url: &str) -> Result<(String, bool)> {
    let (url, value) = take_param(url, "pgbouncer");
    let bouncer = match value {
        None | Some("false" | "0" | "no" | "off") => false,
        Some("true" | "1" | "yes" | "on") => true,
        Some(other) => {
            return Err(Error::Invalid(format!(
                "pgbouncer={} in the database URL: use pgbouncer=true or pgbouncer=false",
                crate::domain::escape_text(other)
            )));
        }
    };
    Ok((url, bouncer))
}

/// A URL without the query parameter `name` (an option of settle's own, which the driver
/// would not know), and the value it had (the last, if given more than once).
pub(super) fn take_param<'a>(url: &'a str, name: &str) -> (String, Option<&'a str>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut value = None;
    let mut kept = Vec::new();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        match param.split_once('=') {
            Some((n, v)) if n == name => value = Some(v),
            _ => kept.push(param),
        }
    }
    let url = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    (url, value)
}

/// How a process uses the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Commands, ingest, the dispatcher, the demo: SQLite's default page cache.
    Batch,
    /// The console: small caches, few connections.
    Console,
    /// `settle serve`: many consoles on one pool (one session's bulk action must not starve the
    /// others), the console's quick notice of an outage.
    Server,
}

impl Profile {
    /// How long to wait for a connection: a command may wait out a busy moment; the console
    /// must notice an outage within a couple of seconds and say so.
    pub(super) fn acquire_timeout(self) -> Duration {
        match self {
            Profile::Batch => Duration::from_secs(5),
            Profile::Console | Profile::Server => Duration::from_secs(2),
        }
    }

    /// How long an unused PostgreSQL connection is kept: a server nobody is logged in to holds
    /// none but its listener's.
    pub(super) fn idle_timeout(self) -> Option<Duration> {
        match self {
            Profile::Server => Some(Duration::from_secs(10)),
            // sqlx's default
            Profile::Batch | Profile::Console => Some(Duration::from_secs(600)),
        }
    }

    /// `PRAGMA cache_size` in KiB (negative, as SQLite reads it).
    pub(super) fn sqlite_cache(self) -> &'static str {
        match self {
            Profile::Batch | Profile::Server => "-2000",
            Profile::Console => "-256",
        }
    }

    pub(super) fn connections(self, backend: Backend) -> u32 {
        match (self, backend) {
            (Profile::Console, _) => 2,
            (Profile::Server, Backend::Sqlite) => 4,
            (Profile::Server, Backend::Postgres) => 8,
            (Profile::Batch, Backend::Sqlite) => 4,
            (Profile::Batch, Backend::Postgres) => 8,
        }
    }
}

/// The file a `sqlite:` URL names (`sqlite://settle.db`, `sqlite:///abs/path.db`,
/// `sqlite:rel.db`), and whether it asks to be opened read-only (`?mode=ro`).
pub(super) fn sqlite_file(url: &str) -> (PathBuf, bool) {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let read_only = query.split('&').any(|p| p == "mode=ro");
    (PathBuf::from(path), read_only)
}

/// Where `url` names a SQLite ledger whose file does not exist: the line saying so, for a
/// command that only reads (it makes nothing: `settle init` and `settle demo` make a ledger).
pub fn missing_ledger(url: &str) -> Option<String> {
    if Backend::of_url(url).ok()? != Backend::Sqlite {
        return None;
    }
    let (path, _) = sqlite_file(url);
    (!path.exists()).then(|| {
        format!(
            "no ledger at {}: the file does not exist (settle init makes one; or give --db, SETTLE_DATABASE_URL or the config's database)",
            display_url(url)
        )
    })
}

/// Checks a SQLite database file before any pool waits on it, so that a wrong path is one clear
/// line at once rather than a connection timeout: a directory, an unreadable file or a file that
/// is not a SQLite database is refused. A missing file is created (when `create`) readable by its
/// owner only, as it will hold raw payloads; SQLite gives its `-wal` and `-shm` files the same
/// permissions.
pub(super) fn prepare_sqlite_file(path: &std::path::Path, shown: &str, create: bool) -> Result<()> {
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
        // a base64 password holds `/`; the user and host stay readable
        let url = "postgres://settle:Zk9QmW2/Vb7xR+q=@db.internal:5432/x";
        let shown = display_url(url);
        assert_eq!(shown, "postgres://settle:***@db.internal:5432/x");
        // and an error that holds it, cleaned for the terminal, keeps them too
        let said = crate::domain::redact::redact_text(&format!("cannot open database {shown}: x"));
        assert_eq!(said, format!("cannot open database {shown}: x"));
        let raw = crate::domain::redact::redact_text(&format!("cannot open database {url}: x"));
        assert!(
            !raw.contains("Vb7") && raw.contains("settle:***@db.internal:5432/x"),
            "{raw}"
        );
    }

    #[test]
    fn pgbouncer_is_taken_out_of_the_url() {
        assert_eq!(
            pg_url("postgres://h/d?pgbouncer=true&sslmode=require").unwrap(),
            ("postgres://h/d?sslmode=require".to_string(), true)
        );
        assert_eq!(
            pg_url("postgres://h/d?pgbouncer=false").unwrap(),
            ("postgres://h/d".to_string(), false)
        );
        assert_eq!(
            pg_url("postgres://h/d?application_name=x").unwrap(),
            ("postgres://h/d?application_name=x".to_string(), false)
        );
        let bad = pg_url("postgres://h/d?pgbouncer=maybe").unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        assert!(bad.to_string().contains("pgbouncer=maybe"), "{bad}");
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
