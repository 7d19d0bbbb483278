//! Embedded migrations, applied on every start, refusing a database from a newer settle.
//!
//! A small runner of our own rather than `sqlx::migrate!`: one schema per backend with the same
//! version numbers, and the one rule we need beyond "apply what is missing" is a clear refusal of
//! a newer schema.

use super::sql::{Cell, Stmt, get};
use super::{Backend, Store, Tx};
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
    Migration {
        version: 5,
        sqlite: include_str!("../../assets/migrations/sqlite/0005_destination_pauses.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0005_destination_pauses.sql"),
    },
    Migration {
        version: 6,
        sqlite: include_str!("../../assets/migrations/sqlite/0006_activity.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0006_activity.sql"),
    },
    Migration {
        version: 7,
        sqlite: include_str!("../../assets/migrations/sqlite/0007_state_counts.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0007_state_counts.sql"),
    },
    Migration {
        version: 8,
        sqlite: include_str!("../../assets/migrations/sqlite/0008_counts_by_workflow.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0008_counts_by_workflow.sql"),
    },
    Migration {
        version: 9,
        sqlite: include_str!("../../assets/migrations/sqlite/0009_exception_spans.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0009_exception_spans.sql"),
    },
    Migration {
        version: 10,
        sqlite: include_str!("../../assets/migrations/sqlite/0010_one_trigger.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0010_one_trigger.sql"),
    },
    Migration {
        version: 11,
        sqlite: include_str!("../../assets/migrations/sqlite/0011_runs.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0011_runs.sql"),
    },
    Migration {
        version: 12,
        sqlite: include_str!("../../assets/migrations/sqlite/0012_run_rows.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0012_run_rows.sql"),
    },
    Migration {
        version: 13,
        sqlite: include_str!("../../assets/migrations/sqlite/0013_prune.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0013_prune.sql"),
    },
    Migration {
        version: 14,
        sqlite: include_str!("../../assets/migrations/sqlite/0014_review_at_scale.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0014_review_at_scale.sql"),
    },
    Migration {
        version: 15,
        sqlite: include_str!("../../assets/migrations/sqlite/0015_word_search.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0015_word_search.sql"),
    },
    Migration {
        version: 16,
        sqlite: include_str!("../../assets/migrations/sqlite/0016_word_index_pending.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0016_word_index_pending.sql"),
    },
    Migration {
        version: 17,
        sqlite: include_str!("../../assets/migrations/sqlite/0017_notifications.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0017_notifications.sql"),
    },
    Migration {
        version: 18,
        sqlite: include_str!("../../assets/migrations/sqlite/0018_groups_by_reason.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0018_groups_by_reason.sql"),
    },
    Migration {
        version: 19,
        sqlite: include_str!("../../assets/migrations/sqlite/0019_corrections.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0019_corrections.sql"),
    },
    Migration {
        version: 20,
        sqlite: include_str!("../../assets/migrations/sqlite/0020_rate_buckets.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0020_rate_buckets.sql"),
    },
    Migration {
        version: 21,
        sqlite: include_str!("../../assets/migrations/sqlite/0021_groups_and_order.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0021_groups_and_order.sql"),
    },
    Migration {
        version: 22,
        sqlite: include_str!("../../assets/migrations/sqlite/0022_breakers.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0022_breakers.sql"),
    },
    Migration {
        version: 23,
        sqlite: include_str!("../../assets/migrations/sqlite/0023_undo.sql"),
        postgres: include_str!("../../assets/migrations/postgres/0023_undo.sql"),
    },
];

/// The schema this build of settle reads and writes.
pub const SCHEMA_VERSION: i64 = 23;
const _: () = assert!(MIGRATIONS[MIGRATIONS.len() - 1].version == SCHEMA_VERSION);

pub(super) async fn migrate(store: &Store) -> Result<()> {
    let backend = store.backend();
    let mut tx = store.begin().await?;
    let result = apply(&mut tx, backend, &store.shown_url).await;
    match result {
        Ok(()) => tx.commit().await,
        Err(e) => {
            tx.rollback().await;
            Err(e)
        }
    }
}

