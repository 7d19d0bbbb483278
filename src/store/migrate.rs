//! Embedded migrations, applied on every start, refusing a database from a newer settle.
//!
//! A small runner of our own rather than `sqlx::migrate!`: the `Any` driver has no migrator, and
//! the one rule we need beyond "apply what is missing" is a clear refusal of a newer schema.

use super::{Backend, Store};
use crate::error::{Error, Result};

struct Migration {
    version: i64,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sqlite: include_str!("../../assets/migrations/sqlite/0001_ledger.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0001_ledger.sql"),
    },
    Migration {
        version: 2,
        sqlite: include_str!("../../assets/migrations/sqlite/0002_console.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0002_console.sql"),
    },
    Migration {
        version: 3,
        sqlite: include_str!("../../assets/migrations/sqlite/0003_dispatchers.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0003_dispatchers.sql"),
    },
    Migration {
        version: 4,
        sqlite: include_str!("../../assets/migrations/sqlite/0004_retry_budgets.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0004_retry_budgets.sql"),
    },
];

/// The schema this build of settle reads and writes.
pub const SCHEMA_VERSION: i64 = 4;
const _: () = assert!(MIGRATIONS[MIGRATIONS.len() - 1].version == SCHEMA_VERSION);

pub(super) async fn migrate(store: &Store) -> Result<()> {
    let mut tx = store.begin().await?;
    if store.backend == Backend::Postgres {
        // Two processes starting on a fresh database must not both create the schema.
        sqlx::query("SELECT pg_advisory_xact_lock(7383501)")
            .execute(&mut *tx)
            .await
            .map_err(|e| store.err(e))?;
    }
    sqlx::query("CREATE TABLE IF NOT EXISTS settle_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)")
        .execute(&mut *tx)
        .await
        .map_err(|e| store.err(e))?;
    let current: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM settle_schema")
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| store.err(e))?;
    let current = current.unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(Error::Unavailable(format!(
            "database {} has schema version {current}, newer than this settle understands ({SCHEMA_VERSION}): upgrade settle",
            store.shown_url
        )));
    }
    if current == 0 {
        let foreign: i64 = sqlx::query_scalar(match store.backend {
            Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'operations'",
            Backend::Postgres => "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'operations'",
        })
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| store.err(e))?;
        if foreign > 0 {
            return Err(Error::Unavailable(format!(
                "database {} has an `operations` table that settle did not create: use another database",
                store.shown_url
            )));
        }
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        let sql = match store.backend {
            Backend::Sqlite => m.sqlite,
            Backend::Postgres => m.postgres,
        };
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| store.err(e))?;
        sqlx::query("INSERT INTO settle_schema (version, applied_at) VALUES ($1, $2)")
            .bind(m.version)
            .bind(chrono::Utc::now().timestamp_millis())
            .execute(&mut *tx)
            .await
            .map_err(|e| store.err(e))?;
    }
    tx.commit().await.map_err(|e| store.err(e))
}
