//! `cargo bench --bench runs`: runs (manual: Runs) at SETTLE_BENCH_RUNS runs of three steps (default
//! 1,000,000 runs: 3,000,000 operations), one in a hundred stalled after its first step (10,000),
//! on SQLite, or on PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh database, dropped
//! afterwards).
//!
//! Reports, each the median of several runs, with the ratios measured in this one run:
//!   1. view 1's first data: the console's start (its page of operations, its stalled runs and its
//!      header) answered through the console's own effects, against its page alone;
//!   2. `settle runs --where state:stalled` (its first 100);
//!   3. finding the stalls (their count by workflow: the header's, the metrics', the stopping
//!      threshold's), against the header without them;
//!   4. recording run steps against the same operations without a run, on fresh ledgers
//!      (SETTLE_BENCH_SAMPLE runs, default 30,000: target >= 0.8x).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::console::app::App;
use settle::console::run_effect;
use settle::{Config, Ledger};

const STEPS: [&str; 3] = ["create-customer", "create-task", "welcome-sms"];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn config() -> Config {
    Config::parse(
        "[workflows.onboarding]\nsteps = [\"create-customer\", \"create-task\", \"welcome-sms\"]\nstep_gap = \"15m\"\n",
        "bench",
    )
    .unwrap()
}

/// JSON lines of runs `from..to`: each step recorded and accepted; every hundredth run stops
/// after its first step; one in fifty others has an unknown outcome for its SMS (blocked: the
/// operations' exceptions of view 1). `with_run: false` writes the same operations without their run.
fn lines(from: usize, to: usize, with_run: bool) -> String {
    let mut out = String::with_capacity((to - from) * 700);
    for i in from..to {
        let steps = if i % 100 == 0 { 1 } else { 3 };
        for step in &STEPS[..steps] {
            let key = format!("run-{i}:{step}");
            let outcome = if i % 50 == 25 && *step == "welcome-sms" {
                "\"outcome\":\"unknown\",\"error\":\"read timeout\"".to_string()
            } else {
                format!("\"outcome\":\"accepted\",\"reference\":\"R-{i}\"")
            };
            let run = if with_run {
                format!(",\"run\":\"run-{i}\"")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "{{\"type\":\"intent\",\"key\":\"{key}\",\"workflow\":\"onboarding\",\"step\":\"{step}\",\"destination\":\"crm\",\"action\":\"create\",\"payload\":{{\"n\":{i}}}{run}}}\n\
                 {{\"type\":\"attempt\",\"key\":\"{key}\",\"attempt\":1,{outcome}}}\n"
            ));
        }
    }
    out
}

/// A ledger written two days ago (so every stall is past its gap), read now.
async fn fill(url: &str, runs: usize, with_run: bool) -> Duration {
    let past = chrono::Utc::now() - chrono::TimeDelta::days(2);
    let ledger = Ledger::open(url, config())
        .await
        .unwrap()
        .with_clock(move || past);
    let t = Instant::now();
    let chunk = 20_000;
    for from in (0..runs).step_by(chunk) {
        let text = lines(from, (from + chunk).min(runs), with_run);
        let r = ledger.ingest(text.as_bytes(), "bench").await.unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems.first());
    }
    let took = t.elapsed();
    ledger.close().await;
    took
}

/// The console's start, answered through its own effects: (all of it, its page alone).
async fn first_data(ledger: &Ledger) -> (Duration, Duration, usize) {
    let mut app = App::new("bench", "bench");
    let t = Instant::now();
    let mut page = Duration::ZERO;
    for fx in app.start() {
        let is_page = matches!(fx, settle::console::app::Effect::Page { .. });
        let t_fx = Instant::now();
        if let Some(m) = run_effect(ledger, fx, "bench").await {
            let _ = app.update(m);
        }
        if is_page {
            page = t_fx.elapsed();
        }
    }
    (t.elapsed(), page, app.stalled.runs.len())
}

#[tokio::main]
async fn main() {
    let runs = common::env_count("SETTLE_BENCH_RUNS", 1_000_000);
    let sample = common::env_count("SETTLE_BENCH_SAMPLE", 30_000);
    let dir = tempfile::tempdir().unwrap();
    let backend = if common::bench_server().is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let (url, db) = common::bench_db(dir.path(), "runs").await;
    let took = fill(&url, runs, true).await;
    let ledger = Ledger::open_console(&url, config()).await.unwrap();
    // as a running dispatcher's heartbeat does after a bulk load: the planner's statistics
    // (PostgreSQL; autovacuum would in time)
    ledger.rounds().heartbeat("bench").await.unwrap();
    let (ops, _, _) = ledger.counts().await.unwrap();
    println!(
        "runs on {backend}: {runs} runs, {ops} operations, {} stalled (written in {:.0} s)",
        runs / 100,
        took.as_secs_f64()
    );

    // 1. view 1's first data
    let (mut all, mut page) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let (a, p, shown) = first_data(&ledger).await;
        assert_eq!(shown, 100, "a page of stalled runs");
        assert!(p > Duration::ZERO);
        all.push(a);
        page.push(p);
    }
    let (a, p) = (median(all), median(page));
    println!(
        "\n1. view 1's first data (its page, its stalled runs, its header): {:.1} ms; its page of operations alone {:.1} ms: {:.2}x",
        ms(a),
        ms(p),
        a.as_secs_f64() / p.as_secs_f64()
    );

    // 2. runs --where state:stalled
    let mut listed = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let r = ledger
            .read()
            .runs("state:stalled", "bench", 100)
            .await
            .unwrap();
        listed.push(t.elapsed());
        assert_eq!(r.len(), 100);
    }
    println!(
        "\n2. runs --where state:stalled (the first 100 of {}): {:.1} ms",
        runs / 100,
        ms(median(listed))
    );

    // 3. finding the stalls: their count, against the header's other numbers
    let (mut found, mut header) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let t = Instant::now();
        let c = ledger.read().stalled_counts().await.unwrap();
        found.push(t.elapsed());
        assert_eq!(
            c.iter().map(|(_, n, _)| n).sum::<i64>(),
            (runs / 100) as i64
        );
        let t = Instant::now();
        let s = ledger.read().stats().await.unwrap();
        header.push(t.elapsed());
        assert_eq!(s.stalled_runs, (runs / 100) as i64);
    }
    let (f, h) = (median(found), median(header));
    println!(
        "\n3. finding the {} stalls: {:.1} ms; the whole header with them {:.1} ms ({:.0}% of it)",
        runs / 100,
        ms(f),
        ms(h),
        100.0 * f.as_secs_f64() / h.as_secs_f64()
    );
    ledger.close().await;
    drop(db);

    // 4. recording with a run against without, on fresh ledgers, alternating
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let (u, d) = common::bench_db(dir.path(), &format!("with-{i}")).await;
        with.push(fill(&u, sample, true).await);
        drop(d);
        let (u, d) = common::bench_db(dir.path(), &format!("without-{i}")).await;
        without.push(fill(&u, sample, false).await);
        drop(d);
    }
    let (w, wo) = (median(with), median(without));
    let n_ops = sample * 3 - sample / 100 * 2;
    println!(
        "\n4. recording {n_ops} run steps (intent and outcome each): with their run {:.0} ops/s, without {:.0} ops/s: {:.2}x (target >= 0.8x)",
        n_ops as f64 / w.as_secs_f64(),
        n_ops as f64 / wo.as_secs_f64(),
        wo.as_secs_f64() / w.as_secs_f64()
    );
}
