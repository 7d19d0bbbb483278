//! Correcting a request (manual: Correcting a request), as its users meet it, on both backends:
//! a destination written here (not `settle sim`) rejects a body whose `email` lacks `@` with 422
//! and creates a task otherwise. A request rejected there is corrected with `settle correct`, sent
//! once by the dispatcher, and then every face answers the old key with the correction's outcome:
//! the automation's rerun on the command line and over HTTP, five repeats at the gateway. The
//! destination counts what it made. Then what may not be corrected, a redacted field set by a
//! correction, 150 corrected at once, and a chain of corrections.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::api::{ApiServer, TOOL, tool_automation};
use common::scripted::{Reply, Scripted};
use common::{Drill, TestDb, drill_with};
use serde_json::{Value, json};
use settle::{Config, Ledger};

/// What the test's destination made: a task per accepted body, numbered; and every request's
/// body, to count what was sent.
#[derive(Default)]
struct Held {
    tasks: Vec<Value>,
    requests: usize,
}

/// The destination: 422 for an `email` without `@`, else 201 `{"id": "T-n"}`.
fn destination() -> (Scripted, Arc<Mutex<Held>>) {
    let held = Arc::new(Mutex::new(Held::default()));
    let h = held.clone();
    let server = Scripted::start(move |seen| {
        let body: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
        let mut h = h.lock().unwrap();
        h.requests += 1;
        if !body["email"].as_str().unwrap_or_default().contains('@') {
            return Reply::Answer(422, r#"{"error":"email must contain @"}"#.into());
        }
        h.tasks.push(body);
        Reply::Answer(201, format!(r#"{{"id":"T-{}"}}"#, h.tasks.len()))
    });
    (server, held)
}

/// The config: the destination `people` (fast retries), `secret_code` redacted there, the tool's
/// token for the workflow onboarding, and a lead's key for the reveal.
fn config(base: &str) -> String {
    format!(
        r#"[destinations.people]
url = "{base}/people"
dedupes = false
timeout = "2s"
max_attempts = 3
base = "10ms"
cap = "50ms"
[destinations.crm]
url = "{base}/crm"
dedupes = false
timeout = "2s"
[[redaction.rules]]
destination = "people"
fields = ["secret_code"]
{tool}"#,
        tool = tool_automation()
    )
}

fn config_of(text: &str) -> Config {
    Config::parse(text, "the test's config").expect("the test's config")
}

/// The request as the automation sends it, rejected for its address.
fn original() -> Value {
    json!({"email": "ada.example", "name": "Ada", "secret_code": "old-code-1"})
}

/// A planted value: set by a correction into a redacted field, it must never be seen.
const PLANTED: &str = "PLANTED-7c1d-secret";

async fn gateway(base: &str, key: &str, body: &Value) -> (u16, Value, BTreeMap<String, String>) {
    let r = reqwest::Client::new()
        .post(format!("{base}/gateway/people/create_person"))
        .bearer_auth(TOOL)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .expect("the gateway answers");
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    (status, r.json().await.unwrap_or(Value::Null), headers)
}

/// The old key's answer once its correction succeeded: nothing to send, done, with the
/// correction's key and reference.
fn answers_for_its_correction(answer: &Value) {
    assert_eq!(
        (
            &answer["send"],
            &answer["done"],
            &answer["corrected_as"],
            &answer["reference"]
        ),
        (&json!(false), &json!(true), &json!("p-1:c2"), &json!("T-1")),
        "{answer}"
    );
}

/// The automation's rerun of `key` on the command line: `record` with these contents (and
/// `more` arguments, e.g. its run).
fn record_with(d: &Drill, key: &str, body: &Value, more: &[&str]) -> (i32, String, String) {
    let body = body.to_string();
    let mut args = vec![
        "record",
        "--key",
        key,
        "--workflow",
        "onboarding",
        "--step",
        "create_person",
        "--destination",
        "people",
        "--action",
        "create_person",
        "--payload",
        &body,
    ];
    args.extend(more);
    d.output(&args)
}

fn record(d: &Drill, key: &str, body: &Value) -> (i32, String, String) {
    record_with(d, key, body, &["--json"])
}

/// Acceptance 1 and 3: rejected at the destination, corrected, sent once; the old key answers with
/// the correction's outcome on every face; the planted value is nowhere but a lead's reveal.
async fn a_corrected_request_is_sent_once_and_the_old_key_answers_for_it(db: &TestDb) {
    let (dest, held) = destination();
    let text = config(&dest.base);
    let s = ApiServer::start_with(&db.url, &text, &[]);
    let d = drill_with(&db.url, &text);
    let mut seen = Vec::new();

    let (status, body, _) = gateway(&s.base, "p-1", &original()).await;
    assert_eq!(status, 422, "the destination's own rejection: {body}");
    assert_eq!(d.show("p-1")["state"], "rejected");

    let set = format!("secret_code=\"{PLANTED}\"");
    let (code, out, err) = d.output(&[
        "correct",
        "p-1",
        "--set",
        "email=\"a@b.example\"",
        "--set",
        &set,
        "--note",
        &format!("the address had no @; code {PLANTED}"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("corrected as p-1:c2"), "{out}");
    seen.extend([out, err]);
    let corrected = d.show("p-1:c2");
    assert_eq!(
        (&corrected["state"], &corrected["corrects"]),
        (&json!("pending"), &json!("p-1")),
        "{corrected}"
    );
    assert_eq!(d.show("p-1")["corrected_as"]["key"], "p-1:c2");

    let out = d.dispatch_until_settled();
    seen.push(out);
    let shown = d.show("p-1:c2");
    assert_eq!(shown["state"], "succeeded", "{shown}");
    assert_eq!(shown["reference"], "T-1");
    {
        let h = held.lock().unwrap();
        assert_eq!(h.tasks.len(), 1);
        assert_eq!(h.tasks[0]["email"], "a@b.example");
        assert_eq!(
            h.tasks[0]["secret_code"], PLANTED,
            "the destination gets the corrected value itself"
        );
    }

    // the automation's rerun of the old key with the old contents, on the command line
    let (code, out, err) = record(&d, "p-1", &original());
    assert_eq!(code, 0, "{out}{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    answers_for_its_correction(&answer);
    let (code, _, err) = d.output(&["start", "--key", "p-1"]);
    assert_eq!(code, 3);
    assert!(err.contains("corrected as p-1:c2"), "{err}");

    // over HTTP
    let intent = json!({"key": "p-1", "workflow": "onboarding", "step": "create_person",
        "destination": "people", "action": "create_person", "payload": original()});
    let r = reqwest::Client::new()
        .post(format!("{}/v1/operations", s.base))
        .bearer_auth(TOOL)
        .json(&intent)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let answer: Value = r.json().await.unwrap();
    answers_for_its_correction(&answer);
    // its start over HTTP names the correction, as the command line does
    let r = reqwest::Client::new()
        .post(format!("{}/v1/operations/p-1/start", s.base))
        .bearer_auth(TOOL)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 409);
    let refused: Value = r.json().await.unwrap();
    assert_eq!(refused["error"]["corrected_as"], "p-1:c2", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("corrected as p-1:c2"),
        "{refused}"
    );

    // five repeats at the gateway: the correction's replay, never a send
    for _ in 0..5 {
        let (status, body, headers) = gateway(&s.base, "p-1", &original()).await;
        assert_eq!((status, &body), (200, &json!({"id": "T-1"})), "{headers:?}");
        assert_eq!(
            headers.get("settle-replayed").map(String::as_str),
            Some("true")
        );
        seen.push(body.to_string());
    }
    {
        let h = held.lock().unwrap();
        assert_eq!(
            h.tasks.len(),
            1,
            "one task for the pair, counted at the destination"
        );
        assert_eq!(
            h.requests, 2,
            "the rejected request and its correction, nothing else"
        );
    }

    // the planted value is in no view, event, log line or answer
    for key in ["p-1", "p-1:c2"] {
        seen.push(d.run(&["show", key, "--json"]));
        seen.push(d.run(&["show", key]));
    }
    seen.push(d.run(&["list", "--all", "--json"]));
    seen.push(d.run(&["report"]));
    seen.push(s.log());
    seen.push(std::fs::read_to_string(d.config.with_extension("log")).unwrap_or_default());
    for text in &seen {
        assert!(!text.contains(PLANTED), "the planted value leaked: {text}");
    }
    // ... but a lead's reveal shows it, and the audit names the field, not the value
    let lead = Ledger::open(&db.url, config_of(&text)).await.unwrap();
    let value = lead
        .staff()
        .reveal("p-1:c2", "secret_code", "the customer asks", "lena")
        .await
        .unwrap();
    assert_eq!(value, PLANTED);
    let history = d.run(&["show", "p-1:c2", "--json"]);
    assert!(history.contains("\"revealed\""), "{history}");
    assert!(!history.contains(PLANTED));
}

/// Acceptance 2: what may have been done, is done or is closed is not corrected: one line, exit 3,
/// nothing changed.
async fn only_a_rejected_or_failed_request_is_corrected(db: &TestDb) {
    let (dest, _held) = destination();
    let d = drill_with(&db.url, &config(&dest.base));
    let body = json!({"email": "x@y.example"});
    for key in ["unknown-1", "flight-1", "done-1", "closed-1"] {
        let (code, out, err) = record(&d, key, &body);
        assert_eq!(code, 0, "{out}{err}");
    }
    for key in ["unknown-1", "flight-1", "done-1"] {
        d.run(&["start", "--key", key]);
    }
    d.run(&["attempt", "--key", "unknown-1", "--outcome", "unknown"]);
    d.run(&[
        "attempt",
        "--key",
        "done-1",
        "--outcome",
        "accepted",
        "--reference",
        "T-9",
    ]);
    d.run(&[
        "close",
        "closed-1",
        "--resolution",
        "abandoned",
        "--note",
        "not wanted",
    ]);
    for (key, why) in [
        ("unknown-1", "reconcile it first"),
        ("flight-1", "reconcile it first"),
        ("done-1", "nothing to correct"),
        ("closed-1", "nothing to correct"),
    ] {
        // as it stood (its age aside, which the clock moves)
        let shown = |key: &str| {
            let mut v = d.show(key);
            v.as_object_mut().unwrap().remove("age_seconds");
            // the next step names the age too ("created 1s ago")
            if let Some(step) = v["next_step"].as_str()
                && let (Some(from), Some(to)) = (step.find("created "), step.find(" ago"))
            {
                let step = format!("{}created _{}", &step[..from], &step[to..]);
                v["next_step"] = serde_json::Value::String(step);
            }
            v
        };
        let before = shown(key);
        let (code, out, err) = d.output(&[
            "correct",
            key,
            "--set",
            "email=\"a@b.example\"",
            "--note",
            "fix",
        ]);
        assert_eq!(code, 3, "{key}: {out}{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(why), "{key}: {err}");
        assert_eq!(shown(key), before, "{key} is as it was");
        let (code, _, _) = d.output(&["show", &format!("{key}:c2")]);
        assert_eq!(code, 3, "no correction of {key} was made");
    }
    // and the offers agree: `correct` is offered on the rejected one only
    let l = Ledger::open(&db.url, config_of(&config(&dest.base)))
        .await
        .unwrap();
    let (code, out, err) = record(&d, "rejected-1", &json!({"email": "nope"}));
    assert_eq!(code, 0, "{out}{err}");
    d.run(&["start", "--key", "rejected-1"]);
    d.run(&["attempt", "--key", "rejected-1", "--outcome", "rejected"]);
    for (key, offered) in [
        ("unknown-1", false),
        ("flight-1", false),
        ("done-1", false),
        ("closed-1", false),
        ("rejected-1", true),
    ] {
        let v = l.read().operation(key, "alice").await.unwrap();
        assert_eq!(
            v.actions.contains(settle::domain::Offer::Correct),
            offered,
            "{key}"
        );
    }
}

/// Acceptance 4: `--where` with a frozen preview per item; `--yes` corrects 150 in one go: 150 new
/// operations, 150 originals closed, 300 events, one send each.
async fn a_hundred_and_fifty_at_once(db: &TestDb) {
    let (dest, held) = destination();
    let text = config(&dest.base);
    let d = drill_with(&db.url, &text);
    let mut lines = String::new();
    for i in 0..150 {
        let key = format!("crm-{i:03}");
        lines.push_str(
            &json!({"type": "intent", "key": key, "workflow": "onboarding", "step": "create_contact",
                "destination": "crm", "action": "create_contact",
                "payload": {"email": format!("c{i}@x.example"), "country": "FR"}})
            .to_string(),
        );
        lines.push('\n');
        lines.push_str(
            &json!({"type": "attempt", "key": key, "attempt": 1, "outcome": "rejected",
            "http_status": 422, "error": "country must be DE"})
            .to_string(),
        );
        lines.push('\n');
    }
    let file = d.config.with_file_name("lines.jsonl");
    std::fs::write(&file, lines).unwrap();
    d.run(&["ingest", file.to_str().unwrap()]);
    let filter = ["--where", "dest:crm state:rejected"];
    let set = ["--set", "country=\"DE\"", "--note", "wrong country code"];
    let args = |more: &[&'static str]| -> Vec<&str> {
        let mut a = vec!["correct"];
        a.extend(filter);
        a.extend(set);
        a.extend(more);
        a
    };
    let (code, out, err) = d.output(&args(&["--dry-run"]));
    assert_eq!(code, 0, "{out}{err}");
    let previewed: Vec<&str> = out.lines().filter(|l| l.contains(" -> crm-")).collect();
    assert_eq!(previewed.len(), 150, "{out}");
    assert!(
        previewed
            .iter()
            .all(|l| l.contains(":c2  country \"FR\" -> \"DE\"")),
        "{out}"
    );
    assert!(out.contains("correct 150: 150 to do"), "{out}");
    assert_eq!(
        d.run(&["list", "--all", "--json"]).matches("crm-").count(),
        150,
        "nothing changed"
    );

    let (code, out, err) = d.output(&args(&["--yes"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("correct: 150 done"), "{out}");
    let l = Ledger::open(&db.url, config_of(&text)).await.unwrap();
    let mut events = 0;
    for i in 0..150 {
        let key = format!("crm-{i:03}");
        let old = l.read().show(&key, "alice").await.unwrap();
        assert_eq!(
            old.op.superseded_by.as_deref(),
            Some(format!("{key}:c2").as_str())
        );
        let new = l.read().show(&format!("{key}:c2"), "alice").await.unwrap();
        assert_eq!(new.payload["country"], "DE");
        assert_eq!(new.op.state, settle::State::Pending);
        events += old.history.iter().filter(|e| e.kind == "corrected").count();
        events += new.history.len();
    }
    assert_eq!(events, 300, "a corrected and a recorded event each");
    d.dispatch_until_settled();
    let h = held.lock().unwrap();
    assert_eq!(h.requests, 150, "one send each");
    let mut sent: Vec<&str> = h.tasks.iter().filter_map(|t| t["email"].as_str()).collect();
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), 150);
}

/// Acceptance 5: KEY -> KEY:c2 (rejected again) -> KEY:c3 (succeeded): `show KEY` names KEY:c3,
/// the run is done, the review counts two corrections.
async fn a_chain_of_corrections(db: &TestDb) {
    let (dest, held) = destination();
    let text = config(&dest.base);
    let d = drill_with(&db.url, &text);
    let (code, out, err) = record_with(&d, "onb-7", &json!({"email": "none"}), &["--run", "run-7"]);
    assert_eq!(code, 0, "{out}{err}");
    d.dispatch_until_settled();
    assert_eq!(d.show("onb-7")["state"], "rejected");
    // corrected, still without an @: rejected again
    d.run(&[
        "correct",
        "onb-7",
        "--set",
        "email=\"still none\"",
        "--note",
        "first try",
    ]);
    d.dispatch_until_settled();
    assert_eq!(d.show("onb-7:c2")["state"], "rejected");
    assert_eq!(d.show("onb-7")["corrected_as"]["state"], "rejected");
    let run = d.run(&["run", "show", "run-7", "--json"]);
    assert!(run.contains("\"blocked\""), "{run}");
    // correcting the original again is refused: its chain's end is what to correct
    let (code, _, err) = d.output(&["correct", "onb-7", "--set", "email=\"a@b\"", "--note", "x"]);
    assert_eq!(code, 3);
    assert!(err.contains("correct onb-7:c2 instead"), "{err}");
    d.run(&[
        "correct",
        "onb-7:c2",
        "--set",
        "email=\"ada@b.example\"",
        "--note",
        "second",
    ]);
    d.dispatch_until_settled();
    let end = d.show("onb-7:c3");
    assert_eq!(
        (&end["state"], &end["corrects"]),
        (&json!("succeeded"), &json!("onb-7:c2"))
    );
    let first = d.show("onb-7");
    assert_eq!(
        (
            &first["corrected_as"]["key"],
            &first["corrected_as"]["corrections"]
        ),
        (&json!("onb-7:c3"), &json!(2)),
        "{first}"
    );
    assert!(
        d.run(&["show", "onb-7"])
            .contains("corrected as onb-7:c3 (succeeded")
    );
    let run: Value = serde_json::from_str(&d.run(&["run", "show", "run-7", "--json"])).unwrap();
    assert_eq!(run["state"], "done", "{run}");
    let report: Value = serde_json::from_str(&d.run(&["report", "--json"])).unwrap();
    assert_eq!(report["corrections"], 2, "{report}");
    assert_eq!(report["by_destination"]["people"]["corrections"], 2);
    assert!(d.run(&["report"]).contains("corrections: 2"));
    assert_eq!(held.lock().unwrap().tasks.len(), 1);
}

/// A key along the chain that an automation recorded itself (`KEY:c2`) is skipped, never taken
/// over: the correction is made under the next free key; and a path deeper than a payload may
/// nest is refused in one line, before anything is written (60,000 segments once crashed it).
async fn a_taken_key_is_skipped_and_a_deep_path_refused(db: &TestDb) {
    let (dest, held) = destination();
    let d = drill_with(&db.url, &config(&dest.base));
    let (code, out, err) = record(&d, "p-9", &json!({"email": "none"}));
    assert_eq!(code, 0, "{out}{err}");
    d.dispatch_until_settled();
    assert_eq!(d.show("p-9")["state"], "rejected");
    // the automation's own request under the chain's next key, not yet sent
    d.run(&[
        "record",
        "--key",
        "p-9:c2",
        "--workflow",
        "onboarding",
        "--destination",
        "crm",
        "--action",
        "create_person",
        "--payload",
        r#"{"email":"other@b.example"}"#,
    ]);
    let before = d.show("p-9:c2");
    for (segments, what) in [(60_000, "60,000"), (20_000, "20,000"), (127, "127")] {
        let path = vec!["a"; segments].join(".");
        let (code, out, err) = d.output(&[
            "correct",
            "p-9",
            "--set",
            &format!("{path}=1"),
            "--note",
            "deep",
        ]);
        assert_eq!(code, 2, "{what}: {out}{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(err.contains("deeper than 126 fields"), "{what}: {err}");
    }
    assert_eq!(d.show("p-9")["state"], "rejected", "nothing was written");
    let out = d.run(&[
        "correct",
        "p-9",
        "--set",
        "email=\"ada@b.example\"",
        "--note",
        "the address",
    ]);
    assert!(out.contains("corrected as p-9:c3"), "{out}");
    let after = d.show("p-9:c2");
    assert_eq!(
        (&after["state"], &after["payload"], &after["history"]),
        (&before["state"], &before["payload"], &before["history"]),
        "the automation's own operation is left as it was"
    );
    assert_eq!(d.show("p-9")["corrected_as"]["key"], "p-9:c3");
    assert_eq!(d.show("p-9:c3")["corrects"], "p-9");
    d.dispatch_until_settled();
    assert_eq!(d.show("p-9:c3")["state"], "succeeded");
    assert_eq!(
        held.lock().unwrap().tasks.len(),
        2,
        "p-9:c2 and p-9:c3 each once"
    );
}

both_backends!(
    a_corrected_request_is_sent_once_and_the_old_key_answers_for_it,
    only_a_rejected_or_failed_request_is_corrected,
    a_hundred_and_fifty_at_once,
    a_chain_of_corrections,
    a_taken_key_is_skipped_and_a_deep_path_refused,
);
