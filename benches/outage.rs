//! `cargo bench --bench outage`: the drill of a destination's bad hour through the binary, at
//! scale (manual: Recovery that follows the destination). 2,000 operations due at a destination
//! that neither deduplicates nor can be looked up (`settle sim --no-dedupe`, a 5 s timeout, so
//! that what was in flight when it began is unknown by 10 s); it hangs for
//! SETTLE_BENCH_OUTAGE_S seconds (default 40), then comes back limited to 40 requests a second.
//! On SQLite with one dispatcher, or on PostgreSQL with SETTLE_BENCH_DB=postgres://... (a fresh
//! database, dropped afterwards) with two. SETTLE_BENCH_PROBE_URL=1 gives the destination a
//! `probe_url`.
//!
//! Prints the unknowns at 10 s and at the outage's end, the share of 429s among the requests
//! after it, and how long the backlog took to drain against what 40/s allows.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::Sim;

const N: usize = 2_000;

fn unknown(d: &common::Drill) -> usize {
    let out = d.run(&["list", "--all", "--where", "state:unknown", "--json"]);
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap()
        .as_array()
        .map_or(0, Vec::len)
}

fn dispatcher(d: &common::Drill) -> Child {
    d.cmd(&["dispatch", "--until-settled"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::main]
async fn main() {
    let outage: u64 = common::env_count("SETTLE_BENCH_OUTAGE_S", 40) as u64;
    let probe = std::env::var("SETTLE_BENCH_PROBE_URL").is_ok_and(|v| v == "1");
    let db = match std::env::var("SETTLE_BENCH_DB") {
        Ok(u) if u.starts_with("postgres") => common::postgres_on(&u).await,
        _ => common::sqlite(),
    };
    let window = format!("0s..{outage}s");
    let sim = Sim::start(&["--no-dedupe", "--outage", &window, "--rate-limit", "40/s"]);
    let probe_url = match probe {
        true => format!("probe_url = \"{}/health\"\n", sim.base),
        false => String::new(),
    };
    let text = format!(
        "[destinations.tasks]\nurl = \"{}/tasks\"\ntimeout = \"5s\"\n{probe_url}pace = {{ max = \"40/s\" }}\n",
        sim.base
    );
    let d = common::drill_with(&db.url, &text);
    let file = d.config.with_extension("jsonl");
    let lines: String = (0..N)
        .map(|i| {
            format!(
                "{{\"type\":\"intent\",\"key\":\"o-{i:05}\",\"workflow\":\"billing\",\"destination\":\"tasks\",\"action\":\"create\",\"payload\":{{\"n\":{i}}}}}\n"
            )
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let two = db.url.starts_with("postgres");
    let began = Instant::now();
    let mut children = vec![dispatcher(&d)];
    if two {
        children.push(dispatcher(&d));
    }
    std::thread::sleep(Duration::from_secs(10).saturating_sub(began.elapsed()));
    let at_10 = unknown(&d);
    std::thread::sleep(Duration::from_secs(outage - 1).saturating_sub(began.elapsed()));
    let at_end = unknown(&d);
    for mut c in children {
        let until = Instant::now() + Duration::from_secs(600);
        while c.try_wait().unwrap().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    let st = sim.stats();
    let after = st["requests"].as_u64().unwrap() - st["outage"].as_u64().unwrap();
    let limited = st["limited"].as_u64().unwrap();
    let at =
        |k: &str| -> chrono::DateTime<chrono::Utc> { st[k].as_str().unwrap().parse().unwrap() };
    let took = (at("last_task_at") - at("first_task_at")).num_milliseconds() as f64 / 1000.0;
    let done = st["tasks"].as_u64().unwrap() as f64;
    let (_, by_key) = sim.tasks();
    let twice = by_key.values().filter(|n| **n > 1).count();
    println!(
        "outage {}: {N} due, hang {outage} s then 40/s, {} dispatcher(s){}: unknown {at_10} at 10 s, \
         {at_end} at {} s; after it {limited} of {after} requests answered 429 ({:.1}%); \
         {done} made in {took:.1} s where 40/s allows {:.1} s ({:.2}x); keys made twice: {twice}",
        if two { "postgres" } else { "sqlite" },
        if two { 2 } else { 1 },
        if probe { ", probe_url" } else { "" },
        outage - 1,
        100.0 * limited as f64 / after.max(1) as f64,
        done / 40.0,
        took / (done / 40.0),
    );
}
