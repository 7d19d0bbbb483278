//! Each long-running process serves its own counters and histograms (manual: Metrics): work
//! driven through `settle dispatch --metrics`, `settle serve --http --metrics` and `settle serve
//! --metrics` alone, and the counts read back from their `/metrics` equal what was done (the
//! attempts the ledger recorded, by outcome; the HTTP requests the client sent, by route and
//! code). A dispatcher that stops cleanly is no longer listed; one that goes silent is listed
//! as down, then forgotten.

mod common;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::api::{ApiServer, TOOL, config_text, tool_automation};
use common::{Killed, Sim, TestDb};
use serde_json::{Value, json};

type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

async fn scrape(base: &str) -> (String, Samples) {
    let r = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let samples = common::parse_prometheus(&text);
    (text, samples)
}

/// The sum of a family's samples whose labels include these.
fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

/// Starts `settle ARGS` in the background; the process and the metrics' base URL from the
/// first line it prints (`WHO: metrics on http://ADDR/metrics`).
fn start(d: &common::Drill, args: &[&str]) -> (Killed, String) {
    let mut child = d
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let base = line
        .trim()
        .split_once(": metrics on ")
        .unwrap_or_else(|| panic!("the first line names the metrics: {line:?}"))
        .1
        .trim_end_matches("/metrics")
        .to_string();
    (Killed(child), base)
}

