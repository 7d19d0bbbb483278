//! The recovery drills: the real binary, the real simulator and a real database,
//! counting the destination's actual business records, not the ledger's green ticks.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::checker::{self, Destination};
use common::{Sim, TestDb, drill};
use serde_json::Value;

fn attempts(v: &Value) -> usize {
    v["attempt_log"].as_array().unwrap().len()
}

#[test]
fn drill_1_a_rejection_is_final_and_creates_nothing() {
    let db = common::sqlite();
    let sim = Sim::start(&["--fault", "reject"]);
    let d = drill(&db, &sim, true, true, "");
    d.record("onb-1-task");
    d.dispatch_until_settled();
    let v = d.show("onb-1-task");
    assert_eq!(v["state"], "rejected");
    assert!(v["reason"].as_str().unwrap().contains("HTTP 422"), "{v}");
    assert_eq!(attempts(&v), 1, "no retry is sent");
    assert_eq!(sim.tasks().0, 0);
}

#[test]
fn drill_2a_lost_response_at_a_deduplicating_destination() {
    let db = common::sqlite();
    let sim = Sim::start(&["--fault", "drop", "--fault-first-only"]);
    let d = drill(&db, &sim, true, false, "");
    d.record("onb-2a-task");
    d.dispatch_until_settled();
    let v = d.show("onb-2a-task");
    assert_eq!(
        (v["state"].as_str(), v["reference"].as_str()),
        (Some("succeeded"), Some("T-1")),
        "{v}"
    );
    assert_eq!(v["attempt_log"][0]["outcome"], "unknown");
    assert_eq!(sim.tasks().1.get("onb-2a-task"), Some(&1));
}

#[test]
fn drill_2b_lost_response_settled_by_lookup() {
    let db = common::sqlite();
    let sim = Sim::start(&["--no-dedupe", "--fault", "drop", "--fault-first-only"]);
    let d = drill(&db, &sim, false, true, "");
    d.record("onb-2b-task");
    d.dispatch_until_settled();
    let v = d.show("onb-2b-task");
    assert_eq!(
        (v["state"].as_str(), v["reference"].as_str()),
        (Some("succeeded"), Some("T-1")),
        "{v}"
    );
    assert_eq!(attempts(&v), 1, "settled by lookup, not by a second send");
    assert_eq!(
        v["history"].as_array().unwrap().last().unwrap()["kind"],
        "looked_up"
    );
    assert_eq!(sim.tasks().1.get("onb-2b-task"), Some(&1));
}

#[test]
fn drill_2c_lost_response_with_neither_waits_for_a_person() {
    let db = common::sqlite();
    let sim = Sim::start(&["--no-dedupe", "--fault", "drop", "--fault-first-only"]);
    let d = drill(&db, &sim, false, false, "");
    d.record("onb-2c-task");
    d.dispatch_until_settled();
    let v = d.show("onb-2c-task");
    assert_eq!(v["state"], "unknown");
    assert!(
        v["next_step"]
            .as_str()
            .unwrap()
            .starts_with("Check tasks for this request (onb-2c-task"),
        "{v}"
    );
    assert_eq!(attempts(&v), 1, "no retry is sent");
    d.run(&["claim", "onb-2c-task"]);
    d.run(&["reconcile", "onb-2c-task", "--found", "T-1"]);
    assert_eq!(d.show("onb-2c-task")["state"], "succeeded");
    assert_eq!(sim.tasks().1.get("onb-2c-task"), Some(&1));
}

