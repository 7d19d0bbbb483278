//! The blind-retry drill: a client that retries every error and timeout
//! five times at once, as an automation tool's "retry on fail" does, sends 500 operations
//! through the gateway to a `settle sim --no-dedupe` with 20% seeded faults (drop, late, error).
//! Counted at the simulator: at most one task per key. Every key is succeeded, with the client
//! holding its reference, or an exception with its state; staff reconcile the unknowns from the
//! simulator's own records (`reconcile --from`), and a last round of the client's retries gets
//! replays, the simulator still holding one task per key. On both backends.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::api::{ApiServer, TOOL, config_text, tool_automation};
use common::checker::{self, Destination};
use common::{Sim, TestDb, env_count};
use serde_json::{Value, json};

/// What one operation's client saw: the reference it holds (from a 2xx), and its requests.
#[derive(Debug, Default)]
struct Seen {
    reference: Option<String>,
    replayed: bool,
    requests: usize,
    statuses: Vec<u16>,
}

/// One request as the tool makes it: its status, the `id` of a 2xx body, and whether it was a
/// replay; `None` when the tool's own timeout came first.
async fn once(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
) -> Option<(u16, Option<String>, bool)> {
    let resp = client
        .post(format!("{base}/gateway/tasks/create_task"))
        .bearer_auth(TOOL)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    let replayed = resp.headers().get("settle-replayed").is_some();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    let id = v["id"].as_str().map(str::to_string);
    Some((status, id, replayed))
}

/// The tool's "retry on fail": one request; on an error or a timeout, five at once.
async fn blind(client: reqwest::Client, base: String, key: String, body: Value) -> Seen {
    let mut seen = Seen::default();
    let take = |got: Option<(u16, Option<String>, bool)>, seen: &mut Seen| {
        seen.requests += 1;
        match got {
            Some((status, id, replayed)) => {
                seen.statuses.push(status);
                if (200..300).contains(&status) && seen.reference.is_none() {
                    seen.reference = id;
                    seen.replayed = replayed;
                }
            }
            None => seen.statuses.push(0),
        }
    };
    let first = once(&client, &base, &key, &body).await;
    take(first, &mut seen);
    if seen.reference.is_some() {
        return seen;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let retries: Vec<_> = (0..5)
        .map(|_| {
            let (client, base, key, body) =
                (client.clone(), base.clone(), key.clone(), body.clone());
            tokio::spawn(async move { once(&client, &base, &key, &body).await })
        })
        .collect();
    for r in retries {
        take(r.await.unwrap(), &mut seen);
    }
    seen
}

/// Every operation through the blind client, 50 at a time.
async fn round(base: &str, keys: &[String]) -> HashMap<String, Seen> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(50));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, key) in keys.iter().enumerate() {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let body = json!({"title": format!("Task {i}"), "customer": {"id": i}});
        let (client, base, key) = (client.clone(), base.to_string(), key.clone());
        tasks.spawn(async move {
            let seen = blind(client, base, key.clone(), body).await;
            drop(permit);
            (key, seen)
        });
    }
    let mut all = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        let (key, seen) = done.unwrap();
        all.insert(key, seen);
    }
    all
}

/// What the simulator holds for a key: its task's id.
async fn task_id(sim: &Sim, key: &str) -> Option<String> {
    let r = reqwest::get(format!("{}/tasks?key={key}", sim.base))
        .await
        .unwrap();
    if r.status() == 404 {
        return None;
    }
    let v: Value = r.json().await.unwrap();
    v["id"].as_str().map(str::to_string)
}

async fn blind_retries_make_no_duplicates(db: &TestDb) {
    let n = env_count("SETTLE_DRILL_OPS", 500);
    let sim = Sim::start(&[
        "--no-dedupe",
        "--fault-rate",
        "0.2",
        "--fault-kinds",
        "drop,late,error",
        "--seed",
        "27",
        "--late",
        "2s",
    ]);
    let extra = format!(
        r#"{}[destinations.tasks]
url = "{}/tasks"
dedupes = false
timeout = "1500ms"
"#,
        tool_automation(),
        sim.base
    );
    let s = ApiServer::start_with(&db.url, &config_text(&extra), &[]);
    let keys: Vec<String> = (0..n).map(|i| format!("drill-{i:04}")).collect();

    let seen = round(&s.base, &keys).await;
    // the client gave up on some before the gateway had its answer: those attempts end within
    // the destination's timeout, whoever is still listening
    common::wait_until("no attempt in flight", Duration::from_secs(10), || {
        s.operations(false)
            .values()
            .all(|(state, _)| state != "in_flight")
    });
    let (total, by_key) = sim.tasks();
    assert!(by_key.values().all(|c| *c == 1), "a duplicate: {by_key:?}");
    let dests = [Destination {
        name: "tasks",
        sim: &sim,
        dedupes: false,
    }];
    let found = checker::check(&db.url, &dests, false).await;
    assert!(found.is_empty(), "{}", checker::report(&found));
    let states = s.operations(false);
    let queue = s.operations(true);
    let mut unknown = Vec::new();
    for key in &keys {
        let (state, reference) = states.get(key).unwrap_or_else(|| panic!("{key} recorded"));
        let client = &seen[key];
        if state == "succeeded" {
            assert_eq!(
                &client.reference, reference,
                "{key}: the client holds it: {client:?}"
            );
        } else {
            assert_eq!(state, "unknown", "{key}: {client:?}");
            assert!(queue.contains_key(key), "{key} is in the exception queue");
            assert!(client.reference.is_none(), "{key}: {client:?}");
            unknown.push(key.clone());
        }
    }
    let retried = seen.values().filter(|s| s.requests > 1).count();
    assert!(
        unknown.len() >= n / 20,
        "the faults made unknowns: {}",
        unknown.len()
    );
    assert!(retried >= unknown.len(), "the client retried every failure");

    // staff reconcile from the simulator's own records
    let mut csv = String::from("key,outcome,reference\n");
    for key in &unknown {
        match task_id(&sim, key).await {
            Some(id) => csv.push_str(&format!("{key},found,{id}\n")),
            None => csv.push_str(&format!("{key},absent,\n")),
        }
    }
    let file = s.dir.path().join("sim-records.csv");
    std::fs::write(&file, csv).unwrap();
    s.settle(&["reconcile", "--from", file.to_str().unwrap(), "--yes"]);
    assert!(
        s.operations(true).is_empty(),
        "the queue is empty after the reconcile"
    );

    // the last round: every key answered from the ledger, nothing sent
    let before = sim.tasks().0;
    let last = round(&s.base, &keys).await;
    for key in &keys {
        let client = &last[key];
        assert!(client.replayed, "{key}: replayed: {client:?}");
        assert_eq!(client.requests, 1, "{key}: {client:?}");
        assert_eq!(client.reference, task_id(&sim, key).await, "{key}");
    }
    let (after, by_key) = sim.tasks();
    assert_eq!((before, after, total), (after, n as u64, n as u64));
    assert!(by_key.values().all(|c| *c == 1));
    let found = checker::check(&db.url, &dests, true).await;
    assert!(found.is_empty(), "{}", checker::report(&found));
    eprintln!(
        "blind-retry drill: {n} operations, {} unknown then reconciled, {} retried, {} requests to the gateway",
        unknown.len(),
        retried,
        seen.values().map(|s| s.requests).sum::<usize>()
    );
}

both_backends!(blind_retries_make_no_duplicates);
