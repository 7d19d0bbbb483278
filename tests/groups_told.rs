//! Groups and messages that mean exactly what they say (manual: Owners and notifications),
//! through the real binary on both backends, told to a webhook receiver: a group's filter lists
//! exactly its items, kinds stay apart (an HTTP status, punctuation), the owning team reaches the
//! workflow's series on `/metrics`, what was settled before it
//! was told is not told, a growing group's message says its new items and the group's, a group
//! past both aging levels is told once at the higher, messages arrive in the ledger's order
//! saying who paused, a clean stop hands the sender's lease over, and a process without a
//! channel's variable says so and leaves the sending to one that has it.

mod common;

use std::time::{Duration, Instant};

use common::TestDb;
use common::receivers::HttpReceiver;
use serde_json::Value;

/// A config whose team `ops` owns every workflow and is told through the webhook `hook`.
fn config(extra: &str) -> String {
    format!(
        r#"
[destinations.crm]
[defaults]
owner = "ops"
[teams.ops]
members = ["alice"]
notify = ["hook"]
[channels.hook]
kind = "webhook"
url_env = "SETTLE_T_HOOK"
[workflows.crm-sync]
{extra}
"#
    )
}

/// `settle ARGS` in the background with the hook's URL (unless `without_hook`), killed when
/// dropped, and the URL of its metrics (from its first line).
fn start(
    d: &common::Drill,
    args: &[&str],
    hook: Option<&HttpReceiver>,
) -> (common::Killed, String) {
    use std::io::BufRead;
    let mut cmd = d.cmd(args);
    match hook {
        Some(h) => cmd.env("SETTLE_T_HOOK", &h.url),
        None => cmd.env_remove("SETTLE_T_HOOK"),
    };
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let url = line
        .split_once("metrics on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .1
        .trim()
        .to_string();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (common::Killed(child), url)
}

fn sender(d: &common::Drill, hook: &HttpReceiver) -> (common::Killed, String) {
    start(d, &["serve", "--metrics", "127.0.0.1:0"], Some(hook))
}

/// `key` recorded in `workflow` at `crm` and its attempt reported by the automation.
fn exception(d: &common::Drill, key: &str, workflow: &str, outcome: &str, error: &str) {
    d.run(&[
        "record",
        "--key",
        key,
        "--workflow",
        workflow,
        "--destination",
        "crm",
        "--action",
        "create",
        "--payload",
        &format!(r#"{{"n":"{key}"}}"#),
    ]);
    d.run(&[
        "attempt",
        "--key",
        key,
        "--outcome",
        outcome,
        "--error",
        error,
    ]);
}

fn json(d: &common::Drill, args: &[&str]) -> Value {
    serde_json::from_str(&d.run(args)).unwrap()
}

/// The documents the hook got of `kind`, in the order it got them.
fn told(hook: &HttpReceiver, kind: &str) -> Vec<Value> {
    hook.documents()
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect()
}

/// Each group's filter (from `groups --json` and from its message) lists exactly
/// its items; an HTTP status and a comma are kept apart.
async fn a_groups_filter_lists_exactly_its_items(db: &TestDb) {
    let hook = HttpReceiver::start(None);
    let d = common::drill_with(
        &db.url,
        &format!("{}\n[notify]\ngroup_window = \"1s\"\n", config("")),
    );
    d.run(&["init"]);
    for i in 0..5 {
        exception(
            &d,
            &format!("t-{i}"),
            "billing",
            "unknown",
            &format!("read timeout after {}s", 30 + i),
        );
    }
    for i in 0..3 {
        exception(
            &d,
            &format!("r-{i}"),
            "billing",
            "unknown",
            "connection reset by peer",
        );
    }
    exception(&d, "s-422", "billing", "rejected", "HTTP 422: invalid");
    exception(&d, "s-500", "billing", "rejected", "HTTP 500: invalid");
    exception(
        &d,
        "c-1",
        "billing",
        "rejected",
        r#"{"amount":1,"currency":"EUR"}"#,
    );
    let groups = json(&d, &["groups", "--json"]);
    let groups = groups.as_array().unwrap();
    assert_eq!(groups.len(), 5, "{groups:#?}");
    for g in groups {
        let listed = json(
            &d,
            &["list", "--where", g["filter"].as_str().unwrap(), "--json"],
        );
        assert_eq!(
            listed.as_array().unwrap().len() as i64,
            g["count"].as_i64().unwrap(),
            "{g}"
        );
        assert!(
            g["filter"]
                .as_str()
                .unwrap()
                .contains(&format!("group:{}", g["id"].as_str().unwrap()))
        );
    }
    let reasons: Vec<&str> = groups
        .iter()
        .map(|g| g["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons.contains(&"HTTP 422: invalid") && reasons.contains(&"HTTP 500: invalid"),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&r#"{"amount":N,"currency":"EUR"}"#),
        "{reasons:?}"
    );
    // the messages' own filters list exactly what each tells of
    let s = sender(&d, &hook);
    common::wait_until("five groups told", Duration::from_secs(30), || {
        told(&hook, "queue").len() == 5
    });
    // the owning team reaches Prometheus on the workflow's series
    let scraped = reqwest::get(&s.1).await.unwrap().text().await.unwrap();
    let series: Vec<&str> = scraped
        .lines()
        .filter(|l| l.starts_with("settle_exceptions{") && l.contains("workflow=\"billing\""))
        .collect();
    assert!(
        !series.is_empty() && series.iter().all(|l| l.contains("team=\"ops\"")),
        "{scraped}"
    );
    for m in told(&hook, "queue") {
        let open = m["open"].as_str().unwrap();
        let filter = open
            .trim_start_matches("settle list --where '")
            .trim_end_matches('\'');
        let listed = json(&d, &["list", "--where", filter, "--json"]);
        assert_eq!(
            listed.as_array().unwrap().len() as i64,
            m["count"].as_i64().unwrap(),
            "{m}"
        );
    }
}

/// What a person settled inside the window is not told; a growing group's
/// message says the new items and the group's, its oldest the group's.
async fn what_is_told_is_what_is_open(db: &TestDb) {
    let hook = HttpReceiver::start(None);
    let d = common::drill_with(
        &db.url,
        &format!(
            "{}\n[notify]\ngroup_window = \"3s\"\nrepeat = \"2s\"\n",
            config("")
        ),
    );
    d.run(&["init"]);
    let _s = sender(&d, &hook);
    // settled inside its window: the rejection corrected by a person
    exception(&d, "bill-2", "billing", "rejected", "HTTP 422: no");
    d.run(&[
        "correct",
        "bill-2",
        "--set",
        "n=\"fixed\"",
        "--note",
        "typo",
    ]);
    // a group that grows: two, told; seven more, told with the group's nine
    exception(&d, "g-1", "signup", "unknown", "read timeout after 30s");
    exception(&d, "g-2", "signup", "unknown", "read timeout after 31s");
    common::wait_until("the first told", Duration::from_secs(30), || {
        !told(&hook, "queue").is_empty()
    });
    std::thread::sleep(Duration::from_secs(3));
    for i in 3..=9 {
        exception(
            &d,
            &format!("g-{i}"),
            "signup",
            "unknown",
            "read timeout after 32s",
        );
    }
    common::wait_until("the growth told", Duration::from_secs(30), || {
        told(&hook, "queue").len() >= 2
    });
    std::thread::sleep(Duration::from_secs(4));
    let queue = told(&hook, "queue");
    assert!(
        queue.iter().all(|m| m["workflow"] != "billing"),
        "a settled exception is not told: {queue:#?}"
    );
    assert_eq!(queue.len(), 2, "{queue:#?}");
    assert_eq!(
        (&queue[0]["count"], &queue[0]["group_count"]),
        (&2.into(), &2.into())
    );
    // seven new (more than the five keys a message names), nine open
    assert_eq!(
        (&queue[1]["count"], &queue[1]["group_count"]),
        (&7.into(), &9.into())
    );
    assert_eq!(queue[1]["keys"].as_array().unwrap().len(), 5);
    assert!(
        queue[1]["oldest_seconds"].as_i64().unwrap() >= 3,
        "the group's oldest: {}",
        queue[1]
    );
    let body = hook.received().last().unwrap().body.clone();
    assert!(body.contains("\"group_count\":9"), "{body}");
}

/// A group that passes both aging levels in one window is told once, at the higher,
/// whatever the turns (the warning of 14 items arriving over a second is not split either).
async fn a_group_past_both_levels_is_told_once(db: &TestDb) {
    let hook = HttpReceiver::start(None);
    let d = common::drill_with(
        &db.url,
        &format!(
            "warn_after = \"2s\"\ncritical_after = \"3s\"\n{}\n[notify]\ngroup_window = \"2s\"\n",
            config("")
        ),
    );
    d.run(&["init"]);
    let _s = sender(&d, &hook);
    // a backlog of 14, arriving together
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..14 {
        lines.push_str(&format!(
            "{{\"type\":\"intent\",\"key\":\"a-{i}\",\"workflow\":\"billing\",\"step\":\"s\",\"destination\":\"crm\",\"action\":\"create\",\"payload\":{{\"n\":{i}}}}}\n\
             {{\"type\":\"attempt\",\"key\":\"a-{i}\",\"attempt\":1,\"outcome\":\"unknown\",\"error\":\"read timeout after {i}s\"}}\n"
        ));
    }
    let file = dir.path().join("backlog.jsonl");
    std::fs::write(&file, lines).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    common::wait_until("the aging told", Duration::from_secs(30), || {
        !told(&hook, "aging").is_empty()
    });
    std::thread::sleep(Duration::from_secs(5));
    let aging = told(&hook, "aging");
    assert_eq!(aging.len(), 1, "{aging:#?}");
    assert_eq!(
        (&aging[0]["level"], &aging[0]["count"]),
        (&"critical".into(), &14.into())
    );
}

/// A pause and a resume a moment apart arrive in that order, each with its
/// place and who did it; a sender stopped cleanly hands its lease over at once; a process
/// without the channel's variable says so and sends nothing, one with it sends.
async fn order_handover_and_a_missing_variable(db: &TestDb) {
    let hook = HttpReceiver::start(None);
    let d = common::drill_with(
        &db.url,
        &format!("{}\n[notify]\ngroup_window = \"1s\"\n", config("")),
    );
    d.run(&["init"]);
    exception(&d, "p-1", "crm-sync", "unknown", "read timeout after 30s");
    // a dispatcher without the variable: it says so, and sends nothing
    let mut lacking = start(&d, &["dispatch", "--metrics", "127.0.0.1:0"], None);
    std::thread::sleep(Duration::from_secs(3));
    let _ = lacking.0.0.kill();
    let _ = lacking.0.0.wait();
    let mut err = String::new();
    use std::io::Read;
    lacking
        .0
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("hook: the variable SETTLE_T_HOOK (its URL) is not set"),
        "{err}"
    );
    let failed = json(&d, &["notifications", "--json"]);
    assert!(
        failed.as_array().unwrap().iter().all(|m| m["tries"] == 0),
        "nothing was tried: {failed}"
    );
    let mut first = sender(&d, &hook);
    common::wait_until("told", Duration::from_secs(20), || {
        !told(&hook, "queue").is_empty()
    });
    d.run(&["pause", "crm-sync", "--reason", "maintenance"]);
    d.run(&["resume", "crm-sync"]);
    common::wait_until("both told", Duration::from_secs(20), || {
        !told(&hook, "paused").is_empty() && !told(&hook, "resumed").is_empty()
    });
    let docs = hook.documents();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["queue", "paused", "resumed"], "{docs:#?}");
    let seqs: Vec<i64> = docs.iter().map(|d| d["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "{seqs:?}");
    assert_eq!(told(&hook, "paused")[0]["by"], "alice");
    // a clean stop hands the lease over: the next sender tells at once, not in 30 s
    let stopped = std::process::Command::new("kill")
        .arg(first.0.pid().to_string())
        .status()
        .unwrap();
    assert!(stopped.success());
    let _ = first.0.0.wait();
    let _second = sender(&d, &hook);
    let began = Instant::now();
    exception(&d, "p-2", "other", "unknown", "connection reset by peer");
    common::wait_until("told by the next sender", Duration::from_secs(60), || {
        told(&hook, "queue").len() >= 2
    });
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
}

/// What was left open when owners and corrections landed: a destination's pause is told to the
/// teams with work there only; `runs --where owner:` is answered; the list says a corrected
/// original's correction answers for it; a prune takes the messages done with.
async fn what_was_left_open(db: &TestDb) {
    let (ops_hook, other_hook) = (HttpReceiver::start(None), HttpReceiver::start(None));
    let d = common::drill_with(
        &db.url,
        r#"
[destinations.crm]
[destinations.erp]
[retention]
succeeded = "1s"
closed = "1s"
[teams.ops]
notify = ["hook"]
[teams.finance]
notify = ["money"]
[channels.hook]
kind = "webhook"
url_env = "SETTLE_T_HOOK"
[channels.money]
kind = "webhook"
url_env = "SETTLE_T_MONEY"
[workflows.signup]
owner = "ops"
steps = ["a", "b"]
[workflows.billing]
owner = "finance"
[notify]
group_window = "1s"
"#,
    );
    d.run(&["init"]);
    // work at crm for ops only; finance's is at erp
    d.run(&[
        "record",
        "--key",
        "s-1",
        "--workflow",
        "signup",
        "--step",
        "a",
        "--run",
        "run-1",
        "--destination",
        "crm",
        "--action",
        "create",
        "--payload",
        "{\"n\":1}",
    ]);
    d.run(&[
        "record",
        "--key",
        "b-1",
        "--workflow",
        "billing",
        "--destination",
        "erp",
        "--action",
        "create",
        "--payload",
        "{\"email\":\"none\"}",
    ]);
    let mut cmd = d.cmd(&["serve", "--metrics", "127.0.0.1:0"]);
    cmd.env("SETTLE_T_HOOK", &ops_hook.url)
        .env("SETTLE_T_MONEY", &other_hook.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let _sender = common::Killed(child);
    d.run(&["pause", "--destination", "crm", "--reason", "their outage"]);
    common::wait_until("ops told", Duration::from_secs(20), || {
        !told(&ops_hook, "paused").is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        told(&other_hook, "paused").is_empty(),
        "finance has no work at crm"
    );
    // its breaker opened and closed: the same owners told, each once
    d.run(&["breaker", "open", "crm", "--reason", "their maintenance"]);
    d.run(&["breaker", "close", "crm", "--reason", "maintenance over"]);
    common::wait_until("ops told of the breaker", Duration::from_secs(20), || {
        !told(&ops_hook, "breaker_closed").is_empty()
    });
    let opened = told(&ops_hook, "breaker_open");
    assert_eq!(opened.len(), 1, "{opened:#?}");
    assert_eq!(opened[0]["destination"], "crm");
    assert_eq!(opened[0]["reason"], "their maintenance");
    assert!(told(&other_hook, "breaker_open").is_empty());
    // runs by owner
    let runs = json(&d, &["runs", "--where", "owner:ops", "--json"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let none = json(&d, &["runs", "--where", "owner:finance", "--json"]);
    assert!(none.as_array().unwrap().is_empty(), "{none}");
    // a corrected original, as the list says it
    d.run(&[
        "attempt",
        "--key",
        "b-1",
        "--outcome",
        "rejected",
        "--error",
        "HTTP 422: email",
    ]);
    d.run(&[
        "correct",
        "b-1",
        "--set",
        "email=\"a@b.example\"",
        "--note",
        "fixed",
    ]);
    let all = json(&d, &["list", "--all", "--where", "key:b-1", "--json"]);
    let step = all[0]["next_step"].as_str().unwrap();
    assert!(step.contains("corrected as b-1:c2"), "{step}");
    // the messages done with, pruned past retention
    common::wait_until("told", Duration::from_secs(20), || {
        let m = json(&d, &["notifications", "--json"]);
        !m.as_array().unwrap().is_empty()
            && m.as_array().unwrap().iter().all(|m| m["status"] == "sent")
    });
    std::thread::sleep(Duration::from_secs(2));
    let pruned = d.run(&["prune"]);
    assert!(pruned.contains("message(s) to the owners"), "{pruned}");
    let left = json(&d, &["notifications", "--json"]);
    assert!(
        left.as_array()
            .unwrap()
            .iter()
            .all(|m| m["status"] == "pending"),
        "{left}"
    );
}

both_backends!(
    a_groups_filter_lists_exactly_its_items,
    what_is_told_is_what_is_open,
    a_group_past_both_levels_is_told_once,
    order_handover_and_a_missing_variable,
    what_was_left_open
);
