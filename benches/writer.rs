//! `cargo bench --bench writer`: the HTTP API's group writer alone, as the gateway uses it, on
//! SQLite, or on PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh database, dropped
//! afterwards). No HTTP: what a gateway request costs the ledger.
//!
//! 64 tasks each repeat a gateway request's writes: the record and the start together, a wait
//! of SETTLE_BENCH_LATENCY_MS (default 20, the destination), then the outcome. Reports requests a
//! second, each write's p50 and p99 as its caller waits for it, the writes per group, and the
//! process's CPU time per request (user + system, from /proc/self/stat). SETTLE_BENCH_LANES
//! sets the lanes (default 1, as `settle serve` runs them).

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::api::config_text;
use common::percentile;
use settle::ledger::{Write, Writer};
use settle::{AttemptReport, Config, Intent, Ledger, Outcome};
use tokio::sync::Mutex;

const CLIENTS: usize = 64;

fn intent(key: &str) -> Intent {
    Intent {
        key: key.into(),
        workflow: "onboarding".into(),
        step: "create_task".into(),
        destination: "crm".into(),
        action: "create_task".into(),
        payload: serde_json::json!({"title": "Kickoff call", "customer": {"id": 42}, "n": key}),
        run: None,
    }
}

/// The process's CPU time so far (user + system), from /proc/self/stat.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // fields 14 and 15 of the file, counted after the name: 12 and 13 here (from 0)
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

async fn run(
    ledger: &Ledger,
    writer: &Writer,
    ops: usize,
    latency: Duration,
    prefix: &str,
) -> (f64, Vec<Duration>, Vec<Duration>) {
    let first = Arc::new(Mutex::new(Vec::with_capacity(ops)));
    let second = Arc::new(Mutex::new(Vec::with_capacity(ops)));
    let t = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (l, w) = (ledger.clone(), writer.clone());
            let (first, second) = (first.clone(), second.clone());
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for i in (c..ops).step_by(CLIENTS) {
                    let key = format!("{prefix}-{i}");
                    let t = Instant::now();
                    let (r, s) = w
                        .write_two(
                            &l,
                            "bot",
                            Write::Record(intent(&key)),
                            Write::Start(key.clone()),
                        )
                        .await;
                    r.unwrap();
                    s.unwrap();
                    a.push(t.elapsed());
                    tokio::time::sleep(latency).await;
                    let report = AttemptReport {
                        key: key.clone(),
                        attempt: Some(1),
                        outcome: Some(Outcome::Accepted),
                        reference: Some(format!("T-{i}")),
                        ..Default::default()
                    };
                    let t = Instant::now();
                    w.write(&l, "bot", Write::Attempt(report)).await.unwrap();
                    b.push(t.elapsed());
                }
                first.lock().await.extend(a);
                second.lock().await.extend(b);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = ops as f64 / t.elapsed().as_secs_f64();
    let a = std::mem::take(&mut *first.lock().await);
    let b = std::mem::take(&mut *second.lock().await);
    (rate, a, b)
}

#[tokio::main]
async fn main() {
    let ops = common::env_count("SETTLE_BENCH_OPS", 20_000);
    let latency = Duration::from_millis(common::env_count("SETTLE_BENCH_LATENCY_MS", 20) as u64);
    let backend = if common::bench_server().is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let dir = tempfile::tempdir().unwrap();
    let (url, _db) = common::bench_db(dir.path(), "writer").await;
    let ledger = Ledger::open_server(&url, Config::parse(&config_text(""), "bench").unwrap())
        .await
        .unwrap();
    let writer = Writer::new(&ledger, common::env_count("SETTLE_BENCH_LANES", 1));
    run(&ledger, &writer, 1_000, latency, "warm").await;
    let (writes0, groups0, split0) = writer.counts();
    let cpu0 = cpu();
    let (rate, mut a, mut b) = run(&ledger, &writer, ops, latency, "w").await;
    let used = cpu() - cpu0;
    let (writes, groups, split) = writer.counts();
    let (writes, groups, split) = (writes - writes0, groups - groups0, split - split0);
    println!(
        "group writer on {backend}, {ops} requests, {CLIENTS} at once, {} ms between the writes:",
        latency.as_millis()
    );
    println!("  {rate:8.0} requests/s");
    println!(
        "  record + start: p50 {:.2} ms, p99 {:.2} ms; outcome: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&mut a, 0.5),
        percentile(&mut a, 0.99),
        percentile(&mut b, 0.5),
        percentile(&mut b, 0.99)
    );
    println!(
        "  {:.1} writes a group ({split} split), CPU {:.0} us a request",
        writes as f64 / groups as f64,
        used.as_secs_f64() * 1e6 / ops as f64
    );
}
