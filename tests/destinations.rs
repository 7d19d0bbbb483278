//! The example destinations of `assets/destinations/` (manual: Destinations and the dispatcher), each drilled against `settle
//! sim` through the real binary on both backends: the header
//! secret is sent and never kept, a wrong one pauses the destination without losing anything, a
//! form body arrives as Stripe would read it, the reference comes from the configured pointer,
//! a lookup settles an unknown, and the simulator holds one task per operation.

mod common;

use common::{Drill, Raw, Sim, TestDb, drill_with};
use serde_json::{Value, json};

/// The secret the drills' destinations read from `${SIM_TOKEN}`.
const TOKEN: &str = "sk_test_drill_5ecret_4242";
const WRONG: &str = "sk_test_expired_0000";

/// An example config from `assets/destinations/`, pointed at this simulator, with a drill's
/// short timeout and fast retries.
fn example(file: &str, sim: &Sim, db: &TestDb) -> Drill {
    let path = format!("{}/assets/destinations/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("http://127.0.0.1:8787", &sim.base);
    let table = text.find("\n[destinations.").unwrap() + 1;
    let eol = table + text[table..].find('\n').unwrap() + 1;
    let config = format!(
        "attempt_timeout = \"2s\"\n{}base = \"10ms\"\ncap = \"50ms\"\n{}",
        &text[..eol],
        &text[eol..]
    );
    drill_with(&db.url, &config)
}

fn record(d: &Drill, key: &str, destination: &str, payload: &Value) {
    d.run(&[
        "record",
        "--key",
        key,
        "--workflow",
        "billing",
        "--destination",
        destination,
        "--action",
        "create",
        "--payload",
        &payload.to_string(),
    ]);
}

/// `settle dispatch --until-settled` with `SIM_TOKEN` set to `token` (unset for `None`):
/// exit code, stdout, stderr.
fn dispatch(d: &Drill, token: Option<&str>) -> (i32, String, String) {
    let mut c = d.cmd(&["dispatch", "--until-settled"]);
    match token {
        Some(t) => c.env("SIM_TOKEN", t),
        None => c.env_remove("SIM_TOKEN"),
    };
    let out = c.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

/// The first column of every row of a query, read on a thread of its own (the PostgreSQL
/// drills run inside a runtime already).
fn texts(url: &str, sql: &str) -> Vec<String> {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { Raw::connect(&url).await.texts(&sql).await })
    })
    .join()
    .unwrap()
}

/// What the simulator holds for a key (its lookup, which also shows the body as it read it),
/// asked with the Bearer token, or with `Basic` for the Twilio-like simulator.
fn task(sim: &Sim, key: &str) -> Value {
    task_as(sim, key, &format!("Bearer {TOKEN}"))
}

fn task_as(sim: &Sim, key: &str, auth: &str) -> Value {
    let auth = auth.to_string();
    let url = format!("{}/tasks?key={key}", sim.base);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            reqwest::Client::new()
                .get(url)
                .header("Authorization", auth)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        })
    })
    .join()
    .unwrap()
}

/// The secrets appear in no output, the log, `show`, `list` or the database.
fn secrets_kept_nowhere(d: &Drill, keys: &[&str], outputs: &[&str]) {
    let mut seen: Vec<String> = outputs.iter().map(|s| s.to_string()).collect();
    seen.push(std::fs::read_to_string(d.config.with_extension("log")).unwrap_or_default());
    seen.push(d.run(&["list", "--all", "--json"]));
    for k in keys {
        seen.push(d.run(&["show", k, "--json"]));
    }
    for sql in [
        "SELECT COALESCE(error, '') || ' ' || COALESCE(reference, '') FROM attempts",
        "SELECT detail FROM events",
        "SELECT payload FROM operations",
        "SELECT COALESCE(paused_reason, '') FROM destinations",
    ] {
        seen.extend(texts(&d.db, sql));
    }
    assert!(
        seen.iter().any(|s| s.contains("HTTP 401")),
        "the drill saw the 401 it checks for"
    );
    for text in &seen {
        for secret in [TOKEN, WRONG] {
            assert!(!text.contains(secret), "a secret leaked: {text}");
        }
    }
}