/// A database outage while attempts are in flight: the dispatcher keeps the answers it gets and
/// records them once the database is back. No outcome is lost, so nothing becomes `unknown` and
/// nothing is sent twice (the destination does not deduplicate: a blind retry would show).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_4b_a_database_outage_loses_no_answer() {
    let db = common::postgres().await;
    let (proxy, via_proxy) = common::Proxy::before(&db).await;
    let sim = Sim::start(&["--no-dedupe", "--latency", "1500ms"]);
    let mut d = drill(&db, &sim, false, false, "");
    d.db = via_proxy;
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace("timeout = \"1s\"", "timeout = \"10s\"");
    std::fs::write(&d.config, cfg).unwrap();
    let keys: Vec<String> = (0..5).map(|i| format!("outage-{i}")).collect();
    let err_file = d.config.with_extension("stderr");
    let err = err_file.clone();
    let (d, keys, dispatcher) = tokio::task::spawn_blocking(move || {
        let err_file = err;
        for k in &keys {
            d.record(k);
        }
        let dispatcher = d
            .cmd(&["dispatch", "--until-settled"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&err_file).unwrap()))
            .spawn()
            .unwrap();
        wait_for("attempts in flight", || {
            keys.iter().all(|k| d.show(k)["state"] == "in_flight")
        });
        (d, keys, dispatcher)
    })
    .await
    .unwrap();
    // the answers come after 1.5 s, while the database is away: the database comes back only
    // once the destination has answered all five and the dispatcher has said that it saw the
    // outage (however long that takes on a loaded machine)
    proxy.cut();
    let stderr_path = err_file.clone();
    let sim = tokio::task::spawn_blocking(move || {
        common::wait_until(
            "the answers and the outage",
            Duration::from_secs(60),
            || {
                sim.tasks().0 == 5
                    && std::fs::read_to_string(&stderr_path)
                        .unwrap()
                        .contains("answer(s) in hand")
            },
        );
        sim
    })
    .await
    .unwrap();
    let _back = proxy.restore().await;
    tokio::task::spawn_blocking(move || {
        let out = dispatcher.wait_with_output().unwrap();
        let stderr = std::fs::read_to_string(&err_file).unwrap();
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("reachable again"), "{stderr}");
        let (tasks, by_key) = sim.tasks();
        assert_eq!(tasks, 5);
        for k in &keys {
            let v = d.show(k);
            assert_eq!(v["state"], "succeeded", "{k}: {v}");
            assert_eq!(
                attempts(&v),
                1,
                "{k}: the answer was kept, no second attempt"
            );
            assert_eq!(by_key.get(k.as_str()), Some(&1));
        }
    })
    .await
    .unwrap();
}

#[test]
fn drill_5_an_operator_and_the_automation_at_once() {
    let db = common::sqlite();
    let sim = Sim::start(&[
        "--no-dedupe",
        "--fault",
        "unavailable",
        "--fault-first-only",
    ]);
    let d = drill(&db, &sim, false, false, "");
    // a claimed operation gets no automatic attempt
    d.record("held-1");
    d.run(&["claim", "held-1"]);
    // this one is refused once (503), with one attempt allowed: failed, confirmed not done
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace("max_attempts = 4", "max_attempts = 1");
    std::fs::write(&d.config, cfg).unwrap();
    d.record("retry-1");
    d.dispatch_until_settled();
    let held = d.show("held-1");
    assert_eq!(
        (held["state"].as_str(), attempts(&held)),
        (Some("pending"), 0)
    );
    assert_eq!(d.show("retry-1")["state"], "failed");
    // a manual retry while the dispatcher runs: exactly one task
    let mut dispatcher = d
        .cmd(&["dispatch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    d.run(&["claim", "retry-1"]);
    d.run(&["retry", "retry-1"]);
    wait_for("the dispatcher to run the retry", || {
        d.show("retry-1")["state"] == "succeeded"
    });
    let _ = dispatcher.kill();
    let _ = dispatcher.wait();
    let (_, by_key) = sim.tasks();
    assert_eq!(
        (by_key.get("retry-1"), by_key.get("held-1")),
        (Some(&1), None)
    );
}

/// Repeated delivery: the same intent ingested three times, two dispatchers started together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_3_repeated_delivery_and_two_dispatchers_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || {
        let sim = Sim::start(&["--no-dedupe"]);
        let d = drill(&db, &sim, false, false, "");
        let file = d.config.with_extension("jsonl");
        let mut text = String::new();
        for i in 0..50 {
            text.push_str(&format!(
                "{{\"type\":\"intent\",\"key\":\"rep-{i}\",\"workflow\":\"onboarding\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"n\":{i}}}}}\n"
            ));
        }
        std::fs::write(&file, text.repeat(3)).unwrap();
        d.run(&["ingest", file.to_str().unwrap()]);
        let a = d.cmd(&["dispatch", "--until-settled"]).stdout(Stdio::null()).spawn().unwrap();
        let b = d.cmd(&["dispatch", "--until-settled"]).stdout(Stdio::null()).spawn().unwrap();
        for mut c in [a, b] {
            assert!(c.wait().unwrap().success());
        }
        let (total, by_key) = sim.tasks();
        assert_eq!(total, 50, "exactly one task per intent");
        assert!(by_key.values().all(|n| *n == 1));
    })
    .await
    .unwrap();
}

