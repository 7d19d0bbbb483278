//! `cargo bench --bench ledger`: settle against plain SQL on the same rows, in one run, on SQLite
//! (default) or on PostgreSQL (`SETTLE_BENCH_DB=postgres://USER@HOST/DB`: fresh databases are made
//! on that server and dropped afterwards).
//!
//! Reports ratios, not absolute times (the machine is shared):
//!   1. `ingest` of SETTLE_BENCH_INGEST intents (default 100,000) and an attempt for every tenth,
//!      vs a plain loader writing the same rows (operations, attempts and the audit events ingest
//!      writes) with multi-row INSERTs, 500 lines to a transaction (target >= 0.8x on SQLite,
//!      >= 0.7x on PostgreSQL); three rounds on fresh databases, the median of each side;
//!   2. re-ingesting the same file, every line already stored, vs the first ingest (target:
//!      at least as fast);
//!   3. the console's first page of exceptions, oldest first, vs the same raw SELECT, with
//!      SETTLE_BENCH_OPS operations stored (default 1,000,000; a tenth of them exceptions)
//!      (target <= 1.5x).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::{Config, Ledger, ListFilter};

const PAGE: usize = 50;
const BATCH: usize = 500;

fn payload(i: usize) -> String {
    format!(
        r#"{{"customer":{{"email":"c{i}@example.com","id":{i},"name":"Customer {i}"}},"source":"bench"}}"#
    )
}

