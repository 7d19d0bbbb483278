//! PostgreSQL as teams run it (manual: Retention and the archive): `--db` takes the libpq options teams use (`sslmode`,
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
    ledger.read().stats().await.unwrap();
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

/// A replica for reports (manual: Retention and the archive): a hot standby of a cluster of the test's own answers every
/// reading command as the primary does; a change asked of it is refused in one line, nothing
/// changed; before the primary has settle's schema, the replica says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_replica_answers_reports_and_refuses_changes() {
    tokio::task::spawn_blocking(|| {
        let primary = common::cluster::Cluster::primary();
        let standby = primary.standby();
        let sim = common::Sim::start(&[]);
        let on_primary = common::drill_on(&primary.url("postgres"), &sim, false, false, "");
        let on_replica = common::drill_on(&standby.url("postgres"), &sim, false, false, "");
        let (code, _, stderr) = on_replica.output(&["stats"]);
        assert_eq!(code, 4, "{stderr}");
        assert!(
            stderr.contains("read-only (a replica?) with no settle schema"),
            "{stderr}"
        );
        on_primary.record("rep-1");
        on_primary.run(&["attempt", "--key", "rep-1", "--outcome", "unknown"]);
        common::wait_until(
            "the replica to catch up",
            std::time::Duration::from_secs(20),
            || on_replica.output(&["show", "rep-1", "--json"]).0 == 0,
        );
        // what does not move with the clock reads the same on both
        for args in [&["stats"][..], &["runs"]] {
            assert_eq!(
                on_replica.run(args),
                on_primary.run(args),
                "settle {args:?} on the replica"
            );
        }
        let listed = on_replica.run(&["list"]);
        assert!(
            listed
                .lines()
                .any(|l| l.contains("rep-1") && l.contains("unknown")),
            "{listed}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&on_replica.run(&["report", "--json"])).unwrap();
        assert_eq!(report["open_exceptions"], 1, "{report}");
        assert_eq!(on_replica.show("rep-1")["state"], "unknown");
        let (code, _, stderr) = on_replica.output(&["claim", "rep-1"]);
        assert_eq!(code, 3, "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("changes are made on the primary"),
            "{stderr}"
        );
        assert_eq!(
            on_primary.show("rep-1")["claimed_by"],
            serde_json::Value::Null
        );
    })
    .await
    .unwrap();
}

/// `settle serve` without a dispatcher folds PostgreSQL's counter rows itself: every write
/// appends its differences, and scrapes and consoles sum them (466,000 rows after an ingest of
/// ten million made a scrape take 200 ms instead of 25).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn serve_folds_the_counters_without_a_dispatcher() {
    let db = common::postgres().await;
    let sim = common::Sim::start(&[]);
    let d = common::drill(&db, &sim, false, false, "");
    for i in 0..20 {
        d.record(&format!("fold-{i}"));
    }
    let mut raw = Raw::connect(&db.url).await;
    let rows = raw.int("SELECT COUNT(*) FROM state_counts").await;
    assert!(rows >= 20, "a row of differences a write: {rows}");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("host_key");
    let _serve = common::Killed(
        d.cmd(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--host-key",
            key.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // one workflow, every operation pending: one row once folded
        let rows = raw.int("SELECT COUNT(*) FROM state_counts").await;
        if rows == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {rows} rows");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let n = raw
        .int("SELECT CAST(SUM(n) AS BIGINT) FROM state_counts")
        .await;
    assert_eq!(n, 20, "the fold keeps the count");
}

/// Schema 15 where `pg_trgm` cannot be created (a role that may make tables in its schema but not
/// extensions in the database): the migration goes on without the trigram index, and the
/// filter's words are still found (by reading the exceptions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn words_are_found_where_pg_trgm_cannot_be_created() {
    use settle::{Config, Ledger};
    let admin = std::env::var("SETTLE_TEST_POSTGRES_URL").unwrap();
    let text_index =
        "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'operations_exceptions_text'";
    // where it may, the migration makes the index
    let full = common::postgres_on(&admin).await;
    Ledger::open(&full.url, Config::default())
        .await
        .unwrap()
        .close()
        .await;
    assert_eq!(Raw::connect(&full.url).await.int(text_index).await, 1);
    let db = common::postgres_on(&admin).await;
    let role = format!("settle_plain_{}", rand::random::<u32>());
    let mut raw = Raw::connect(&db.url).await;
    raw.execute(&format!("CREATE ROLE {role} LOGIN"))
        .await
        .unwrap();
    // its schema's tables, but no CREATE on the database, which CREATE EXTENSION needs
    raw.execute(&format!("GRANT USAGE, CREATE ON SCHEMA public TO {role}"))
        .await
        .unwrap();
    let (_, server) = db.url.split_once('@').unwrap();
    let url = format!("postgres://{role}@{server}");
    let l = Ledger::open(&url, Config::default()).await.unwrap();
    let extensions = raw
        .int("SELECT COUNT(*) FROM pg_extension WHERE extname = 'pg_trgm'")
        .await;
    let indexes = raw.int(text_index).await;
    assert_eq!((extensions, indexes), (0, 0));
    l.ingest(
        concat!(
            r#"{"type":"intent","key":"w-1","workflow":"wf","destination":"sms","action":"send","payload":{}}"#,
            "\n",
            r#"{"type":"attempt","key":"w-1","attempt":1,"outcome":"unknown","error":"mailbox bounced"}"#,
            "\n",
            r#"{"type":"intent","key":"w-2","workflow":"wf","destination":"sms","action":"send","payload":{}}"#,
            "\n",
            r#"{"type":"attempt","key":"w-2","attempt":1,"outcome":"unknown","error":"read timeout"}"#,
            "\n",
        )
        .as_bytes(),
        "bot",
    )
    .await
    .unwrap();
    let keys = common::keys_listed(&l, settle::Scope::default(), "bounce", "alice").await;
    assert_eq!(keys, ["w-1"]);
    l.close().await;
    drop(raw);
    drop(db);
    let mut admin = Raw::connect(&admin).await;
    admin.execute(&format!("DROP ROLE {role}")).await.unwrap();
}

