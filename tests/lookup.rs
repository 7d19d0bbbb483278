//! Lookups (the manual's Destinations and the dispatcher, Incidents): a lookup is evidence only when it names the operation,
//! "absent" only from a 404 or a 2xx without the value, and `failed` ("confirmed not done") only
//! from a real absent. Against a destination written from the manual (every answer scripted) and
//! against `settle sim`, on both backends.

mod common;

use std::time::Duration;

use common::TestDb;
use common::scripted::{Reply, Scripted};
use serde_json::Value;

/// What the scripted destination answers a lookup of each key: the key says which answer.
fn lookup_answer(key: &str) -> Reply {
    let ok = |body: &str| Reply::Answer(200, body.to_string());
    match key {
        "lk-absent-404" => Reply::Answer(404, "{\"message\":\"not found\"}".into()),
        "lk-found" => ok("{\"id\":\"CRM-1\",\"name\":\"x\"}"),
        "lk-no-value" => ok("{\"results\":[]}"),
        "lk-null-value" => ok("{\"id\":null}"),
        "lk-5xx" => Reply::Answer(502, "{\"message\":\"bad gateway\"}".into()),
        "lk-not-json" => ok("<html>search</html>"),
        "lk-timeout" => Reply::Late(Duration::from_secs(3), 200, "{\"id\":\"CRM-late\"}".into()),
        "lk-broken" => Reply::Broken,
        "lk-401" => Reply::Answer(401, "{}".into()),
        _ => Reply::Answer(400, "{}".into()),
    }
}

const KEYS: [(&str, &str); 9] = [
    ("lk-absent-404", "failed"),
    ("lk-found", "succeeded"),
    ("lk-no-value", "failed"),
    ("lk-null-value", "failed"),
    ("lk-5xx", "unknown"),
    ("lk-not-json", "unknown"),
    ("lk-timeout", "unknown"),
    ("lk-broken", "unknown"),
    ("lk-401", "unknown"),
];

/// Every create answers 500 (the task may exist: an unknown outcome), so the dispatcher looks
/// every key up and the lookup's answer alone decides.
fn scripted_crm() -> Scripted {
    Scripted::start(|req| {
        if req.method == "POST" && req.target.starts_with("/tasks") {
            return Reply::Answer(500, "{\"message\":\"internal\"}".into());
        }
        match req.target.strip_prefix("/lookup?key=") {
            Some(key) => lookup_answer(key),
            None => Reply::Answer(404, "{}".into()),
        }
    })
}

fn crm_config(base: &str) -> String {
    format!(
        "[destinations.crm]\nurl = \"{base}/tasks\"\nlookup_url = \"{base}/lookup?key={{key}}\"\ntimeout = \"1s\"\n"
    )
}

fn record(d: &common::Drill, key: &str) {
    d.run(&[
        "record",
        "--key",
        key,
        "--workflow",
        "crm-sync",
        "--destination",
        "crm",
        "--action",
        "create_contact",
        "--payload",
        "{\"name\":\"Ada\"}",
    ]);
}

