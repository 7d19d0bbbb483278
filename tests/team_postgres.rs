//! PostgreSQL as teams run it (SPEC 22): `--db` takes the libpq options teams use (`sslmode`,
//! `application_name`, `options`), seen from the server's side.

mod common;

use common::Raw;

/// A ledger opened with `sslmode=require`, an `application_name` and `options` runs over TLS
/// under that name with that setting, as `pg_stat_activity` and `pg_stat_ssl` see it; on a
/// server without TLS it is refused in one line, never sent in the clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn the_db_url_takes_libpq_options() {
    let db = common::postgres().await;
    let mut raw = Raw::connect(&db.url).await;
    let tls = raw.texts("SHOW ssl").await == ["on"];
    // settle in a schema of its own, as a team's shared database would have it
    raw.execute("CREATE SCHEMA ledger").await.unwrap();
    let url = format!(
        "{}?sslmode=require&application_name=settle-team-test&options=-c%20search_path%3Dledger",
        db.url
    );
    let opened = settle::Ledger::open(&url, common::config()).await;
    if !tls {
        let err = opened.unwrap_err().to_string();
        assert!(err.contains("TLS") || err.contains("SSL"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        return;
    }
    let ledger = opened.unwrap();
    ledger.stats().await.unwrap();
    let seen = raw
        .texts(
            "SELECT a.application_name || ' ' || s.ssl::text FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'settle-team-test'",
        )
        .await;
    assert!(!seen.is_empty(), "settle's session is named as asked");
    assert!(
        seen.iter().all(|s| s == "settle-team-test true"),
        "{seen:?}"
    );
    // `options` reached the session: settle's tables are in the schema it set
    let tables = raw
        .int(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = 'ledger' AND table_name = 'operations'",
        )
        .await;
    assert_eq!(tables, 1);
    ledger.close().await;
}
