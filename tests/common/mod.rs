//! Test databases: a temporary SQLite file, or a fresh PostgreSQL database dropped afterwards.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use settle::Config;
use sqlx::Connection;

pub struct TestDb {
    pub url: String,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
    pg_drop: Option<(String, String)>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin, name)) = self.pg_drop.take() {
            // Drop runs outside any runtime we may borrow: use a small one of our own.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                        let _ =
                            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut c)
                                .await;
                    }
                });
            })
            .join();
        }
    }
}

pub fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("settle.db").display());
    TestDb {
        url,
        backend: "sqlite",
        _dir: Some(dir),
        pg_drop: None,
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh PostgreSQL database, or `None` (with a printed notice) when no server is configured.
/// With `SETTLE_REQUIRE_POSTGRES=1` a missing server fails the test instead.
pub async fn postgres() -> Option<TestDb> {
    let Ok(admin) = std::env::var("SETTLE_TEST_POSTGRES_URL") else {
        if std::env::var("SETTLE_REQUIRE_POSTGRES").as_deref() == Ok("1") {
            panic!("SETTLE_REQUIRE_POSTGRES=1 but SETTLE_TEST_POSTGRES_URL is not set");
        }
        eprintln!(
            "notice: SETTLE_TEST_POSTGRES_URL is not set: skipping the PostgreSQL run of this test"
        );
        return None;
    };
    let name = format!(
        "settle_test_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        rand::random::<u32>()
    );
    let mut c = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to SETTLE_TEST_POSTGRES_URL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .expect("create test database");
    let _ = c.close().await;
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .expect("URL with a database name");
    let url = format!("{base}/{name}");
    Some(TestDb {
        url,
        backend: "postgres",
        _dir: None,
        pg_drop: Some((admin, name)),
    })
}

/// The destinations and workflows the tests lean on.
pub fn config() -> Config {
    Config::parse(
        r#"
lease = "30m"
attempt_timeout = "5m"
[destinations.projects]
dedupes = true
key_retention = "24h"
lookup = true
[destinations.crm]
lookup = true
[destinations.sms]
max_attempts = 3
[workflows.guarded]
pause_when = { unresolved = 3 }
[[redaction.rules]]
destination = "crm"
fields = ["customer.name"]
"#,
        "test config",
    )
    .unwrap()
}

/// Runs a test body against SQLite, and against PostgreSQL when configured.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = $crate::common::sqlite();
                    super::$name(&db).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = $crate::common::postgres().await else { return };
                    super::$name(&db).await;
                }
            )*
        }
    };
}
