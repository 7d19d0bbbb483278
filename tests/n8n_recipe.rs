//! the manual's n8n recipe as n8n behaves. n8n's HTTP Request node (1.123, read from its source
//! and tried with it) sends the items of one run at once; with *Retry On Fail* and *On Error*
//! left at stopping the workflow, one failed item fails the node and a retry runs the node again
//! with every item, up to five tries. A client that does exactly that sends 100 items and then
//! reruns them, against `settle sim --no-dedupe` with 20% seeded faults (drop, late, error,
//! unavailable, reject). Counted at the destination: sent straight, keys get several tasks;
//! through the gateway, none gets two. With the destination's lookup configured, no unknown
//! outcome is left for a person; without it, each one left is done at the destination (what the
//! manual says a person reconciles). On both backends.

mod common;

use std::time::Duration;

use common::api::{ApiServer, TOOL, config_text, tool_automation};
use common::checker::{self, Destination};
use common::{Sim, TestDb};
use serde_json::json;

/// Where the node sends: straight to the destination, or through settle's gateway.
#[derive(Clone, Copy)]
enum Via<'a> {
    Direct(&'a str),
    Gateway(&'a str),
}

/// One run of the node: every item at once; whether each answered 2xx.
async fn node(client: &reqwest::Client, via: Via<'_>, items: u32) -> Vec<bool> {
    let mut sent = tokio::task::JoinSet::new();
    for i in 1..=items {
        let body = json!({"title": format!("Task {i}")});
        let key = format!("{i}-task");
        let r = match via {
            Via::Direct(sim) => client.post(format!("{sim}/tasks")),
            Via::Gateway(base) => client
                .post(format!("{base}/gateway/tasks/create_task"))
                .bearer_auth(TOOL),
        }
        .header("idempotency-key", key)
        .json(&body);
        sent.spawn(async move { (i, r.send().await.is_ok_and(|a| a.status().is_success())) });
    }
    let mut ok = vec![false; items as usize];
    while let Some(done) = sent.join_next().await {
        let (i, answered) = done.unwrap();
        ok[(i - 1) as usize] = answered;
    }
    ok
}

/// One execution with Retry On Fail: up to five runs of the node, each with every item, until
/// one run has no failed item. The runs it took.
async fn execution(via: Via<'_>, items: u32) -> u32 {
    // n8n's own request timeout is far longer than the gateway's destination timeout
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for run in 1..=5 {
        if node(&client, via, items).await.iter().all(|ok| *ok) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    5
}

fn faulty() -> Sim {
    Sim::start(&[
        "--no-dedupe",
        "--fault-rate",
        "0.2",
        "--seed",
        "46",
        "--late",
        "1500ms",
    ])
}

async fn retry_on_fail_through_the_gateway(db: &TestDb) {
    const ITEMS: u32 = 100;
    // straight to the destination: the whole node again, every item again
    let direct = faulty();
    for _ in 0..2 {
        execution(Via::Direct(&direct.base), ITEMS).await;
    }
    let (total, by_key) = direct.tasks();
    let doubled = by_key.values().filter(|n| **n > 1).count();
    assert!(
        doubled >= 50 && total > 2 * u64::from(ITEMS),
        "straight to the destination, a retry of the node repeats every item: {total} tasks, {doubled} keys doubled"
    );

    // through the gateway, without a lookup and then with one (on a ledger of its own)
    let second = match db.backend {
        "postgres" => common::postgres().await,
        _ => common::sqlite(),
    };
    for (lookup, db) in [(false, db), (true, &second)] {
        let sim = faulty();
        let lookup_url = if lookup {
            format!("lookup_url = \"{}/tasks?key={{key}}\"\n", sim.base)
        } else {
            String::new()
        };
        let extra = format!(
            "{}[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = false\ntimeout = \"1s\"\n{lookup_url}",
            tool_automation(),
            sim.base
        );
        let s = ApiServer::start_with(&db.url, &config_text(&extra), &[]);
        let runs = run_and_rerun(&s.base, ITEMS).await;
        let (total, by_key) = sim.tasks();
        assert!(
            by_key.values().all(|n| *n == 1),
            "through the gateway, no key twice (lookup {lookup}): {by_key:?}"
        );
        let dests = [Destination {
            name: "tasks",
            sim: &sim,
            dedupes: false,
        }];
        let found = checker::check(&db.url, &dests, false).await;
        assert!(found.is_empty(), "{}", checker::report(&found));
        let states: std::collections::BTreeMap<String, String> = s
            .operations(false)
            .into_iter()
            .map(|(key, (state, _))| (key, state))
            .collect();
        let count = |state: &str| states.values().filter(|s| *s == state).count();
        let unknown: Vec<&String> = states
            .iter()
            .filter(|(_, s)| *s == "unknown")
            .map(|(k, _)| k)
            .collect();
        if lookup {
            assert!(unknown.is_empty(), "a lookup settles them: {unknown:?}");
        } else {
            assert!(!unknown.is_empty(), "the faults left unknowns for a person");
            for key in &unknown {
                assert_eq!(
                    by_key.get(*key),
                    Some(&1),
                    "{key}: unknown, and done at the destination"
                );
            }
        }
        assert_eq!(
            count("succeeded") + unknown.len(),
            total as usize,
            "every task is a success or an unknown: {states:?}"
        );
        eprintln!(
            "{} lookup {lookup}: runs {runs:?}; {total} tasks for {} keys; {} succeeded, {} rejected, {} unknown",
            db.backend,
            by_key.len(),
            count("succeeded"),
            count("rejected"),
            unknown.len()
        );
    }
}

/// A run and a rerun of the workflow through the gateway: the runs each execution took.
async fn run_and_rerun(base: &str, items: u32) -> Vec<u32> {
    let mut runs = Vec::new();
    for _ in 0..2 {
        runs.push(execution(Via::Gateway(base), items).await);
    }
    runs
}

both_backends!(retry_on_fail_through_the_gateway);
