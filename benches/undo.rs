//! `cargo bench --bench undo`: a bulk action over SETTLE_BENCH_OPS items (default 100,000) taken
//! back (manual: Taking an action back), on SQLite, or on PostgreSQL with
//! SETTLE_BENCH_DB=postgres://... (a fresh database, dropped afterwards).
//!
//! Each of three rounds closes every item (the bulk action: 200 items to a transaction, one
//! compare-and-set and one event each), then takes that close back with `undo`; reported: each
//! one's median, and the undo's time over the action's (target <= 2x), with the undo's preview.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use settle::ledger::UndoOf;
use settle::{Config, Ledger, Resolution, StaffAction};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `n` operations whose outcome is unknown, as JSON lines for ingest.
fn unknowns(n: usize) -> String {
    let mut text = String::with_capacity(n * 260);
    for i in 0..n {
        text.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"undo-{i:08}\",\"workflow\":\"wf-{}\",\"step\":\"send\",\"destination\":\"dest-{}\",\"action\":\"send\",\"payload\":{{\"n\":{i}}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"undo-{i:08}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"read timeout after 30s\"}}\n",
            i % 7,
            i % 5
        ));
    }
    text
}

#[tokio::main]
async fn main() {
    let n = common::env_count("SETTLE_BENCH_OPS", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let (url, _pg) = common::bench_db(dir.path(), "undo").await;
    let backend = if url.starts_with("postgres") {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let ledger = Ledger::open(&url, Config::default()).await.unwrap();
    let t = Instant::now();
    let report = ledger
        .ingest(unknowns(n).as_bytes(), "bench")
        .await
        .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems.first());
    ledger.rounds().fold_counters().await.unwrap();
    println!(
        "undo on {backend}: {n} unknown operations (seeded in {:.1} s)",
        t.elapsed().as_secs_f64()
    );
    let keys: Vec<String> = (0..n).map(|i| format!("undo-{i:08}")).collect();
    let close = StaffAction::Close {
        resolution: Resolution::Abandoned,
        reference: None,
        superseded_by: None,
        note: "the wrong filter".into(),
    };
    let stop = AtomicBool::new(false);
    let (mut acted, mut previewed, mut undone) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        let t = Instant::now();
        let r = ledger
            .staff()
            .bulk_apply(&keys, &close, "alice", &stop, None, |_, _| {})
            .await
            .unwrap();
        acted.push(t.elapsed());
        assert_eq!(r.done.len(), n, "round {round}: every item closed");
        let t = Instant::now();
        let p = ledger
            .staff()
            .undo_preview(UndoOf::Id(&r.batch), "alice")
            .await
            .unwrap();
        previewed.push(t.elapsed());
        assert_eq!(p.taken_back.len(), n);
        let t = Instant::now();
        let u = ledger
            .staff()
            .undo(UndoOf::Id(&r.batch), "alice", Some("wrong filter"))
            .await
            .unwrap();
        undone.push(t.elapsed());
        assert_eq!(
            u.taken_back.len(),
            n,
            "round {round}: every item taken back"
        );
        println!(
            "  round {round}: close {:.2} s, preview of its undo {:.2} s, undo {:.2} s",
            acted[round].as_secs_f64(),
            previewed[round].as_secs_f64(),
            undone[round].as_secs_f64()
        );
    }
    let stats = ledger.read().stats().await.unwrap();
    assert_eq!(
        stats.by_state.get(&settle::State::Unknown).copied(),
        Some(n as i64)
    );
    let (a, p, u) = (median(acted), median(previewed), median(undone));
    println!(
        "\nbulk close of {n}: {:.2} s; its undo {:.2} s ({:.2}x the close; target <= 2x); \
         the undo's preview {:.2} s (medians of 3)",
        a.as_secs_f64(),
        u.as_secs_f64(),
        u.as_secs_f64() / a.as_secs_f64(),
        p.as_secs_f64()
    );
}