/// For every kind of lookup answer the state the manual's Destinations and the dispatcher gives.
fn every_kind_of_lookup_answer(db: &TestDb) {
    let crm = scripted_crm();
    let d = common::drill_with(&db.url, &crm_config(&crm.base));
    for (key, _) in KEYS {
        record(&d, key);
    }
    d.dispatch_until_settled();
    for (key, want) in KEYS {
        let v = d.show(key);
        assert_eq!(v["state"], want, "{key}: {v}");
        let log = v["attempt_log"].as_array().unwrap();
        assert_eq!(log.len(), 1, "{key}: sent once");
        assert_eq!(log[0]["http_status"], 500);
        let last = v["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["kind"], "looked_up", "{key}: {v}");
        match want {
            "succeeded" => assert_eq!(v["reference"], "CRM-1"),
            "failed" => {
                assert_eq!(v["reason"], "looked up: not at crm", "{key}");
                assert_eq!(last["detail"]["evidence"]["answer"], "absent");
            }
            _ => {
                let reason = v["reason"].as_str().unwrap();
                assert!(
                    reason.starts_with("looked up at crm: no answer ("),
                    "{key}: {reason}"
                );
                assert_eq!(last["detail"]["evidence"]["answer"], "no_answer");
                assert!(
                    v["next_step"].as_str().unwrap().starts_with("Look up lk-"),
                    "{key}: a person can look again: {v}"
                );
            }
        }
    }
    // each key was asked for by name, once
    for (key, _) in KEYS {
        let asked = crm.requests(&format!("/lookup?key={key}"));
        assert_eq!(asked.len(), 1, "{key}");
    }
}

/// A lookup that names nothing of the operation (no `{key}`, no `{payload...}`) cannot tell
/// absent from "not searched for": it is refused wherever the config is loaded (exit 2, naming
/// the destination), before anything is sent or stored.
fn a_lookup_that_names_nothing_is_refused_at_start(db: &TestDb) {
    let crm = scripted_crm();
    let config = format!(
        "[destinations.crm]\nurl = \"{}/tasks\"\nlookup_url = \"{}/search\"\nlookup_method = \"POST\"\n",
        crm.base, crm.base
    );
    let d = common::drill_with(&db.url, &config);
    for args in [
        &["dispatch", "--until-settled"][..],
        &["lookup", "lk-found", "--yes"],
        &[
            "record",
            "--key",
            "k-1",
            "--workflow",
            "w",
            "--destination",
            "crm",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
        &["list"],
    ] {
        let (code, out, err) = d.output(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("destination crm") && err.contains("names nothing of the operation"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    assert!(crm.requests("/").is_empty(), "nothing was sent");
}

async fn on_blocking(db: TestDb, f: fn(&TestDb)) {
    tokio::task::spawn_blocking(move || f(&db)).await.unwrap();
}

#[test]
fn every_kind_of_lookup_answer_on_sqlite() {
    every_kind_of_lookup_answer(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn every_kind_of_lookup_answer_on_postgres() {
    on_blocking(common::postgres().await, every_kind_of_lookup_answer).await;
}

#[test]
fn a_lookup_that_names_nothing_is_refused_at_start_on_sqlite() {
    a_lookup_that_names_nothing_is_refused_at_start(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_lookup_that_names_nothing_is_refused_at_start_on_postgres() {
    on_blocking(
        common::postgres().await,
        a_lookup_that_names_nothing_is_refused_at_start,
    )
    .await;
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Creates a task at the simulator as a script would, with the key as its idempotency key.
fn create_at(sim: &common::Sim, key: &str) {
    let ok = std::process::Command::new("curl")
        .args(["-sf", "-o", "/dev/null", "-X", "POST", "-H"])
        .arg(format!("Idempotency-Key: {key}"))
        .args([
            "-H",
            "Content-Type: application/json",
            "-d",
            "{\"title\":\"Kickoff call\"}",
        ])
        .arg(format!("{}/tasks", sim.base))
        .status()
        .unwrap()
        .success();
    assert!(ok, "the simulator took {key}");
}

/// `n` operations of `dest` whose attempt a script reported unknown (`onb-{prefix}-{i}`).
fn unknowns(d: &common::Drill, dest: &str, prefix: &str, n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("onb-{prefix}-{i:03}")).collect();
    let mut lines = String::new();
    for k in &keys {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"{k}\",\"workflow\":\"onboarding\",\"destination\":\"{dest}\",\"action\":\"create_task\",\"payload\":{{\"title\":\"Kickoff call\"}}}}\n\
             {{\"type\":\"start\",\"key\":\"{k}\",\"attempt\":1}}\n\
             {{\"type\":\"attempt\",\"key\":\"{k}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"read timeout after 30s\"}}\n"
        ));
    }
    let file = d.config.with_extension(format!("{prefix}.jsonl"));
    std::fs::write(&file, lines).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    keys
}

/// The command line: `settle lookup` against `settle sim`'s GET lookup. Found
/// becomes succeeded with the destination's reference, absent becomes failed, no answer leaves
/// the item as it was and says why; a bulk lookup of 200 with `--rate` previews (what it leaves
/// alone, by reason), paces, and writes one event per item naming the lookup, one batch for all.
fn settle_lookup_against_the_simulator(db: &TestDb) {
    let sim = common::Sim::start(&["--no-dedupe"]);
    let config = format!(
        "[destinations.tasks]\nlookup_url = \"{base}/tasks?key={{key}}\"\ntimeout = \"2s\"\n\
         [destinations.down]\nlookup_url = \"http://127.0.0.1:9/tasks?key={{key}}\"\ntimeout = \"1s\"\n\
         [destinations.by-hand]\nlookup = true\n",
        base = sim.base
    );
    let d = common::drill_with(&db.url, &config);
    // one at a time: found, absent, no answer
    let one = unknowns(&d, "tasks", "one", 2);
    create_at(&sim, &one[0]);
    let (code, out, err) = d.output(&["lookup", &one[0], "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("{}: found at tasks: T-1 (HTTP 200)", one[0])),
        "{out}"
    );
    let v = d.show(&one[0]);
    assert_eq!(
        (v["state"].as_str(), v["reference"].as_str()),
        (Some("succeeded"), Some("T-1"))
    );
    let (code, out, _) = d.output(&["lookup", &one[1], "--yes"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("not at tasks (HTTP 404)"), "{out}");
    let v = d.show(&one[1]);
    assert_eq!(
        (v["state"].as_str(), v["reason"].as_str()),
        (Some("failed"), Some("looked up: not at tasks"))
    );
    let down = unknowns(&d, "down", "down", 1);
    let (code, out, _) = d.output(&["lookup", &down[0], "--yes"]);
    assert_eq!(code, 3, "no answer: nothing reconciled: {out}");
    assert!(
        out.contains("no answer from down (could not connect)"),
        "{out}"
    );
    assert_eq!(d.show(&down[0])["state"], "unknown", "left as it was");
    assert_eq!(
        d.show(&down[0])["history"].as_array().unwrap().len(),
        3,
        "nothing written"
    );
    // a destination settle cannot ask is left alone at the preview, with why
    let by_hand = unknowns(&d, "by-hand", "hand", 1);
    let (code, out, _) = d.output(&["lookup", &by_hand[0], "--yes"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("left alone: 1 no lookup configured"), "{out}");

    // in bulk: 200, half of them at the destination, one claimed by bob
    let many = unknowns(&d, "tasks", "bulk", 200);
    for k in many.iter().step_by(2) {
        create_at(&sim, k);
    }
    let bob = common::settle_as(
        &d.db,
        d.config.parent().unwrap(),
        "bob",
        &["--config", d.config.to_str().unwrap(), "claim", &many[1]],
    );
    assert_eq!(bob.code, 0, "{}", bob.stderr);
    let (code, out, _) = d.output(&[
        "lookup",
        "--where",
        "dest:tasks key:onb-bulk-*",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(code, 0);
    let dry = json(&out);
    assert_eq!(dry["preview"]["matched"], 200);
    assert_eq!(
        dry["preview"]["refused"]["claimed by another"][0],
        many[1].as_str()
    );
    assert_eq!(dry["report"], Value::Null, "a dry run reconciles nothing");
    assert_eq!(d.show(&many[0])["state"], "unknown");
    let started = std::time::Instant::now();
    let (code, out, err) = d.output(&[
        "lookup",
        "--where",
        "dest:tasks key:onb-bulk-*",
        "--rate",
        "200/s",
        "--yes",
        "--json",
    ]);
    let took = started.elapsed();
    assert_eq!(code, 3, "bob's claim is left alone: {err}");
    let run = json(&out);
    let looked = run["looked_up"].as_array().unwrap();
    assert_eq!(looked.len(), 199);
    // paced: 199 lookups 5 ms apart take at least 198 x 5 ms
    assert!(took >= Duration::from_millis(990), "paced: {took:?}");
    let batch = run["report"]["batch"].as_str().unwrap().to_string();
    assert_eq!(run["report"]["done"].as_array().unwrap().len(), 199);
    for (i, k) in many.iter().enumerate() {
        let v = d.show(k);
        if i == 1 {
            assert_eq!(v["state"], "unknown", "bob's, left alone");
            continue;
        }
        let want = if i % 2 == 0 { "succeeded" } else { "failed" };
        assert_eq!(v["state"], want, "{k}: {v}");
        let events: Vec<&Value> = v["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "reconciled")
            .collect();
        assert_eq!(events.len(), 1, "{k}: one event");
        assert_eq!(events[0]["detail"]["batch"], batch.as_str());
        assert_eq!(events[0]["detail"]["evidence"]["by"], "lookup");
        assert_eq!(events[0]["actor"], "alice");
    }
    assert_eq!(sim.tasks().0, 101, "a lookup creates nothing");
}

#[test]
fn settle_lookup_against_the_simulator_on_sqlite() {
    settle_lookup_against_the_simulator(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn settle_lookup_against_the_simulator_on_postgres() {
    on_blocking(
        common::postgres().await,
        settle_lookup_against_the_simulator,
    )
    .await;
}
