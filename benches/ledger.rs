//! `cargo bench --bench ledger`: settle against plain SQL on the same SQLite rows, in one run.
//!
//! Seeds SETTLE_BENCH_OPS operations (default 1,000,000), a tenth of them exceptions, and reports
//! ratios, not absolute times (the machine is shared):
//!   1. `ingest` throughput vs a plain batched INSERT loop of the same rows (target >= 0.5x);
//!   2. the console's first page of exceptions, oldest first, vs the same raw SELECT (target <= 1.5x).

use std::time::{Duration, Instant};

use settle::{Config, Ledger, ListFilter};

const PAGE: usize = 50;

fn lines(n: usize) -> String {
    let mut text = String::with_capacity(n * 220);
    for i in 0..n {
        text.push_str(&format!(
            r#"{{"type":"intent","key":"bench-{i:08}","workflow":"crm-sync","step":"upsert-customer","destination":"crm","action":"upsert_customer","payload":{{"customer":{{"id":{i},"email":"c{i}@example.com","name":"Customer {i}"}},"source":"bench"}}}}"#
        ));
        text.push('\n');
        if i % 10 == 0 {
            text.push_str(&format!(
                r#"{{"type":"attempt","key":"bench-{i:08}","attempt":1,"outcome":"unknown","error":"read timeout after 30s"}}"#
            ));
            text.push('\n');
        }
    }
    text
}

