//! `cargo bench --bench notify`: telling the owners (manual: Owners and notifications). SQLite,
//! or PostgreSQL with SETTLE_BENCH_DB=postgres://...
//!
//! 1. An incident: 10,000 exceptions entering within one minute, in 20 groups, to two channels
//!    (a signed webhook and a slack channel on a local receiver), the sender turned every second
//!    of the ledger's clock: the messages per group and channel in the first two windows (target:
//!    at most two), and what a turn of the sender costs.
//! 3. `settle groups` on a ledger of SETTLE_BENCH_GROUPS exceptions (default 1,000,000; 0 skips
//!    it): the first answer and the median of three (target: within 1 s).
//! 2. The dispatcher at 50 ms and concurrency 64 (SETTLE_BENCH_OPS operations, default 2,000; a
//!    tenth rejected by the simulator) with notifications on (teams, a default owner, a channel,
//!    the sender running) beside the same with none configured, in turn (target: >= 0.95x).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::receivers::HttpReceiver;
use settle::dispatch::{self, Options};
use settle::{Config, Ledger};

async fn fresh_db() -> common::TestDb {
    match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => common::postgres_on(&u).await,
        _ => common::sqlite(),
    }
}

/// The teams and channels of both parts; `hook` and `chat` are the receivers' URLs' variables.
fn teams() -> String {
    r#"
[defaults]
owner = "ops"
[teams.ops]
members = ["alice"]
notify = ["hook", "chat"]
[channels.hook]
kind = "webhook"
url_env = "SETTLE_BENCH_HOOK"
secret_env = "SETTLE_BENCH_SECRET"
[channels.chat]
kind = "slack"
url_env = "SETTLE_BENCH_CHAT"
"#
    .to_string()
}

/// Part 1: the incident.
async fn incident() {
    let db = fresh_db().await;
    let config = Config::parse(&teams(), "bench").unwrap();
    let clock = Arc::new(Mutex::new(chrono::Utc::now()));
    let c = clock.clone();
    let ledger = Ledger::open(&db.url, config)
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    let http = reqwest::Client::new();
    let mut turns = Vec::new();
    let n = 10_000;
    let per_second = n / 60 + 1;
    let mut made = 0;
    for _second in 0..=120 {
        if made < n {
            let mut lines = String::new();
            for _ in 0..per_second.min(n - made) {
                let wf = made % 4;
                let reason = [
                    "dns lookup failed",
                    "tls handshake",
                    "timeout",
                    "connection reset",
                    "refused",
                ][made / 4 % 5];
                let key = format!("inc-{made}");
                lines.push_str(&format!(
                    "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"wf-{wf}\",\"destination\":\"crm\",\"action\":\"upsert\",\"payload\":{{\"n\":{made}}}}}\n\
                     {{\"type\":\"attempt\",\"key\":\"{key}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"{reason} after {}s\"}}\n",
                    30 + made % 9
                ));
                made += 1;
            }
            ledger.ingest(lines.as_bytes(), "bench").await.unwrap();
        }
        let start = Instant::now();
        settle::notify::turn(&ledger, "bench", &http).await.unwrap();
        turns.push(start.elapsed());
        *clock.lock().unwrap() += chrono::Duration::seconds(1);
    }
    let recent = ledger.notices().recent(10_000).await.unwrap();
    let mut per: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for d in &recent {
        let m = &d.message;
        let group = format!(
            "{} {}",
            m.workflow.clone().unwrap_or_default(),
            m.reason.clone().unwrap_or_default()
        );
        *per.entry((group, d.channel.clone(), m.kind.clone()))
            .or_insert(0) += 1;
    }
    let most = per.values().copied().max().unwrap_or(0);
    let groups = per
        .keys()
        .map(|k| &k.0)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let sent = recent.iter().filter(|d| d.status == "sent").count();
    let told: i64 = recent
        .iter()
        .filter(|d| d.channel == "hook")
        .map(|d| d.message.count)
        .sum();
    turns.sort();
    println!(
        "incident: {n} exceptions in 60 s, {groups} groups, 2 channels: {} messages ({sent} sent), at most {most} per group and channel in the first two windows (target <= 2); the hook told of {told}",
        recent.len()
    );
    println!(
        "          a turn of the sender (lease, fold, sends): median {:.1} ms, slowest {:.1} ms",
        turns[turns.len() / 2].as_secs_f64() * 1e3,
        turns[turns.len() - 1].as_secs_f64() * 1e3
    );
    assert!(most <= 2, "{per:?}");
    drop(db);
}

