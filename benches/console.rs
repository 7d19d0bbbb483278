//! `cargo bench --bench console`: the console on SQLite (or on PostgreSQL, with
//! SETTLE_BENCH_DB=postgres://...: a fresh database for each size, dropped afterwards) at 1,000
//! and SETTLE_BENCH_OPS (default 1,000,000) operations, a tenth of them exceptions. Each size runs
//! in a child process of its own, so its peak memory is its own.
//!
//! Reports: start to first frame and to first data frame; p50/p99 from keystroke to the redrawn
//! frame (target p99 within one 60 Hz frame, 16.7 ms) and to the frame with the key's data, for
//! `j`, `G`, `/` filter typing (a word, and three of the qualifiers (manual: The filter)), view 6's review and its windows
//! (manual: The review after a release: its data within 1 s) and a view switch; peak memory at both sizes (target ratio <= 1.2x).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use settle::console::app::{App, Effect, Msg};
use settle::console::theme::Theme;
use settle::console::{run_effect, ui};
use settle::{Config, Ledger};

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The child: opens the console's state on `url` and drives it with keys.
async fn child(url: &str, started: Instant) {
    let ledger = Ledger::open_console(url, Config::default()).await.unwrap();
    let theme = Theme { color: true };
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    let mut app = App::new(ledger.database(), "bench");
    app.update(Msg::Resized { rows: 20 });
    term.draw(|f| ui::draw(f, &app, &theme)).unwrap();
    let first_frame = started.elapsed();
    let fx = app.start();
    resolve(&mut app, &ledger, fx).await;
    term.draw(|f| ui::draw(f, &app, &theme)).unwrap();
    let first_data = started.elapsed();
    assert!(!app.rows.is_empty());

    // (name, keys): each key is timed to its redrawn frame, and to the frame with its data.
    let mut typing = Vec::new();
    for _ in 0..10 {
        typing.push(key(KeyCode::Char('/')));
        for c in "wf-3".chars() {
            typing.push(key(KeyCode::Char(c)));
        }
        typing.push(key(KeyCode::Esc));
    }
    // the qualifiers (manual: The filter), three of them, typed key by key (each key narrows the list)
    let mut qualifiers = Vec::new();
    for _ in 0..3 {
        qualifiers.push(key(KeyCode::Char('/')));
        for c in "state:unknown wf:wf-3 dest:dest-1".chars() {
            qualifiers.push(key(KeyCode::Char(c)));
        }
        qualifiers.push(key(KeyCode::Esc));
    }
    let scenarios: Vec<(&str, Vec<Msg>)> = vec![
        ("j", (0..300).map(|_| key(KeyCode::Char('j'))).collect()),
        (
            "G",
            (0..30)
                .flat_map(|_| [key(KeyCode::Char('G')), key(KeyCode::Char('g'))])
                .collect(),
        ),
        ("/typing", typing),
        ("/3-qualifiers", qualifiers),
        // view 6 (manual: The review after a release): its frame at once, its data (the review) within a second
        (
            "review-6]]]",
            (0..5)
                .flat_map(|_| {
                    "6]]]1"
                        .chars()
                        .map(|c| key(KeyCode::Char(c)))
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
        (
            "view-switch",
            (0..20)
                .flat_map(|_| {
                    "2341"
                        .chars()
                        .map(|c| key(KeyCode::Char(c)))
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
    ];
    let slow = std::env::var("SETTLE_BENCH_SLOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let mut report = Vec::new();
    for (name, keys) in scenarios {
        let (mut frame, mut data) = (Vec::new(), Vec::new());
        for k in keys {
            let t = Instant::now();
            let fx = app.update(k);
            term.draw(|f| ui::draw(f, &app, &theme)).unwrap();
            frame.push(t.elapsed());
            resolve(&mut app, &ledger, fx).await;
            term.draw(|f| ui::draw(f, &app, &theme)).unwrap();
            data.push(t.elapsed());
            // SETTLE_BENCH_SLOW=MS names each key whose data took longer, with the filter then
            if slow.is_some_and(|slow| t.elapsed() > slow) {
                eprintln!(
                    "slow {name}: {:?} filter '{}'",
                    t.elapsed(),
                    app.filter.value()
                );
            }
        }
        report.push(format!(
            "{name}:{:.2}:{:.2}:{:.2}:{:.2}",
            pct(&mut frame, 0.5),
            pct(&mut frame, 0.99),
            pct(&mut data, 0.5),
            pct(&mut data, 0.99)
        ));
    }
    println!(
        "RESULT {:.1} {:.1} {} {}",
        first_frame.as_secs_f64() * 1e3,
        first_data.as_secs_f64() * 1e3,
        peak_rss_kib(),
        report.join(" ")
    );
}

/// Runs the effects as the event loop would, until the app asks for nothing more.
async fn resolve(app: &mut App, ledger: &Ledger, mut fx: Vec<Effect>) {
    for _ in 0..10 {
        let mut next = Vec::new();
        for e in fx {
            if let Some(m) = run_effect(ledger, e, "bench").await {
                next.extend(app.update(m));
            }
        }
        if next.is_empty() {
            return;
        }
        fx = next;
    }
}

/// The kept database for size `n` on the server `server` (created when missing).
async fn kept_pg(server: &str, n: usize) -> String {
    use sqlx::Connection;
    let name = format!("settle_bench_console_{n}");
    let mut c = sqlx::PgConnection::connect(server).await.unwrap();
    let _ = sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await;
    format!("{}/{name}", server.rsplit_once('/').unwrap().0)
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    if let Ok(url) = std::env::var("SETTLE_BENCH_CHILD") {
        child(&url, started).await;
        return;
    }
    let big = common::env_count("SETTLE_BENCH_OPS", 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let server = common::bench_server();
    let backend = if server.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let mut rows = Vec::new();
    // SETTLE_BENCH_KEEP=DIR keeps each size's database (SQLite: DIR/cN.db; PostgreSQL: the
    // database settle_bench_console_N) and reuses it on the next run: ten million operations take
    // minutes to ingest
    let keep = std::env::var("SETTLE_BENCH_KEEP").ok();
    for n in [1_000, big] {
        // a database of its own for each size, kept until its child is done
        let pg = match (&server, &keep) {
            (Some(u), None) => Some(common::postgres_on(u).await),
            _ => None,
        };
        let url = match (&pg, &server, &keep) {
            (Some(db), _, _) => db.url.clone(),
            (None, Some(u), Some(_)) => kept_pg(u, n).await,
            (None, None, Some(k)) => format!("sqlite://{k}/c{n}.db"),
            (None, _, None) => {
                format!("sqlite://{}", dir.path().join(format!("c{n}.db")).display())
            }
        };
        let ledger = Ledger::open(&url, Config::default()).await.unwrap();
        if ledger
            .read()
            .stats()
            .await
            .unwrap()
            .by_state
            .values()
            .sum::<i64>()
            == 0
        {
            ledger
                .ingest(common::seed_lines(n).as_bytes(), "bench")
                .await
                .unwrap();
        }
        // what a team's database has between bulk loads: the counters' rows of differences
        // folded (`settle serve` and the dispatcher do it every minute) and, on PostgreSQL, the
        // tables vacuumed and analyzed (autovacuum does it after a bulk load)
        ledger.rounds().fold_counters().await.unwrap();
        ledger.close().await;
        if url.starts_with("postgres") {
            let mut raw = common::Raw::connect(&url).await;
            raw.execute("VACUUM ANALYZE").await.unwrap();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("SETTLE_BENCH_CHILD", &url)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("RESULT "))
            .unwrap_or_else(|| panic!("child: {text} {}", String::from_utf8_lossy(&out.stderr)));
        // the keys SETTLE_BENCH_SLOW named
        for l in String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("slow "))
        {
            println!("{n}: {l}");
        }
        rows.push((n, line.trim_start_matches("RESULT ").to_string()));
        drop(pg);
    }
    println!("console on {backend}, 160x48, a tenth of the operations exceptions");
    let mut rss = Vec::new();
    for (n, line) in &rows {
        let parts: Vec<&str> = line.split(' ').collect();
        println!(
            "\n{n} operations: first frame {} ms, first data frame {} ms, peak memory {} MiB",
            parts[0],
            parts[1],
            parts[2].parse::<u64>().unwrap_or(0) / 1024
        );
        rss.push(parts[2].parse::<f64>().unwrap_or(0.0));
        println!(
            "  {:<12} {:>12} {:>12} {:>14} {:>14}",
            "key", "frame p50", "frame p99", "data p50", "data p99"
        );
        for s in &parts[3..] {
            let f: Vec<&str> = s.split(':').collect();
            println!(
                "  {:<12} {:>9} ms {:>9} ms {:>11} ms {:>11} ms",
                f[0], f[1], f[2], f[3], f[4]
            );
        }
    }
    println!(
        "\npeak memory ratio {}x / 1k ops: {:.2}x (target <= 1.2x)",
        big / 1000,
        rss[1] / rss[0]
    );
}