fn lines(n: usize) -> String {
    let mut text = String::with_capacity(n * 220);
    for i in 0..n {
        text.push_str(&format!(
            r#"{{"type":"intent","key":"bench-{i:08}","workflow":"crm-sync","step":"upsert-customer","destination":"crm","action":"upsert_customer","payload":{}}}"#,
            payload(i)
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

/// A plain client on the benchmark's database.
enum Plain {
    Sqlite(rusqlite::Connection),
    Postgres(sqlx::PgConnection),
}

impl Plain {
    async fn connect(url: &str) -> Plain {
        use sqlx::Connection;
        match url.strip_prefix("sqlite://") {
            Some(path) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
                    .unwrap();
                Plain::Sqlite(c)
            }
            None => Plain::Postgres(sqlx::PgConnection::connect(url).await.unwrap()),
        }
    }

    /// One batch of lines as a plain loader writes it: the operations (ids back), their
    /// attempts, and one audit event per line, three multi-row INSERTs in one transaction.
    async fn load_batch(&mut self, lines: &[usize], now: i64) {
        let exception = |i: usize| i.is_multiple_of(10);
        let marks = |rows: usize, width: usize, numbered: bool| -> String {
            (0..rows)
                .map(|r| {
                    let cells: Vec<String> = (0..width)
                        .map(|c| {
                            if numbered {
                                format!("${}", r * width + c + 1)
                            } else {
                                "?".into()
                            }
                        })
                        .collect();
                    format!("({})", cells.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let op_sql = |numbered: bool| {
            format!(
                "INSERT INTO operations (key, workflow, step, destination, action, payload, fingerprint, state, attempts, \
                 created_at, updated_at, exception_since, next_attempt_at) VALUES {} RETURNING id",
                marks(lines.len(), 13, numbered)
            )
        };
        let tried: Vec<usize> = lines.iter().copied().filter(|i| exception(*i)).collect();
        let att_sql = |numbered: bool| {
            format!(
                "INSERT INTO attempts (operation_id, n, actor, started_at, finished_at, outcome, error) VALUES {}",
                marks(tried.len(), 7, numbered)
            )
        };
        let ev_rows = lines.len() + tried.len();
        let ev_sql = |numbered: bool| {
            format!(
                "INSERT INTO events (operation_id, at, actor, kind, from_state, to_state, detail) VALUES {}",
                marks(ev_rows, 7, numbered)
            )
        };
        match self {
            Plain::Sqlite(c) => {
                use rusqlite::types::Value as V;
                let tx = c.transaction().unwrap();
                let mut params: Vec<V> = Vec::new();
                for &i in lines {
                    let e = exception(i);
                    params.extend([
                        V::Text(format!("bench-{i:08}")),
                        V::Text("crm-sync".into()),
                        V::Text("upsert-customer".into()),
                        V::Text("crm".into()),
                        V::Text("upsert_customer".into()),
                        V::Text(payload(i)),
                        V::Text(format!("{i:064x}")),
                        V::Text(if e { "unknown" } else { "pending" }.into()),
                        V::Integer(i64::from(e)),
                        V::Integer(now),
                        V::Integer(now),
                        if e { V::Integer(now) } else { V::Null },
                        if e { V::Null } else { V::Integer(now) },
                    ]);
                }
                let ids: Vec<i64> = {
                    let mut st = tx.prepare_cached(&op_sql(false)).unwrap();
                    st.query_map(rusqlite::params_from_iter(params), |r| r.get(0))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect()
                };
                let id_of = |k: usize| ids[k];
                let mut params: Vec<V> = Vec::new();
                for (k, &i) in lines.iter().enumerate() {
                    if exception(i) {
                        params.extend([
                            V::Integer(id_of(k)),
                            V::Integer(1),
                            V::Text("bench".into()),
                            V::Integer(now),
                            V::Integer(now),
                            V::Text("unknown".into()),
                            V::Text("read timeout after 30s".into()),
                        ]);
                    }
                }
                if !tried.is_empty() {
                    tx.prepare_cached(&att_sql(false))
                        .unwrap()
                        .execute(rusqlite::params_from_iter(params))
                        .unwrap();
                }
                let mut params: Vec<V> = Vec::new();
                for (k, &i) in lines.iter().enumerate() {
                    params.extend([
                        V::Integer(id_of(k)),
                        V::Integer(now),
                        V::Text("bench".into()),
                        V::Text("recorded".into()),
                        V::Null,
                        V::Text("pending".into()),
                        V::Text(format!("{{\"fingerprint\":\"{i:064x}\"}}")),
                    ]);
                    if exception(i) {
                        params.extend([
                            V::Integer(id_of(k)),
                            V::Integer(now),
                            V::Text("bench".into()),
                            V::Text("attempt".into()),
                            V::Text("pending".into()),
                            V::Text("unknown".into()),
                            V::Text("{\"attempt\":1,\"outcome\":\"unknown\"}".into()),
                        ]);
                    }
                }
                tx.prepare_cached(&ev_sql(false))
                    .unwrap()
                    .execute(rusqlite::params_from_iter(params))
                    .unwrap();
                tx.commit().unwrap();
            }
            Plain::Postgres(c) => {
                use sqlx::{Connection, Row};
                let mut tx = c.begin().await.unwrap();
                let sql = op_sql(true);
                let mut q = sqlx::query(&sql);
                for &i in lines {
                    let e = exception(i);
                    q = q
                        .bind(format!("bench-{i:08}"))
                        .bind("crm-sync")
                        .bind("upsert-customer")
                        .bind("crm")
                        .bind("upsert_customer")
                        .bind(payload(i))
                        .bind(format!("{i:064x}"))
                        .bind(if e { "unknown" } else { "pending" })
                        .bind(i64::from(e))
                        .bind(now)
                        .bind(now)
                        .bind(e.then_some(now))
                        .bind((!e).then_some(now));
                }
                let ids: Vec<i64> = q
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if !tried.is_empty() {
                    let sql = att_sql(true);
                    let mut q = sqlx::query(&sql);
                    for (k, &i) in lines.iter().enumerate() {
                        if exception(i) {
                            q = q
                                .bind(ids[k])
                                .bind(1i64)
                                .bind("bench")
                                .bind(now)
                                .bind(now)
                                .bind("unknown")
                                .bind("read timeout after 30s");
                        }
                    }
                    q.execute(&mut *tx).await.unwrap();
                }
                let sql = ev_sql(true);
                let mut q = sqlx::query(&sql);
                for (k, &i) in lines.iter().enumerate() {
                    q = q
                        .bind(ids[k])
                        .bind(now)
                        .bind("bench")
                        .bind("recorded")
                        .bind(None::<&str>)
                        .bind("pending")
                        .bind(format!("{{\"fingerprint\":\"{i:064x}\"}}"));
                    if exception(i) {
                        q = q
                            .bind(ids[k])
                            .bind(now)
                            .bind("bench")
                            .bind("attempt")
                            .bind("pending")
                            .bind("unknown")
                            .bind("{\"attempt\":1,\"outcome\":\"unknown\"}");
                    }
                }
                q.execute(&mut *tx).await.unwrap();
                tx.commit().await.unwrap();
            }
        }
    }

    /// The console's first page through this client: every column decoded into plain values.
    async fn first_page(&mut self, now: i64) -> usize {
        // The statement `Ledger::list` runs for this page, as plain SQL.
        let sql = |mark: &str| {
            format!(
                "SELECT id, key, workflow, step, destination, action, payload, fingerprint, conflicting_payload, \
                 conflicting_fingerprint, state, reason, attempts, budget_start, ambiguous, first_sent_at, \
                 attempt_started_at, next_attempt_at, reference, last_error, created_at, updated_at, exception_since, \
                 claimed_by, claimed_at, claim_expires_at, resolution, superseded_by, version, \
                 COALESCE((SELECT paused FROM workflows w WHERE w.name = operations.workflow), 0) AS workflow_paused, \
                 COALESCE((SELECT paused FROM destinations d WHERE d.name = operations.destination), 0) AS destination_paused \
                 FROM operations WHERE exception_since IS NOT NULL AND exception_since <= {mark}1 \
                 ORDER BY exception_since, id LIMIT {mark}2"
            )
        };
        // the column positions of the statement: 15 integer and 16 text columns
        const INTS: [usize; 15] = [0, 12, 13, 14, 15, 16, 17, 20, 21, 22, 24, 25, 28, 29, 30];
        const TEXTS: [usize; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 18, 19, 23, 26, 27];
        match self {
            Plain::Sqlite(c) => {
                let mut st = c.prepare_cached(&sql("?")).unwrap();
                let rows: Vec<PlainRow> = st
                    .query_map(rusqlite::params![now, PAGE as i64], |r| {
                        Ok((
                            INTS.map(|i| r.get(i).unwrap()),
                            TEXTS.map(|i| r.get(i).unwrap()),
                        ))
                    })
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                std::hint::black_box(rows).len()
            }
            Plain::Postgres(c) => {
                use sqlx::Row;
                let rows = sqlx::query(&sql("$"))
                    .bind(now)
                    .bind(PAGE as i64)
                    .fetch_all(&mut *c)
                    .await
                    .unwrap();
                let plain: Vec<PlainRow> = rows
                    .iter()
                    .map(|r| (INTS.map(|i| r.get(i)), TEXTS.map(|i| r.get(i))))
                    .collect();
                std::hint::black_box(plain).len()
            }
        }
    }
}

/// One row of the raw page statement, decoded as a plain client would.
type PlainRow = ([Option<i64>; 15], [Option<String>; 16]);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn fresh() -> common::TestDb {
    match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => common::postgres_on(&u).await,
        _ => common::sqlite(),
    }
}

/// One ingest round on fresh databases: the plain loader, then settle's first ingest and
/// its re-ingest of the same file. Times in that order.
async fn ingest_round(n: usize, text: &str) -> (Duration, Duration, Duration) {
    let (ours, plain) = (fresh().await, fresh().await);
    Ledger::open(&plain.url, Config::default())
        .await
        .unwrap()
        .close()
        .await;
    let mut p = Plain::connect(&plain.url).await;
    let now = chrono::Utc::now().timestamp_millis();
    let all: Vec<usize> = (0..n).collect();
    let start = Instant::now();
    for chunk in all.chunks(BATCH * 10 / 11) {
        p.load_batch(chunk, now).await;
    }
    let plain_took = start.elapsed();
    drop(p);
    let ledger = Ledger::open(&ours.url, Config::default()).await.unwrap();
    let start = Instant::now();
    let report = ledger.ingest(text.as_bytes(), "bench").await.unwrap();
    let ingest_took = start.elapsed();
    assert_eq!((report.created, report.attempts), (n, n.div_ceil(10)));
    let start = Instant::now();
    let again = ledger.ingest(text.as_bytes(), "bench").await.unwrap();
    let again_took = start.elapsed();
    assert_eq!(
        (again.created, again.attempts, again.unchanged),
        (0, 0, n + n.div_ceil(10))
    );
    ledger.close().await;
    (plain_took, ingest_took, again_took)
}

#[tokio::main]
async fn main() {
    let n = common::env_count("SETTLE_BENCH_OPS", 1_000_000);
    let m = common::env_count("SETTLE_BENCH_INGEST", 100_000);
    let ours = fresh().await;
    let backend = if ours.backend == "postgres" {
        "PostgreSQL"
    } else {
        "SQLite"
    };

    // 1 and 2. ingest vs a plain loader of the same rows, then the same file again; three rounds
    // on fresh databases, each side's median (one slow moment of a shared machine moves one round)
    let text = lines(m);
    let rows = (m + m.div_ceil(10)) as f64;
    println!(
        "ingest: {m} intents and {} attempts, {backend}, 3 rounds",
        m.div_ceil(10)
    );
    let (mut plain_t, mut ingest_t, mut again_t) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (p, i, a) = ingest_round(m, &text).await;
        plain_t.push(p);
        ingest_t.push(i);
        again_t.push(a);
    }
    let (plain_took, ingest_took, again_took) =
        (median(plain_t), median(ingest_t), median(again_t));
    let (ingest_rate, plain_rate) = (
        rows / ingest_took.as_secs_f64(),
        rows / plain_took.as_secs_f64(),
    );
    let target = if backend == "SQLite" { 0.8 } else { 0.7 };
    println!(
        "ingest         {ingest_rate:>10.0} lines/s   ({:.1} s)",
        ingest_took.as_secs_f64()
    );
    println!(
        "plain INSERT   {plain_rate:>10.0} rows/s    ({:.1} s: operations, attempts and events, multi-row, {BATCH} lines a transaction)",
        plain_took.as_secs_f64()
    );
    println!(
        "ratio          {:.2}x of plain (target >= {target:.2}x)",
        ingest_rate / plain_rate
    );
    println!(
        "re-ingest      {:>10.0} lines/s   ({:.1} s) = {:.2}x the first ingest (target >= 1.00x)",
        rows / again_took.as_secs_f64(),
        again_took.as_secs_f64(),
        ingest_took.as_secs_f64() / again_took.as_secs_f64()
    );

    // 3. the console's first page of exceptions vs the same raw SELECT, at n operations
    println!("first page: {n} operations, {} exceptions", n.div_ceil(10));
    let ledger = Ledger::open(&ours.url, Config::default()).await.unwrap();
    let text = lines(n);
    ledger.ingest(text.as_bytes(), "bench").await.unwrap();
    drop(text);
    let mut raw = Plain::connect(&ours.url).await;
    let now = chrono::Utc::now().timestamp_millis() + 1000;
    // Each side warmed up, then timed in its own run of calls (interleaving them made both pay
    // for the other's cache misses).
    let (mut ours_t, mut raw_t) = (Vec::new(), Vec::new());
    for round in 0..2 {
        for _ in 0..200 {
            let t = Instant::now();
            let page = ledger
                .read()
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
            let got = raw.first_page(now).await;
            if round == 1 {
                raw_t.push(t.elapsed());
            }
            assert_eq!(got, PAGE);
        }
    }
    let (o, r) = (median(ours_t), median(raw_t));
    println!(
        "first page     {:>8.2} ms (settle list, redacted, with safe next steps)",
        o.as_secs_f64() * 1e3
    );
    println!(
        "raw SELECT     {:>8.2} ms (the same statement through the driver, rows decoded into plain values)",
        r.as_secs_f64() * 1e3
    );
    println!(
        "ratio          {:.2}x of raw (target <= 1.50x)",
        o.as_secs_f64() / r.as_secs_f64()
    );
    ledger.close().await;
}
