//! `cargo bench --bench api`: the HTTP API (manual: The HTTP API) against the library it stands on, on SQLite,
//! or on PostgreSQL with SETTLE_BENCH_DB=postgres://... (fresh databases, dropped afterwards).
//!
//! Reports, measured in this one run:
//!   1. record + start + attempt of SETTLE_BENCH_OPS operations (default 20,000) by 64 tasks
//!      calling the library in one process, against the same by 64 concurrent HTTP clients of the
//!      real `settle serve --http` (target: HTTP >= 0.8x the library's operations a second), with
//!      the HTTP requests' p50 and p99 (target on PostgreSQL: p99 <= 10 ms);
//!   2. 1,000 requests a second (record, start, attempt in turn) for SETTLE_BENCH_SECONDS
//!      (default 60) from 64 clients: requests sent, errors (target: none), p99;
//!   3. two `settle serve --http` on one database, the 64 clients split between them, against
//!      one server, in turns (SETTLE_BENCH_ROUNDS, default 3, each on fresh databases): operations
//!      a second, two against one (target >= 0.9x: the token's rate, one budget across both,
//!      costs nothing); then 2. again over both (target: no error). SETTLE_BENCH_TWO_ONLY=1 runs
//!      this part alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::api::{ApiServer, BOT, config_text};
use common::percentile;
use settle::{AttemptReport, Config, Intent, Ledger, Outcome};
use tokio::sync::Mutex;

const CLIENTS: usize = 64;

/// Only the library's part, by this many tasks (SETTLE_BENCH_LIBRARY_ONLY=N): for profiling.
fn library_only() -> Option<usize> {
    std::env::var("SETTLE_BENCH_LIBRARY_ONLY")
        .ok()
        .and_then(|v| v.parse().ok())
}

fn intent(key: &str) -> Intent {
    Intent {
        key: key.into(),
        workflow: "onboarding".into(),
        step: "create-task".into(),
        destination: "crm".into(),
        action: "create_task".into(),
        payload: serde_json::json!({"title": "Kickoff call", "customer": {"id": 42}}),
        run: None,
    }
}

