//! Many settle processes on one ledger (manual: Running settle for a team): they behave as one.
//! A token's rate is one budget across every `settle serve --http` on the ledger: requests
//! alternating between two servers get what one server alone gives, within 10%. One key's
//! requests split over two servers are recorded, started and sent once, at the gateway and over
//! the protocol. On both backends (two processes on one SQLite file share it as two on
//! PostgreSQL do).

mod common;

use std::time::{Duration, Instant};

use common::TestDb;
use common::api::{ApiServer, SLOW, config_text, sha256};

/// Two tokens of the same rate (20 a second, a burst of 10), one per measurement, so that each
/// starts with a full bucket of its own.
const FIRST: &str = "settle_f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1";
const SECOND: &str = "settle_5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

fn config() -> String {
    let token = |name: &str, token: &str| {
        format!(
            "[automations.{name}]\ntoken_sha256 = \"{}\"\nworkflows = [\"*\"]\nrate = \"20/s\"\nburst = 10\n",
            sha256(token)
        )
    };
    config_text(&(token("first", FIRST) + &token("second", SECOND)))
}

/// Requests one after another for `long`, to the servers in turn: how many were let through.
async fn through(bases: &[&str], token: &str, long: Duration) -> (usize, usize) {
    let client = reqwest::Client::new();
    let (mut passed, mut sent) = (0, 0);
    let end = Instant::now() + long;
    while Instant::now() < end {
        let base = bases[sent % bases.len()];
        let status = client
            .get(format!("{base}/v1/operations?limit=1"))
            .bearer_auth(token)
            .send()
            .await
            .expect("the server answers")
            .status()
            .as_u16();
        sent += 1;
        if status != 429 {
            assert_eq!(status, 200);
            passed += 1;
        }
    }
    (passed, sent)
}

async fn a_tokens_rate_is_one_budget_across_servers(db: &TestDb) {
    let one = ApiServer::start_with(&db.url, &config(), &[]);
    let two = ApiServer::start_with(&db.url, &config(), &[]);
    // the burst of two a minute: alternating, still two in all
    let mut passed = 0;
    for i in 0..6 {
        let base = if i % 2 == 0 { &one.base } else { &two.base };
        let status = reqwest::Client::new()
            .get(format!("{base}/v1/operations?limit=1"))
            .bearer_auth(SLOW)
            .send()
            .await
            .unwrap()
            .status();
        passed += usize::from(status != 429);
    }
    assert_eq!(passed, 2, "the burst is the token's, not each server's");
    // 20 a second for three seconds: one server alone, then the two in turn
    let long = Duration::from_secs(3);
    let (alone, sent_alone) = through(&[&one.base], FIRST, long).await;
    let (both, sent_both) = through(&[&one.base, &two.base], SECOND, long).await;
    eprintln!("one server: {alone} of {sent_alone}; two in turn: {both} of {sent_both}");
    assert!(
        sent_alone > alone * 2 && sent_both > both * 2,
        "the rate was reached"
    );
    let ratio = both as f64 / alone as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "two servers let {both} through where one let {alone} ({ratio:.2}x)"
    );
}

/// The gateway and the API's protocol with one key's requests split over two servers: one record,
/// one start, one send. 20 keys, each sent 6 times at once, in turn to the two servers, at a
/// destination that does not deduplicate: it holds one task per key.
async fn one_keys_requests_split_over_two_servers(db: &TestDb) {
    use common::Sim;
    use common::api::{ALL, TOOL, tool_automation};
    let sim = Sim::start(&["--no-dedupe"]);
    let text = config_text(&format!(
        "{}[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = false\ntimeout = \"5s\"\n",
        tool_automation(),
        sim.base
    ));
    let one = ApiServer::start_with(&db.url, &text, &[]);
    let two = ApiServer::start_with(&db.url, &text, &[]);
    let bases = [one.base.clone(), two.base.clone()];
    let client = reqwest::Client::new();
    let mut sent = tokio::task::JoinSet::new();
    for k in 0..20 {
        for i in 0..6 {
            let (client, base) = (client.clone(), bases[i % 2].clone());
            sent.spawn(async move {
                client
                    .post(format!("{base}/gateway/tasks/create_task"))
                    .bearer_auth(TOOL)
                    .header("idempotency-key", format!("split-{k}"))
                    .json(&serde_json::json!({"title": format!("Task {k}")}))
                    .send()
                    .await
                    .expect("the gateway answers")
                    .status()
                    .as_u16()
            });
        }
    }
    let mut codes = Vec::new();
    while let Some(code) = sent.join_next().await {
        codes.push(code.unwrap());
    }
    assert!(
        codes.iter().all(|c| [200, 201, 409].contains(c)),
        "a send, a replay or in flight: {codes:?}"
    );
    let (tasks, by_key) = sim.tasks();
    assert_eq!(tasks, 20, "one task per key: {by_key:?}");
    assert!(by_key.values().all(|n| *n == 1), "{by_key:?}");
    // the protocol: one key recorded and started from both servers at once
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..8 {
        let (client, base) = (client.clone(), bases[i % 2].clone());
        calls.spawn(async move {
            let intent = serde_json::json!({"key": "split-api", "workflow": "onboarding",
                "destination": "crm", "action": "a", "payload": {"n": 1}});
            let recorded = client
                .post(format!("{base}/v1/operations"))
                .bearer_auth(ALL)
                .json(&intent)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            let started = client
                .post(format!("{base}/v1/operations/split-api/start"))
                .bearer_auth(ALL)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            (recorded, started)
        });
    }
    let mut answers = Vec::new();
    while let Some(a) = calls.join_next().await {
        answers.push(a.unwrap());
    }
    let count = |f: &dyn Fn(&(u16, u16)) -> bool| answers.iter().filter(|a| f(a)).count();
    assert_eq!(count(&|a| a.0 == 201), 1, "recorded once: {answers:?}");
    assert_eq!(count(&|a| a.0 == 200), 7, "{answers:?}");
    assert_eq!(count(&|a| a.1 == 200), 1, "started once: {answers:?}");
    assert_eq!(count(&|a| a.1 == 409), 7, "{answers:?}");
}

both_backends!(
    a_tokens_rate_is_one_budget_across_servers,
    one_keys_requests_split_over_two_servers,
);
