//! `cargo bench --bench live`: how soon a change made elsewhere shows in a running console, end
//! to end: the real binary in a tmux pseudo-terminal, another writer claiming one row after
//! another, the screen read until the claim is on it. On SQLite the console polls the newest event
//! id once a second; on PostgreSQL (`SETTLE_BENCH_DB=postgres://USER@HOST/DB`, a server on which a
//! fresh database is made and dropped) it is told at once by LISTEN/NOTIFY. the manual's console: "within
//! about a second". A benchmark, not a test: on a shared machine a timed assertion would flake.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::{AttemptReport, Config, Intent, Ledger, Outcome, StaffAction};

const BIN: &str = env!("CARGO_BIN_EXE_settle");
const ROWS: usize = 12;

struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("tmux is needed for this benchmark");
        String::from_utf8_lossy(&out.stdout).into()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t:a"])
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let db = match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => common::postgres_on(&u).await,
        _ => common::sqlite(),
    };
    let ledger = Ledger::open(&db.url, Config::default()).await.unwrap();
    for i in 0..ROWS {
        let key = format!("live-{i:02}");
        ledger
            .record(
                &Intent {
                    key: key.clone(),
                    workflow: "onboarding".into(),
                    step: "create-task".into(),
                    destination: "projects".into(),
                    action: "create_task".into(),
                    payload: serde_json::json!({"n": i}),
                    run: None,
                },
                "bench",
            )
            .await
            .unwrap();
        ledger
            .report_attempt(
                &AttemptReport {
                    key,
                    outcome: Some(Outcome::Unknown),
                    ..Default::default()
                },
                "bench",
            )
            .await
            .unwrap();
    }
    let tmux = Tmux(format!("settle-live-bench-{}", std::process::id()));
    let cmd = format!(
        "env SETTLE_OPERATOR=bob SETTLE_LOG_FILE={} XDG_CONFIG_HOME={} {BIN} --db '{}'",
        dir.path().join("settle.log").display(),
        dir.path().display(),
        db.url
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-n",
        "a",
        "-x",
        "120",
        "-y",
        "40",
        "sh",
        "-c",
        &cmd,
    ]);
    let start = Instant::now();
    while !tmux.screen().contains(&format!("live-{:02}", ROWS - 1)) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the console never drew its rows"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut seen = Vec::new();
    for i in 0..ROWS {
        let key = format!("live-{i:02}");
        // a change comes at any moment, not just after the console looked
        std::thread::sleep(Duration::from_millis(rand::random_range(0..1000)));
        ledger
            .staff()
            .act(&key, "alice", StaffAction::Claim { force_reason: None })
            .await
            .unwrap();
        let committed = Instant::now();
        loop {
            let screen = tmux.screen();
            if screen
                .lines()
                .any(|l| l.contains(&key) && l.contains("alice"))
            {
                seen.push(committed.elapsed());
                break;
            }
            assert!(
                committed.elapsed() < Duration::from_secs(30),
                "{key} never showed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let backend = if db.backend == "postgres" {
        "PostgreSQL (LISTEN/NOTIFY)"
    } else {
        "SQLite (polled every second)"
    };
    println!(
        "live refresh on {backend}, {ROWS} claims by another writer: on screen after p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms (manual: The console: within about a second)",
        pct(&mut seen, 0.5),
        pct(&mut seen, 0.9),
        pct(&mut seen, 1.0)
    );
    drop(tmux);
    ledger.close().await;
}
