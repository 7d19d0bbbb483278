//! What only PostgreSQL has: statements named or not (PgBouncer), the planner's statistics kept
//! fresh, and notifications of other writers' changes.

use sqlx::Row;

use super::bouncer::pg_statement;

use super::conn::Pool;
use super::{Backend, Open, Store};
use crate::error::Result;

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
        let Open::Postgres(p, _) = &mut tx.open else {
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
        let Pool::Postgres(main) = &self.pool else {
            return None;
        };
        // a pool of its own, of one connection, through which the listener reconnects (to the
        // writable host of the moment, where there are more than one)
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_with((*main.connect_options()).clone())
            .await
            .ok()?;
        if let Some(hosts) = &self.hosts {
            hosts.keep(&pool);
        }
        let mut l = sqlx::postgres::PgListener::connect_with(&pool).await.ok()?;
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
