//! `cargo bench --bench dispatch`: dispatcher throughput against the simulator with no faults,
//! beside a plain loop of the same HTTP client sending the same requests (target: at least half
//! as fast; at 50 ms, 0.9x on SQLite and 0.8x on PostgreSQL). SQLite, or PostgreSQL with
//! SETTLE_BENCH_DB=postgres://... (where each latency above 0 also runs two dispatchers on one
//! database); SETTLE_BENCH_OPS operations (default 2,000; a tenth above 0 ms) at each destination
//! latency of SETTLE_BENCH_LATENCIES (default "0s,2ms,5ms,20ms") and concurrency of
//! SETTLE_BENCH_CONCURRENCY (default "1,16"). At 0 ms it also prints the ceiling of any
//! dispatcher that records each attempt before sending it: SQLite alone writing those rows.

use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

use settle::dispatch::{self, Options};
use settle::{Config, Ledger};

/// A fresh database of the benchmark's backend: SQLite, or a new database on the PostgreSQL
/// server `SETTLE_BENCH_DB` names (dropped afterwards).
async fn fresh_db() -> common::TestDb {
    match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => common::postgres_on(&u).await,
        _ => common::sqlite(),
    }
}

async fn dispatched(base: &str, n: usize, concurrency: usize) -> f64 {
    dispatched_on(fresh_db().await, base, n, concurrency).await
}

