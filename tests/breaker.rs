//! Recovery that follows the destination's health, through the binary against `settle sim`:
//! during an outage the unknowns stop growing (the breaker holds every start, one probe at a
//! time), after it the backlog drains at the destination's pace without a storm of 429s, and a
//! storm of business rejections never opens the breaker. Both backends; two dispatchers on
//! PostgreSQL, sharing one breaker and one pace.

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Sim, TestDb};

both_backends!(
    an_outage_then_a_rate_limit,
    a_rejection_storm_never_opens_it
);

/// A destination that neither deduplicates nor can be looked up, paced at its documented 40/s.
fn config(sim: &Sim) -> String {
    format!(
        "attempt_timeout = \"2s\"\n[destinations.tasks]\nurl = \"{}/tasks\"\n\
         max_attempts = 6\nbase = \"100ms\"\ncap = \"1s\"\ntimeout = \"1s\"\n\
         pace = {{ max = \"40/s\" }}\nbreaker = {{ cooldown = \"2s\" }}\n",
        sim.base
    )
}

fn intents(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"type\":\"intent\",\"key\":\"b-{i:04}\",\"workflow\":\"billing\",\"destination\":\"tasks\",\"action\":\"create\",\"payload\":{{\"n\":{i}}}}}\n"
            )
        })
        .collect()
}

fn dispatcher(d: &common::Drill) -> Child {
    d.cmd(&["dispatch", "--until-settled"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn count(d: &common::Drill, state: &str) -> usize {
    let out = d.run(&[
        "list",
        "--all",
        "--where",
        &format!("state:{state}"),
        "--json",
    ]);
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap()
        .as_array()
        .map_or(0, Vec::len)
}

/// Waits for each dispatcher to finish (at most `limit`); their stderr, together.
fn finished(children: Vec<Child>, limit: Duration) -> String {
    let until = Instant::now() + limit;
    let mut said = String::new();
    for mut c in children {
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > until {
                let _ = c.kill();
                let _ = c.wait();
                panic!("a dispatcher did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut err = String::new();
        use std::io::Read;
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        said.push_str(&err);
    }
    said
}

async fn an_outage_then_a_rate_limit(db: &TestDb) {
    const N: usize = 800;
    let sim = Sim::start(&["--no-dedupe", "--outage", "0s..12s", "--rate-limit", "40/s"]);
    let d = common::drill_with(&db.url, &config(&sim));
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, intents(N)).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let two = db.url.starts_with("postgres");
    let started = Instant::now();
    let mut children = vec![dispatcher(&d)];
    if two {
        children.push(dispatcher(&d));
    }
    // what was in flight when it began may become unknown; after that only probes
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    let early = count(&d, "unknown");
    std::thread::sleep(Duration::from_secs(11).saturating_sub(started.elapsed()));
    let late = count(&d, "unknown");
    assert!(
        late <= early + 3,
        "the unknowns grew with the outage: {early} at 4 s, {late} at 11 s"
    );
    let said = finished(children, Duration::from_secs(120));
    assert!(said.contains("struggling"), "{said}");
    assert!(said.contains("answers again"), "{said}");
    // every other operation succeeded, each sent once
    let unknown = count(&d, "unknown");
    assert_eq!(count(&d, "succeeded"), N - unknown, "{said}");
    let st = sim.stats();
    let (tasks, by_key) = sim.tasks();
    assert_eq!(tasks as usize, N - unknown, "{st}");
    assert!(by_key.values().all(|n| *n == 1), "a key sent twice: {st}");
    // after it: few 429s
    let after = st["requests"].as_u64().unwrap() - st["outage"].as_u64().unwrap();
    let limited = st["limited"].as_u64().unwrap();
    assert!(
        limited * 20 <= after,
        "{limited} of {after} requests after the outage answered 429"
    );
    // the backlog drained within 1.3x of what 40/s allows (from the first task to the last)
    let at =
        |k: &str| -> chrono::DateTime<chrono::Utc> { st[k].as_str().unwrap().parse().unwrap() };
    let (first, last) = (at("first_task_at"), at("last_task_at"));
    let took = (last - first).num_milliseconds() as f64 / 1000.0;
    let allows = (N - unknown) as f64 / 40.0;
    assert!(
        took <= allows * 1.3,
        "drained in {took:.1} s where 40/s allows {allows:.1} s"
    );
    println!(
        "unknowns {early} at 4 s, {late} at 11 s; {limited} of {after} answered 429; drained in {took:.1} s (40/s: {allows:.1} s)"
    );
}

async fn a_rejection_storm_never_opens_it(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe", "--fault", "reject"]);
    let d = common::drill_with(&db.url, &config(&sim));
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, intents(30)).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let said = finished(vec![dispatcher(&d)], Duration::from_secs(60));
    assert!(!said.contains("struggling"), "{said}");
    assert_eq!(count(&d, "rejected"), 30);
    assert_eq!(sim.stats()["requests"].as_u64(), Some(30));
}