fn wait_for(what: &str, ok: impl FnMut() -> bool) {
    common::wait_until(what, Duration::from_secs(20), ok)
}

/// Interruption during recovery (the manual's States): a dispatcher is killed with
/// SIGKILL while attempts are in flight at a deduplicating destination, at one with a lookup and
/// at one with neither; each destination made the task, then answered late. Another dispatcher,
/// running meanwhile, settles the first two kinds by itself: a retry with the same key that the
/// destination answers with the original task, and a lookup that finds it, one task each, within
/// two attempt timeouts of the attempt. Only the third kind waits in the queue as `unknown`, never
/// retried blindly.
fn kill_9_while_attempts_are_in_flight(db: &TestDb) {
    let late = ["--fault", "late", "--late", "1500ms"];
    let dedupe = Sim::start(&late);
    let lookup = Sim::start(&[&["--no-dedupe"][..], &late].concat());
    let neither = Sim::start(&[&["--no-dedupe"][..], &late].concat());
    let timeout = Duration::from_secs(3);
    let config = format!(
        "attempt_timeout = \"3s\"\n\
         [destinations.dedupe]\nurl = \"{}/tasks\"\ndedupes = true\nkey_retention = \"1h\"\ntimeout = \"10s\"\nbase = \"10ms\"\ncap = \"50ms\"\n\
         [destinations.lookup]\nurl = \"{}/tasks\"\nlookup_url = \"{}/tasks?key={{key}}\"\ntimeout = \"10s\"\n\
         [destinations.neither]\nurl = \"{}/tasks\"\ntimeout = \"10s\"\n",
        dedupe.base, lookup.base, lookup.base, neither.base
    );
    let d = common::drill_with(&db.url, &config);
    let sims = [
        ("dedupe", &dedupe),
        ("lookup", &lookup),
        ("neither", &neither),
    ];
    let keys = |dest: &str| -> Vec<String> { (0..3).map(|i| format!("kill-{dest}-{i}")).collect() };
    for (dest, _) in sims {
        for k in keys(dest) {
            d.run(&[
                "record",
                "--key",
                &k,
                "--workflow",
                "onboarding",
                "--destination",
                dest,
                "--action",
                "create_task",
                "--payload",
                "{\"title\":\"Kickoff call\"}",
            ]);
        }
    }
    let spawn = || {
        common::Killed(
            d.cmd(&["dispatch"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let mut first = spawn();
    // the requests must have reached the destinations (which make the task, then answer late)
    // before the dispatcher dies: else there is nothing to be interrupted
    wait_for("every simulator to hold its tasks", || {
        sims.iter().all(|(dest, sim)| {
            keys(dest)
                .iter()
                .all(|k| sim.tasks().1.contains_key(k.as_str()))
        })
    });
    for (dest, _) in sims {
        for k in keys(dest) {
            assert_eq!(
                d.show(&k)["state"],
                "in_flight",
                "{k}: in flight when the dispatcher dies"
            );
        }
    }
    let _second = spawn();
    first.kill_9();
    common::wait_until(
        "the running dispatcher to settle them",
        Duration::from_secs(60),
        || {
            ["dedupe", "lookup"]
                .iter()
                .flat_map(|dest| keys(dest))
                .all(|k| d.show(&k)["state"] == "succeeded")
                && keys("neither")
                    .iter()
                    .all(|k| d.show(k)["state"] == "unknown")
        },
    );
    let dests = sims.map(|(name, sim)| Destination {
        name,
        sim,
        dedupes: name == "dedupe",
    });
    let found = checker::check_blocking(&db.url, &dests, false);
    assert!(found.is_empty(), "{}", checker::report(&found));
    let time = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .to_utc()
    };
    for (dest, sim) in sims {
        let (_, by_key) = sim.tasks();
        for k in keys(dest) {
            let v = d.show(&k);
            assert_eq!(by_key.get(k.as_str()), Some(&1), "{k}: exactly one task");
            let started = time(&v["attempt_log"][0]["started_at"]);
            let history = v["history"].as_array().unwrap();
            let last = history.last().unwrap();
            match dest {
                "dedupe" => {
                    assert_eq!(
                        v["reference"],
                        v["attempt_log"].as_array().unwrap().last().unwrap()["reference"]
                    );
                    assert!(
                        history
                            .iter()
                            .any(|e| e["kind"] == "swept" && e["to_state"] == "retry_wait"),
                        "{v}"
                    );
                }
                "lookup" => {
                    assert_eq!(
                        (last["kind"].as_str(), attempts(&v)),
                        (Some("looked_up"), 1),
                        "{v}"
                    );
                    assert!(v["reference"].as_str().unwrap().starts_with("T-"), "{v}");
                }
                _ => {
                    assert_eq!(v["reason"], "interrupted", "{v}");
                    assert_eq!(attempts(&v), 1, "{k}: never retried blindly");
                    assert!(
                        v["next_step"]
                            .as_str()
                            .unwrap()
                            .starts_with("Attempt interrupted"),
                        "{v}"
                    );
                    continue;
                }
            }
            let settled = time(&last["at"]);
            assert!(
                settled - started <= chrono::TimeDelta::from_std(timeout * 2).unwrap(),
                "{k}: settled {} after its attempt started: {v}",
                settled - started
            );
        }
    }
}

#[test]
fn drill_4_kill_9_while_attempts_are_in_flight_on_sqlite() {
    kill_9_while_attempts_are_in_flight(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_4_kill_9_while_attempts_are_in_flight_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || kill_9_while_attempts_are_in_flight(&db))
        .await
        .unwrap();
}

/// The late-answer drill (the manual's Automatic retries): at a deduplicating destination whose
/// first answer comes late (2.5 s, after the client gave up at 1 s), every repeat meanwhile gets
/// `409` (the first request with this key is still running). The attempts after a 409 wait at
/// least the destination's timeout, so a short policy (base 100 ms, cap 1 s, 6 attempts) is not
/// spent before the first request's own answer is there: all four succeed with one task each,
/// ten runs in a row, each on a database of its own (a fresh retry budget, as the trial had).
fn late_first_answers(dbs: &[TestDb]) {
    for (run, db) in dbs.iter().enumerate() {
        let sim = Sim::start(&["--fault", "late", "--fault-first-only", "--late", "2500ms"]);
        let config = format!(
            "attempt_timeout = \"5s\"\n[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = true\n\
             key_retention = \"1h\"\nmax_attempts = 6\nbase = \"100ms\"\ncap = \"1s\"\ntimeout = \"1s\"\n",
            sim.base
        );
        let d = common::drill_with(&db.url, &config);
        let keys: Vec<String> = (0..4).map(|i| format!("late-{run}-{i}")).collect();
        for k in &keys {
            d.record(k);
        }
        d.run(&["dispatch", "--until-settled", "--concurrency", "4"]);
        let (_, by_key) = sim.tasks();
        for k in &keys {
            let v = d.show(k);
            assert_eq!(v["state"], "succeeded", "run {run}: {k}: {v}");
            assert_eq!(by_key.get(k.as_str()), Some(&1), "run {run}: {k}: one task");
            let log = v["attempt_log"].as_array().unwrap();
            assert!(
                log.iter().any(|a| a["http_status"] == 409),
                "run {run}: {k}: the first request was still running at a retry: {v}"
            );
        }
    }
}

#[test]
fn drill_8_late_first_answers_on_sqlite() {
    let dbs: Vec<TestDb> = (0..10).map(|_| common::sqlite()).collect();
    late_first_answers(&dbs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_8_late_first_answers_on_postgres() {
    let mut dbs = Vec::new();
    for _ in 0..10 {
        dbs.push(common::postgres().await);
    }
    tokio::task::spawn_blocking(move || late_first_answers(&dbs))
        .await
        .unwrap();
}

/// A number from the dispatcher's closing line, e.g. `settled by lookup` in
/// "dispatched 1203 attempt(s), ..., 41 settled by lookup, ...".
fn summary_count(summary: &str, what: &str) -> u64 {
    summary
        .split(", ")
        .find_map(|part| {
            part.trim()
                .strip_suffix(what)?
                .trim()
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no '{what}' in the dispatcher's summary: {summary}"))
}

/// The destination a soak runs against.
#[derive(Clone, Copy, Debug)]
struct SoakDest {
    /// The simulator honours idempotency keys (a blind retry would be harmless).
    dedupes: bool,
    /// The dispatcher may ask whether the work for a key exists.
    lookup: bool,
}

/// 1,000 operations against a simulator with seeded random faults (10% of requests: reject,
/// drop after commit, late after commit, 503, 500 after commit), counting what the destination
/// really made. Every fault that leaves the outcome unknown has created the task, so at a
/// destination that does not deduplicate any blind retry would make a second one: there, settle
/// alone keeps each key to one task.
fn soak(db: &TestDb, dest: SoakDest) {
    const OPS: usize = 1000;
    let mut sim_args = vec!["--fault-rate", "0.1", "--seed", "42", "--late", "1500ms"];
    if !dest.dedupes {
        sim_args.push("--no-dedupe");
    }
    let sim = Sim::start(&sim_args);
    let d = drill(db, &sim, dest.dedupes, dest.lookup, "");
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace("max_attempts = 4", "max_attempts = 6");
    std::fs::write(&d.config, cfg).unwrap();
    let file = d.config.with_extension("jsonl");
    let text: String = (0..OPS)
        .map(|i| format!("{{\"type\":\"intent\",\"key\":\"soak-{i}\",\"workflow\":\"onboarding\",\"destination\":\"tasks\",\"action\":\"create_task\",\"payload\":{{\"n\":{i}}}}}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let summary = d.dispatch_until_settled();
    let dests = [Destination {
        name: "tasks",
        sim: &sim,
        dedupes: dest.dedupes,
    }];
    let found = checker::check_blocking(&db.url, &dests, true);
    assert!(found.is_empty(), "{}", checker::report(&found));
    let (tasks, by_key) = sim.tasks();
    let list: Value = serde_json::from_str(&d.run(&["list", "--all", "--json"])).unwrap();
    let ops = list.as_array().unwrap();
    assert_eq!(ops.len(), OPS);
    let mut states = std::collections::BTreeMap::new();
    for op in ops {
        let key = op["key"].as_str().unwrap();
        let state = op["state"].as_str().unwrap();
        *states.entry(state.to_string()).or_insert(0) += 1;
        let made = by_key.get(key).copied().unwrap_or(0);
        assert!(made <= 1, "{key}: {made} tasks ({state})");
        let attempts = op["attempts"].as_u64().unwrap();
        assert!(
            (1..=6).contains(&attempts),
            "{key}: {attempts} attempts, the policy allows 6"
        );
        match state {
            "succeeded" => {
                assert_eq!(made, 1, "{key}: succeeded means one task");
                assert!(op["reference"].is_string(), "{key}: {op}");
            }
            "rejected" => assert_eq!(made, 0, "{key}: a rejection creates nothing"),
            "failed" => assert_eq!(made, 0, "{key}: failed means confirmed not done"),
            // every fault that hides the outcome here creates the task first
            "unknown" => {
                assert_eq!(made, 1, "{key}: unknown here means made, not seen");
                assert!(
                    !dest.dedupes && !dest.lookup,
                    "{key}: an unknown outcome is settled automatically at {dest:?}"
                );
            }
            other => panic!("{key} ended {other}"),
        }
    }
    let count = |s: &str| states.get(s).copied().unwrap_or(0) as u64;
    assert_eq!(
        tasks,
        count("succeeded") + count("unknown"),
        "the destination holds one task per operation that made one, and no other: {states:?}"
    );
    // about 2% of first requests are rejected and, with neither dedupe nor lookup, about 6% stay
    // unknown; the rest succeed
    assert!(
        count("succeeded") as usize >= OPS * 85 / 100,
        "most operations succeed: {states:?}"
    );
    assert!(count("rejected") > 0, "the fault schedule ran: {states:?}");
    let looked_up = summary_count(&summary, "settled by lookup");
    if dest.lookup && !dest.dedupes {
        assert!(
            looked_up > 0,
            "unknown outcomes were settled by lookup: {summary}"
        );
    } else if !dest.lookup {
        assert_eq!(looked_up, 0, "{summary}");
        if !dest.dedupes {
            assert!(
                count("unknown") > 0,
                "unknown outcomes wait for a person: {states:?}"
            );
        }
    }
    println!(
        "soak on {} at {dest:?}: {summary} tasks {tasks}; states {states:?}",
        db.backend
    );
}

const DEDUPES: SoakDest = SoakDest {
    dedupes: true,
    lookup: true,
};
const LOOKUP_ONLY: SoakDest = SoakDest {
    dedupes: false,
    lookup: true,
};
const NEITHER: SoakDest = SoakDest {
    dedupes: false,
    lookup: false,
};

#[test]
fn drill_6_soak_on_sqlite() {
    soak(&common::sqlite(), DEDUPES);
}

#[test]
fn drill_6b_soak_without_dedupe_on_sqlite() {
    let db = common::sqlite();
    soak(&db, LOOKUP_ONLY);
    soak(&common::sqlite(), NEITHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_6_soak_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || soak(&db, DEDUPES))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_6b_soak_without_dedupe_on_postgres() {
    let (a, b) = (common::postgres().await, common::postgres().await);
    tokio::task::spawn_blocking(move || {
        soak(&a, LOOKUP_ONLY);
        soak(&b, NEITHER);
    })
    .await
    .unwrap();
}

/// Drill 7 (manual: The protocol): a script that follows the protocol is killed
/// with -9 after `start` and after the destination received its request, before `attempt`. The
/// operation is not left `pending` (which a dispatcher would send again): past the attempt
/// timeout it is an exception, swept to `unknown` (interrupted), listed, and never sent again at a
/// destination that neither deduplicates nor has a lookup.
fn killed_between_start_and_attempt(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe", "--fault", "late", "--late", "30s"]);
    let d = drill(db, &sim, false, false, "");
    let key = "script-killed-1";
    d.record(key);
    let (code, out, err) = d.output(&["start", "--key", key]);
    assert_eq!((code, out.trim()), (0, "1"), "{err}");
    // the script's send: the destination makes the task, then answers late
    let mut send = Command::new("curl")
        .args(["-s", "-m", "60", "-X", "POST", "-H"])
        .arg(format!("Idempotency-Key: {key}"))
        .args(["-H", "Content-Type: application/json", "-d", "{}"])
        .arg(format!("{}/tasks", sim.base))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl");
    wait_for("the simulator to hold the task", || {
        sim.tasks().1.contains_key(key)
    });
    Command::new("kill")
        .arg("-9")
        .arg(send.id().to_string())
        .status()
        .unwrap();
    let _ = send.wait();
    assert_eq!(
        d.show(key)["state"],
        "in_flight",
        "a visible trace, not pending"
    );
    wait_for("the attempt to outlive its timeout", || {
        d.show(key)["next_step"]
            .as_str()
            .unwrap()
            .starts_with("Attempt interrupted")
    });
    // a dispatcher starting now sweeps it, and sends nothing
    d.dispatch_until_settled();
    let v = d.show(key);
    assert_eq!(v["state"], "unknown", "{v}");
    assert_eq!(v["reason"], "interrupted");
    assert_eq!(attempts(&v), 1, "never sent again automatically");
    assert_eq!(sim.tasks().1.get(key), Some(&1), "exactly one task");
    let listed = d.run(&["list", "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["key"] == key && o["state"] == "unknown"),
        "{listed}"
    );
}

#[test]
fn drill_7_a_script_killed_between_start_and_attempt_on_sqlite() {
    killed_between_start_and_attempt(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_7_a_script_killed_between_start_and_attempt_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || killed_between_start_and_attempt(&db))
        .await
        .unwrap();
}

/// The manual's three-step Python automation (docs/automations.md), as it stands.
fn readme_python() -> String {
    let readme = include_str!("../docs/automations.md");
    let start = readme
        .find("```python\nimport json, os, subprocess")
        .expect("the manual's three-step Python recipe");
    let body = &readme[start + "```python\n".len()..];
    body[..body.find("```").unwrap()].to_string()
}

/// Calls the real settle, counting the calls; SIGKILLs the script (its parent) before or after
/// the call `SHIM_KILL` names (`before-3`, `after-5`).
const SHIM: &str = r#"#!/bin/sh
n=$(( $(cat "$SHIM_COUNT" 2>/dev/null || echo 0) + 1 )); echo $n > "$SHIM_COUNT"
if [ "$SHIM_KILL" = "before-$n" ]; then kill -9 $PPID; exit 137; fi
"$SHIM_REAL" "$@"; rc=$?
if [ "$SHIM_KILL" = "after-$n" ]; then kill -9 $PPID; fi
exit $rc
"#;

const STEPS: [(&str, &str); 3] = [
    ("create-customer", "crm"),
    ("create-task", "projects"),
    ("welcome-sms", "sms"),
];

/// Drill 9 (manual: Runs): the manual's three-step Python automation killed with SIGKILL at every
/// call to settle in turn (before it and after it: every protocol line), then rerun, against
/// three `settle sim --no-dedupe` destinations (none deduplicates, none can be looked up). A kill
/// outside an attempt: the rerun finishes the run. A kill between start and report: the rerun
/// sends nothing and the run is blocked on that step; a person reconciles it from the
/// destination's own records, and a rerun finishes it. In the end each destination holds one task
/// per run step and every run is done; one run crashed after its first step and not rerun is
/// stalled, listed, counted by stats and the metrics, its next step naming the missing step.
fn a_three_step_automation_killed_at_every_line(db: &TestDb) {
    let sims: Vec<Sim> = STEPS.iter().map(|_| Sim::start(&["--no-dedupe"])).collect();
    let d = common::drill_with(
        &db.url,
        "attempt_timeout = \"1s\"\n\
         [destinations.crm]\n[destinations.projects]\n[destinations.sms]\n\
         [workflows.onboarding]\nsteps = [\"create-customer\", \"create-task\", \"welcome-sms\"]\n\
         step_gap = \"1s\"\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("onboard.py");
    std::fs::write(&script, readme_python()).unwrap();
    let shim = dir.path().join("settle-shim");
    std::fs::write(&shim, SHIM).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let onboard = |run: &str, kill: &str| -> Option<i32> {
        Command::new("python3")
            .arg(&script)
            .args([run, "Ada Lovelace", "ada@example.com", "+44 20 7946 0000"])
            .env("SETTLE", &shim)
            .env("SHIM_REAL", env!("CARGO_BIN_EXE_settle"))
            .env("SHIM_COUNT", dir.path().join(format!("count-{run}-{kill}")))
            .env("SHIM_KILL", kill)
            .env("SETTLE_DATABASE_URL", &db.url)
            .env("SETTLE_CONFIG", &d.config)
            .env("SETTLE_OPERATOR", "onboarding-bot")
            .env("SETTLE_LOG_FILE", "/dev/null")
            .env("CRM_URL", format!("{}/tasks", sims[0].base))
            .env("PROJECTS_URL", format!("{}/tasks", sims[1].base))
            .env("SMS_URL", format!("{}/tasks", sims[2].base))
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .code()
    };
    let run_state = |run: &str| -> Value {
        serde_json::from_str(&d.run(&["run", "show", run, "--json"])).unwrap()
    };
    let tasks = || -> Vec<std::collections::BTreeMap<String, u64>> {
        sims.iter().map(|s| s.tasks().1).collect()
    };
    // every call of a whole run (record, start, attempt per step), killed before and after each
    let mut runs = Vec::new();
    for n in 1..=9 {
        for when in ["before", "after"] {
            let run = format!("r{n}{}", &when[..1]);
            let code = onboard(&run, &format!("{when}-{n}"));
            assert_eq!(code, None, "{run}: killed by its signal");
            runs.push((run, n, when));
        }
    }
    // the one left after its first step
    assert_eq!(onboard("left", "before-4"), None);
    // between start (call 2, 5, 8) and its report (3, 6, 9): an outcome nobody observed
    let unobserved = |n: usize, when: &str| {
        (n % 3 == 2 && when == "after") || (n.is_multiple_of(3) && when == "before")
    };
    std::thread::sleep(Duration::from_millis(1200));
    let before = tasks();
    for (run, n, when) in &runs {
        let code = onboard(run, "");
        let v = run_state(run);
        if unobserved(*n, when) {
            assert_eq!(code, Some(3), "{run}: the rerun stops");
            assert_eq!(v["state"], "blocked", "{run}: {v}");
            let (step, _) = STEPS[(*n - 1) / 3];
            assert!(
                v["next_step"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{step} ({run}:{step})")),
                "{run}: {v}"
            );
        } else {
            assert_eq!(code, Some(0), "{run}: the rerun finishes ({v})");
            assert_eq!(v["state"], "done", "{run}: {v}");
        }
    }
    // the reruns of the blocked runs sent nothing
    let after = tasks();
    for (run, n, when) in runs.iter().filter(|(_, n, w)| unobserved(*n, w)) {
        let (step, _) = STEPS[(*n - 1) / 3];
        let key = format!("{run}:{step}");
        let i = (*n - 1) / 3;
        assert_eq!(after[i].get(&key), before[i].get(&key), "{key} ({when})");
    }
    // a person reconciles each from the destination's own records, and reruns it
    for (run, n, _) in runs.iter().filter(|(_, n, w)| unobserved(*n, w)) {
        let i = (*n - 1) / 3;
        let (step, _) = STEPS[i];
        let key = format!("{run}:{step}");
        let seen = Command::new("curl")
            .args(["-s", &format!("{}/tasks?key={key}", sims[i].base)])
            .output()
            .unwrap();
        let seen: Value = serde_json::from_slice(&seen.stdout).unwrap();
        match seen["id"].as_str() {
            Some(id) => {
                d.run(&["reconcile", &key, "--found", id, "--note", "in its records"]);
            }
            None => {
                d.run(&[
                    "reconcile",
                    &key,
                    "--absent",
                    "--note",
                    "not in its records",
                ]);
                d.run(&["retry", &key]);
            }
        }
        assert_eq!(
            onboard(run, ""),
            Some(0),
            "{run}: finished after the reconcile"
        );
        assert_eq!(run_state(run)["state"], "done");
    }
    // one task per run step at each destination, and every run done
    let held = tasks();
    for (i, (step, _)) in STEPS.iter().enumerate() {
        for (run, _, _) in &runs {
            assert_eq!(
                held[i].get(&format!("{run}:{step}")),
                Some(&1),
                "{run}:{step}"
            );
        }
        assert!(held[i].values().all(|n| *n == 1), "{step}: {:?}", held[i]);
    }
    assert_eq!(held[0].get("left:create-customer"), Some(&1));
    assert_eq!(held[1].get("left:create-task"), None);
    // the one not rerun: stalled, listed, counted, its next step naming the missing one
    let stalled: Value =
        serde_json::from_str(&d.run(&["runs", "--where", "state:stalled", "--json"])).unwrap();
    let stalled = stalled.as_array().unwrap();
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    assert_eq!(stalled[0]["run"], "left");
    assert!(
        stalled[0]["next_step"]
            .as_str()
            .unwrap()
            .contains("create-task was never recorded"),
        "{stalled:?}"
    );
    let stats: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
    assert_eq!(stats["stalled_runs"], 1, "{stats}");
    let metrics = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let config = settle::Config::load(&d.config).unwrap();
            let ledger = settle::Ledger::open(&db.url, config).await.unwrap();
            let text = settle::metrics::scrape(&ledger, 0).await;
            ledger.close().await;
            text
        });
    assert!(
        metrics.contains("settle_runs_stalled{workflow=\"onboarding\"} 1"),
        "{metrics}"
    );
}

#[test]
fn drill_9_a_three_step_automation_killed_at_every_line_on_sqlite() {
    a_three_step_automation_killed_at_every_line(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn drill_9_a_three_step_automation_killed_at_every_line_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || a_three_step_automation_killed_at_every_line(&db))
        .await
        .unwrap();
}