/// [`dispatched`] on a database given (SQLite beside PostgreSQL, for their ratio in one run).
async fn dispatched_on(db: common::TestDb, base: &str, n: usize, concurrency: usize) -> f64 {
    let url = db.url.clone();
    let config = Config::parse(
        &format!("[destinations.tasks]\nurl = \"{base}/tasks\"\n"),
        "bench",
    )
    .unwrap();
    let ledger = Ledger::open(&url, config).await.unwrap();
    let prefix = format!("d{concurrency}");
    ledger
        .ingest(intents(&prefix, n).as_bytes(), "bench")
        .await
        .unwrap();
    let start = Instant::now();
    let totals = dispatch::run(
        ledger,
        Options {
            concurrency,
            until_settled: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let took = start.elapsed().as_secs_f64();
    assert_eq!(totals.succeeded as usize, n);
    n as f64 / took
}

/// Two dispatchers (each its own ledger and connections, as two processes would have) sharing
/// one database: `n` operations, `concurrency` in flight at each. Combined operations a second.
async fn dispatched_by_two(base: &str, n: usize, concurrency: usize) -> f64 {
    let db = fresh_db().await;
    let config = Config::parse(
        &format!("[destinations.tasks]\nurl = \"{base}/tasks\"\n"),
        "bench",
    )
    .unwrap();
    let first = Ledger::open(&db.url, config.clone()).await.unwrap();
    first
        .ingest(intents(&format!("two{concurrency}"), n).as_bytes(), "bench")
        .await
        .unwrap();
    let second = Ledger::open(&db.url, config).await.unwrap();
    let options = Options {
        concurrency,
        until_settled: true,
        ..Default::default()
    };
    let start = Instant::now();
    let (a, b) = tokio::join!(
        dispatch::run(first, options.clone()),
        dispatch::run(second, options)
    );
    let took = start.elapsed().as_secs_f64();
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!((a.succeeded + b.succeeded) as usize, n);
    n as f64 / took
}

/// The ceiling of any dispatcher that records each attempt before sending it: the rows a round
/// writes for each operation (its row twice, its attempt, two audit events), written to a settle
/// database through prepared statements (rusqlite, the same SQLite library), `per_commit`
/// operations per transaction, with no settle code, no reads and no HTTP. At concurrency 1 each
/// operation needs a commit of its own before its request may go.
async fn sqlite_alone(n: usize, per_commit: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let url = format!("sqlite://{}", path.display());
    let config = Config::parse(
        "[destinations.tasks]\nurl = \"http://127.0.0.1:9/tasks\"\n",
        "bench",
    )
    .unwrap();
    let ledger = Ledger::open(&url, config).await.unwrap();
    ledger
        .ingest(intents("f", n).as_bytes(), "bench")
        .await
        .unwrap();
    ledger.close().await;
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON",
    )
    .unwrap();
    let t = 1_800_000_000_000i64;
    let event = "INSERT INTO events (operation_id, at, actor, kind, from_state, to_state, detail) \
                 VALUES (?1, ?2, 'dispatcher', ?3, ?4, ?5, ?6)";
    let start = |tx: &rusqlite::Transaction, id: i64| {
        tx.prepare_cached(
            "UPDATE operations SET state = 'in_flight', attempts = 1, first_sent_at = ?2, \
             attempt_started_at = ?2, next_attempt_at = NULL, updated_at = ?2, exception_since = ?3, \
             version = version + 1 WHERE id = ?1",
        )
        .unwrap()
        .execute(rusqlite::params![id, t, t + 60_000])
        .unwrap();
        tx.prepare_cached(
            "INSERT INTO attempts (operation_id, n, actor, started_at) VALUES (?1, 1, 'dispatcher', ?2)",
        )
        .unwrap()
        .execute(rusqlite::params![id, t])
        .unwrap();
        let detail = "{\"attempt\":1}";
        tx.prepare_cached(event)
            .unwrap()
            .execute(rusqlite::params![
                id,
                t,
                "attempt_started",
                "pending",
                "in_flight",
                detail
            ])
            .unwrap();
    };
    let finish = |tx: &rusqlite::Transaction, id: i64| {
        let reference = format!("T-{id}");
        tx.prepare_cached(
            "UPDATE operations SET state = 'succeeded', attempt_started_at = NULL, reference = ?3, \
             updated_at = ?2, exception_since = NULL, version = version + 1 WHERE id = ?1",
        )
        .unwrap()
        .execute(rusqlite::params![id, t, reference])
        .unwrap();
        tx.prepare_cached(
            "UPDATE attempts SET finished_at = ?2, outcome = 'accepted', http_status = 201, \
             reference = ?3 WHERE operation_id = ?1 AND n = 1",
        )
        .unwrap()
        .execute(rusqlite::params![id, t, reference])
        .unwrap();
        let detail =
            format!("{{\"attempt\":1,\"outcome\":\"accepted\",\"reference\":\"{reference}\"}}");
        tx.prepare_cached(event)
            .unwrap()
            .execute(rusqlite::params![
                id,
                t,
                "attempt_finished",
                "in_flight",
                "succeeded",
                detail
            ])
            .unwrap();
    };
    // round k finishes the operations round k-1 started and starts the next ones
    let ids: Vec<i64> = (1..=n as i64).collect();
    let rounds: Vec<&[i64]> = ids.chunks(per_commit).collect();
    let began = Instant::now();
    for k in 0..=rounds.len() {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        if k > 0 {
            rounds[k - 1].iter().for_each(|id| finish(&tx, *id));
        }
        if let Some(r) = rounds.get(k) {
            r.iter().for_each(|id| start(&tx, *id));
        }
        tx.commit().unwrap();
    }
    let took = began.elapsed().as_secs_f64();
    let done: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM operations WHERE state = 'succeeded'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(done as usize, n);
    n as f64 / took
}

/// `n` intents to the `tasks` destination, as JSON lines.
fn intents(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"type\":\"intent\",\"key\":\"{prefix}-{i}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"title\":\"Kickoff call\",\"n\":{i}}}}}\n"))
        .collect()
}