/// A replica to read from (manual: A replica for the console and reports): with `--read-db`, the
/// lists, counts, the review, `report`, `stats` and the console's pages are read from the hot
/// standby, as its own `pg_stat_statements` shows, and none of them on the primary; writes go to
/// the primary, and so does what a person reads right after their own action, even while the
/// replica lags; the lag is measured for the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn read_db_serves_lists_and_reports_from_the_replica() {
    use settle::ledger::Position;
    let primary = common::cluster::Cluster::primary_with(
        "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n",
    );
    let standby = primary.standby();
    let sim = common::Sim::start(&[]);
    let d = common::drill_on(&primary.url("postgres"), &sim, false, false, "");
    primary.sql("CREATE EXTENSION pg_stat_statements");
    d.record("rep-1");
    d.run(&["attempt", "--key", "rep-1", "--outcome", "unknown"]);
    let replayed = |key: &str| {
        standby.sql(&format!(
            "SELECT COUNT(*) FROM operations WHERE key = '{key}'"
        )) == "1"
    };
    common::wait_until(
        "the replica to catch up",
        std::time::Duration::from_secs(20),
        || replayed("rep-1"),
    );
    // the statements each server ran from here on, by a fragment of their text
    let calls = |on: &common::cluster::Cluster, fragment: &str| -> i64 {
        on.sql(&format!(
            "SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements WHERE query LIKE '%{fragment}%' \
             AND query NOT LIKE '%pg_stat_statements%'"
        ))
        .parse()
        .unwrap()
    };
    for on in [&primary, &standby] {
        on.sql("SELECT pg_stat_statements_reset()");
    }
    let read_db = standby.url("postgres");
    for args in [
        &["list", "--read-db", &read_db][..],
        &["stats", "--read-db", &read_db],
        &["report", "--json", "--read-db", &read_db],
    ] {
        let (code, out, err) = d.output(args);
        assert_eq!(code, 0, "settle {args:?}: {err}");
        if args[0] == "list" {
            assert!(out.contains("rep-1"), "{out}");
        }
    }
    // the counts (stats, the header, the metrics), a page of the list (its rows' columns), the
    // review, the runs, what is paused, the dispatchers heard from: on the replica, none on the
    // primary
    for fragment in [
        "FROM state_counts",
        "conflicting_payload",
        "FROM review_opened",
        "FROM runs",
        "WHERE paused = ",
        "FROM dispatchers",
    ] {
        assert!(calls(&standby, fragment) > 0, "{fragment} on the replica");
        assert_eq!(calls(&primary, fragment), 0, "{fragment} on the primary");
    }

    // the console's ledger: its pages from the replica, until the person acts
    let mut config = common::config();
    config.read_db = Some(read_db.clone());
    let ledger = settle::Ledger::open_console(&primary.url("postgres"), config)
        .await
        .unwrap();
    let claimed_on_page = |ledger: settle::Ledger| async move {
        let page = ledger
            .read()
            .page(
                &settle::ListFilter::default(),
                "alice",
                &Position::First,
                50,
            )
            .await
            .unwrap();
        let row = page
            .items
            .iter()
            .find(|r| r.key == "rep-1")
            .cloned()
            .unwrap();
        row.claimed_by
    };
    let before = calls(&standby, "conflicting_payload");
    assert_eq!(claimed_on_page(ledger.clone()).await, None);
    assert!(
        calls(&standby, "conflicting_payload") > before,
        "the page from the replica"
    );
    // the replica falls behind: what it receives, it replays half a minute later
    standby.sql("ALTER SYSTEM SET recovery_min_apply_delay = '30s'");
    standby.sql("SELECT pg_reload_conf()");
    ledger
        .staff()
        .act(
            "rep-1",
            "alice",
            settle::StaffAction::Claim { force_reason: None },
        )
        .await
        .unwrap();
    // her next page shows her claim: read from the primary, the replica has not replayed it
    assert_eq!(
        claimed_on_page(ledger.clone()).await.as_deref(),
        Some("alice")
    );
    assert_eq!(
        standby.sql("SELECT COALESCE(claimed_by, '-') FROM operations WHERE key = 'rep-1'"),
        "-"
    );
    // and the lag shows: more than five seconds once the claim has waited that long
    common::wait_until(
        "a lag of more than 5 s",
        std::time::Duration::from_secs(30),
        || {
            let lag = common::on_a_thread(ledger.read().replica_lag());
            lag.is_some_and(|s| s > 5)
        },
    );
    ledger.close().await;
}
