//! Crash safety of the HTTP API (manual: The HTTP API): `settle serve --http` killed with SIGKILL while 64
//! clients write record, start and attempt; after a restart every write that got a 2xx is in
//! the ledger, and a client that got no answer repeats its request with the same key and gets
//! the answer the ledger's state gives (never a second attempt). Both backends.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::TestDb;
use common::api::{ApiServer, BOT};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    Record,
    Start,
    Attempt,
}

/// What one client saw: the writes acknowledged, and the one left without an answer.
#[derive(Default)]
struct Seen {
    acked: Vec<(String, Stage)>,
    unanswered: Option<(String, Stage)>,
}

fn body(key: &str, stage: Stage) -> (String, Option<String>) {
    match stage {
        Stage::Record => (
            "/v1/operations".into(),
            Some(
                json!({"key": key, "workflow": "onboarding", "destination": "crm", "action": "a",
                    "payload": {"for": key}})
                .to_string(),
            ),
        ),
        Stage::Start => (format!("/v1/operations/{key}/start"), None),
        Stage::Attempt => (
            format!("/v1/operations/{key}/attempts"),
            Some(
                json!({"attempt": 1, "outcome": "accepted", "reference": format!("R-{key}")})
                    .to_string(),
            ),
        ),
    }
}

/// One request: `Some(status, body)`, or `None` when no answer came.
async fn send(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    stage: Stage,
) -> Option<(u16, Value)> {
    let (path, b) = body(key, stage);
    let mut r = client.post(format!("{base}{path}")).bearer_auth(BOT);
    if let Some(b) = b {
        r = r.body(b);
    }
    let resp = r.send().await.ok()?;
    let status = resp.status().as_u16();
    let v = resp.json().await.ok()?;
    Some((status, v))
}

async fn client(base: String, n: usize, done: Arc<AtomicUsize>) -> Seen {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut seen = Seen::default();
    for i in 0.. {
        let key = format!("crash-{n}-{i}");
        for stage in [Stage::Record, Stage::Start, Stage::Attempt] {
            match send(&http, &base, &key, stage).await {
                Some((s, _)) if (200..300).contains(&s) => {
                    seen.acked.push((key.clone(), stage));
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Some((s, v)) => panic!("{key} {stage:?}: {s} {v}"),
                None => {
                    seen.unanswered = Some((key, stage));
                    return seen;
                }
            }
        }
    }
    seen
}

async fn show(base: &str, key: &str) -> Value {
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/operations/{key}"))
        .bearer_auth(BOT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{key} is in the ledger");
    r.json().await.unwrap()
}

async fn killed_while_64_clients_write(db: &TestDb) {
    let mut s = ApiServer::start(&db.url, "");
    let done = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..64)
        .map(|n| tokio::spawn(client(s.base.clone(), n, done.clone())))
        .collect();
    // let them write a while, then kill the server under them
    for _ in 0..200 {
        if done.load(Ordering::Relaxed) >= 900 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    s.kill_9();
    let mut seen = Vec::new();
    for c in clients {
        seen.push(c.await.unwrap());
    }
    let acked: usize = seen.iter().map(|s| s.acked.len()).sum();
    assert!(acked >= 300, "the clients wrote before the kill: {acked}");
    s.restart();
    let base = s.base.clone();
    // every acknowledged write is in the ledger (each key asked once, for its last stage acked)
    let mut last = std::collections::BTreeMap::new();
    for (key, stage) in seen.iter().flat_map(|s| s.acked.iter()) {
        last.insert(key.clone(), *stage);
    }
    for (key, stage) in &last {
        let v = show(&base, key).await;
        let attempts = v["attempt_log"].as_array().unwrap();
        match stage {
            Stage::Record => assert_eq!(v["payload"]["for"], json!(key)),
            Stage::Start => assert_eq!(attempts.len(), 1, "{key}: {v}"),
            Stage::Attempt => {
                assert_eq!(v["state"], "succeeded", "{key}: {v}");
                assert_eq!(attempts[0]["reference"], json!(format!("R-{key}")));
            }
        }
    }
    // a request without an answer, repeated with its key, gets the ledger's answer
    let http = reqwest::Client::new();
    let mut repeated = 0;
    for (key, stage) in seen.iter().filter_map(|s| s.unanswered.as_ref()) {
        let (status, answer) = send(&http, &base, key, *stage)
            .await
            .expect("an answer now");
        match stage {
            Stage::Record => assert!(status == 201 || status == 200, "{key}: {status} {answer}"),
            Stage::Start => {
                // the first start committed (in flight: do not send) or never did (send now)
                let v = show(&base, key).await;
                assert_eq!(
                    v["attempt_log"].as_array().unwrap().len(),
                    1,
                    "{key}: one attempt: {v}"
                );
                match status {
                    200 => assert_eq!(answer["attempt"], 1),
                    409 => assert!(
                        answer["error"]["message"]
                            .as_str()
                            .unwrap()
                            .contains("in_flight"),
                        "{answer}"
                    ),
                    other => panic!("{key}: {other} {answer}"),
                }
            }
            Stage::Attempt => {
                // its start was acknowledged: the report lands now, or landed before the kill
                assert_eq!(status, 200, "{key}: {answer}");
                assert_eq!(answer["state"], "succeeded");
            }
        }
        repeated += 1;
    }
    assert!(repeated > 0, "some requests were cut off by the kill");
}

both_backends!(killed_while_64_clients_write);
