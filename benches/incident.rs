//! `cargo bench --bench incident`: incident mode (manual: Many at once) at SETTLE_BENCH_OPS operations
//! (default 1,000,000; a tenth of them exceptions, half of those unknown) on SQLite, or on
//! PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh database, dropped afterwards).
//!
//! Reports, each the median of three runs:
//!   1. `A` on the 50,000 unknowns: every matching key, then the bulk preview of closing them
//!      (target: both within 1 s);
//!   2. a bulk close of 10,000 items against plain SQL doing the same per item (a compare-and-set
//!      UPDATE and an event INSERT, 200 items a transaction): throughput ratio (target >= 0.5x);
//!   3. the tab counts and the header's numbers (target <= 50 ms);
//!   4. a metrics scrape, the operations due counted too (manual: Metrics; target <= 100 ms);
//!   5. the review after a release (manual: The review after a release: `settle report` and view 6's data) over 7 and 30
//!      days, with the 60,000 closed by 2. resolved in the window (target <= 1 s);
//!   6. the exceptions by group, all of them and one owner's (manual: Owners and notifications;
//!      target <= 1 s).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::domain::filter::Filter;
use settle::ledger::{ListFilter, Scope};
use settle::{Config, Ledger, Resolution, StaffAction};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The plain client's bulk close: per item one compare-and-set UPDATE and one event INSERT, 200
/// items a transaction (the ids and versions read first, one SELECT a transaction).
async fn plain_close(url: &str, keys: &[String], now: i64) {
    match url.strip_prefix("sqlite://") {
        Some(path) => {
            let mut c = rusqlite::Connection::open(path).unwrap();
            c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000")
                .unwrap();
            for chunk in keys.chunks(200) {
                let tx = c.transaction().unwrap();
                let marks = vec!["?"; chunk.len()].join(", ");
                let rows: Vec<(i64, i64, String)> = {
                    let mut st = tx
                        .prepare(&format!(
                            "SELECT id, version, state FROM operations WHERE key IN ({marks})"
                        ))
                        .unwrap();
                    st.query_map(rusqlite::params_from_iter(chunk.iter()), |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
                };
                for (id, version, state) in rows {
                    let n = tx
                        .prepare_cached(
                            "UPDATE operations SET state = 'closed', resolution = 'abandoned', claimed_by = 'bench', \
                             claimed_at = ?1, claim_expires_at = ?1, exception_since = NULL, next_attempt_at = NULL, \
                             updated_at = ?1, version = version + 1 WHERE id = ?2 AND version = ?3",
                        )
                        .unwrap()
                        .execute(rusqlite::params![now, id, version])
                        .unwrap();
                    assert_eq!(n, 1);
                    tx.prepare_cached(
                        "INSERT INTO events (operation_id, at, actor, kind, from_state, to_state, detail) \
                         VALUES (?1, ?2, 'bench', 'closed', ?3, 'closed', '{\"resolution\":\"abandoned\",\"note\":\"outage\",\"batch\":\"b\"}')",
                    )
                    .unwrap()
                    .execute(rusqlite::params![id, now, state])
                    .unwrap();
                }
                tx.commit().unwrap();
            }
        }
        None => {
            use sqlx::{Connection, Row};
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            for chunk in keys.chunks(200) {
                let mut tx = c.begin().await.unwrap();
                let rows = sqlx::query(
                    "SELECT id, version, state FROM operations WHERE key = ANY($1) ORDER BY key FOR UPDATE",
                )
                .bind(chunk)
                .fetch_all(&mut *tx)
                .await
                .unwrap();
                for r in rows {
                    let (id, version, state): (i64, i64, String) = (r.get(0), r.get(1), r.get(2));
                    let done = sqlx::query(
                        "UPDATE operations SET state = 'closed', resolution = 'abandoned', claimed_by = 'bench', \
                         claimed_at = $1, claim_expires_at = $1, exception_since = NULL, next_attempt_at = NULL, \
                         updated_at = $1, version = version + 1 WHERE id = $2 AND version = $3",
                    )
                    .bind(now)
                    .bind(id)
                    .bind(version)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                    assert_eq!(done.rows_affected(), 1);
                    sqlx::query(
                        "INSERT INTO events (operation_id, at, actor, kind, from_state, to_state, detail) \
                         VALUES ($1, $2, 'bench', 'closed', $3, 'closed', '{\"resolution\":\"abandoned\",\"note\":\"outage\",\"batch\":\"b\"}')",
                    )
                    .bind(id)
                    .bind(now)
                    .bind(state)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                }
                tx.commit().await.unwrap();
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let n = common::env_count("SETTLE_BENCH_OPS", 1_000_000);
    // a tenth of the operations are exceptions, half of them unknown: three bulk closes of 10,000
    // unknowns and three plain closes of 10,000 others must leave some for the scrape
    if n < 700_000 {
        eprintln!("SETTLE_BENCH_OPS must be at least 700000 (60,000 exceptions are closed)");
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().unwrap();
    let server = common::bench_server();
    let pg = match &server {
        Some(u) => Some(common::postgres_on(u).await),
        None => None,
    };
    let url = match &pg {
        Some(db) => db.url.clone(),
        None => format!("sqlite://{}", dir.path().join("incident.db").display()),
    };
    let backend = if pg.is_some() { "PostgreSQL" } else { "SQLite" };
    // the seeded destinations are HTTP destinations (never sent to here): the scrape counts the
    // operations due for a dispatcher, nine in ten of them
    let destinations: String = (0..5)
        .map(|d| format!("[destinations.dest-{d}]\nurl = \"http://127.0.0.1:9/tasks\"\n"))
        .collect();
    // and teams own the workflows (the header counts the exceptions nobody owns; wf-6 is one)
    let teams = "[teams.growth]\nmembers = [\"alice\"]\n[workflows.wf-0]\nowner = \"growth\"\n\
                 [workflows.wf-1]\nowner = \"growth\"\n[teams.revops]\nmembers = [\"bob\"]\n\
                 [workflows.wf-2]\nowner = \"revops\"\n";
    let config = Config::parse(&format!("{destinations}{teams}"), "bench").unwrap();
    let ledger = Ledger::open(&url, config).await.unwrap();
    let t = Instant::now();
    ledger
        .ingest(common::seed_lines(n).as_bytes(), "bench")
        .await
        .unwrap();
    // what a running settle serve or dispatcher does within a minute of a bulk load: the
    // planner's statistics refreshed (PostgreSQL), so that the due counts walk their index
    ledger.rounds().fold_counters().await.unwrap();
    println!(
        "incident mode on {backend}: {n} operations, {} exceptions (seeded in {:.1} s)",
        n / 10,
        t.elapsed().as_secs_f64()
    );

    // 1. A on the unknowns, then the preview of closing them
    let unknown = ListFilter {
        scope: Scope::Exceptions,
        query: Filter::parse("state:unknown").unwrap(),
        ..Default::default()
    };
    let close = StaffAction::Close {
        resolution: Resolution::Abandoned,
        reference: None,
        superseded_by: None,
        note: "outage".into(),
    };
    let (mut mark, mut preview) = (Vec::new(), Vec::new());
    let mut keys = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        keys = ledger
            .read()
            .matching_keys(&unknown, "alice")
            .await
            .unwrap();
        mark.push(t.elapsed());
        let t = Instant::now();
        let p = ledger
            .staff()
            .bulk_preview(&keys, &close, "alice")
            .await
            .unwrap();
        preview.push(t.elapsed());
        assert_eq!(p.eligible.len(), keys.len());
    }
    let (m, p) = (median(mark), median(preview));
    println!(
        "\n1. A on {} matching items: marked in {:.0} ms, previewed in {:.0} ms, together {:.0} ms (target <= 1000 ms)",
        keys.len(),
        ms(m),
        ms(p),
        ms(m + p)
    );

    // 2. a bulk close of 10,000 items vs plain SQL on 10,000 others
    let stop = std::sync::atomic::AtomicBool::new(false);
    let rejected = ListFilter {
        scope: Scope::Exceptions,
        query: Filter::parse("state:rejected").unwrap(),
        ..Default::default()
    };
    let others = ledger
        .read()
        .matching_keys(&rejected, "alice")
        .await
        .unwrap();
    let (mut ours, mut plain) = (Vec::new(), Vec::new());
    for run in 0..3 {
        let mine = &keys[run * 10_000..(run + 1) * 10_000];
        let t = Instant::now();
        let r = ledger
            .staff()
            .bulk_apply(mine, &close, "alice", &stop, None, |_, _| {})
            .await
            .unwrap();
        ours.push(t.elapsed());
        assert_eq!(r.done.len(), 10_000);
        let theirs = &others[run * 10_000..(run + 1) * 10_000];
        let t = Instant::now();
        plain_close(&url, theirs, chrono::Utc::now().timestamp_millis()).await;
        plain.push(t.elapsed());
    }
    let (o, r) = (median(ours), median(plain));
    println!(
        "\n2. bulk close of 10,000: settle {:.0} items/s ({:.0} ms), plain SQL {:.0} items/s ({:.0} ms): {:.2}x (target >= 0.5x)",
        10_000.0 / o.as_secs_f64(),
        ms(o),
        10_000.0 / r.as_secs_f64(),
        ms(r),
        r.as_secs_f64() / o.as_secs_f64()
    );

    // 3. the tab counts and the header's numbers
    let mut counts = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let s = ledger.read().stats().await.unwrap();
        counts.push(t.elapsed());
        assert_eq!(s.by_state.values().sum::<i64>(), n as i64);
    }
    println!(
        "\n3. tab counts and header numbers (every state, exceptions, oldest) {:.1} ms (target <= 50 ms)",
        ms(median(counts))
    );

    // 4. a metrics scrape (manual: Metrics: cheap enough every 15 s)
    let mut scrapes = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let text = settle::metrics::scrape(&ledger, 0).await;
        scrapes.push(t.elapsed());
        assert!(text.contains("settle_exceptions{"));
    }
    println!(
        "\n4. a metrics scrape {:.1} ms (target <= 100 ms)",
        ms(median(scrapes))
    );

    // 5. the review (manual: The review after a release: the report and view 6's data within a second)
    for days in [7u64, 30] {
        let mut runs = Vec::new();
        let mut review = None;
        for _ in 0..3 {
            let t = Instant::now();
            review = Some(
                ledger
                    .read()
                    .review(
                        Duration::from_secs(days * 86_400),
                        &settle::ledger::ReviewScope::default(),
                    )
                    .await
                    .unwrap(),
            );
            runs.push(t.elapsed());
        }
        let r = review.unwrap();
        println!(
            "\n5. the review of {days} days ({} open, {} opened and {} resolved in it) {:.0} ms (target <= 1000 ms)",
            r.open_exceptions,
            r.per_day.iter().map(|d| d.opened).sum::<i64>(),
            r.per_day.iter().map(|d| d.resolved).sum::<i64>(),
            ms(median(runs))
        );
    }
    // 6. the exceptions by group (manual: Owners and notifications), all of them and one owner's
    for (label, text) in [("every exception", ""), ("owner:growth", "owner:growth")] {
        let filter = ListFilter {
            scope: Scope::Exceptions,
            query: Filter::parse(text).unwrap(),
            ..Default::default()
        };
        let mut runs = Vec::new();
        let mut groups = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            groups = ledger.read().groups(&filter, "alice").await.unwrap();
            runs.push(t.elapsed());
        }
        let count: i64 = groups.iter().map(|g| g.count).sum();
        println!(
            "\n6. settle groups, {label}: {count} exceptions in {} groups, {:.0} ms (target <= 1000 ms)",
            groups.len(),
            ms(median(runs))
        );
    }

    ledger.close().await;
    drop(pg);
}
