//! `cargo bench --bench gateway`: the gateway (manual: The gateway) against the destination it stands in
//! front of, on SQLite, or on PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh database,
//! dropped afterwards).
//!
//! 64 concurrent clients send SETTLE_BENCH_OPS requests (default 20,000), each with a key of its
//! own, to `settle sim --latency 20ms --no-dedupe` directly, then the same through the real
//! `settle serve --http`'s gateway (record, start, send, record the outcome). Reports, measured
//! in this one run: requests a second of each (target: the gateway >= 0.8x the direct client's),
//! p50 and p99 of each, and the p99 the gateway adds (target <= 5 ms).

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::api::{ApiServer, BOT};
use common::{Sim, percentile};
use tokio::sync::Mutex;

const CLIENTS: usize = 64;

/// Where a client sends: straight to the simulator, or through the gateway.
#[derive(Clone)]
enum Target {
    Direct(String),
    Gateway(String),
}

async fn request(http: &reqwest::Client, target: &Target, key: &str) -> Result<Duration, String> {
    let body = format!(r#"{{"title":"Kickoff call","customer":{{"id":42}},"n":"{key}"}}"#);
    let r = match target {
        Target::Direct(sim) => http.post(format!("{sim}/tasks")),
        Target::Gateway(base) => http
            .post(format!("{base}/gateway/tasks/create_task"))
            .bearer_auth(BOT)
            .header("settle-workflow", "onboarding"),
    };
    let r = r
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(body);
    let t = Instant::now();
    let resp = r.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let _ = resp.bytes().await.map_err(|e| e.to_string())?;
    let took = t.elapsed();
    match status.is_success() {
        true => Ok(took),
        false => Err(format!("{key}: {status}")),
    }
}

/// 64 concurrent clients, `ops` requests: requests a second and every request's latency.
async fn run(target: &Target, ops: usize, prefix: &str) -> (f64, Vec<Duration>) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(ops)));
    let t = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (http, target, lat) = (http.clone(), target.clone(), latencies.clone());
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in (c..ops).step_by(CLIENTS) {
                    let key = format!("{prefix}-{i}");
                    mine.push(request(&http, &target, &key).await.unwrap());
                }
                lat.lock().await.extend(mine);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = ops as f64 / t.elapsed().as_secs_f64();
    let v = std::mem::take(&mut *latencies.lock().await);
    (rate, v)
}

#[tokio::main]
async fn main() {
    let ops = common::env_count("SETTLE_BENCH_OPS", 20_000);
    let backend = if common::bench_server().is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let sim = Sim::start(&["--latency", "20ms", "--no-dedupe"]);
    let dir = tempfile::tempdir().unwrap();
    let (url, _db) = common::bench_db(dir.path(), "gateway").await;
    let extra = format!(
        "[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = false\ntimeout = \"10s\"\n",
        sim.base
    );
    let server = ApiServer::start(&url, &extra);
    let direct = Target::Direct(sim.base.clone());
    let gateway = Target::Gateway(server.base.clone());
    // warm both: connections made, the database's first pages read
    run(&direct, 1_000, "warm-direct").await;
    run(&gateway, 1_000, "warm-gateway").await;
    let (d_rate, mut d_lat) = run(&direct, ops, "direct").await;
    let logged = server.log().lines().count();
    let (g_rate, mut g_lat) = run(&gateway, ops, "gateway").await;
    // the server's own time for each gateway request (the simulator's 20 ms inside it), from its
    // log lines: what the rest is, is the client's and the loopback's
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut inside = server.times_logged(logged);
    let (d50, d99) = (percentile(&mut d_lat, 0.5), percentile(&mut d_lat, 0.99));
    let (g50, g99) = (percentile(&mut g_lat, 0.5), percentile(&mut g_lat, 0.99));
    println!(
        "gateway on {backend}, {ops} requests, {CLIENTS} clients at once, to settle sim --latency 20ms:"
    );
    println!(
        "  direct to the simulator: {d_rate:8.0} requests/s, p50 {d50:.2} ms, p99 {d99:.2} ms"
    );
    println!(
        "  through the gateway:     {g_rate:8.0} requests/s, p50 {g50:.2} ms, p99 {g99:.2} ms"
    );
    println!(
        "  gateway / direct:        {:.2}x (target >= 0.8x); added p99 {:.2} ms (target <= 5 ms)",
        g_rate / d_rate,
        g99 - d99
    );
    if !inside.is_empty() {
        let (p50, p99) = (percentile(&mut inside, 0.5), percentile(&mut inside, 0.99));
        println!("  in the server (its log): p50 {p50:.2} ms, p99 {p99:.2} ms");
    }
    let (total, by_key) = sim.tasks();
    assert_eq!(
        total as usize,
        ops * 2 + 2_000,
        "every request made one task"
    );
    assert!(by_key.values().all(|n| *n == 1));
}
