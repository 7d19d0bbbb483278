//! The gateway (manual: The gateway) as an automation tool meets it: the real `settle serve --http` in front
//! of real `settle sim`s that do not deduplicate, on SQLite and PostgreSQL. Every row of the manual
//! 21's table, counted at the simulators: a repeat reaches a destination only where the table
//! says it may. And the credentials: the destination's secret comes from settle's environment,
//! the tool's token never travels, and neither shows in an answer, a log line or an event.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::api::{ALL, ApiServer, BOT, TOOL, config_text, tool_automation};
use common::{Raw, Sim, TestDb};
use serde_json::{Value, json};

/// The secret settle sends to the `tasks` simulator, from its own environment.
const DEST_KEY: &str = "gw_dest_5ecret_key_7777";

/// One gateway answer: status, headers, the body as text and as JSON.
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Value,
    text: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// A non-2xx answer of the gateway's own: the error object with this code.
    fn error(&self, status: u16, code: &str) -> &str {
        assert_eq!(self.status, status, "status of {}", self.text);
        assert_eq!(self.body["error"]["code"], code, "code of {}", self.text);
        self.body["error"]["message"].as_str().expect("a message")
    }

    fn replayed(&self) -> bool {
        self.header("settle-replayed") == Some("true")
    }
}

/// A request through the gateway to `destination`, action `create_task`.
async fn gw(
    base: &str,
    token: &str,
    destination: &str,
    key: Option<&str>,
    body: &Value,
    headers: &[(&str, &str)],
) -> Answer {
    let mut r = reqwest::Client::new()
        .post(format!("{base}/gateway/{destination}/create_task"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    for (n, v) in headers {
        r = r.header(*n, *v);
    }
    let resp = r.send().await.expect("the gateway answers");
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let text = resp.text().await.unwrap();
    Answer {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

/// The JSON an HTTP request is answered with.
async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Requests that reached a simulator, whatever came of them (`/stats`).
async fn requests(sim: &Sim) -> u64 {
    let v = json_of(reqwest::Client::new().get(format!("{}/stats", sim.base))).await;
    v["requests"].as_u64().expect("/stats counts requests")
}

/// Tasks a simulator holds for a key.
fn held(sim: &Sim, key: &str) -> u64 {
    sim.tasks().1.get(key).copied().unwrap_or(0)
}

fn state(s: &Gate, key: &str) -> String {
    let v: Value = serde_json::from_str(&s.settle(&["show", key, "--json"])).unwrap();
    v["state"].as_str().unwrap().to_string()
}

/// The simulators: `tasks` (needs the secret header; `late` answers after 1.5 s), `lost` (the
/// first request of each key is lost on its way), `dedupe` (deduplicates; the first answer of
/// each key is dropped after the task is made).
struct Sims {
    tasks: Sim,
    lost: Sim,
    dedupe: Sim,
}

fn sims() -> Sims {
    let header = format!("X-Api-Key: {DEST_KEY}");
    Sims {
        tasks: Sim::start(&[
            "--no-dedupe",
            "--late",
            "1500ms",
            "--require-header",
            &header,
        ]),
        lost: Sim::start(&["--no-dedupe", "--fault", "lost", "--fault-first-only"]),
        dedupe: Sim::start(&["--fault", "drop", "--fault-first-only"]),
    }
}

fn server(db: &TestDb, sims: &Sims) -> ApiServer {
    let extra = format!(
        r#"{tool}[destinations.tasks]
url = "{tasks}/tasks"
dedupes = false
timeout = "5s"
max_attempts = 3
base = "10ms"
cap = "2s"
headers = {{ "X-Api-Key" = "${{GW_TASKS_KEY}}" }}
[destinations.lost]
url = "{lost}/tasks"
dedupes = false
timeout = "2s"
[destinations.dedupe]
url = "{dedupe}/tasks"
dedupes = true
key_retention = "1h"
base = "10ms"
cap = "50ms"
timeout = "2s"
[destinations.looked]
url = "{lost}/tasks"
lookup_url = "{lost}/tasks?key={{key}}"
lookup = true
dedupes = false
timeout = "2s"
[destinations.found]
url = "{dedupe}/tasks"
lookup_url = "{dedupe}/tasks?key={{key}}"
lookup = true
dedupes = false
timeout = "2s"
[destinations.noauth]
url = "{tasks}/tasks"
dedupes = false
timeout = "2s"
[workflows.guarded]
pause_when = {{ unresolved = 1 }}
"#,
        tool = tool_automation(),
        tasks = sims.tasks.base,
        lost = sims.lost.base,
        dedupe = sims.dedupe.base,
    );
    ApiServer::start_env(
        &db.url,
        &config_text(&extra),
        &[],
        &[("GW_TASKS_KEY", DEST_KEY)],
    )
}

/// The gateway's servers: one, or two on one ledger, each request to the next in turn.
struct Gate {
    servers: Vec<ApiServer>,
    turn: AtomicUsize,
}

impl Gate {
    /// The base URL of the server whose turn it is.
    fn base(&self) -> String {
        let i = self.turn.fetch_add(1, Ordering::SeqCst);
        self.servers[i % self.servers.len()].base.clone()
    }

    fn settle(&self, args: &[&str]) -> String {
        self.servers[0].settle(args)
    }

    /// Every server's log.
    fn log(&self) -> String {
        self.servers.iter().map(ApiServer::log).collect()
    }

    fn stderr(&self) -> String {
        self.servers.iter().map(ApiServer::stderr).collect()
    }
}

fn task(title: &str, fault: Option<&str>) -> Value {
    let mut v = json!({"title": title, "customer": {"name": "Ada Lovelace"}});
    if let Some(f) = fault {
        v["_sim_fault"] = json!(f);
    }
    v
}

/// Every row of the table (manual: The gateway), counted at the simulators, then where the
/// secrets went.
async fn every_row_of_the_table(db: &TestDb) {
    every_row_on(db, 1).await;
}

/// Every row of the table with each request to the next of two servers on one ledger, in
/// turn (manual: Many settle processes): the same answers, the same requests sent.
async fn every_row_across_two_servers(db: &TestDb) {
    every_row_on(db, 2).await;
}

async fn every_row_on(db: &TestDb, servers: usize) {
    let sims = sims();
    let s = Gate {
        servers: (0..servers).map(|_| server(db, &sims)).collect(),
        turn: AtomicUsize::new(0),
    };
    let mut seen: Vec<String> = Vec::new();

    // first request: the destination's own status and body, sent once
    let body = task("Kickoff call", None);
    let first = gw(&s.base(), TOOL, "tasks", Some("gw-1"), &body, &[]).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let reference = first.body["id"].as_str().expect("the sim's id").to_string();
    assert_eq!(first.header("settle-state"), Some("succeeded"));
    assert!(!first.replayed());
    assert_eq!(held(&sims.tasks, "gw-1"), 1);
    let shown: Value = serde_json::from_str(&s.settle(&["show", "gw-1", "--json"])).unwrap();
    assert_eq!(
        (&shown["workflow"], &shown["step"]),
        (&json!("onboarding"), &json!("create_task")),
        "the token's only workflow; a step named by its action"
    );
    let sent = requests(&sims.tasks).await;

    // repeat after success: the stored reference, replayed, not sent
    let again = gw(&s.base(), TOOL, "tasks", Some("gw-1"), &body, &[]).await;
    assert_eq!(
        (again.status, again.replayed()),
        (200, true),
        "{}",
        again.text
    );
    assert_eq!(again.body, json!({"id": reference}));
    // same key, different body: 422, nothing sent, the success stands
    let changed = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-1"),
        &task("Other", None),
        &[],
    )
    .await;
    changed.error(422, "conflict");
    assert_eq!(state(&s, "gw-1"), "succeeded");
    assert_eq!(requests(&sims.tasks).await, sent);
    seen.extend([first.text, again.text, changed.text]);

    in_flight_and_changed_bodies(&s, &sims, &mut seen).await;
    unknown_outcomes(&s, &sims, &mut seen).await;
    rejections_waits_and_pauses(&s, &sims, &mut seen).await;
    bad_requests(&s).await;
    who_wrote_each_answer(&s).await;
    assert_eq!(
        sims.tasks.tasks().1.values().max(),
        Some(&1),
        "one task per key"
    );
    secrets_stay_home(&s, &sims, &seen).await;
}

/// In flight: 409 with Retry-After, not sent; a changed body while waiting is a conflict.
async fn in_flight_and_changed_bodies(s: &Gate, sims: &Sims, seen: &mut Vec<String>) {
    let body = task("Slow one", Some("late"));
    let first = {
        let (b, body) = (s.base(), body.clone());
        tokio::spawn(async move { gw(&b, TOOL, "tasks", Some("gw-late"), &body, &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = requests(&sims.tasks).await;
    let during = gw(&s.base(), TOOL, "tasks", Some("gw-late"), &body, &[]).await;
    during.error(409, "in_flight");
    assert!(
        during.header("retry-after").is_some(),
        "{:?}",
        during.headers
    );
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(requests(&sims.tasks).await, sent, "the repeat was not sent");
    assert_eq!(held(&sims.tasks, "gw-late"), 1);

    // a changed body under a key that waits for its retry: a conflict, an exception, not sent
    let waiting = task("A", Some("unavailable"));
    let wait = gw(&s.base(), TOOL, "tasks", Some("gw-conf"), &waiting, &[]).await;
    assert_eq!(wait.status, 503, "{}", wait.text);
    assert_eq!(wait.header("settle-state"), Some("retry_wait"));
    let sent = requests(&sims.tasks).await;
    let other = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-conf"),
        &task("B", None),
        &[],
    )
    .await;
    other.error(422, "conflict");
    assert_eq!(other.header("settle-state"), Some("conflict"));
    assert_eq!(state(s, "gw-conf"), "conflict");
    let repeat = gw(&s.base(), TOOL, "tasks", Some("gw-conf"), &waiting, &[]).await;
    repeat.error(422, "conflict");
    assert_eq!(requests(&sims.tasks).await, sent);
    seen.extend([during.text, other.text, repeat.text]);
}

/// Unknown outcomes: held for review until a person reconciles (found: replayed; absent and
/// released: sent), or sent again with the same key where the destination deduplicates.
async fn unknown_outcomes(s: &Gate, sims: &Sims, seen: &mut Vec<String>) {
    // the task was made, the answer lost: 504, then 409 until a person finds it
    let body = task("Dropped", Some("drop"));
    let first = gw(&s.base(), TOOL, "tasks", Some("gw-drop"), &body, &[]).await;
    first.error(504, "outcome_unknown");
    let sent = requests(&sims.tasks).await;
    for _ in 0..3 {
        let held_back = gw(&s.base(), TOOL, "tasks", Some("gw-drop"), &body, &[]).await;
        assert!(
            held_back
                .error(409, "outcome_unknown")
                .contains("held for review")
        );
    }
    assert_eq!(requests(&sims.tasks).await, sent, "not resent");
    let (_, by_key) = sims.tasks.tasks();
    assert_eq!(by_key.get("gw-drop"), Some(&1));
    s.settle(&["reconcile", "gw-drop", "--found", "T-dropped"]);
    let replay = gw(&s.base(), TOOL, "tasks", Some("gw-drop"), &body, &[]).await;
    assert_eq!(
        (replay.status, replay.replayed()),
        (200, true),
        "{}",
        replay.text
    );
    assert_eq!(replay.body, json!({"id": "T-dropped"}));
    assert_eq!(requests(&sims.tasks).await, sent);

    // lost on its way: absent at the destination; a person says so and lets go: sent again
    let body = task("Lost", None);
    let first = gw(&s.base(), TOOL, "lost", Some("gw-lost"), &body, &[]).await;
    first.error(504, "outcome_unknown");
    assert_eq!(held(&sims.lost, "gw-lost"), 0);
    gw(&s.base(), TOOL, "lost", Some("gw-lost"), &body, &[])
        .await
        .error(409, "outcome_unknown");
    s.settle(&["reconcile", "gw-lost", "--absent"]);
    gw(&s.base(), TOOL, "lost", Some("gw-lost"), &body, &[])
        .await
        .error(409, "claimed");
    assert_eq!(requests(&sims.lost).await, 1, "held while claimed");
    s.settle(&["release", "gw-lost"]);
    let resent = gw(&s.base(), TOOL, "lost", Some("gw-lost"), &body, &[]).await;
    assert_eq!(resent.status, 201, "{}", resent.text);
    assert_eq!(
        (held(&sims.lost, "gw-lost"), requests(&sims.lost).await),
        (1, 2)
    );
    let replay = gw(&s.base(), TOOL, "lost", Some("gw-lost"), &body, &[]).await;
    assert!(replay.replayed(), "{}", replay.text);

    // a destination with a lookup settles the unknown itself: absent, so the repeat is sent
    let body = task("Looked up", None);
    let first = gw(&s.base(), TOOL, "looked", Some("gw-looked"), &body, &[]).await;
    assert!(
        first
            .error(504, "outcome_unknown")
            .contains("looked up at looked: not there: a repeat sends it again"),
        "{}",
        first.text
    );
    assert_eq!(
        first.header("settle-state"),
        Some("failed"),
        "looked up: absent"
    );
    let resent = gw(&s.base(), TOOL, "looked", Some("gw-looked"), &body, &[]).await;
    assert_eq!(resent.status, 201, "{}", resent.text);
    assert_eq!(held(&sims.lost, "gw-looked"), 1);

    // credentials refused: the destination's 401 handed on, the destination paused for all
    let sent = requests(&sims.tasks).await;
    let refused = gw(
        &s.base(),
        TOOL,
        "noauth",
        Some("gw-auth"),
        &task("A", None),
        &[],
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    let next = gw(
        &s.base(),
        TOOL,
        "noauth",
        Some("gw-auth-2"),
        &task("B", None),
        &[],
    )
    .await;
    assert!(
        next.error(503, "paused").contains("destination noauth"),
        "{}",
        next.text
    );
    assert_eq!(requests(&sims.tasks).await, sent + 1);
    s.settle(&["resume", "--destination", "noauth"]);

    // a deduplicating destination: the unknown waits for its retry and is sent again, same key
    let body = task("Deduplicated", None);
    let first = gw(&s.base(), TOOL, "dedupe", Some("gw-dd"), &body, &[]).await;
    first.error(504, "outcome_unknown");
    assert_eq!(first.header("settle-state"), Some("retry_wait"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = gw(&s.base(), TOOL, "dedupe", Some("gw-dd"), &body, &[]).await;
    assert_eq!(
        again.status, 200,
        "the destination's own replay: {}",
        again.text
    );
    assert!(!again.replayed());
    assert_eq!(again.header("settle-state"), Some("succeeded"));
    assert_eq!(
        (held(&sims.dedupe, "gw-dd"), requests(&sims.dedupe).await),
        (1, 2)
    );
    // a destination with a lookup, found: the answer was lost after the task was made; the lookup says done at once, a
    // repeat gets the reference, nothing is sent again
    let body = task("Found", None);
    let first = gw(&s.base(), TOOL, "found", Some("gw-found"), &body, &[]).await;
    assert!(
        first
            .error(504, "outcome_unknown")
            .contains("looked up at found: done (reference "),
        "{}",
        first.text
    );
    assert_eq!(first.body["error"]["settle_state"], "succeeded");
    let sent = requests(&sims.dedupe).await;
    let replay = gw(&s.base(), TOOL, "found", Some("gw-found"), &body, &[]).await;
    assert_eq!(
        (replay.status, replay.replayed()),
        (200, true),
        "{}",
        replay.text
    );
    assert_eq!(
        replay.body["id"].as_str(),
        sims.dedupe.stats()["ids_by_key"]["gw-found"][0].as_str(),
        "the destination's own id: {}",
        replay.text
    );
    assert_eq!(requests(&sims.dedupe).await, sent, "nothing sent again");
    assert_eq!(held(&sims.dedupe, "gw-found"), 1);
    seen.extend([first.text, again.text]);
}

/// Who wrote each answer, where a tool that shows only an error's body (n8n) can read it: the
/// destination's own status and body pass as they came (`Settle-Origin: destination`, the body
/// untouched); every answer settle writes itself says `Settle-Origin: settle` and, in its error
/// object, `"origin": "settle"` with the operation's state (`settle_state`).
async fn who_wrote_each_answer(s: &Gate) {
    // the destination's own 500: an unknown outcome, its body passed on untouched
    let body = task("Broken", Some("error"));
    let first = gw(&s.base(), TOOL, "tasks", Some("gw-500"), &body, &[]).await;
    assert_eq!(first.status, 500, "{}", first.text);
    assert_eq!(first.header("settle-origin"), Some("destination"));
    assert_eq!(first.header("settle-state"), Some("unknown"));
    assert!(
        first
            .body
            .get("error")
            .is_none_or(|e| e.get("origin").is_none()),
        "the destination's body as it came: {}",
        first.text
    );
    // its repeat: settle's own 409, saying so and saying the state in the body
    let held_back = gw(&s.base(), TOOL, "tasks", Some("gw-500"), &body, &[]).await;
    held_back.error(409, "outcome_unknown");
    assert_eq!(held_back.header("settle-origin"), Some("settle"));
    assert_eq!(held_back.body["error"]["origin"], "settle");
    assert_eq!(held_back.body["error"]["settle_state"], "unknown");
    // a success: the destination's own 201, then settle's replay
    let made = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-201"),
        &task("Fine", None),
        &[],
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.header("settle-origin"), Some("destination"));
    let replay = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-201"),
        &task("Fine", None),
        &[],
    )
    .await;
    assert_eq!(replay.header("settle-origin"), Some("settle"));
    // a conflict, and a request refused before any operation: settle's, the latter stateless
    let changed = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-201"),
        &task("Other", None),
        &[],
    )
    .await;
    changed.error(422, "conflict");
    // the success stands: that is the state said
    assert_eq!(changed.body["error"]["settle_state"], "succeeded");
    assert_eq!(changed.header("settle-state"), Some("succeeded"));
    let keyless = gw(&s.base(), TOOL, "tasks", None, &task("No key", None), &[]).await;
    keyless.error(400, "invalid");
    assert_eq!(keyless.header("settle-origin"), Some("settle"));
    assert_eq!(keyless.body["error"]["origin"], "settle");
    assert!(
        keyless.body["error"].get("settle_state").is_none(),
        "{}",
        keyless.text
    );
}

/// A rejection replayed; a retry not yet due; paused workflows and destinations; a threshold.
async fn rejections_waits_and_pauses(s: &Gate, sims: &Sims, seen: &mut Vec<String>) {
    let body = task("Rejected", Some("reject"));
    let first = gw(&s.base(), TOOL, "tasks", Some("gw-rej"), &body, &[]).await;
    assert_eq!(first.status, 422, "{}", first.text);
    let sent = requests(&sims.tasks).await;
    let replay = gw(&s.base(), TOOL, "tasks", Some("gw-rej"), &body, &[]).await;
    assert!(
        replay
            .error(422, "rejected")
            .contains("due date is in the past")
    );
    assert!(replay.replayed());
    assert_eq!(requests(&sims.tasks).await, sent);

    // 503 with Retry-After before the next attempt is due; sent once it is
    let body = task("Busy", Some("unavailable"));
    let first = gw(&s.base(), TOOL, "tasks", Some("gw-wait"), &body, &[]).await;
    assert_eq!(first.status, 503, "{}", first.text);
    let sent = requests(&sims.tasks).await;
    let early = gw(&s.base(), TOOL, "tasks", Some("gw-wait"), &body, &[]).await;
    early.error(503, "unavailable");
    let wait: u64 = early.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        requests(&sims.tasks).await,
        sent,
        "not sent before it is due"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let due = gw(&s.base(), TOOL, "tasks", Some("gw-wait"), &body, &[]).await;
    assert_eq!(
        due.status, 503,
        "the destination's own 503 again: {}",
        due.text
    );
    assert_eq!(requests(&sims.tasks).await, sent + 1, "sent once due");

    // a paused workflow, a paused destination: 503 paused, nothing sent, sent after resume
    s.settle(&["pause", "onboarding", "--reason", "incident"]);
    let body = task("Paused", None);
    let paused = gw(&s.base(), TOOL, "tasks", Some("gw-paused"), &body, &[]).await;
    assert!(paused.error(503, "paused").contains("onboarding"));
    s.settle(&["resume", "onboarding"]);
    s.settle(&["pause", "--destination", "tasks", "--reason", "maintenance"]);
    let paused = gw(&s.base(), TOOL, "tasks", Some("gw-paused"), &body, &[]).await;
    assert!(paused.error(503, "paused").contains("destination tasks"));
    assert_eq!(requests(&sims.tasks).await, sent + 1);
    s.settle(&["resume", "--destination", "tasks"]);
    let resumed = gw(&s.base(), TOOL, "tasks", Some("gw-paused"), &body, &[]).await;
    assert_eq!(resumed.status, 201, "{}", resumed.text);

    // a workflow at its threshold (one unresolved): the next request is not sent
    let wf = [("settle-workflow", "guarded")];
    let rej = gw(
        &s.base(),
        ALL,
        "tasks",
        Some("gw-g1"),
        &task("G1", Some("reject")),
        &wf,
    )
    .await;
    assert_eq!(rej.status, 422);
    let sent = requests(&sims.tasks).await;
    let stopped = gw(
        &s.base(),
        ALL,
        "tasks",
        Some("gw-g2"),
        &task("G2", None),
        &wf,
    )
    .await;
    assert!(
        stopped.error(503, "paused").contains("guarded"),
        "{}",
        stopped.text
    );
    assert_eq!(requests(&sims.tasks).await, sent);
    seen.extend([first.text, replay.text, early.text, due.text, stopped.text]);
}

/// What the gateway refuses before anything is recorded.
async fn bad_requests(s: &Gate) {
    let body = task("x", None);
    let no_key = gw(&s.base(), TOOL, "tasks", None, &body, &[]).await;
    assert!(no_key.error(400, "invalid").contains("Idempotency-Key"));
    // two keys for one request: which was meant cannot be known, so neither is used
    let two = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-two-1"),
        &body,
        &[("idempotency-key", "gw-two-2")],
    )
    .await;
    assert!(
        two.error(400, "invalid").contains("more than once"),
        "{}",
        two.text
    );
    let many = gw(&s.base(), BOT, "tasks", Some("gw-x"), &body, &[]).await;
    assert!(many.error(400, "invalid").contains("Settle-Workflow"));
    let outside = gw(
        &s.base(),
        BOT,
        "tasks",
        Some("gw-x"),
        &body,
        &[("settle-workflow", "payroll")],
    )
    .await;
    outside.error(403, "forbidden");
    gw(&s.base(), TOOL, "nowhere", Some("gw-x"), &body, &[])
        .await
        .error(404, "not_found");
    let r = reqwest::Client::new()
        .post(format!("{}/gateway/tasks/create_task", s.base()))
        .header("idempotency-key", "gw-x")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let bad = reqwest::Client::new()
        .post(format!("{}/gateway/tasks/create_task", s.base()))
        .bearer_auth(TOOL)
        .header("idempotency-key", "gw-x")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let listed = s.settle(&["list", "--all", "--json"]);
    assert!(listed.contains("gw-1"), "the list holds what was recorded");
    assert!(!listed.contains("gw-x"), "nothing recorded: {listed}");
}

/// The destination got its secret from settle's environment and never the tool's
/// token; neither is in an answer, the log, an event or a stored attempt.
async fn secrets_stay_home(s: &Gate, sims: &Sims, seen: &[String]) {
    let t = json_of(
        reqwest::Client::new()
            .get(format!("{}/tasks?key=gw-1", sims.tasks.base))
            .header("x-api-key", DEST_KEY),
    )
    .await;
    let headers = t["headers"].as_object().expect("the sim keeps the headers");
    assert_eq!(headers["x-api-key"], DEST_KEY);
    assert!(!headers.contains_key("authorization"), "{headers:?}");
    assert_eq!(headers["idempotency-key"], "gw-1");
    // a destination that quotes the request back: the answer handed on is scrubbed of both
    let echo = gw(
        &s.base(),
        TOOL,
        "tasks",
        Some("gw-echo"),
        &task("E", Some("echo")),
        &[],
    )
    .await;
    assert_eq!(echo.status, 422, "{}", echo.text);
    assert!(echo.text.contains("x-api-key: [redacted]"), "{}", echo.text);
    let mut texts: Vec<String> = seen.to_vec();
    texts.push(echo.text);
    texts.push(s.log());
    texts.push(s.stderr());
    for key in ["gw-1", "gw-drop", "gw-echo", "gw-rej"] {
        texts.push(s.settle(&["show", key, "--json"]));
    }
    let mut raw = Raw::connect(&s.servers[0].db).await;
    for sql in [
        "SELECT COALESCE(error, '') || ' ' || COALESCE(reference, '') FROM attempts",
        "SELECT detail FROM events",
        "SELECT payload FROM operations",
    ] {
        texts.extend(raw.texts(sql).await);
    }
    assert!(s.log().contains("gw-echo"), "the log names the key");
    for text in &texts {
        for secret in [DEST_KEY, TOOL, BOT, ALL] {
            assert!(!text.contains(secret), "a secret leaked: {text}");
        }
    }
}

/// The gateway and a dispatcher share the rules of `start`: an operation the gateway left in
/// `retry_wait` is sent by the dispatcher or by the tool's next repeat, never by both. Counted at
/// a simulator that does not deduplicate, while the tool repeats every key every 20 ms and a
/// dispatcher runs beside it.
async fn the_dispatcher_and_the_gateway_never_both_send(db: &TestDb) {
    let sim = Sim::start(&[
        "--no-dedupe",
        "--fault",
        "unavailable",
        "--fault-first-only",
    ]);
    let extra = format!(
        r#"{}[destinations.tasks]
url = "{}/tasks"
dedupes = false
base = "10ms"
cap = "1s"
timeout = "2s"
"#,
        tool_automation(),
        sim.base
    );
    let s = ApiServer::start_env(&db.url, &config_text(&extra), &[], &[]);
    let keys: Vec<String> = (0..30).map(|i| format!("both-{i:02}")).collect();
    for k in &keys {
        let first = gw(&s.base, TOOL, "tasks", Some(k), &task(k, None), &[]).await;
        assert_eq!(first.status, 503, "{}", first.text);
    }
    let mut dispatcher = std::process::Command::new(env!("CARGO_BIN_EXE_settle"))
        .arg("--db")
        .arg(&s.db)
        .arg("--config")
        .arg(s.config_path())
        .args(["dispatch", "--until-settled"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let repeats: Vec<_> = keys
        .iter()
        .map(|k| {
            let (base, k) = (s.base.clone(), k.clone());
            tokio::spawn(async move {
                for _ in 0..250 {
                    let a = gw(&base, TOOL, "tasks", Some(&k), &task(&k, None), &[]).await;
                    if (200..300).contains(&a.status) {
                        return a.body["id"].as_str().map(str::to_string);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                None
            })
        })
        .collect();
    let mut references = Vec::new();
    for r in repeats {
        references.push(r.await.unwrap());
    }
    let _ = dispatcher.wait();
    let (total, by_key) = sim.tasks();
    assert_eq!(total, 30, "one task per key: {by_key:?}");
    assert!(by_key.values().all(|n| *n == 1), "{by_key:?}");
    assert_eq!(
        requests(&sim).await,
        60,
        "each key: its 503, then one create"
    );
    let mut by_whom = BTreeMap::new();
    for (k, reference) in keys.iter().zip(&references) {
        let v: Value = serde_json::from_str(&s.settle(&["show", k, "--json"])).unwrap();
        assert_eq!(v["state"], "succeeded", "{k}");
        assert_eq!(
            reference.as_deref(),
            v["reference"].as_str(),
            "{k}: the tool holds it"
        );
        let actor = v["attempt_log"][1]["actor"].as_str().unwrap().to_string();
        *by_whom.entry(actor).or_insert(0) += 1;
    }
    eprintln!("the second attempts, by who sent them: {by_whom:?}");
}

/// An answer that settles its operation goes out once its outcome is queued, before that
/// outcome's commit (the gateway's `send_and_record`): a read through the API and a repeat the
/// moment the answer came still see it (the outcome, a replay: never a second send), and a
/// server stopped the moment its answers went out commits them before it ends.
async fn an_answer_runs_ahead_of_its_commit_never_of_a_repeat(db: &TestDb) {
    let sim = Sim::start(&["--no-dedupe"]);
    let extra = format!(
        "{}[destinations.tasks]\nurl = \"{}/tasks\"\ndedupes = false\ntimeout = \"2s\"\n",
        tool_automation(),
        sim.base
    );
    let mut s = ApiServer::start_env(&db.url, &config_text(&extra), &[], &[]);
    let served = s.base.clone();
    let each = |prefix: &'static str, repeat: bool| {
        let served = served.clone();
        (0..40).map(move |i| {
            let (base, k) = (served.clone(), format!("{prefix}-{i:02}"));
            tokio::spawn(async move {
                let first = gw(&base, TOOL, "tasks", Some(&k), &task(&k, None), &[]).await;
                assert_eq!(first.status, 201, "{k}: {}", first.text);
                let id = first.body["id"].as_str().expect("the sim's id").to_string();
                if repeat {
                    // read through the API at once: the outcome as answered, not in flight
                    let shown = json_of(
                        reqwest::Client::new()
                            .get(format!("{base}/v1/operations/{k}"))
                            .bearer_auth(TOOL),
                    )
                    .await;
                    assert_eq!(
                        (shown["state"].as_str(), shown["reference"].as_str()),
                        (Some("succeeded"), Some(id.as_str())),
                        "{k}: {shown}"
                    );
                    let again = gw(&base, TOOL, "tasks", Some(&k), &task(&k, None), &[]).await;
                    assert_eq!(again.status, 200, "{k}: {}", again.text);
                    assert!(again.replayed(), "{k}: {}", again.text);
                    assert_eq!(again.body, json!({ "id": id }), "{k}");
                }
                (k, id)
            })
        })
    };
    for t in each("ahead", true).collect::<Vec<_>>() {
        t.await.unwrap();
    }
    assert_eq!(requests(&sim).await, 40, "each key sent once");
    let mut answered = Vec::new();
    for t in each("stopped", false).collect::<Vec<_>>() {
        answered.push(t.await.unwrap());
    }
    assert!(s.terminate().success(), "a graceful stop: {}", s.stderr());
    for (k, id) in answered {
        let v: Value = serde_json::from_str(&s.settle(&["show", &k, "--json"])).unwrap();
        assert_eq!(
            (v["state"].as_str(), v["reference"].as_str()),
            (Some("succeeded"), Some(id.as_str())),
            "{k}"
        );
    }
}

both_backends!(
    every_row_of_the_table,
    every_row_across_two_servers,
    the_dispatcher_and_the_gateway_never_both_send,
    an_answer_runs_ahead_of_its_commit_never_of_a_repeat
);