/// 64 tasks calling the library: operations a second.
async fn library(url: &str, ops: usize, clients: usize) -> f64 {
    let ledger = Ledger::open_server(url, Config::parse(&config_text(""), "bench").unwrap())
        .await
        .unwrap();
    let t = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let l = ledger.clone();
            tokio::spawn(async move {
                for i in (c..ops).step_by(clients) {
                    let key = format!("lib-{i}");
                    l.record(&intent(&key), "bot").await.unwrap();
                    let n = l.start(&key, "bot").await.unwrap();
                    let report = AttemptReport {
                        key: key.clone(),
                        attempt: Some(n),
                        outcome: Some(Outcome::Accepted),
                        reference: Some(format!("T-{i}")),
                        ..Default::default()
                    };
                    l.report_attempt(&report, "bot").await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = ops as f64 / t.elapsed().as_secs_f64();
    ledger.close().await;
    rate
}

/// One request of the protocol: its latency, or why it failed.
async fn request(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    stage: usize,
) -> Result<Duration, String> {
    let (path, body) = match stage {
        0 => (
            "/v1/operations".to_string(),
            Some(
                serde_json::json!({"key": key, "workflow": "onboarding", "step": "create-task",
                    "destination": "crm", "action": "create_task",
                    "payload": {"title": "Kickoff call", "customer": {"id": 42}}})
                .to_string(),
            ),
        ),
        1 => (format!("/v1/operations/{key}/start"), None),
        _ => (
            format!("/v1/operations/{key}/attempts"),
            Some(format!(
                r#"{{"attempt":1,"outcome":"accepted","reference":"T-{key}"}}"#
            )),
        ),
    };
    let mut r = http.post(format!("{base}{path}")).bearer_auth(BOT);
    if let Some(b) = body {
        r = r.header("content-type", "application/json").body(b);
    }
    let t = Instant::now();
    let resp = r.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let _ = resp.bytes().await.map_err(|e| e.to_string())?;
    let took = t.elapsed();
    if status.is_success() {
        Ok(took)
    } else {
        Err(format!("{key} stage {stage}: {status}"))
    }
}

/// 64 concurrent HTTP clients, client `c` to server `c % bases.len()`: operations a second and
/// every request's latency.
async fn over_http(bases: &[String], ops: usize, prefix: &str) -> (f64, Vec<Duration>) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(ops * 3)));
    let t = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (http, base, lat) = (
                http.clone(),
                bases[c % bases.len()].clone(),
                latencies.clone(),
            );
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in (c..ops).step_by(CLIENTS) {
                    let key = format!("{prefix}-{i}");
                    for stage in 0..3 {
                        mine.push(request(&http, &base, &key, stage).await.unwrap());
                    }
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

/// 1,000 requests a second for `seconds`, paced, client `c` to server `c % bases.len()`: (sent,
/// errors, latencies).
async fn sustained(bases: &[String], seconds: u64) -> (usize, Vec<String>, Vec<Duration>) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let per_client = Duration::from_secs_f64(CLIENTS as f64 / 1000.0);
    let end = Instant::now() + Duration::from_secs(seconds);
    let results = Arc::new(Mutex::new((0usize, Vec::new(), Vec::new())));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (http, base, results) = (
                http.clone(),
                bases[c % bases.len()].clone(),
                results.clone(),
            );
            tokio::spawn(async move {
                // each client a millisecond after the one before: 1,000 requests a second
                // spread evenly, not 64 at once every 64 ms
                let first =
                    tokio::time::Instant::now() + per_client.mul_f64(c as f64 / CLIENTS as f64);
                let mut tick = tokio::time::interval_at(first, per_client);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let (mut sent, mut errors, mut lat) = (0, Vec::new(), Vec::new());
                let mut i = 0usize;
                while Instant::now() < end {
                    tick.tick().await;
                    let key = format!("load-{c}-{}", i / 3);
                    match request(&http, &base, &key, i % 3).await {
                        Ok(d) => lat.push(d),
                        Err(e) => errors.push(e),
                    }
                    sent += 1;
                    i += 1;
                }
                let mut r = results.lock().await;
                r.0 += sent;
                r.1.extend(errors);
                r.2.extend(lat);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    std::mem::take(&mut *results.lock().await)
}

#[tokio::main]
async fn main() {
    let ops = common::env_count("SETTLE_BENCH_OPS", 20_000);
    let seconds = common::env_count("SETTLE_BENCH_SECONDS", 60) as u64;
    let backend = if common::bench_server().is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let dir = tempfile::tempdir().unwrap();
    let (lib_url, _lib_db) = common::bench_db(dir.path(), "library").await;
    if let Some(n) = library_only() {
        let rate = library(&lib_url, ops, n).await;
        println!("library on {backend}, {n} tasks: {rate:.0} operations/s");
        return;
    }
    // part 3 alone (SETTLE_BENCH_TWO_ONLY=1)
    if std::env::var_os("SETTLE_BENCH_TWO_ONLY").is_some() {
        two_servers(dir.path(), ops, seconds).await;
        return;
    }
    let lib = library(&lib_url, ops, CLIENTS).await;
    let (http_url, _http_db) = common::bench_db(dir.path(), "http").await;
    let server = ApiServer::start(&http_url, "");
    let (http, mut lat) = over_http(std::slice::from_ref(&server.base), ops, "http").await;
    let (p50, p99) = (percentile(&mut lat, 0.5), percentile(&mut lat, 0.99));
    println!(
        "HTTP API on {backend}, {ops} operations (record + start + attempt), {CLIENTS} at once:"
    );
    println!("  library, 64 tasks:      {lib:8.0} operations/s");
    println!(
        "  HTTP, 64 clients:       {http:8.0} operations/s = {:.2}x the library (target >= 0.8x)",
        http / lib
    );
    println!(
        "  per request:            p50 {p50:.2} ms, p99 {p99:.2} ms{}",
        if backend == "PostgreSQL" {
            " (target p99 <= 10 ms)"
        } else {
            ""
        }
    );
    let logged = server.log().lines().count();
    let (sent, errors, mut lat) = sustained(std::slice::from_ref(&server.base), seconds).await;
    // the server's own time for each request of that minute, from its log lines
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut inside = server.times_logged(logged);
    say_sustained(seconds, sent, &errors, &mut lat);
    if !inside.is_empty() {
        let (p50, p99) = (percentile(&mut inside, 0.5), percentile(&mut inside, 0.99));
        println!("  in the server (its log): p50 {p50:.2} ms, p99 {p99:.2} ms");
    }
    drop(server);
    two_servers(dir.path(), ops, seconds).await;
}

/// Part 3: one server and two on one database in turns, each on a fresh database; then the
/// sustained load over the last two.
async fn two_servers(dir: &std::path::Path, ops: usize, seconds: u64) {
    let rounds = common::env_count("SETTLE_BENCH_ROUNDS", 3);
    let (mut ones, mut twos) = (Vec::new(), Vec::new());
    println!("one server and two on one database in turns, the clients split between the two:");
    let mut last = None;
    for round in 0..rounds {
        let (url, db) = common::bench_db(dir, &format!("one{round}")).await;
        let one = ApiServer::start(&url, "");
        let (rate, _) = over_http(std::slice::from_ref(&one.base), ops, "one").await;
        ones.push(rate);
        drop((one, db));
        let (url, db) = common::bench_db(dir, &format!("two{round}")).await;
        let servers = [ApiServer::start(&url, ""), ApiServer::start(&url, "")];
        let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
        let (rate, _) = over_http(&bases, ops, "two").await;
        twos.push(rate);
        println!(
            "  round {}: one {:6.0}, two {:6.0} operations/s = {:.2}x",
            round + 1,
            ones[round],
            rate,
            rate / ones[round]
        );
        last = Some((servers, bases, db));
    }
    let (one, two) = (
        ones.iter().sum::<f64>() / rounds as f64,
        twos.iter().sum::<f64>() / rounds as f64,
    );
    println!(
        "  mean: two servers {:.2}x one's (target >= 0.9x)",
        two / one
    );
    let Some((_servers, bases, _db)) = last else {
        return;
    };
    let (sent, errors, mut lat) = sustained(&bases, seconds).await;
    say_sustained(seconds, sent, &errors, &mut lat);
}

/// The sustained load's line: requests sent, errors (the first five shown), the client's p99.
fn say_sustained(seconds: u64, sent: usize, errors: &[String], lat: &mut [Duration]) {
    let p99 = if lat.is_empty() {
        0.0
    } else {
        percentile(lat, 0.99)
    };
    println!(
        "  1,000 requests/s for {seconds} s: {sent} sent ({:.0}/s), {} errors (target 0), p99 {p99:.2} ms",
        sent as f64 / seconds as f64,
        errors.len()
    );
    for e in errors.iter().take(5) {
        println!("    {e}");
    }
}
