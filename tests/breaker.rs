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
    with_a_probe_url_no_unknown_is_added,
    a_rejection_storm_never_opens_it,
    a_bulk_retry_sends_one_first,
    a_lead_holds_it_open_by_hand
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

/// [`config`], its breaker probing `GET /health` instead of a real attempt.
fn probed_config(sim: &Sim) -> String {
    format!("{}probe_url = \"{}/health\"\n", config(sim), sim.base)
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
    let (early, late) = drill(db, false);
    assert!(
        late <= early + 3,
        "the unknowns grew with the outage: {early} at 4 s, {late} at 11 s"
    );
}

async fn with_a_probe_url_no_unknown_is_added(db: &TestDb) {
    let (early, late) = drill(db, true);
    assert_eq!(
        early, late,
        "with a probe URL the outage added unknowns: {early} at 4 s, {late} at 11 s"
    );
}

/// The drill: 800 operations due, the destination hangs for 12 s, then comes back limited to
/// 40/s. Returns the unknowns at 4 s and at 11 s into the outage, having checked what follows.
fn drill(db: &TestDb, probe_url: bool) -> (usize, usize) {
    const N: usize = 800;
    let sim = Sim::start(&["--no-dedupe", "--outage", "0s..12s", "--rate-limit", "40/s"]);
    let text = if probe_url {
        probed_config(&sim)
    } else {
        config(&sim)
    };
    let d = common::drill_with(&db.url, &text);
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
    // seen: the breaker, why it opened, and (open) when it probes next
    let stats: serde_json::Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
    let b = &stats["breakers"][0];
    assert_eq!(b["destination"], "tasks", "{stats}");
    assert!(
        matches!(b["state"].as_str(), Some("open" | "probing")),
        "{stats}"
    );
    assert!(
        b["why"]
            .as_str()
            .is_some_and(|w| w.contains("failed within")),
        "{stats}"
    );
    assert!(d.run(&["stats"]).contains("breaker     tasks "));
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
        "probe_url {probe_url}: unknowns {early} at 4 s, {late} at 11 s; {limited} of {after} answered 429; drained in {took:.1} s (40/s: {allows:.1} s)"
    );
    if probe_url {
        assert!(st["probes"].as_u64().unwrap() > 0, "never probed: {st}");
    }
    (early, late)
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

/// A dispatcher running until the guard drops.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A dispatcher, once it said it is alive.
fn running(d: &common::Drill) -> Running {
    let r = Running(
        d.cmd(&["dispatch"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_until("a dispatcher alive", Duration::from_secs(20), || {
        let stats: serde_json::Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
        stats["dispatchers"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    });
    r
}

/// A person's bulk retry of 50 failed operations while the destination answers 503: one goes
/// (the canary), and the answer says the rest were not sent and why; once it is healthy the same
/// retry sends all 50, at the destination's pace.
async fn a_bulk_retry_sends_one_first(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe", "--outage", "0s..25s", "--outage-kind", "503"]);
    let text = format!(
        "[destinations.tasks]\nurl = \"{}/tasks\"\nmax_attempts = 1\ntimeout = \"1s\"\n\
         breaker = {{ failures = 1000 }}\n",
        sim.base
    );
    let d = common::drill_with(&db.url, &text);
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, intents(50)).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let said = finished(vec![dispatcher(&d)], Duration::from_secs(30));
    assert_eq!(count(&d, "failed"), 50, "{said}{}", d.run(&["stats"]));
    let before = sim.stats()["requests"].as_u64().unwrap();
    let retry = |d: &common::Drill| {
        d.cmd(&["retry", "--where", "state:failed", "--yes"])
            .output()
            .unwrap()
    };
    {
        let _dispatcher = running(&d);
        let out = retry(&d);
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "{said}");
        assert!(
            said.contains("canary b-") && said.contains("503") && said.contains("49 not sent"),
            "{said}"
        );
    }
    assert_eq!(sim.stats()["requests"].as_u64().unwrap(), before + 1);
    assert_eq!(count(&d, "failed"), 50, "the rest were left as they were");
    // once it is healthy: all 50, paced
    while sim.stats()["in_outage"].as_bool().unwrap() {
        std::thread::sleep(Duration::from_millis(200));
    }
    // its documented limit, learned since
    std::fs::write(&d.config, format!("{text}pace = {{ max = \"20/s\" }}\n")).unwrap();
    let _dispatcher = running(&d);
    let out = retry(&d);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("retry: 50 done"), "{said}");
    let until = Instant::now() + Duration::from_secs(30);
    while count(&d, "succeeded") < 50 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(count(&d, "succeeded"), 50);
    let st = sim.stats();
    let at =
        |k: &str| -> chrono::DateTime<chrono::Utc> { st[k].as_str().unwrap().parse().unwrap() };
    let took = (at("last_task_at") - at("first_task_at")).num_milliseconds();
    // 49 after the canary at 20/s: about 2.4 s, never all at once
    assert!(took >= 1_500, "the 50 went in {took} ms: not paced ({st})");
}

/// A lead opens the breaker for a maintenance: nothing is sent, not even a probe, until the lead
/// closes it; then everything goes.
async fn a_lead_holds_it_open_by_hand(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe"]);
    let d = common::drill_with(&db.url, &config(&sim));
    let said = d.run(&[
        "breaker",
        "open",
        "tasks",
        "--reason",
        "maintenance until 14:00",
    ]);
    assert!(said.contains("opened"), "{said}");
    let file = d.config.with_extension("jsonl");
    std::fs::write(&file, intents(5)).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    {
        let _dispatcher = running(&d);
        std::thread::sleep(Duration::from_secs(3));
    }
    assert_eq!(sim.stats()["requests"].as_u64(), Some(0));
    let stats = d.run(&["stats"]);
    assert!(
        stats.contains("tasks open") && stats.contains("held open by a person"),
        "{stats}"
    );
    // a script's own start is held too
    let start = d.cmd(&["start", "--key", "b-0000"]).output().unwrap();
    let err = String::from_utf8_lossy(&start.stderr);
    assert!(!start.status.success(), "{err}");
    assert!(err.contains("held by its breaker"), "{err}");
    let again = d.run(&["breaker", "open", "tasks", "--reason", "still"]);
    assert!(again.contains("already held open"), "{again}");
    d.run(&["breaker", "close", "tasks", "--reason", "maintenance over"]);
    finished(vec![dispatcher(&d)], Duration::from_secs(30));
    assert_eq!(count(&d, "succeeded"), 5);
    // a reason is needed, and nonsense is one line
    let out = d
        .cmd(&["breaker", "shut", "tasks", "--reason", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