/// The rows a plain loader would write: the same operations and attempts, no rules, no audit.
fn plain_inserts(path: &std::path::Path, n: usize) -> Duration {
    let mut conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        .unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let start = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let tx = conn.transaction().unwrap();
        for &i in chunk {
            let payload = format!(
                r#"{{"customer":{{"email":"c{i}@example.com","id":{i},"name":"Customer {i}"}},"source":"bench"}}"#
            );
            let exception = i % 10 == 0;
            let id: i64 = tx
                .prepare_cached(
                    "INSERT INTO operations (key, workflow, step, destination, action, payload, fingerprint, state, attempts, \
                     created_at, updated_at, exception_since, next_attempt_at) \
                     VALUES (?1, 'crm-sync', 'upsert-customer', 'crm', 'upsert_customer', ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8) RETURNING id",
                )
                .unwrap()
                .query_row(
                    rusqlite::params![
                        format!("bench-{i:08}"),
                        payload,
                        format!("{i:064x}"),
                        if exception { "unknown" } else { "pending" },
                        i64::from(exception),
                        now,
                        exception.then_some(now),
                        (!exception).then_some(now)
                    ],
                    |r| r.get(0),
                )
                .unwrap();
            if exception {
                tx.prepare_cached(
                    "INSERT INTO attempts (operation_id, n, actor, started_at, finished_at, outcome, error) \
                     VALUES (?1, 1, 'bench', ?2, ?2, 'unknown', 'read timeout after 30s')",
                )
                .unwrap()
                .execute(rusqlite::params![id, now])
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    start.elapsed()
}

/// What a plain SQL client reads of each row: every column decoded into plain values, no rules.
#[allow(dead_code)]
struct PlainRow {
    ints: [Option<i64>; 14],
    texts: [Option<String>; 16],
}

impl PlainRow {
    fn read(r: &rusqlite::Row) -> PlainRow {
        // the column positions of the statement below: 14 integer and 16 text columns
        const INTS: [usize; 14] = [0, 12, 13, 14, 15, 16, 17, 20, 21, 22, 24, 25, 28, 29];
        const TEXTS: [usize; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 18, 19, 23, 26, 27];
        PlainRow {
            ints: INTS.map(|i| r.get(i).unwrap()),
            texts: TEXTS.map(|i| r.get(i).unwrap()),
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("SETTLE_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let ours = format!("sqlite://{}", dir.path().join("ingest.db").display());
    let plain = format!("sqlite://{}", dir.path().join("plain.db").display());
    println!(
        "seeding {n} operations, {} exceptions, SQLite",
        n.div_ceil(10)
    );
    let text = lines(n);

    // 1. ingest vs plain inserts of the same rows
    Ledger::open(&plain, Config::default())
        .await
        .unwrap()
        .close()
        .await;
    let plain_took = plain_inserts(&dir.path().join("plain.db"), n);
    let ledger = Ledger::open(&ours, Config::default()).await.unwrap();
    let start = Instant::now();
    let report = ledger.ingest(text.as_bytes(), "bench").await.unwrap();
    let ingest_took = start.elapsed();
    assert_eq!((report.created, report.attempts), (n, n.div_ceil(10)));
    let rows = (n + n.div_ceil(10)) as f64;
    let (ingest_rate, plain_rate) = (
        rows / ingest_took.as_secs_f64(),
        rows / plain_took.as_secs_f64(),
    );
    println!(
        "ingest         {:>10.0} lines/s   ({:.1} s)",
        ingest_rate,
        ingest_took.as_secs_f64()
    );
    println!(
        "plain INSERT   {:>10.0} rows/s    ({:.1} s)",
        plain_rate,
        plain_took.as_secs_f64()
    );
    println!(
        "ratio          {:.2}x of plain (target >= 0.50x)",
        ingest_rate / plain_rate
    );

    // 2. the console's first page of exceptions vs the same raw SELECT
    let raw = rusqlite::Connection::open(dir.path().join("ingest.db")).unwrap();
    let now = chrono::Utc::now().timestamp_millis() + 1000;
    // The statement `Ledger::list` runs for this page, as plain SQL.
    let raw_sql = "SELECT id, key, workflow, step, destination, action, payload, fingerprint, conflicting_payload, \
                   conflicting_fingerprint, state, reason, attempts, budget_start, ambiguous, first_sent_at, \
                   attempt_started_at, next_attempt_at, reference, last_error, created_at, updated_at, exception_since, \
                   claimed_by, claimed_at, claim_expires_at, resolution, superseded_by, version, \
                   COALESCE((SELECT paused FROM workflows w WHERE w.name = operations.workflow), 0) AS workflow_paused \
                   FROM operations WHERE exception_since IS NOT NULL AND exception_since <= ?1 \
                   ORDER BY exception_since, id LIMIT ?2";
    // Each side warmed up, then timed in its own run of calls (interleaving them made both pay
    // for the other's cache misses).
    let (mut ours_t, mut raw_t) = (Vec::new(), Vec::new());
    for round in 0..2 {
        for _ in 0..200 {
            let t = Instant::now();
            let page = ledger
                .list(&ListFilter::default(), "bench", None, PAGE)
                .await
                .unwrap();
            if round == 1 {
                ours_t.push(t.elapsed());
            }
            assert_eq!(page.items.len(), PAGE);
        }
        for _ in 0..200 {
            let t = Instant::now();
            let mut st = raw.prepare_cached(raw_sql).unwrap();
            let plain: Vec<PlainRow> = st
                .query_map(rusqlite::params![now, PAGE as i64], |r| {
                    Ok(PlainRow::read(r))
                })
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            if round == 1 {
                raw_t.push(t.elapsed());
            }
            assert_eq!(plain.len(), PAGE);
            std::hint::black_box(plain);
        }
    }
    let (o, r) = (median(ours_t), median(raw_t));
    println!(
        "first page     {:>8.2} ms (settle list, redacted, with safe next steps)",
        o.as_secs_f64() * 1e3
    );
    println!(
        "raw SELECT     {:>8.2} ms (the same statement through SQLite's API, rows decoded into plain values)",
        r.as_secs_f64() * 1e3
    );
    println!(
        "ratio          {:.2}x of raw (target <= 1.50x)",
        o.as_secs_f64() / r.as_secs_f64()
    );
    ledger.close().await;
}
