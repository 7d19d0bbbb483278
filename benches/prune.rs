//! `cargo bench --bench prune`: a prune beside a running dispatcher (manual: Retention and the archive), on SQLite, or on
//! PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh database, dropped afterwards).
//!
//! SETTLE_BENCH_OPS terminal operations (default 100,000; the target is stated at 1,000,000)
//! succeeded a year ago; then the dispatcher's rate on SETTLE_BENCH_SENDS new operations (default
//! 5,000) against `settle sim --latency 50ms` at concurrency 64, alone, and with `settle prune` of
//! the old ones running beside it (target: >= 0.8x). Reports the prune's own rate, whether it
//! covered the whole dispatch, and the ledger's size before, after the prune, and after VACUUM.

use std::sync::{Arc, Mutex};
use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

use settle::dispatch::{self, Options};
use settle::ledger::PruneOptions;
use settle::{Config, Ledger};

fn intents(prefix: &str, from: usize, n: usize, succeeded: bool) -> String {
    let mut text = String::with_capacity(n * 300);
    for i in from..from + n {
        text.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"{prefix}-{i}\",\"workflow\":\"w\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"title\":\"Kickoff call\",\"n\":{i}}}}}\n"
        ));
        if succeeded {
            text.push_str(&format!(
                "{{\"type\":\"attempt\",\"key\":\"{prefix}-{i}\",\"attempt\":1,\"outcome\":\"accepted\",\"reference\":\"T-{i}\"}}\n"
            ));
        }
    }
    text
}

/// The ledger's size: the file (with its WAL) on SQLite, or the three tables on PostgreSQL; and
/// of that, the operations, attempts and events tables (with TOAST) and their indexes.
struct Size {
    total: u64,
    tables: u64,
    indexes: u64,
}

async fn size(url: &str) -> Size {
    let mut raw = common::Raw::connect(url).await;
    match url.strip_prefix("sqlite://") {
        Some(path) => {
            let file = [path.to_string(), format!("{path}-wal")]
                .iter()
                .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
                .sum();
            // SQLite's dbstat: the pages of each table and index
            let of = |kind: &str| {
                format!(
                    "SELECT CAST(COALESCE(SUM(d.pgsize), 0) AS INTEGER) FROM dbstat d \
                     JOIN sqlite_master m ON m.name = d.name WHERE m.type = '{kind}' \
                     AND m.tbl_name IN ('operations', 'attempts', 'events')"
                )
            };
            Size {
                total: file,
                tables: raw.int(&of("table")).await as u64,
                indexes: raw.int(&of("index")).await as u64,
            }
        }
        None => {
            let sum = |f: &str| {
                format!(
                    "SELECT CAST({f}('operations') + {f}('attempts') + {f}('events') AS BIGINT)"
                )
            };
            Size {
                total: raw.int(&sum("pg_total_relation_size")).await as u64,
                tables: raw.int(&sum("pg_table_size")).await as u64,
                indexes: raw.int(&sum("pg_indexes_size")).await as u64,
            }
        }
    }
}

async fn dispatch(ledger: &Ledger) -> f64 {
    let t = Instant::now();
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
    totals.succeeded as f64 / t.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let ops = common::env_count("SETTLE_BENCH_OPS", 100_000);
    let sends = common::env_count("SETTLE_BENCH_SENDS", 5_000);
    let dir = tempfile::tempdir().unwrap();
    let (url, _db) = common::bench_db(dir.path(), "prune").await;
    let sim = common::Sim::start(&["--no-dedupe", "--latency", "50ms"]);
    let config = Config::parse(
        &format!(
            "[destinations.tasks]\nurl = \"{}/tasks\"\n[retention]\nsucceeded = \"1d\"\n",
            sim.base
        ),
        "bench",
    )
    .unwrap();
    let then = chrono::Utc::now() - chrono::TimeDelta::days(365);
    let old = Ledger::open(&url, config.clone())
        .await
        .unwrap()
        .with_clock(move || then);
    let t = Instant::now();
    for from in (0..ops).step_by(100_000) {
        let n = (ops - from).min(100_000);
        old.ingest(intents("old", from, n, true).as_bytes(), "bench")
            .await
            .unwrap();
    }
    println!(
        "{ops} succeeded operations a year old recorded in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let ledger = Ledger::open(&url, config).await.unwrap();
    let before = size(&url).await;

    ledger
        .ingest(intents("alone", 0, sends, false).as_bytes(), "bench")
        .await
        .unwrap();
    let alone = dispatch(&ledger).await;

    ledger
        .ingest(intents("beside", 0, sends, false).as_bytes(), "bench")
        .await
        .unwrap();
    let pruned_at = Arc::new(Mutex::new(None));
    let pruning = {
        let (ledger, at) = (ledger.clone(), pruned_at.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let r = ledger
                .retention()
                .prune("alice", &PruneOptions::default())
                .await
                .unwrap();
            *at.lock().unwrap() = Some(t.elapsed());
            (r, t.elapsed())
        })
    };
    let t = Instant::now();
    let beside = dispatch(&ledger).await;
    let dispatch_took = t.elapsed();
    let covered = pruned_at.lock().unwrap().is_none();
    let (report, prune_took) = pruning.await.unwrap();
    let after = size(&url).await;
    match url.strip_prefix("sqlite://") {
        Some(_) => {
            let mut raw = common::Raw::connect(&url).await;
            raw.execute("VACUUM").await.unwrap();
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").await.ok();
        }
        None => {
            let mut raw = common::Raw::connect(&url).await;
            for t in ["operations", "attempts", "events"] {
                raw.execute(&format!("VACUUM {t}")).await.unwrap();
            }
        }
    }
    let vacuumed = size(&url).await;
    let backend = if url.starts_with("sqlite") {
        "SQLite"
    } else {
        "PostgreSQL"
    };
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "prune beside a dispatcher, {backend}: {ops} old operations, {sends} sends at 64, 50 ms"
    );
    println!("  dispatcher alone         {alone:8.0} operations/s");
    println!(
        "  beside the prune         {beside:8.0} operations/s = {:.2}x (target >= 0.80x)",
        beside / alone
    );
    println!(
        "  the prune: {} operations in {:.1} s ({:.0}/s); it {} the whole dispatch ({:.1} s)",
        report.succeeded,
        prune_took.as_secs_f64(),
        report.succeeded as f64 / prune_took.as_secs_f64(),
        if covered { "covered" } else { "did not cover" },
        dispatch_took.as_secs_f64()
    );
    for (when, s) in [
        ("before", &before),
        ("after the prune", &after),
        ("after VACUUM", &vacuumed),
    ] {
        println!(
            "  size {when:<16} {:8.1} MB: tables {:8.1} MB, their indexes {:8.1} MB",
            mb(s.total),
            mb(s.tables),
            mb(s.indexes)
        );
    }
}
