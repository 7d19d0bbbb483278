//! `settle sim`, the fault-injecting task system, through the real binary and a real HTTP client.

mod common;

use std::process::Command;
use std::time::Duration;

use common::Sim;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_settle");

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

async fn create(
    sim: &Sim,
    key: Option<&str>,
    body: Value,
    fault: Option<&str>,
) -> Result<(u16, Value), reqwest::Error> {
    let mut req = client(Duration::from_secs(5))
        .post(format!("{}/tasks", sim.base))
        .json(&body);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    if let Some(f) = fault {
        req = req.header("X-Sim-Fault", f);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await?))
}

async fn stats(sim: &Sim) -> Value {
    client(Duration::from_secs(5))
        .get(format!("{}/stats", sim.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn deduplicates_by_key_and_refuses_a_changed_body() {
    let sim = Sim::start(&[]);
    let (s1, t1) = create(&sim, Some("k-1"), json!({"title": "Kickoff"}), None)
        .await
        .unwrap();
    let (s2, t2) = create(&sim, Some("k-1"), json!({"title": "Kickoff"}), None)
        .await
        .unwrap();
    assert_eq!((s1, s2), (201, 200));
    assert_eq!(t1["id"], t2["id"]);
    let (s3, _) = create(&sim, Some("k-1"), json!({"title": "Other"}), None)
        .await
        .unwrap();
    assert_eq!(s3, 422);
    create(&sim, None, json!({"title": "no key"}), None)
        .await
        .unwrap();
    let st = stats(&sim).await;
    assert_eq!(
        (st["tasks"].as_u64(), st["by_key"]["k-1"].as_u64()),
        (Some(2), Some(1))
    );
    // the lookup
    let c = client(Duration::from_secs(5));
    let found = c
        .get(format!("{}/tasks?key=k-1", sim.base))
        .send()
        .await
        .unwrap();
    assert_eq!(found.status().as_u16(), 200);
    assert_eq!(found.json::<Value>().await.unwrap()["id"], t1["id"]);
    assert_eq!(
        c.get(format!("{}/tasks?key=nope", sim.base))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );
}

#[tokio::test]
async fn without_dedupe_every_request_creates_a_task() {
    let sim = Sim::start(&["--no-dedupe"]);
    for _ in 0..3 {
        assert_eq!(
            create(&sim, Some("k-1"), json!({}), None).await.unwrap().0,
            201
        );
    }
    assert_eq!(stats(&sim).await["by_key"]["k-1"], 3);
}

#[tokio::test]
async fn each_fault_does_what_it_says() {
    let sim = Sim::start(&["--late", "2s"]);
    // before committing: nothing created
    assert_eq!(
        create(&sim, Some("r"), json!({}), Some("reject"))
            .await
            .unwrap()
            .0,
        422
    );
    let resp = client(Duration::from_secs(5))
        .post(format!("{}/tasks", sim.base))
        .header("X-Sim-Fault", "unavailable")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(stats(&sim).await["tasks"], 0);
    // after committing: created, and the client does not learn it
    assert_eq!(
        create(&sim, Some("e"), json!({}), Some("error"))
            .await
            .unwrap()
            .0,
        500
    );
    assert!(
        create(&sim, Some("d"), json!({}), Some("drop"))
            .await
            .is_err(),
        "the answer is lost"
    );
    let late = client(Duration::from_millis(300))
        .post(format!("{}/tasks", sim.base))
        .header("Idempotency-Key", "l")
        .header("X-Sim-Fault", "late")
        .json(&json!({}))
        .send()
        .await;
    assert!(late.unwrap_err().is_timeout());
    // a retry while the first is still running is told so
    assert_eq!(
        create(&sim, Some("l"), json!({}), None).await.unwrap().0,
        409
    );
    let st = stats(&sim).await;
    assert_eq!(
        (
            st["by_key"]["e"].as_u64(),
            st["by_key"]["d"].as_u64(),
            st["by_key"]["l"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert!(st["by_key"].get("r").is_none());
    // once the late answer has gone (2 s on), a retry with the same key gets the original;
    // until then each retry is told 409 and makes nothing
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = create(&sim, Some("l"), json!({}), None).await.unwrap().0;
        if status != 409 {
            break status;
        }
        if std::time::Instant::now() > deadline {
            panic!("gave up waiting for the late answer to go out");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200);
    assert_eq!(stats(&sim).await["by_key"]["l"], 1);
}

#[tokio::test]
async fn records_survive_a_restart_with_a_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sim.json");
    let s = state.to_str().unwrap();
    let first = Sim::start(&["--state", s]);
    let (_, t) = create(&first, Some("k-9"), json!({"n": 9}), None)
        .await
        .unwrap();
    drop(first);
    let again = Sim::start(&["--state", s]);
    assert_eq!(stats(&again).await["by_key"]["k-9"], 1);
    let (status, t2) = create(&again, Some("k-9"), json!({"n": 9}), None)
        .await
        .unwrap();
    assert_eq!((status, &t2["id"]), (200, &t["id"]));
}

#[tokio::test]
async fn a_seeded_fault_schedule_repeats() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let sim = Sim::start(&[
            "--fault-rate",
            "0.5",
            "--seed",
            "7",
            "--late",
            "50ms",
            "--no-dedupe",
        ]);
        let mut statuses = Vec::new();
        for i in 0..20 {
            statuses.push(
                match create(&sim, Some(&format!("k{i}")), json!({}), None).await {
                    Ok((s, _)) => s,
                    Err(_) => 0,
                },
            );
        }
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1]);
    assert!(
        runs[0].iter().any(|s| *s != 201) && runs[0].contains(&201),
        "{:?}",
        runs[0]
    );
}

#[test]
fn bad_arguments_get_one_line() {
    let out = Command::new(BIN)
        .args(["sim", "--fault", "explode"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("unknown fault"));
}

/// `GET /health` through a client of its own (a fresh connection each time, as a probe makes).
async fn health(sim: &Sim, timeout: Duration) -> Result<u16, reqwest::Error> {
    let c = reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    Ok(c.get(format!("{}/health", sim.base))
        .send()
        .await?
        .status()
        .as_u16())
}

#[tokio::test]
async fn a_rate_limit_answers_429_above_it_and_counts_what_it_refused() {
    let sim = Sim::start(&["--rate-limit", "10/s", "--no-dedupe"]);
    let started = std::time::Instant::now();
    let mut statuses = Vec::new();
    for i in 0..25 {
        let (s, body) = create(&sim, None, json!({ "n": i }), None).await.unwrap();
        if s == 429 {
            assert_eq!(body["error"], "rate limit exceeded");
        }
        statuses.push(s);
    }
    let took = started.elapsed().as_secs_f64();
    let made = statuses.iter().filter(|s| **s == 201).count();
    // one second's worth at once, then what the rate refills while they are sent
    let most = 10 + (10.0 * took).ceil() as usize;
    assert!(
        (10..=most).contains(&made),
        "{made} in {took:.2} s: {statuses:?}"
    );
    if took < 1.0 {
        assert!(statuses.contains(&429), "{statuses:?}");
    }
    // its Retry-After says when to come back
    let resp = client(Duration::from_secs(5))
        .post(format!("{}/tasks", sim.base))
        .json(&json!({ "n": 99 }))
        .send()
        .await
        .unwrap();
    let mut made = made as u64;
    match resp.status().as_u16() {
        429 => assert_eq!(resp.headers()["retry-after"], "1"),
        _ => made += 1,
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (s, _) = create(&sim, None, json!({ "n": 100 }), None).await.unwrap();
    assert_eq!(s, 201, "a second later the limit has room again");
    let st = stats(&sim).await;
    assert_eq!(st["tasks"].as_u64(), Some(made + 1), "{st}");
    assert_eq!(
        st["tasks"].as_u64().unwrap() + st["limited"].as_u64().unwrap(),
        st["requests"].as_u64().unwrap(),
        "every create that arrived is made or limited: {st}"
    );
}

#[tokio::test]
async fn an_outage_hangs_refuses_or_answers_503_in_its_window_only() {
    // 503: every route but /stats, nothing made, healthy again after it
    let sim = Sim::start(&["--outage", "0s..2s", "--outage-kind", "503"]);
    let (s, _) = create(&sim, Some("o-1"), json!({ "n": 1 }), None)
        .await
        .unwrap();
    assert_eq!(s, 503);
    assert_eq!(health(&sim, Duration::from_secs(5)).await.unwrap(), 503);
    assert_eq!(stats(&sim).await["tasks"].as_u64(), Some(0));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(health(&sim, Duration::from_secs(5)).await.unwrap(), 200);
    let (s, _) = create(&sim, Some("o-1"), json!({ "n": 1 }), None)
        .await
        .unwrap();
    assert_eq!(s, 201);
    let st = stats(&sim).await;
    // the probes of /health are counted apart from the work's requests
    assert_eq!(
        (
            st["tasks"].as_u64(),
            st["outage"].as_u64(),
            st["probes"].as_u64()
        ),
        (Some(1), Some(1), Some(2))
    );

    // hang: the request is taken and never answered; nothing is made
    let sim = Sim::start(&["--outage", "0s..2s"]);
    let hung = health(&sim, Duration::from_millis(700)).await.unwrap_err();
    assert!(hung.is_timeout(), "{hung}");
    let lost = client(Duration::from_millis(700))
        .post(format!("{}/tasks", sim.base))
        .json(&json!({ "n": 2 }))
        .send()
        .await
        .unwrap_err();
    assert!(lost.is_timeout(), "{lost}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(health(&sim, Duration::from_secs(5)).await.unwrap(), 200);
    assert_eq!(stats(&sim).await["tasks"].as_u64(), Some(0));

    // refuse: no connection is taken in the window (a connect error, nothing sent), then served
    let sim = Sim::start(&["--outage", "500ms..2s", "--outage-kind", "refuse"]);
    assert_eq!(health(&sim, Duration::from_secs(5)).await.unwrap(), 200);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let refused = health(&sim, Duration::from_secs(5)).await.unwrap_err();
    assert!(refused.is_connect(), "{refused}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(health(&sim, Duration::from_secs(5)).await.unwrap(), 200);
}

#[test]
fn a_bad_outage_or_rate_gets_one_line() {
    for (args, said) in [
        (&["--outage", "5s..1s"][..], "ends before it starts"),
        (&["--outage", "soon"][..], "FROM..TO"),
        (&["--outage-kind", "down"][..], "hang, refuse or 503"),
        (&["--rate-limit", "fast"][..], "--rate-limit"),
    ] {
        let out = Command::new(BIN).arg("sim").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
}
