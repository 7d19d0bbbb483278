//! the protocol through the real binary, as a script follows it: `record`, `start`, send,
//! `attempt`. Exit 0 is the only answer that lets the script go on; every other answer stops it
//! with exit 3 and one line saying why, and `--json` says the same (`send`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Run, TestDb, settle_as};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_settle");

fn settle(db: &str, dir: &Path, args: &[&str]) -> Run {
    settle_as(db, dir, "script", args)
}

fn record(db: &str, dir: &Path, key: &str, payload: &str) -> Run {
    settle(
        db,
        dir,
        &[
            "record",
            "--key",
            key,
            "--workflow",
            "onboarding",
            "--destination",
            "projects",
            "--action",
            "create_task",
            "--payload",
            payload,
            "--json",
        ],
    )
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", r.stdout))
}

/// Exit 3, one line on stderr naming the reason, and (with `--json`) `send: false`.
fn stopped(r: &Run, why: &str) {
    assert_eq!(r.code, 3, "{why}: stderr {:?}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{:?}", r.stderr);
    assert!(r.stderr.contains(why), "{why}: {:?}", r.stderr);
    if !r.stdout.is_empty() {
        assert_eq!(json(r)["send"], false, "{why}");
    }
}

fn state(db: &str, dir: &Path, key: &str) -> String {
    let r = settle(db, dir, &["show", key, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json(&r)["state"].as_str().unwrap().to_string()
}

fn the_protocol(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let (d, db) = (dir.path(), db.url.as_str());

    // record, start, report: exit 0 each, and the start says which attempt to report
    let r = record(db, d, "onb-1", r#"{"title":"Kickoff"}"#);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r)["send"], true);
    assert_eq!(json(&r)["state"], "pending");
    assert_eq!(
        (
            json(&r)["done"].as_bool(),
            json(&r)["reference"].is_null(),
            json(&r)["run"].is_null()
        ),
        (Some(false), true, true),
        "every --json answer carries done, reference and run"
    );
    let r = settle(db, d, &["start", "--key", "onb-1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "1", "the attempt number, alone");
    let r = settle(
        db,
        d,
        &[
            "attempt",
            "--key",
            "onb-1",
            "--attempt",
            "1",
            "--outcome",
            "accepted",
            "--reference",
            "T-1",
            "--json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let answer = json(&r);
    assert_eq!(
        (answer["state"].as_str(), answer["attempt"].as_u64()),
        (Some("succeeded"), Some(1))
    );

    // a repeated record of a done key answers done with its reference (manual: Runs): exit 0, so a
    // rerun goes on to the next step, and send: false, so it sends nothing; start still stops
    let r = record(db, d, "onb-1", r#"{"title":"Kickoff"}"#);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let answer = json(&r);
    assert_eq!(
        (
            answer["done"].as_bool(),
            answer["send"].as_bool(),
            answer["reference"].as_str(),
            answer["state"].as_str()
        ),
        (Some(true), Some(false), Some("T-1"), Some("succeeded")),
        "{answer}"
    );
    let plain = settle(
        db,
        d,
        &[
            "record",
            "--key",
            "onb-1",
            "--workflow",
            "onboarding",
            "--destination",
            "projects",
            "--action",
            "create_task",
            "--payload",
            r#"{"title":"Kickoff"}"#,
        ],
    );
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert_eq!(
        plain.stdout.trim(),
        "onb-1: done (reference T-1): do not send; go on"
    );
    stopped(&settle(db, d, &["start", "--key", "onb-1"]), "is succeeded");
    // new contents under the done key are refused: the done step stands
    stopped(&record(db, d, "onb-1", r#"{"title":"Other"}"#), "succeeded");

    // (a) changed contents under a known key: exit 3, kept beside the old, never started
    assert_eq!(record(db, d, "onb-2", r#"{"title":"A"}"#).code, 0);
    stopped(&record(db, d, "onb-2", r#"{"title":"B"}"#), "conflict");
    assert_eq!(state(db, d, "onb-2"), "conflict");
    stopped(&settle(db, d, &["start", "--key", "onb-2"]), "is conflict");

    // (c) in flight elsewhere, claimed by a person, not due yet, workflow paused
    assert_eq!(record(db, d, "onb-3", "{}").code, 0);
    assert_eq!(settle(db, d, &["start", "--key", "onb-3"]).code, 0);
    let r = settle(db, d, &["start", "--key", "onb-3", "--json"]);
    stopped(&r, "is in_flight");
    assert_eq!(json(&r)["state"], "in_flight");

    assert_eq!(record(db, d, "onb-4", "{}").code, 0);
    assert_eq!(
        settle_as(db, d, "bob", &["claim", "onb-4"]).code,
        0,
        "a person claims it"
    );
    stopped(
        &settle(db, d, &["start", "--key", "onb-4"]),
        "claimed by bob",
    );

    assert_eq!(record(db, d, "onb-5", "{}").code, 0);
    assert_eq!(settle(db, d, &["start", "--key", "onb-5"]).code, 0);
    let r = settle(
        db,
        d,
        &[
            "attempt",
            "--key",
            "onb-5",
            "--outcome",
            "transient",
            "--retry-after",
            "1h",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(state(db, d, "onb-5"), "retry_wait");
    stopped(
        &settle(db, d, &["start", "--key", "onb-5"]),
        "not due until",
    );

    assert_eq!(record(db, d, "onb-6", "{}").code, 0);
    let r = settle_as(
        db,
        d,
        "bob",
        &["pause", "onboarding", "--reason", "vendor incident"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    stopped(
        &settle(db, d, &["start", "--key", "onb-6"]),
        "workflow onboarding is paused",
    );
    assert_eq!(
        state(db, d, "onb-6"),
        "pending",
        "a refusal changes nothing"
    );
    assert_eq!(settle_as(db, d, "bob", &["resume", "onboarding"]).code, 0);
    let r = settle_as(
        db,
        d,
        "bob",
        &[
            "pause",
            "--destination",
            "projects",
            "--reason",
            "token expired",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    stopped(
        &settle(db, d, &["start", "--key", "onb-6"]),
        "destination projects is paused",
    );
    let stats = json(&settle(db, d, &["stats", "--json"]));
    assert_eq!(
        stats["paused_destinations"],
        serde_json::json!(["projects"])
    );
    assert_eq!(
        settle_as(db, d, "bob", &["resume", "--destination", "projects"]).code,
        0
    );
    assert_eq!(settle(db, d, &["start", "--key", "onb-6"]).code, 0);

    // (d) twenty scripts start one operation at once: exactly one may send
    assert_eq!(record(db, d, "onb-7", "{}").code, 0);
    let children: Vec<_> = (0..20)
        .map(|_| {
            Command::new(BIN)
                .args(["--db", db, "--as", "script", "start", "--key", "onb-7"])
                .env("SETTLE_LOG_FILE", d.join("settle.log"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut started = Vec::new();
    let mut refused = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        match out.status.code() {
            Some(0) => started.push(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            Some(3) => refused += 1,
            other => panic!("{other:?}: {}", String::from_utf8_lossy(&out.stderr)),
        }
    }
    assert_eq!(started, vec!["1".to_string()], "exactly one start wins");
    assert_eq!(refused, 19);
    let shown = json(&settle(db, d, &["show", "onb-7", "--json"]));
    assert_eq!(shown["attempt_log"].as_array().unwrap().len(), 1);
}

/// `settle ingest FILE` of these lines, written to a file in `dir`.
fn ingest(db: &str, dir: &Path, name: &str, lines: &[Value]) -> Run {
    let file = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    settle(db, dir, &["ingest", file.to_str().unwrap()])
}

fn intent(key: &str, payload: Value) -> Value {
    serde_json::json!({"type": "intent", "key": key, "workflow": "onboarding",
        "destination": "projects", "action": "create_task", "payload": payload})
}

fn start(key: &str, n: u32) -> Value {
    serde_json::json!({"type": "start", "key": key, "attempt": n})
}

/// The protocol through JSON lines (acceptance 1e): a start line follows `settle start`'s rules,
/// a file of history re-ingested changes nothing, and of twenty callers starting one attempt at
/// once exactly one is let through.
fn the_protocol_through_ingest(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let (d, db) = (dir.path(), db.url.as_str());
    let history = [
        intent("ing-1", serde_json::json!({"title": "Kickoff"})),
        start("ing-1", 1),
        serde_json::json!({"type": "attempt", "key": "ing-1", "attempt": 1,
            "outcome": "accepted", "reference": "T-1"}),
    ];
    let r = ingest(db, d, "history.jsonl", &history);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("1 recorded, 0 unchanged, 0 conflict(s), 1 started, 1 attempt(s)"),
        "{}",
        r.stdout
    );
    assert_eq!(state(db, d, "ing-1"), "succeeded");
    // the same file again: nothing changes, nothing is refused
    let r = ingest(db, d, "history.jsonl", &history);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("0 recorded, 3 unchanged, 0 conflict(s), 0 started, 0 attempt(s)"),
        "{}",
        r.stdout
    );
    let shown = json(&settle(db, d, &["show", "ing-1", "--json"]));
    assert_eq!(shown["attempt_log"].as_array().unwrap().len(), 1);

    // (a) changed contents, then a start: the conflict is kept and the start refused
    assert_eq!(
        ingest(
            db,
            d,
            "a.jsonl",
            &[intent("ing-2", serde_json::json!({"t": "A"}))]
        )
        .code,
        0
    );
    let r = ingest(
        db,
        d,
        "b.jsonl",
        &[
            intent("ing-2", serde_json::json!({"t": "B"})),
            start("ing-2", 1),
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stdout.contains("1 conflict(s), 0 started"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("line 2: ") && r.stderr.contains("is conflict"),
        "{}",
        r.stderr
    );
    assert_eq!(state(db, d, "ing-2"), "conflict");

    // (c) succeeded, claimed, destination paused, a number out of turn: refused, nothing changes
    assert_eq!(
        ingest(
            db,
            d,
            "c.jsonl",
            &[
                intent("ing-4", serde_json::json!({})),
                intent("ing-5", serde_json::json!({}))
            ]
        )
        .code,
        0
    );
    assert_eq!(settle_as(db, d, "bob", &["claim", "ing-4"]).code, 0);
    let r = settle_as(
        db,
        d,
        "bob",
        &[
            "pause",
            "--destination",
            "projects",
            "--reason",
            "token rotation",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ingest(
        db,
        d,
        "d.jsonl",
        &[
            start("ing-1", 2),
            start("ing-4", 1),
            start("ing-5", 1),
            start("ing-5", 3),
        ],
    );
    assert_eq!(r.code, 3);
    for (line, why) in [
        (1, "is succeeded"),
        (2, "claimed by bob"),
        (3, "destination projects is paused"),
        (4, "attempt 3 cannot start"),
    ] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.starts_with(&format!("line {line}: ")) && l.contains(why)),
            "line {line}, {why}: {}",
            r.stderr
        );
    }
    assert_eq!(state(db, d, "ing-5"), "pending");
    assert_eq!(
        settle_as(db, d, "bob", &["resume", "--destination", "projects"]).code,
        0
    );

    // (d) twenty callers ingest the start of one attempt at once: exactly one starts it
    assert_eq!(
        ingest(db, d, "e.jsonl", &[intent("ing-7", serde_json::json!({}))]).code,
        0
    );
    let file = d.join("start.jsonl");
    std::fs::write(&file, format!("{}\n", start("ing-7", 1))).unwrap();
    let children: Vec<_> = (0..20)
        .map(|_| {
            Command::new(BIN)
                .args(["--db", db, "--as", "script", "ingest"])
                .arg(&file)
                .env("SETTLE_LOG_FILE", d.join("settle.log"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let (mut started, mut refused) = (0, 0);
    for c in children {
        let out = c.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        match out.status.code() {
            Some(0) if stdout.contains(" 1 started") => started += 1,
            Some(3) => {
                assert!(String::from_utf8_lossy(&out.stderr).contains("is in_flight"));
                refused += 1
            }
            other => panic!(
                "{other:?}: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    assert_eq!((started, refused), (1, 19), "exactly one start wins");
    assert_eq!(state(db, d, "ing-7"), "in_flight");
}

#[test]
fn the_protocol_through_ingest_on_sqlite() {
    the_protocol_through_ingest(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn the_protocol_through_ingest_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || the_protocol_through_ingest(&db))
        .await
        .unwrap();
}

#[test]
fn the_protocol_on_sqlite() {
    the_protocol(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn the_protocol_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || the_protocol(&db))
        .await
        .unwrap();
}

/// Runs: a step names its run when it is recorded (`record --run`, `"run"` in a JSON line),
/// every answer carries it, and it never changes after.
fn a_step_names_its_run(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let (d, db) = (dir.path(), db.url.as_str());
    let with_run = |key: &str, run: &str| {
        settle(
            db,
            d,
            &[
                "record",
                "--key",
                key,
                "--workflow",
                "onboarding",
                "--step",
                "create-customer",
                "--destination",
                "crm",
                "--action",
                "upsert",
                "--payload",
                "{}",
                "--run",
                run,
                "--json",
            ],
        )
    };
    let r = with_run("onb-42:create-customer", "onb-42");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r)["run"], "onb-42");
    let shown = json(&settle(
        db,
        d,
        &["show", "onb-42:create-customer", "--json"],
    ));
    assert_eq!(shown["run"], "onb-42", "{shown}");

    // the same step again: with its run, or without naming one, nothing changes
    let r = with_run("onb-42:create-customer", "onb-42");
    assert_eq!((r.code, json(&r)["run"].as_str()), (0, Some("onb-42")));
    let r = settle(
        db,
        d,
        &[
            "record",
            "--key",
            "onb-42:create-customer",
            "--workflow",
            "onboarding",
            "--step",
            "create-customer",
            "--destination",
            "crm",
            "--action",
            "upsert",
            "--payload",
            "{}",
            "--json",
        ],
    );
    assert_eq!(
        (r.code, json(&r)["run"].as_str()),
        (0, Some("onb-42")),
        "{}",
        r.stderr
    );
    // another run, or a run given later, is refused and changes nothing
    stopped(
        &with_run("onb-42:create-customer", "onb-43"),
        "belongs to run onb-42, not onb-43",
    );
    assert_eq!(record(db, d, "no-run", "{}").code, 0);
    stopped(&with_run("no-run", "onb-44"), "recorded without a run");
    let shown = json(&settle(db, d, &["show", "no-run", "--json"]));
    assert!(shown["run"].is_null(), "{shown}");

    // settle run show: the run's state, its safe next step and its steps
    let r = settle(db, d, &["run", "show", "onb-42", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let run = json(&r);
    assert_eq!(
        (
            run["run"].as_str(),
            run["state"].as_str(),
            run["steps"][0]["step"].as_str()
        ),
        (Some("onb-42"), Some("running"), Some("create-customer")),
        "{run}"
    );
    let r = settle(db, d, &["run", "show", "onb-42"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("state        running") && r.stdout.contains("… create-customer"),
        "{}",
        r.stdout
    );
    let r = settle(db, d, &["run", "show", "nobody"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no run nobody"), "{}", r.stderr);

    // a run id follows the key's rules
    let r = with_run("onb-45:x", "onb 45");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("bad run"), "{}", r.stderr);
    let r = with_run("onb-46:x", "card-4111111111111111");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("bad run") && !r.stderr.contains("4111111111111111"),
        "{}",
        r.stderr
    );

    // a JSON line names it too; a start line may not
    let mut line = intent("onb-47:create-customer", serde_json::json!({}));
    line["run"] = "onb-47".into();
    let mut bad_start = start("onb-47:create-customer", 1);
    bad_start["run"] = "onb-47".into();
    let r = ingest(db, d, "runs.jsonl", &[line, bad_start]);
    assert_eq!(r.code, 2, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("line 2") && r.stderr.contains("run"),
        "{}",
        r.stderr
    );
    let shown = json(&settle(
        db,
        d,
        &["show", "onb-47:create-customer", "--json"],
    ));
    assert_eq!(shown["run"], "onb-47", "{shown}");
}

#[test]
fn a_step_names_its_run_on_sqlite() {
    a_step_names_its_run(&common::sqlite());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn a_step_names_its_run_on_postgres() {
    let db = common::postgres().await;
    tokio::task::spawn_blocking(move || a_step_names_its_run(&db))
        .await
        .unwrap();
}