async fn apply(tx: &mut Tx, backend: Backend, shown_url: &str) -> Result<()> {
    let named = |e: Error| match e {
        Error::Unavailable(why) => Error::Unavailable(format!("database {shown_url}: {why}")),
        other => other,
    };
    let stmt = |sql: &'static str| Stmt::new(sql, Vec::new());
    if backend == Backend::Postgres {
        // A replica (a hot standby) or a read-only role: nothing may be created or locked,
        // and reads need only the schema this settle knows.
        let read_only: String = stmt("SELECT current_setting('transaction_read_only') AS v")
            .one(tx.db(), |r| get(r, "v"))
            .await
            .map_err(named)?;
        if read_only == "on" {
            return check_read_only(tx).await.map_err(named);
        }
        // Two processes starting on a fresh database must not both create the schema.
        stmt("SELECT pg_advisory_xact_lock(7383501)")
            .row(tx.db(), |_| Ok(()))
            .await
            .map_err(named)?;
    }
    stmt("CREATE TABLE IF NOT EXISTS settle_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)")
        .execute(tx.db())
        .await
        .map_err(named)?;
    let current: i64 = stmt("SELECT COALESCE(MAX(version), 0) AS n FROM settle_schema")
        .one(tx.db(), |r| get(r, "n"))
        .await
        .map_err(named)?;
    if current > SCHEMA_VERSION {
        return Err(Error::Unavailable(format!(
            "database {shown_url} has schema version {current}, newer than this settle understands ({SCHEMA_VERSION}): upgrade settle"
        )));
    }
    if current == 0 {
        let sql = match backend {
            Backend::Sqlite => {
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'operations'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'operations'"
            }
        };
        let foreign: i64 = stmt(sql)
            .one(tx.db(), |r| get(r, "n"))
            .await
            .map_err(named)?;
        if foreign > 0 {
            return Err(Error::Unavailable(format!(
                "database {shown_url} has an `operations` table that settle did not create: use another database"
            )));
        }
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        let sql = match backend {
            Backend::Sqlite => m.sqlite,
            Backend::Postgres => m.postgres,
        };
        tx.db().execute_batch(sql).await.map_err(named)?;
        if m.version == 21 {
            super::group_ids::fill(tx).await.map_err(named)?;
        }
        Stmt::new(
            "INSERT INTO settle_schema (version, applied_at) VALUES ($1, $2)",
            vec![
                Cell::Int(Some(m.version)),
                Cell::Int(Some(chrono::Utc::now().timestamp_millis())),
            ],
        )
        .execute(tx.db())
        .await
        .map_err(named)?;
    }
    Ok(())
}

/// A read-only PostgreSQL (a replica for reports): its schema must be the one this settle
/// reads, as the primary's migrations left it.
async fn check_read_only(tx: &mut Tx) -> Result<()> {
    let stmt = |sql: &'static str| Stmt::new(sql, Vec::new());
    let kept: i64 = stmt(
        "SELECT COUNT(*) AS n FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_name = 'settle_schema'",
    )
    .one(tx.db(), |r| get(r, "n"))
    .await?;
    let version: Option<i64> = match kept {
        0 => None,
        _ => Some(
            stmt("SELECT COALESCE(MAX(version), 0) AS n FROM settle_schema")
                .one(tx.db(), |r| get(r, "n"))
                .await?,
        ),
    };
    let found = match version {
        Some(v) if v == SCHEMA_VERSION => return Ok(()),
        Some(v) if v > SCHEMA_VERSION => {
            return Err(Error::Unavailable(format!(
                "schema version {v}, newer than this settle understands ({SCHEMA_VERSION}): upgrade settle"
            )));
        }
        Some(v) => format!("schema version {v}, older than this settle's {SCHEMA_VERSION}"),
        None => "no settle schema".to_string(),
    };
    Err(Error::Unavailable(format!(
        "read-only (a replica?) with {found}: run settle init on the primary, and let the replica catch up"
    )))
}

#[cfg(test)]
mod tests {
    /// The Activity query repeats the partial index's condition word for word, or the planner
    /// would not use the index.
    #[test]
    fn the_people_index_has_the_activity_query_condition() {
        for m in super::MIGRATIONS.iter().filter(|m| m.version == 6) {
            for sql in [m.sqlite, m.postgres] {
                assert!(
                    sql.contains(&format!(
                        "WHERE {};",
                        crate::domain::activity_filter::PEOPLE_ONLY
                    )),
                    "{sql}"
                );
            }
        }
    }

    /// The bare words' query repeats the text index's expression word for word, or the planner
    /// would not use the index.
    #[test]
    fn the_text_index_has_the_word_query_expression() {
        for m in super::MIGRATIONS.iter().filter(|m| m.version == 15) {
            for sql in [m.sqlite, m.postgres] {
                assert!(sql.contains(crate::store::terms::EXCEPTION_TEXT), "{sql}");
            }
        }
    }

    /// Schema 16: the trigram index folds its pending list in steps of 512 kB (see the
    /// migration), on a PostgreSQL that has the index.
    #[tokio::test]
    #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
    async fn the_word_index_folds_small_pending_lists() {
        use super::super::sql::{Stmt, get};
        let f = super::super::store_tests::postgres().await;
        let mut tx = f.store.begin().await.unwrap();
        let options: Vec<String> = Stmt::new(
            "SELECT COALESCE(array_to_string(reloptions, ','), '') AS o FROM pg_class \
             WHERE relname = 'operations_exceptions_text'",
            Vec::new(),
        )
        .rows(tx.db(), |r| get(r, "o"))
        .await
        .unwrap();
        tx.rollback().await;
        assert_eq!(options, ["gin_pending_list_limit=512"]);
    }
}
