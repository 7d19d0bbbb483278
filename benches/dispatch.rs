//! `cargo bench --bench dispatch`: dispatcher throughput against the simulator with no faults,
//! beside a plain loop of the same HTTP client sending the same requests (target: at least half
//! as fast). SQLite; SETTLE_BENCH_OPS operations (default 2,000) at each destination latency of
//! SETTLE_BENCH_LATENCIES (default "0s,2ms,5ms,20ms").

use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

use settle::dispatch::{self, Options};
use settle::{Config, Ledger};

async fn dispatched(base: &str, n: usize, concurrency: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("d.db").display());
    let config = Config::parse(
        &format!("[destinations.tasks]\nurl = \"{base}/tasks\"\n"),
        "bench",
    )
    .unwrap();
    let ledger = Ledger::open(&url, config).await.unwrap();
    let lines: String = (0..n)
        .map(|i| format!("{{\"type\":\"intent\",\"key\":\"d{concurrency}-{i}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"title\":\"Kickoff call\",\"n\":{i}}}}}\n"))
        .collect();
    ledger.ingest(lines.as_bytes(), "bench").await.unwrap();
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

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("SETTLE_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    println!("dispatch of {n} operations to the simulator (no faults), SQLite, in one run");
    // An instant destination shows settle's own cost; real task APIs answer in tens of milliseconds.
    let latencies =
        std::env::var("SETTLE_BENCH_LATENCIES").unwrap_or_else(|_| "0s,2ms,5ms,20ms".into());
    for latency in latencies.split(',') {
        let sim = common::Sim::start(&["--no-dedupe", "--latency", latency]);
        let base = sim.base.clone();
        for concurrency in [1, 16] {
            let n = if latency == "0s" { n } else { n / 10 };
            let p = plain(&base, n, concurrency).await;
            let d = dispatched(&base, n, concurrency).await;
            println!(
                "latency {latency:>4}, concurrency {concurrency:>2}: settle dispatch {d:>7.0} ops/s, plain reqwest loop {p:>7.0} req/s, ratio {:.2}x (target >= 0.50x)",
                d / p
            );
        }
        drop(sim);
    }
}