/// A Stripe-like API: form body, Idempotency-Key, `/id`, a Bearer secret from the environment.
fn stripe_like(db: &TestDb) {
    let sim = Sim::start(&[
        "--require-header",
        &format!("Authorization: Bearer {TOKEN}"),
    ]);
    let d = example("stripe-like.toml", &sim, db);
    record(
        &d,
        "pay-1",
        "payments",
        &json!({"amount": 2000, "currency": "eur", "metadata": {"order_id": "6735"},
                "payment_method_types": ["card"], "capture": false}),
    );
    record(
        &d,
        "pay-2",
        "payments",
        &json!({"amount": 500, "currency": "eur"}),
    );

    // a missing variable: exit 2 at start, naming destination and variable; nothing sent
    let (code, out, missing) = dispatch(&d, None);
    assert_eq!(code, 2, "{out}{missing}");
    assert_eq!(
        missing.trim(),
        "settle: destination payments: header Authorization reads ${SIM_TOKEN}, which is not set in the environment"
    );
    assert_eq!(sim.tasks().0, 0);

    // an expired token: 401 pauses the destination (audited, as settle); nothing is lost
    let (code, out1, err1) = dispatch(&d, Some(WRONG));
    assert_eq!(code, 0, "{out1}{err1}");
    assert!(
        err1.contains("destination payments paused: HTTP 401 from payments: check its credentials"),
        "{err1}"
    );
    let stats = json_of(&d.run(&["stats", "--json"]));
    assert_eq!(stats["paused_destinations"], json!(["payments"]));
    for key in ["pay-1", "pay-2"] {
        let op = d.show(key);
        assert_eq!(op["state"], "retry_wait", "{op}");
        assert_eq!(op["attempt_log"][0]["http_status"], 401);
        assert_eq!(
            op["next_step"], "Automatic attempt waits: destination payments paused",
            "{op}"
        );
    }
    let paused = texts(
        &d.db,
        "SELECT actor || ' ' || kind || ' ' || detail FROM events WHERE operation_id IS NULL",
    );
    assert_eq!(
        paused,
        vec![
            r#"settle auto_paused {"destination":"payments","reason":"HTTP 401 from payments: check its credentials"}"#
        ]
    );
    assert_eq!(sim.tasks().0, 0, "a 401 created nothing");
    // while paused, `settle start` refuses too
    let (code, _, refused) = d.output(&["start", "--key", "pay-1"]);
    assert_eq!(code, 3);
    assert!(
        refused.contains("destination payments is paused"),
        "{refused}"
    );

    // resumed with the right token: each sent once, form-encoded, reference from `/id`
    let resumed = d.run(&["resume", "--destination", "payments"]);
    assert!(
        resumed.contains("destination payments resumed"),
        "{resumed}"
    );
    let (code, out2, err2) = dispatch(&d, Some(TOKEN));
    assert_eq!(code, 0, "{out2}{err2}");
    let stats = json_of(&d.run(&["stats", "--json"]));
    assert_eq!(stats["paused_destinations"], json!([]));
    let (total, by_key) = sim.tasks();
    assert_eq!(total, 2);
    assert!(by_key.values().all(|n| *n == 1), "{by_key:?}");
    for key in ["pay-1", "pay-2"] {
        let op = d.show(key);
        assert_eq!(op["state"], "succeeded", "{op}");
        assert_eq!(op["reference"], task(&sim, key)["id"]);
    }
    let t = task(&sim, "pay-1");
    assert_eq!(
        t["body"],
        json!({"amount": "2000", "currency": "eur", "metadata": {"order_id": "6735"},
               "payment_method_types": {"0": "card"}, "capture": "false"}),
        "read as Stripe reads a form: {}",
        t["received"]
    );
    assert!(
        t["received"]
            .as_str()
            .unwrap()
            .contains("metadata%5Border_id%5D=6735")
    );
    secrets_kept_nowhere(
        &d,
        &["pay-1", "pay-2"],
        &[&out1, &err1, &out2, &err2, &missing],
    );
}

