//! What only PostgreSQL has: statements named or not (PgBouncer), the planner's statistics kept
//! fresh, and notifications of other writers' changes.

use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{Postgres, Row};

use super::{Backend, Store, Tx};
use crate::error::Result;

/// Whether this process's PostgreSQL statements are parsed anew each time (unnamed) rather than
/// prepared once per connection and kept (named, sqlx's default). Kept, unless the process opened
/// a database through PgBouncer in transaction pooling mode: there a connection's next
/// transaction may run on another server connection, where a statement this one named does not
/// exist, or another client's of the same name does. One switch for the process rather than one
/// per store: a settle process opens one database, and a second store of the same process (only
/// tests open several) loses nothing but the parse this saves.
static UNNAMED: AtomicBool = AtomicBool::new(false);

/// From now on, this process names no PostgreSQL statement (see [`UNNAMED`]).
pub(crate) fn name_no_statements() {
    UNNAMED.store(true, Ordering::Relaxed);
}

/// Whether this process names its PostgreSQL statements (not through PgBouncer).
pub(crate) fn names_statements() -> bool {
    !UNNAMED.load(Ordering::Relaxed)
}

/// A PostgreSQL statement: named and kept by its connection, unless [`name_no_statements`].
pub(crate) fn pg_statement(sql: &str) -> Query<'_, Postgres, PgArguments> {
    let query = sqlx::query::<Postgres>(sql);
    match UNNAMED.load(Ordering::Relaxed) {
        true => query.persistent(false),
        false => query,
    }
}

impl Store {
    /// Refreshes the planner's statistics of `operations` (and of `runs`) when they are missing or stale
    /// (PostgreSQL: never analyzed, or more rows changed since than half the table holds, as
    /// after a bulk load that autovacuum has not yet seen). Without them a table filled since
    /// looks nearly empty, and the dispatcher's due query reads and sorts every due row each round
    /// instead of walking its index to the limit. Asking costs one catalog read; `ANALYZE`
    /// samples a fixed number of rows (about 0.6 s at 100,000 operations on this machine).
    /// SQLite's plans for settle's statements do not depend on statistics: nothing to do.
    pub(crate) async fn refresh_stale_statistics(&self) -> Result<()> {
        if self.backend() != Backend::Postgres {
            return Ok(());
        }
        // a transaction of its own, so that through PgBouncer each statement's two exchanges
        // stay on one server connection
        let mut tx = self.begin().await?;
        let Tx::Postgres(p, _) = &mut tx else {
            unreachable!("a PostgreSQL store begins PostgreSQL transactions")
        };
        // the state counters' and the review's rows of differences (schemas 8 and 14), folded
        // into one row per group (readers sum them; rows appended meanwhile are not deleted and
        // keep counting)
        for fold in [
            "WITH d AS (DELETE FROM state_counts RETURNING workflow, state, n) \
             INSERT INTO state_counts (workflow, state, n) SELECT workflow, state, SUM(n) FROM d \
             GROUP BY workflow, state HAVING SUM(n) <> 0",
            "WITH d AS (DELETE FROM review_opened RETURNING day, workflow, destination, n) \
             INSERT INTO review_opened (day, workflow, destination, n) \
             SELECT day, workflow, destination, SUM(n) FROM d \
             GROUP BY day, workflow, destination HAVING SUM(n) <> 0",
        ] {
            pg_statement(fold)
                .execute(&mut **p)
                .await
                .map_err(|e| self.err(e))?;
        }
        // the runs' rows (schema 12) are read by run and by their waits alike
        for table in ["operations", "runs"] {
            let stale: Option<bool> = pg_statement(&format!(
                "SELECT (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL) \
                   OR s.n_mod_since_analyze > GREATEST(c.reltuples, 1000) / 2 \
                 FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
                 WHERE s.relid = '{table}'::regclass"
            ))
            .fetch_optional(&mut **p)
            .await
            .map_err(|e| self.err(e))?
            .and_then(|row| row.get::<Option<bool>, _>(0));
            if stale == Some(true) {
                sqlx::query(&format!("ANALYZE {table}"))
                    .persistent(false)
                    .execute(&mut **p)
                    .await
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().await
    }

    /// Waits for the next change notification (PostgreSQL `LISTEN settle_events`); `None` on
    /// SQLite, which is polled instead, through PgBouncer in transaction mode (where a LISTEN
    /// lasts only its own transaction, so no notification would ever come), or when the listener
    /// cannot connect.
    pub(crate) async fn listen(&self) -> Option<Listener> {
        if self.backend() != Backend::Postgres || self.bouncer {
            return None;
        }
        let mut l = sqlx::postgres::PgListener::connect(&self.url).await.ok()?;
        l.listen("settle_events").await.ok()?;
        Some(Listener(l))
    }
}

/// Changes made by others, as PostgreSQL tells of them.
pub(crate) struct Listener(sqlx::postgres::PgListener);

impl Listener {
    /// Waits for the next notification; false when the connection is gone.
    pub(crate) async fn next(&mut self) -> bool {
        self.0.try_recv().await.is_ok_and(|n| n.is_some())
    }
}

/// What to do about an error that a pooler in front of PostgreSQL caused, said after its message:
/// a startup parameter it refuses (named, with the two ways out), or statements that met another
/// server connection while this process names them (`pgbouncer=true` missing from the URL).
pub(super) fn pooler_hint(message: &str, pooled: bool, named: bool) -> String {
    const REFUSED: &str = "unsupported startup parameter";
    if let Some(at) = message.find(REFUSED) {
        let rest = message[at + REFUSED.len()..].trim_start_matches([':', ' ']);
        let rest = rest.strip_prefix("in options:").unwrap_or(rest).trim();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let name = if name.is_empty() {
            "it".to_string()
        } else {
            format!("`{name}`")
        };
        return format!(
            " (PgBouncer refuses the startup parameter {name}: take it out of the database URL, \
             or list it in ignore_startup_parameters in pgbouncer.ini)"
        );
    }
    if pooled && named {
        " (through PgBouncer in transaction pooling mode? add pgbouncer=true to the database URL)"
            .to_string()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::pooler_hint;

    #[test]
    fn a_poolers_refusal_is_named_and_the_option_asked_only_where_missing() {
        let refused = "cannot open database x: unsupported startup parameter: options";
        let hint = pooler_hint(refused, true, false);
        assert!(hint.contains("startup parameter `options`"), "{hint}");
        assert!(hint.contains("ignore_startup_parameters"), "{hint}");
        assert!(!hint.contains("pgbouncer=true"), "{hint}");
        // the same while statements are named: the parameter is still what is wrong
        assert!(!pooler_hint(refused, true, true).contains("pgbouncer=true"));
        let newer = "unsupported startup parameter in options: statement_timeout";
        assert!(pooler_hint(newer, true, false).contains("`statement_timeout`"));
        // a named statement that met another server connection
        let lost = "prepared statement \"sqlx_s_1\" does not exist";
        assert!(pooler_hint(lost, true, true).contains("add pgbouncer=true"));
        // with pgbouncer=true given, no advice to give it
        assert_eq!(pooler_hint(lost, true, false), "");
        assert_eq!(pooler_hint("connection refused", false, true), "");
    }
}