async fn plain(base: &str, n: usize, concurrency: usize) -> f64 {
    let client = reqwest::Client::new();
    let url = format!("{base}/tasks");
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(concurrency));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, url, gate) = (client.clone(), url.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _p = gate.acquire_owned().await.unwrap();
            let r = client
                .post(&url)
                .header("Idempotency-Key", format!("p{concurrency}-{i}"))
                .json(&serde_json::json!({"title": "Kickoff call", "n": i}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            let _: serde_json::Value = r.json().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Seconds the metrics' counting takes per attempt, as the dispatcher counts one: the attempt by
/// destination and outcome and the exception it opens (a transaction's tally, added at its
/// commit), and its time in the histogram. The median of five runs of 200,000.
fn counting_an_attempt() -> f64 {
    use settle::counters::{self, Count};
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let n = 200_000;
            let start = Instant::now();
            for i in 0..n {
                let outcome = if i % 10 == 0 { "unknown" } else { "accepted" };
                let mut tally = vec![Count::of(counters::ATTEMPTS, &["tasks", outcome])];
                if i % 10 == 0 {
                    tally.push(Count::of(
                        counters::EXCEPTIONS_OPENED,
                        &["onboarding", "unknown"],
                    ));
                }
                counters::add(tally);
                counters::observe(
                    counters::ATTEMPT_SECONDS,
                    &["tasks"],
                    std::time::Duration::from_micros(i % 5000),
                );
            }
            start.elapsed().as_secs_f64() / n as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("SETTLE_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let backend = match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => "PostgreSQL",
        _ => "SQLite",
    };
    println!("dispatch of {n} operations to the simulator (no faults), {backend}, in one run");
    // An instant destination shows settle's own cost; real task APIs answer in tens of milliseconds.
    let latencies =
        std::env::var("SETTLE_BENCH_LATENCIES").unwrap_or_else(|_| "0s,2ms,5ms,20ms".into());
    for latency in latencies.split(',') {
        let sim = common::Sim::start(&["--no-dedupe", "--latency", latency]);
        let base = sim.base.clone();
        let concurrencies =
            std::env::var("SETTLE_BENCH_CONCURRENCY").unwrap_or_else(|_| "1,16".into());
        for concurrency in concurrencies
            .split(',')
            .map(|c| c.parse::<usize>().expect("a concurrency"))
        {
            let n = if latency == "0s" { n } else { n / 10 };
            let p = plain(&base, n, concurrency).await;
            let d = dispatched(&base, n, concurrency).await;
            // The manual's targets at a real API's latency; an instant destination shows settle's own cost
            let target = match (latency, backend) {
                ("50ms", "PostgreSQL") => 0.8,
                ("50ms", _) => 0.9,
                _ => 0.5,
            };
            println!(
                "latency {latency:>4}, concurrency {concurrency:>3}: settle dispatch {d:>7.0} ops/s, plain reqwest loop {p:>7.0} req/s, ratio {:.2}x (target >= {target:.2}x)",
                d / p
            );
            let counted = counting_an_attempt();
            println!(
                "             counting an attempt (its outcome, its exception, its time): {:.0} ns = {:.2}% of the dispatcher's time per attempt here (target < 3%)",
                counted * 1e9,
                counted * d * 100.0
            );
            if backend == "PostgreSQL" && latency != "0s" {
                // PostgreSQL beside SQLite in this run (the manual's goal at 50 ms, 256: >= 0.8x): three
                // of each, in turn, and the ratio of the medians
                let (mut pg, mut lite) = (vec![d], Vec::new());
                for i in 0..5 {
                    if i % 2 == 0 {
                        lite.push(dispatched_on(common::sqlite(), &base, n, concurrency).await);
                    } else {
                        pg.push(dispatched(&base, n, concurrency).await);
                    }
                }
                let median = |mut v: Vec<f64>| {
                    v.sort_by(|a, b| a.total_cmp(b));
                    v[v.len() / 2]
                };
                let (pg, lite) = (median(pg), median(lite));
                println!(
                    "             PostgreSQL beside SQLite, 3 runs each in turn: {pg:>7.0} vs {lite:>7.0} ops/s (medians) = {:.2}x (target >= 0.80x at 50 ms)",
                    pg / lite
                );
                let two = dispatched_by_two(&base, n, concurrency).await;
                println!(
                    "             two dispatchers sharing the database, {concurrency} in flight each: {two:>7.0} ops/s together = {:.2}x one dispatcher",
                    two / d
                );
            }
            if latency == "0s" && backend == "SQLite" {
                let f = sqlite_alone(n, concurrency).await;
                println!(
                    "             floor: the same writes as plain SQL, {concurrency:>2} operation(s) per commit, no HTTP: {f:>7.0} ops/s = {:.2}x the plain loop; settle reaches {:.2}x of it",
                    f / p,
                    d / f
                );
            }
        }
        drop(sim);
    }
}