/// `settle dispatch --metrics`: its attempts by destination and outcome equal the attempts the
/// ledger recorded; its histogram counts each; stopped cleanly, it is no longer listed.
async fn dispatch_counts_the_attempts_it_recorded(db: &TestDb) {
    let ok = Sim::start(&[]);
    let rejecting = Sim::start(&["--fault", "reject"]);
    let d = common::drill(
        db,
        &ok,
        true,
        false,
        &format!(
            "[destinations.rejecting]\nurl = \"{}/tasks\"\ndedupes = true\nkey_retention = \"1h\"\nmax_attempts = 2\n",
            rejecting.base
        ),
    );
    for i in 0..12 {
        d.record(&format!("ok-{i}"));
    }
    for i in 0..5 {
        d.run(&[
            "record",
            "--key",
            &format!("no-{i}"),
            "--workflow",
            "counted-dispatch",
            "--destination",
            "rejecting",
            "--action",
            "create_task",
            "--payload",
            "{}",
        ]);
    }
    let (mut dispatcher, base) = start(&d, &["dispatch", "--metrics", "127.0.0.1:0"]);
    let mut settled = false;
    for _ in 0..200 {
        let stats: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
        let moving: i64 = ["pending", "retry_wait", "in_flight"]
            .iter()
            .map(|s| stats["by_state"][s].as_i64().unwrap_or(0))
            .sum();
        if moving == 0 {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(settled, "the dispatcher settles every operation");
    // the attempts as the ledger recorded them, by destination and outcome
    let mut recorded: BTreeMap<(String, String), f64> = BTreeMap::new();
    let list: Value = serde_json::from_str(&d.run(&["list", "--json", "--all"])).unwrap();
    for op in list.as_array().unwrap() {
        let key = op["key"].as_str().unwrap();
        let shown: Value = serde_json::from_str(&d.run(&["show", key, "--json"])).unwrap();
        for a in shown["attempt_log"].as_array().unwrap() {
            let dest = shown["destination"].as_str().unwrap().to_string();
            let outcome = a["outcome"].as_str().unwrap().to_string();
            *recorded.entry((dest, outcome)).or_default() += 1.0;
        }
    }
    assert!(recorded.len() >= 2, "accepted and rejected: {recorded:?}");
    let (text, samples) = scrape(&base).await;
    let mut counted: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (n, l, v) in &samples {
        if n == "settle_attempts_total" {
            counted.insert((l["destination"].clone(), l["outcome"].clone()), *v);
        }
    }
    assert_eq!(counted, recorded, "{text}");
    for dest in ["tasks", "rejecting"] {
        let sent: f64 = recorded
            .iter()
            .filter(|((d, _), _)| d == dest)
            .map(|(_, n)| n)
            .sum();
        let timed = value(
            &samples,
            "settle_attempt_duration_seconds_count",
            &[("destination", dest)],
        );
        assert_eq!(timed, sent, "{dest}: {text}");
    }
    assert_eq!(
        value(
            &samples,
            "settle_exceptions_opened_total",
            &[("workflow", "counted-dispatch"), ("state", "rejected")]
        ),
        5.0,
        "{text}"
    );
    assert_eq!(value(&samples, "settle_database_up", &[]), 1.0);
    assert_eq!(
        value(&samples, "settle_dispatchers_alive", &[]),
        1.0,
        "{text}"
    );
    let listed = |d: &common::Drill| -> usize {
        let stats: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
        stats["dispatchers"].as_array().unwrap().len()
    };
    assert_eq!(listed(&d), 1);
    // SIGTERM: it finishes, and says it is gone
    let _ = Command::new("kill")
        .arg(dispatcher.pid().to_string())
        .status();
    let status = dispatcher.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        listed(&d),
        0,
        "a dispatcher stopped cleanly is no longer listed"
    );
}

/// `settle serve --http --metrics`: its requests by route and code equal what the client was
/// answered, each timed; the gateway's answers and its attempt counted.
async fn serve_http_counts_the_requests_it_answered(db: &TestDb) {
    let sim = Sim::start(&[]);
    let extra = format!(
        "{}[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = true\nkey_retention = \"1h\"\n",
        tool_automation(),
        sim.base
    );
    let s = ApiServer::start_with(&db.url, &config_text(&extra), &["--metrics", "127.0.0.1:0"]);
    let metrics = s.metrics.clone().expect("the metrics' address is printed");
    let client = reqwest::Client::new();
    let mut sent: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut note = |route: &str, status: reqwest::StatusCode| {
        *sent
            .entry((route.to_string(), status.as_u16().to_string()))
            .or_default() += 1.0;
    };
    for i in 0..3 {
        let body = json!({"key": format!("http-{i}"), "workflow": "onboarding", "step": "s",
            "destination": "crm", "action": "a", "payload": {}});
        let r = client
            .post(format!("{}/v1/operations", s.base))
            .bearer_auth(TOOL)
            .json(&body)
            .send()
            .await
            .unwrap();
        note("/v1/operations", r.status());
    }
    for key in ["http-0", "http-1", "nothing-here"] {
        let r = client
            .get(format!("{}/v1/operations/{key}", s.base))
            .bearer_auth(TOOL)
            .send()
            .await
            .unwrap();
        note("/v1/operations/{key}", r.status());
    }
    let r = client
        .get(format!("{}/v1/operations", s.base))
        .send()
        .await
        .unwrap();
    note("/v1/operations", r.status());
    let r = client
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap();
    note("/healthz", r.status());
    let mut answers = Vec::new();
    for _ in 0..2 {
        let r = client
            .post(format!("{}/gateway/tasks/create_task", s.base))
            .bearer_auth(TOOL)
            .header("idempotency-key", "gw-counted-1")
            .json(&json!({"title": "welcome"}))
            .send()
            .await
            .unwrap();
        note("/gateway/{destination}/{action}", r.status());
        answers.push(r.headers().get("settle-replayed").is_some());
    }
    assert_eq!(answers, [false, true], "sent, then replayed");
    assert!(sent.len() >= 6, "several routes and codes: {sent:?}");
    let (text, samples) = scrape(&metrics).await;
    let mut counted: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (n, l, v) in &samples {
        if n == "settle_http_requests_total" {
            counted.insert((l["route"].clone(), l["code"].clone()), *v);
        }
    }
    assert_eq!(counted, sent, "{text}");
    for route in ["/v1/operations", "/v1/operations/{key}", "/healthz"] {
        let answered: f64 = sent
            .iter()
            .filter(|((r, _), _)| r == route)
            .map(|(_, n)| n)
            .sum();
        let timed = value(
            &samples,
            "settle_http_request_duration_seconds_count",
            &[("route", route)],
        );
        assert_eq!(timed, answered, "{route}: {text}");
    }
    for answer in ["sent", "replayed"] {
        let n = value(
            &samples,
            "settle_gateway_answers_total",
            &[("destination", "tasks"), ("answer", answer)],
        );
        assert_eq!(n, 1.0, "{answer}: {text}");
    }
    assert_eq!(
        value(
            &samples,
            "settle_attempts_total",
            &[("destination", "tasks"), ("outcome", "accepted")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &samples,
            "settle_attempt_duration_seconds_count",
            &[("destination", "tasks")]
        ),
        1.0
    );
}

/// `settle serve --metrics ADDR` alone: the metrics and nothing else (no console over SSH), the
/// ledger's gauges as work lands.
async fn serve_metrics_alone_serves_the_ledger(db: &TestDb) {
    let sim = Sim::start(&[]);
    let d = common::drill(db, &sim, true, false, "");
    let (_serve, base) = start(&d, &["serve", "--metrics", "127.0.0.1:0"]);
    for i in 0..4 {
        d.record(&format!("alone-{i}"));
    }
    let (text, samples) = scrape(&base).await;
    assert_eq!(
        value(&samples, "settle_operations", &[("state", "pending")]),
        4.0,
        "{text}"
    );
    assert_eq!(value(&samples, "settle_operations_due", &[]), 4.0, "{text}");
    assert_eq!(
        value(&samples, "settle_dispatchers_alive", &[]),
        0.0,
        "{text}"
    );
    assert_eq!(value(&samples, "settle_database_up", &[]), 1.0, "{text}");
    assert!(
        text.contains("# TYPE settle_http_requests_total counter"),
        "{text}"
    );
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
}

/// A dispatcher heard from within 30 s is up; silent longer, it is listed as down until
/// `dispatcher_gone_after` (10m), then forgotten; one that stops cleanly goes at once.
async fn dispatchers_come_and_go_without_lingering(db: &TestDb) {
    let t0: DateTime<Utc> = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let clock = Arc::new(Mutex::new(t0));
    let c = clock.clone();
    let l = settle::Ledger::open(&db.url, common::config())
        .await
        .unwrap()
        .with_clock(move || *c.lock().unwrap());
    l.rounds().heartbeat("host-1").await.unwrap();
    let at = |secs: i64| *clock.lock().unwrap() = t0 + TimeDelta::seconds(secs);
    let gauges = |text: &str| {
        let s = common::parse_prometheus(text);
        (
            value(&s, "settle_dispatcher_up", &[("name", "host-1")]),
            value(&s, "settle_dispatchers_alive", &[]),
            text.contains("name=\"host-1\""),
        )
    };
    at(10);
    assert_eq!(
        gauges(&settle::metrics::scrape(&l, 0).await),
        (1.0, 1.0, true)
    );
    at(60);
    assert_eq!(
        gauges(&settle::metrics::scrape(&l, 0).await),
        (0.0, 0.0, true)
    );
    let stats = l.read().stats().await.unwrap();
    assert_eq!(stats.dispatchers.len(), 1);
    assert_eq!(stats.dispatchers[0].seen_seconds, 60);
    at(11 * 60);
    assert_eq!(
        gauges(&settle::metrics::scrape(&l, 0).await),
        (0.0, 0.0, false)
    );
    // a new one's heartbeat clears what was forgotten; its clean stop removes it
    l.rounds().heartbeat("host-2").await.unwrap();
    assert_eq!(l.read().stats().await.unwrap().dispatchers.len(), 1);
    l.rounds().stopped("host-2").await.unwrap();
    assert!(l.read().stats().await.unwrap().dispatchers.is_empty());
    l.close().await;
}

/// `due` (and `settle_operations_due`): the operations of the HTTP destinations a dispatcher
/// would start now, summed over the destinations; never one claimed, one of a paused workflow
/// or destination, one due later, nor one of a destination the dispatcher cannot send to.
async fn due_counts_what_a_dispatcher_would_start(db: &TestDb) {
    let config = settle::Config::parse(
        "[destinations.a]\nurl = \"http://127.0.0.1:9/a\"\n[destinations.b]\nurl = \"http://127.0.0.1:9/b\"\n[destinations.manual]\n",
        "test",
    )
    .unwrap();
    let l = settle::Ledger::open(&db.url, config).await.unwrap();
    let put = |key: &str, workflow: &str, dest: &str| settle::Intent {
        key: key.into(),
        workflow: workflow.into(),
        step: "s".into(),
        destination: dest.into(),
        action: "create".into(),
        payload: json!({}),
        run: None,
    };
    for (key, workflow, dest) in [
        ("a-1", "w", "a"),
        ("a-2", "w", "a"),
        ("b-1", "w", "b"),
        ("b-2", "other", "b"),
        ("m-1", "w", "manual"),
        ("claimed", "w", "a"),
    ] {
        l.record(&put(key, workflow, dest), "bot").await.unwrap();
    }
    assert_eq!(l.read().stats().await.unwrap().due, 5);
    l.staff()
        .act(
            "claimed",
            "alice",
            settle::StaffAction::Claim { force_reason: None },
        )
        .await
        .unwrap();
    assert_eq!(l.read().stats().await.unwrap().due, 4);
    l.staff()
        .pause_one(settle::ledger::Pausable::Workflow, "other", "hold", "alice")
        .await
        .unwrap();
    assert_eq!(l.read().stats().await.unwrap().due, 3);
    l.staff()
        .pause_one(settle::ledger::Pausable::Destination, "b", "hold", "alice")
        .await
        .unwrap();
    assert_eq!(l.read().stats().await.unwrap().due, 2);
    let text = settle::metrics::scrape(&l, 0).await;
    assert!(text.contains("\nsettle_operations_due 2\n"), "{text}");
    // one started and answered unknown is not due: a person holds it
    l.report_attempt(
        &settle::AttemptReport {
            key: "a-1".into(),
            outcome: Some(settle::Outcome::Unknown),
            ..Default::default()
        },
        "bot",
    )
    .await
    .unwrap();
    assert_eq!(l.read().stats().await.unwrap().due, 1);
    l.close().await;
}

both_backends!(
    due_counts_what_a_dispatcher_would_start,
    dispatch_counts_the_attempts_it_recorded,
    serve_http_counts_the_requests_it_answered,
    serve_metrics_alone_serves_the_ledger,
    dispatchers_come_and_go_without_lingering
);