/// A HubSpot-like API: JSON, 409 means "already exists", lookup through `POST /search`.
fn hubspot_like(db: &TestDb) {
    let sim = Sim::start(&[
        "--exists-409",
        "--require-header",
        &format!("Authorization: Bearer {TOKEN}"),
    ]);
    let d = example("hubspot-like.toml", &sim, db);
    // crm-1's answer is lost after the contact was made: unknown, then found by the search
    record(
        &d,
        "crm-1",
        "crm",
        &json!({"properties": {"email": "jo@example.com", "settle_key": "crm-1"}, "_sim_fault": "drop"}),
    );
    // crm-2 exists already (an earlier run made it and lost its record): the create answers 409
    record(
        &d,
        "crm-2",
        "crm",
        &json!({"properties": {"email": "al@example.com", "settle_key": "crm-2"}}),
    );
    let made = std::thread::spawn({
        let url = format!("{}/tasks", sim.base);
        move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                reqwest::Client::new()
                    .post(url)
                    .header("Authorization", format!("Bearer {TOKEN}"))
                    .header("Idempotency-Key", "crm-2")
                    .header("Content-Type", "application/json")
                    .body(r#"{"properties":{"email":"al@example.com","settle_key":"crm-2"}}"#)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        }
    })
    .join()
    .unwrap();
    assert_eq!(made, 201);

    let (code, out, err) = dispatch(&d, Some(TOKEN));
    assert_eq!(code, 0, "{out}{err}");
    let one = d.show("crm-1");
    assert_eq!(one["state"], "succeeded", "{one}");
    assert_eq!(one["reference"], task(&sim, "crm-1")["id"]);
    assert!(
        one["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["actor"] == "settle" && e["to_state"] == "succeeded"),
        "settled by the lookup: {one}"
    );
    let two = d.show("crm-2");
    assert_eq!(two["state"], "succeeded", "{two}");
    assert_eq!(two["attempt_log"][0]["http_status"], 409);
    assert_eq!(two["attempt_log"][0]["outcome"], "accepted");
    let (total, by_key) = sim.tasks();
    assert_eq!(
        (total, by_key.get("crm-1"), by_key.get("crm-2")),
        (2, Some(&1), Some(&1))
    );
    for text in [&out, &err] {
        assert!(!text.contains(TOKEN));
    }
}

/// A Twilio-like API: form body, no idempotency key at all, a GET lookup by a payload value.
fn twilio_like(db: &TestDb) {
    let sim = Sim::start(&["--require-header", &format!("Authorization: Basic {TOKEN}")]);
    let d = example("twilio-like.toml", &sim, db);
    // the message is sent, then the destination fails: unknown, and never sent again blindly
    record(
        &d,
        "sms-1",
        "sms",
        &json!({"To": "+15550001111", "Body": "Your code is 123", "client_ref": "sms-1", "_sim_fault": "error"}),
    );
    record(
        &d,
        "sms-2",
        "sms",
        &json!({"To": "+15550002222", "Body": "Welcome", "client_ref": "sms-2"}),
    );
    let (code, out, err) = dispatch(&d, Some(TOKEN));
    assert_eq!(code, 0, "{out}{err}");
    let (total, by_key) = sim.tasks();
    assert_eq!(total, 2, "one message each: {by_key:?}");
    assert_eq!(
        by_key.keys().collect::<Vec<_>>(),
        vec![""],
        "no idempotency header was sent"
    );
    for key in ["sms-1", "sms-2"] {
        let op = d.show(key);
        assert_eq!(op["state"], "succeeded", "{op}");
        let made = task_as(&sim, key, &format!("Basic {TOKEN}"));
        assert_eq!(op["reference"], made["id"], "{op}");
        assert_eq!(op["attempt_log"].as_array().unwrap().len(), 1, "{op}");
    }
    assert_eq!(d.show("sms-1")["attempt_log"][0]["http_status"], 500);
    for text in [&out, &err] {
        assert!(!text.contains(TOKEN));
    }
}

macro_rules! on_both {
    ($drill:ident, $sqlite:ident, $pg:ident) => {
        #[test]
        fn $sqlite() {
            $drill(&common::sqlite());
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
        async fn $pg() {
            let db = common::postgres().await;
            tokio::task::spawn_blocking(move || $drill(&db))
                .await
                .unwrap();
        }
    };
}

on_both!(stripe_like, stripe_like_on_sqlite, stripe_like_on_postgres);
on_both!(
    hubspot_like,
    hubspot_like_on_sqlite,
    hubspot_like_on_postgres
);
on_both!(twilio_like, twilio_like_on_sqlite, twilio_like_on_postgres);

/// A create answered `204 No Content` (manual: Destinations and the dispatcher: any 2xx is accepted; with no body there is no
/// reference): done, sent once, through the real binary.
#[test]
fn a_204_answer_is_accepted_without_a_reference() {
    let db = common::sqlite();
    let sim = Sim::start(&["--answer", "204"]);
    let d = common::drill(&db, &sim, true, false, "");
    d.record("onb-204");
    let (code, out, err) = dispatch(&d, None);
    assert_eq!(code, 0, "{out}{err}");
    let op = d.show("onb-204");
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["reference"], Value::Null);
    assert_eq!(op["attempt_log"][0]["http_status"], 204);
    assert_eq!(sim.tasks().0, 1);
}