/// Part 2: one run of the dispatcher; `notify`: teams, a channel and the sender on.
async fn dispatched(base: &str, n: usize, notify: bool) -> f64 {
    let db = fresh_db().await;
    let mut text = format!("[destinations.tasks]\nurl = \"{base}/tasks\"\n");
    if notify {
        text.push_str(&teams());
    }
    let ledger = Ledger::open(&db.url, Config::parse(&text, "bench").unwrap())
        .await
        .unwrap();
    let lines: String = (0..n)
        .map(|i| format!("{{\"type\":\"intent\",\"key\":\"d-{i}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"n\":{i}}}}}\n"))
        .collect();
    ledger.ingest(lines.as_bytes(), "bench").await.unwrap();
    let sending = settle::notify::start(&ledger, "bench".into(), Duration::from_secs(1));
    assert_eq!(sending.is_some(), notify);
    let start = Instant::now();
    let totals = dispatch::run(
        ledger.clone(),
        Options {
            concurrency: 64,
            until_settled: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert!(totals.succeeded as usize > n * 8 / 10);
    drop(sending);
    rate
}

/// Part 3: `settle groups` over `n` open exceptions in 7 workflows, 5 destinations and 6 reasons.
async fn groups_at_scale(n: usize) {
    let db = fresh_db().await;
    let ledger = Ledger::open(&db.url, Config::parse(&teams(), "bench").unwrap())
        .await
        .unwrap();
    let reasons = [
        "read timeout after 30s",
        "422 due date is in the past",
        "connection reset",
        "503 service unavailable",
        "mailbox unavailable",
        "tls handshake failed",
    ];
    let started = Instant::now();
    for chunk in 0..n.div_ceil(20_000) {
        let mut lines = String::with_capacity(20_000 * 300);
        for i in chunk * 20_000..((chunk + 1) * 20_000).min(n) {
            let outcome = if i % 3 == 0 { "rejected" } else { "unknown" };
            lines.push_str(&format!(
                "{{\"type\":\"intent\",\"key\":\"g-{i:08}\",\"workflow\":\"wf-{}\",\"destination\":\"dest-{}\",\"action\":\"upsert\",\"payload\":{{\"n\":{i}}}}}\n\
                 {{\"type\":\"attempt\",\"key\":\"g-{i:08}\",\"attempt\":1,\"outcome\":\"{outcome}\",\"error\":\"{}\"}}\n",
                i % 7,
                i % 5,
                reasons[i % 6]
            ));
        }
        ledger.ingest(lines.as_bytes(), "bench").await.unwrap();
    }
    let seeded = started.elapsed().as_secs_f64();
    let filter = settle::ListFilter {
        scope: settle::Scope::Exceptions,
        ..Default::default()
    };
    let mut times = Vec::new();
    let mut groups = 0;
    for _ in 0..4 {
        let start = Instant::now();
        groups = ledger.read().groups(&filter, "alice").await.unwrap().len();
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let first = times[0];
    let mut rest = times[1..].to_vec();
    rest.sort_by(f64::total_cmp);
    println!(
        "settle groups over {n} open exceptions ({groups} groups; seeded in {seeded:.0} s): first {first:.0} ms, median of three more {:.0} ms (target <= 1000 ms)",
        rest[1]
    );
}

#[tokio::main]
async fn main() {
    let backend = match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => "PostgreSQL",
        _ => "SQLite",
    };
    // the webhook checks signatures; the slack channel's receiver takes anything
    let receiver = HttpReceiver::start(Some("bench-secret"));
    let chat = HttpReceiver::start(None);
    // SAFETY: set before any task reads the environment
    unsafe {
        std::env::set_var("SETTLE_BENCH_HOOK", &receiver.url);
        std::env::set_var("SETTLE_BENCH_CHAT", &chat.url);
        std::env::set_var("SETTLE_BENCH_SECRET", "bench-secret");
    }
    println!("notifications, {backend}, in one run");
    incident().await;
    let at_scale = common::env_count("SETTLE_BENCH_GROUPS", 1_000_000);
    if at_scale > 0 {
        groups_at_scale(at_scale).await;
    }
    let n: usize = common::env_count("SETTLE_BENCH_OPS", 2_000);
    let sim = common::Sim::start(&[
        "--no-dedupe",
        "--latency",
        "50ms",
        "--fault-rate",
        "0.1",
        "--fault-kinds",
        "reject",
    ]);
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..6 {
        if i % 2 == 0 {
            off.push(dispatched(&sim.base, n, false).await);
        } else {
            on.push(dispatched(&sim.base, n, true).await);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (off_m, on_m) = (median(off.clone()), median(on.clone()));
    println!(
        "dispatch at 50 ms x 64, {n} operations, a tenth rejected: {on_m:.0} ops/s with notifications on vs {off_m:.0} with none = {:.3}x (target >= 0.95x); runs off {off:.0?}, on {on:.0?}",
        on_m / off_m
    );
    println!(
        "          requests the receivers took: {} webhook, {} slack",
        receiver.received().len(),
        chat.received().len()
    );
}
