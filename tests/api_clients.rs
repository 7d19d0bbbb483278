//! Clients of the HTTP API that are not ours (manual: The HTTP API): the manual's Python (standard library
//! only) and `curl` recipes run as they stand against the real `settle serve --http` and `settle
//! sim` destinations, counted at the destinations; the OpenAPI document checked by the
//! `openapi-spec-validator` package and probed route by route; HTTPS with a certificate of its
//! own; tokens re-read on SIGHUP; and one attempt at a time under 64 clients at once.

mod common;

use std::process::Command;
use std::time::Duration;

use common::api::{ApiServer, BOT, config_text, sha256};
use common::{Sim, TestDb};
use serde_json::{Value, json};

/// A fenced block of the manual (docs/automations.md) that starts with `first`.
fn readme_block(fence: &str, first: &str) -> String {
    let readme = include_str!("../docs/automations.md");
    let open = format!("```{fence}\n{first}");
    let start = readme
        .find(&open)
        .unwrap_or_else(|| panic!("the manual's block starting {first:?}"));
    let body = &readme[start + fence.len() + 4..];
    body[..body.find("```").unwrap()].to_string()
}

async fn get(url: &str) -> Value {
    reqwest::Client::new()
        .get(url)
        .bearer_auth(BOT)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

const STEPS: &str = r#"[destinations.projects]
[destinations.sms]
[workflows.onboarding]
steps = ["create-customer", "create-task", "welcome-sms"]
"#;

/// The manual's three-step Python automation over HTTP, twice and rerun: one task per step at
/// each destination (none deduplicates), every run done.
async fn the_readme_python_over_http(db: &TestDb) {
    let sims: Vec<Sim> = (0..3).map(|_| Sim::start(&["--no-dedupe"])).collect();
    let s = ApiServer::start(&db.url, STEPS);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("onboard_http.py");
    std::fs::write(
        &script,
        readme_block("python", "import json, os, sys, time, urllib"),
    )
    .unwrap();
    let onboard = |run: &str| {
        Command::new("python3")
            .arg(&script)
            .args([run, "Ada Lovelace", "ada@example.com", "+44 20 7946 0000"])
            .env("SETTLE_URL", &s.base)
            .env("SETTLE_TOKEN", BOT)
            .env("CRM_URL", format!("{}/tasks", sims[0].base))
            .env("PROJECTS_URL", format!("{}/tasks", sims[1].base))
            .env("SMS_URL", format!("{}/tasks", sims[2].base))
            .output()
            .unwrap()
    };
    for run in ["r1", "r2", "r1"] {
        let out = onboard(run);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (sim, step) in sims
        .iter()
        .zip(["create-customer", "create-task", "welcome-sms"])
    {
        let (total, by_key) = sim.tasks();
        assert_eq!(
            total, 2,
            "{step}: one task a run, the rerun sent nothing: {by_key:?}"
        );
        assert!(by_key.keys().all(|k| k.ends_with(step)), "{by_key:?}");
    }
    for run in ["r1", "r2"] {
        let v = get(&format!("{}/v1/runs/{run}", s.base)).await;
        assert_eq!(v["state"], "done", "{v}");
    }
}

/// The manual's `curl` step, run and rerun: one task, succeeded with its reference.
async fn the_readme_curl_over_http(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe"]);
    let s = ApiServer::start(&db.url, "[destinations.projects]\n");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("step.sh");
    std::fs::write(&script, readme_block("sh", "# settle over HTTP with curl")).unwrap();
    for _ in 0..2 {
        let out = Command::new("bash")
            .arg(&script)
            .env("SETTLE_URL", &s.base)
            .env("SETTLE_TOKEN", BOT)
            .env("PROJECTS_URL", format!("{}/tasks", sim.base))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(sim.tasks().0, 1, "sent once");
    let v = get(&format!("{}/v1/operations/onb-42-task", s.base)).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert!(
        v["reference"].as_str().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
}

/// 64 clients at once: one records the key, the others find it recorded; one starts it, the
/// others are refused; and the writes shared their commits.
async fn one_attempt_at_a_time_under_64_clients(db: &TestDb) {
    let ledger = settle::Ledger::open_server(
        &db.url,
        settle::Config::parse(&config_text(""), "t").unwrap(),
    )
    .await
    .unwrap();
    let (router, api) = settle::api::router(ledger, 4);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let client = reqwest::Client::new();
    let fire = |path: String, body: Option<String>| {
        let (client, base) = (client.clone(), base.clone());
        tokio::spawn(async move {
            let mut r = client.post(format!("{base}{path}")).bearer_auth(BOT);
            if let Some(b) = body {
                r = r.body(b);
            }
            r.send().await.unwrap().status().as_u16()
        })
    };
    let intent = json!({"key": "hot-1", "workflow": "onboarding", "destination": "crm",
        "action": "a", "payload": {"n": 1}})
    .to_string();
    let mut codes = Vec::new();
    for t in (0..64)
        .map(|_| fire("/v1/operations".into(), Some(intent.clone())))
        .collect::<Vec<_>>()
    {
        codes.push(t.await.unwrap());
    }
    codes.sort();
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 63, "{codes:?}");
    let mut starts = Vec::new();
    for t in (0..64)
        .map(|_| fire("/v1/operations/hot-1/start".into(), None))
        .collect::<Vec<_>>()
    {
        starts.push(t.await.unwrap());
    }
    assert_eq!(
        starts.iter().filter(|c| **c == 200).count(),
        1,
        "{starts:?}"
    );
    assert_eq!(
        starts.iter().filter(|c| **c == 409).count(),
        63,
        "{starts:?}"
    );
    // many keys at once: the lanes group them
    let mut many = Vec::new();
    for i in 0..256 {
        let body =
            json!({"key": format!("many-{i}"), "workflow": "onboarding", "destination": "crm",
            "action": "a", "payload": {}})
            .to_string();
        many.push(fire("/v1/operations".into(), Some(body)));
    }
    for t in many {
        assert_eq!(t.await.unwrap(), 201);
    }
    let (writes, groups, split) = api.writer.counts();
    eprintln!("writes {writes} groups {groups} split {split}");
    assert_eq!(writes, 64 + 64 + 256);
    assert!(
        groups < writes,
        "commits were shared: {groups} groups for {writes} writes"
    );
}

/// On SQLite a writer lane's commits leave the WAL to a checkpointer thread of their own (a
/// checkpoint inside a commit stalled every write behind it): the written pages still reach the
/// database file while the lane runs, with no other connection committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_lanes_wal_is_checkpointed_beside_it() {
    use settle::ledger::{Write, Writer};
    let db = common::sqlite();
    let ledger = settle::Ledger::open_server(
        &db.url,
        settle::Config::parse(&config_text(""), "t").unwrap(),
    )
    .await
    .unwrap();
    let file = std::path::PathBuf::from(db.url.trim_start_matches("sqlite://"));
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let before = size(&file);
    let writer = Writer::new(&ledger, 1);
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (l, w) = (ledger.clone(), writer.clone());
            tokio::spawn(async move {
                for i in 0..100 {
                    let key = format!("wal-{t}-{i}");
                    let intent = settle::Intent {
                        key: key.clone(),
                        workflow: "onboarding".into(),
                        step: "s".into(),
                        destination: "crm".into(),
                        action: "a".into(),
                        payload: json!({"n": i, "pad": "x".repeat(400)}),
                        run: None,
                    };
                    let (r, s) = w
                        .write_two(&l, "bot", Write::Record(intent), Write::Start(key))
                        .await;
                    r.unwrap();
                    s.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let wal = file.with_extension("db-wal");
    assert!(size(&wal) > 0, "the lane wrote through the WAL");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while size(&file) < before + 1_000_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the database file stayed at {} bytes (from {before}; WAL {} bytes): no checkpoint",
            size(&file),
            size(&wal)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(writer);
}

both_backends!(
    the_readme_python_over_http,
    the_readme_curl_over_http,
    one_attempt_at_a_time_under_64_clients
);

/// The OpenAPI document passes a validator that is not ours, and every route it lists answers on
/// the real server (none is the fallback's "no such route").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(settle_oas),
    ignore = "needs the openapi-spec-validator Python package (pip install openapi-spec-validator)"
)]
async fn the_openapi_document_is_valid_and_every_route_answers() {
    let doc = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/openapi.json");
    let out = Command::new("python3")
        .args(["-m", "openapi_spec_validator", doc])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let db = common::sqlite();
    let s = ApiServer::start(&db.url, "");
    let v: Value = serde_json::from_str(include_str!("../assets/openapi.json")).unwrap();
    let client = reqwest::Client::new();
    let mut probed = 0;
    for (path, ops) in v["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{key}", "probe-1")
            .replace("{run}", "probe-run")
            .replace("{action}", "claim")
            .replace("{destination}", "crm");
        for method in ops.as_object().unwrap().keys() {
            let r = client
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("{}{concrete}", s.base),
                )
                .bearer_auth(BOT)
                .body("{}")
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let text = r.text().await.unwrap();
            assert!(
                status != 405 && !text.contains("no such route"),
                "{method} {path}: {status} {text}"
            );
            probed += 1;
        }
    }
    // the nine (manual: The HTTP API) routes (ten methods) and the gateway's four methods
    assert_eq!(probed, 14);
}

/// HTTPS with a certificate of its own (rustls): `curl --cacert` and reqwest trust it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_its_own_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let db = common::sqlite();
    let (c, k) = (cert.display().to_string(), key.display().to_string());
    let s = ApiServer::start_with(
        &db.url,
        &config_text(""),
        &["--tls-cert", &c, "--tls-key", &k],
    );
    assert!(s.base.starts_with("https://"), "{}", s.base);
    let out = Command::new("curl")
        .args(["-sS", "--cacert", &c, &format!("{}/healthz", s.base)])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"status":"ok"}"#
    );
    let pem = std::fs::read(&cert).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let r = client
        .post(format!("{}/v1/operations", s.base))
        .bearer_auth(BOT)
        .body(json!({"key": "tls-1", "workflow": "onboarding", "destination": "crm", "action": "a", "payload": {}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    // plain HTTP to the TLS port gets no answer
    let plain = reqwest::get(s.base.replace("https://", "http://") + "/healthz").await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
}

/// `[automations]` re-read on SIGHUP: a new token works at once, a removed one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_reread_on_sighup() {
    let db = common::sqlite();
    let s = ApiServer::start(&db.url, "");
    let fresh = "settle_feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface";
    let status = |token: &'static str| {
        let url = format!("{}/v1/operations?limit=1", s.base);
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(fresh).await, 401);
    let config = config_text("").replace(&sha256(BOT), &sha256(fresh));
    std::fs::write(s.config_path(), config).unwrap();
    let pid = s.pid().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut changed = false;
    for _ in 0..50 {
        if status(fresh).await == 200 {
            changed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(changed, "the new token works");
    assert_eq!(status(BOT).await, 401, "the removed token is refused");
    assert!(s.stderr().contains("automations re-read"), "{}", s.stderr());
}
