//! The HTTP API (manual: The HTTP API) as an automation meets it: the real `settle serve --http` on SQLite and
//! PostgreSQL, every answer of the table (manual: The HTTP API) and every refusal with the one error object, who
//! the events name, and what never shows (the token).

mod common;

use std::time::Duration;

use common::TestDb;
use common::api::{ALL, ApiServer, BOT, SLOW, sha256};
use serde_json::{Value, json};

/// One request's answer: status, the headers a test reads, the body as JSON.
struct Answer {
    status: u16,
    id: Option<String>,
    retry_after: Option<String>,
    body: Value,
    text: String,
}

async fn call(method: &str, url: &str, token: Option<&str>, body: Option<String>) -> Answer {
    let client = reqwest::Client::new();
    let mut r = client.request(method.parse().unwrap(), url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.header("content-type", "application/json").body(b);
    }
    let resp = r.send().await.expect("the server answers");
    let header = |n: &str| {
        resp.headers()
            .get(n)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (status, id, retry_after) = (
        resp.status().as_u16(),
        header("x-request-id"),
        header("retry-after"),
    );
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        id,
        retry_after,
        body,
        text,
    }
}

impl Answer {
    /// A non-2xx answer is the error object with this code, its message one line.
    fn error(&self, status: u16, code: &str) -> &str {
        assert_eq!(self.status, status, "status of {}", self.text);
        assert_eq!(self.body["error"]["code"], code, "code of {}", self.text);
        let message = self.body["error"]["message"].as_str().expect("a message");
        assert!(!message.is_empty() && !message.contains('\n'), "{message}");
        assert_eq!(
            self.body.as_object().unwrap().len(),
            1,
            "only the error: {}",
            self.text
        );
        message
    }
}

fn intent(key: &str, workflow: &str) -> String {
    json!({"key": key, "workflow": workflow, "step": "create-task", "destination": "crm",
        "action": "create_task", "payload": {"customer": {"name": "Ada Lovelace", "id": 42}, "email": "ada@example.org"}})
    .to_string()
}

/// Every row of the table (manual: The HTTP API), in the order a script meets them.
async fn every_answer_of_the_table(db: &TestDb) {
    every_answer_on(db, 1).await;
}

/// Every row of the table with each request to the next of two servers on one ledger, in turn
/// (manual: Many settle processes): the same answers.
async fn every_answer_across_two_servers(db: &TestDb) {
    every_answer_on(db, 2).await;
}

async fn every_answer_on(db: &TestDb, n: usize) {
    let servers: Vec<ApiServer> = (0..n).map(|_| ApiServer::start(&db.url, "")).collect();
    let turn = std::sync::atomic::AtomicUsize::new(0);
    // the operations' URL on the server whose turn it is
    let ops = || {
        let i = turn.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        format!("{}/v1/operations", servers[i % n].base)
    };
    let first = call(
        "POST",
        &ops(),
        Some(BOT),
        Some(intent("onb-1", "onboarding")),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.body["send"], true);
    assert_eq!(first.body["state"], "pending");
    let again = call(
        "POST",
        &ops(),
        Some(BOT),
        Some(intent("onb-1", "onboarding")),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        (again.body["done"].clone(), again.body["reference"].clone()),
        (json!(false), Value::Null)
    );
    let start = call("POST", &format!("{}/onb-1/start", ops()), Some(BOT), None).await;
    assert_eq!(start.status, 200, "{}", start.text);
    assert_eq!(
        (start.body["attempt"].clone(), start.body["send"].clone()),
        (json!(1), json!(true))
    );
    // one attempt at a time: a second start is refused while the first runs
    let twice = call("POST", &format!("{}/onb-1/start", ops()), Some(BOT), None).await;
    assert!(twice.error(409, "refused").contains("in_flight"));
    let report =
        json!({"attempt": 1, "outcome": "accepted", "reference": "T-17", "http_status": 201});
    let done = call(
        "POST",
        &format!("{}/onb-1/attempts", ops()),
        Some(BOT),
        Some(report.to_string()),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_eq!(done.body["state"], "succeeded");
    // the same report again changes nothing; another outcome for it is refused
    let same = call(
        "POST",
        &format!("{}/onb-1/attempts", ops()),
        Some(BOT),
        Some(report.to_string()),
    )
    .await;
    assert_eq!(same.status, 200, "{}", same.text);
    let other = json!({"attempt": 1, "outcome": "rejected", "error": "no"}).to_string();
    call(
        "POST",
        &format!("{}/onb-1/attempts", ops()),
        Some(BOT),
        Some(other),
    )
    .await
    .error(409, "refused");
    // a rerun goes on past a done step, with its reference
    let rerun = call(
        "POST",
        &ops(),
        Some(BOT),
        Some(intent("onb-1", "onboarding")),
    )
    .await;
    assert_eq!(rerun.status, 200);
    assert_eq!(
        (rerun.body["done"].clone(), rerun.body["reference"].clone()),
        (json!(true), json!("T-17"))
    );
    assert_eq!(rerun.body["send"], false);
    let after = call("POST", &format!("{}/onb-1/start", ops()), Some(BOT), None).await;
    assert!(after.error(409, "refused").contains("succeeded"));
    // new contents under a pending key: a conflict, kept, never sent
    call(
        "POST",
        &ops(),
        Some(BOT),
        Some(intent("onb-2", "onboarding")),
    )
    .await;
    let changed = intent("onb-2", "onboarding").replace("42", "43");
    call("POST", &ops(), Some(BOT), Some(changed))
        .await
        .error(409, "conflict");
    // show --json's document, redacted
    let show = call("GET", &format!("{}/onb-1", ops()), Some(BOT), None).await;
    assert_eq!(show.status, 200);
    assert_eq!(show.body["key"], "onb-1");
    assert_eq!(show.body["payload"]["customer"]["name"], "[redacted]");
    assert_eq!(show.body["payload"]["email"], "[redacted]");
    assert_eq!(show.body["attempt_log"][0]["reference"], "T-17");
    assert!(!show.text.contains("Lovelace") && !show.text.contains("ada@example.org"));
    call("GET", &format!("{}/nobody", ops()), Some(BOT), None)
        .await
        .error(404, "not_found");
    // the rest on the last server (with two, not the one that took the first request)
    pages_and_runs(&servers[n - 1]).await;
    ingest_and_the_rest(&servers[n - 1]).await;
}

/// `GET /v1/operations` a page at a time to the end, and `GET /v1/runs/{run}`.
async fn pages_and_runs(s: &ApiServer) {
    let ops = format!("{}/v1/operations", s.base);
    for i in 0..5 {
        let body =
            json!({"key": format!("page-{i}"), "workflow": "billing-sync", "destination": "crm",
            "action": "sync", "payload": {"n": i}, "run": "case-9"})
            .to_string();
        assert_eq!(call("POST", &ops, Some(BOT), Some(body)).await.status, 201);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let url = match &cursor {
            Some(c) => format!("{ops}?where=wf:billing-sync&limit=2&cursor={c}"),
            None => format!("{ops}?where=wf:billing-sync&limit=2"),
        };
        let page = call("GET", &url, Some(BOT), None).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let items = page.body["operations"].as_array().unwrap();
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|o| o["key"].as_str().unwrap().to_string()));
        match page.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(
        seen,
        (0..5).map(|i| format!("page-{i}")).collect::<Vec<_>>()
    );
    call(
        "GET",
        &format!("{ops}?where=state:nonsense"),
        Some(BOT),
        None,
    )
    .await
    .error(400, "invalid");
    call("GET", &format!("{ops}?limit=0"), Some(BOT), None)
        .await
        .error(400, "invalid");
    call("GET", &format!("{ops}?cursor=xyz"), Some(BOT), None)
        .await
        .error(400, "invalid");
    let run = call(
        "GET",
        &format!("{}/v1/runs/case-9", s.base),
        Some(BOT),
        None,
    )
    .await;
    assert_eq!(run.status, 200, "{}", run.text);
    assert_eq!(run.body["run"], "case-9");
    assert_eq!(
        run.body["steps"].as_array().unwrap().len(),
        5,
        "its five operations"
    );
    call(
        "GET",
        &format!("{}/v1/runs/none-such", s.base),
        Some(BOT),
        None,
    )
    .await
    .error(404, "not_found");
}

/// `POST /v1/ingest` with a result per line, `/openapi.json`, `/healthz`, and the request ids.
async fn ingest_and_the_rest(s: &ApiServer) {
    let lines = [
        r#"{"type":"intent","key":"ing-1","workflow":"onboarding","step":"s","destination":"crm","action":"a","payload":{}}"#,
        "{not json",
        "",
        r#"{"type":"start","key":"ing-1","attempt":1}"#,
        r#"{"type":"attempt","key":"ing-1","attempt":1,"outcome":"unknown","error":"read timeout"}"#,
    ]
    .join("\n");
    let r = call(
        "POST",
        &format!("{}/v1/ingest", s.base),
        Some(BOT),
        Some(lines),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.body["recorded"].clone(), r.body["malformed"].clone()),
        (json!(1), json!(1))
    );
    let results = r.body["results"].as_array().unwrap();
    let oks: Vec<(u64, bool)> = results
        .iter()
        .map(|l| (l["line"].as_u64().unwrap(), l["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(oks, vec![(1, true), (2, false), (4, true), (5, true)]);
    let shown = call(
        "GET",
        &format!("{}/v1/operations/ing-1", s.base),
        Some(BOT),
        None,
    )
    .await;
    assert_eq!(shown.body["state"], "unknown");
    let doc = call("GET", &format!("{}/openapi.json", s.base), None, None).await;
    assert_eq!(doc.status, 200);
    let asset: Value = serde_json::from_str(include_str!("../assets/openapi.json")).unwrap();
    assert_eq!(
        doc.body, asset,
        "the served document is assets/openapi.json"
    );
    let health = call("GET", &format!("{}/healthz", s.base), None, None).await;
    assert_eq!(health.status, 200);
    // every answer has an id, and the log line of that request holds it
    let client_id = reqwest::Client::new()
        .get(format!("{}/healthz", s.base))
        .header("x-request-id", "trace-abc.1")
        .send()
        .await
        .unwrap();
    assert_eq!(client_id.headers()["x-request-id"], "trace-abc.1");
    let id = health.id.expect("an X-Request-Id");
    common::wait_until("the log line", Duration::from_secs(5), || {
        s.log().contains(&id)
    });
    let line = s
        .log()
        .lines()
        .find(|l| l.contains(&id))
        .unwrap()
        .to_string();
    assert!(
        line.contains("/healthz") && line.contains("status=200"),
        "{line}"
    );
}

/// 400 naming the field, 401, 403 for another workflow and for a staff action, 413, 429 with
/// Retry-After; each the error object.
async fn refusals(db: &TestDb) {
    let s = ApiServer::start(&db.url, "");
    let ops = format!("{}/v1/operations", s.base);
    let bad = |body: &str| call("POST", &ops, Some(BOT), Some(body.to_string()));
    assert!(
        bad("{\"workflow\":\"onboarding\"}")
            .await
            .error(400, "invalid")
            .contains("`key`")
    );
    assert!(
        bad(&intent("k1", "onboarding").replace("\"crm\"", "7"))
            .await
            .error(400, "invalid")
            .contains("`destination`")
    );
    assert!(bad("[]").await.error(400, "invalid").contains("object"));
    assert!(bad("{").await.error(400, "invalid").contains("JSON"));
    assert!(
        bad(&intent("a@b.com", "onboarding"))
            .await
            .error(400, "invalid")
            .contains("key")
    );
    call("POST", &ops, Some(BOT), Some(intent("k1", "onboarding"))).await;
    let bad_outcome = call(
        "POST",
        &format!("{ops}/k1/attempts"),
        Some(BOT),
        Some("{\"outcome\":\"maybe\"}".into()),
    )
    .await;
    assert!(bad_outcome.error(400, "invalid").contains("`outcome`"));
    // 401: no token, a token not configured, a malformed header
    call("POST", &ops, None, Some(intent("k2", "onboarding")))
        .await
        .error(401, "unauthorized");
    call(
        "GET",
        &format!("{ops}/k1"),
        Some("settle_not_a_token"),
        None,
    )
    .await
    .error(401, "unauthorized");
    // 403: a write naming a workflow outside its own, and staff actions; a key of another
    // workflow is not there for it (404, the workflow never named), and taken when recorded
    let other = call("POST", &ops, Some(ALL), Some(intent("pay-1", "payments"))).await;
    assert_eq!(other.status, 201);
    call("POST", &ops, Some(BOT), Some(intent("pay-2", "payments")))
        .await
        .error(403, "forbidden");
    for (method, path) in [
        ("GET", format!("{ops}/pay-1")),
        ("POST", format!("{ops}/pay-1/start")),
        ("GET", format!("{ops}/nobody-has-this")),
    ] {
        let r = call(method, &path, Some(BOT), None).await;
        let said = r.error(404, "not_found");
        assert!(!said.contains("payments"), "{said}");
    }
    let taken = call("POST", &ops, Some(BOT), Some(intent("pay-1", "onboarding"))).await;
    assert!(
        taken.error(409, "conflict").contains("taken"),
        "{}",
        taken.text
    );
    assert!(!taken.text.contains("payments"), "{}", taken.text);
    let listed = call("GET", &ops, Some(BOT), None).await;
    assert!(
        !listed.text.contains("pay-1"),
        "a list shows its own workflows only"
    );
    for verb in ["claim", "release", "retry", "note", "reconcile"] {
        let r = call(
            "POST",
            &format!("{ops}/k1/{verb}"),
            Some(ALL),
            Some("{\"note\":\"x\"}".into()),
        )
        .await;
        assert!(r.error(403, "forbidden").contains("staff"), "{verb}");
    }
    // 413 over max_body (8 KiB here), nothing stored
    let big = intent("big-1", "onboarding")
        .replace("\"id\": 42", &format!("\"id\": \"{}\"", "x".repeat(9000)));
    let big = big.replace("\"id\":42", &format!("\"id\":\"{}\"", "x".repeat(9000)));
    call("POST", &ops, Some(BOT), Some(big))
        .await
        .error(413, "too_large");
    call("GET", &format!("{ops}/big-1"), Some(BOT), None)
        .await
        .error(404, "not_found");
    // 429 past the burst, with Retry-After
    for _ in 0..2 {
        assert_ne!(
            call(
                "GET",
                &format!("{}/v1/operations?limit=1", s.base),
                Some(SLOW),
                None
            )
            .await
            .status,
            429
        );
    }
    let limited = call(
        "GET",
        &format!("{}/v1/operations?limit=1", s.base),
        Some(SLOW),
        None,
    )
    .await;
    limited.error(429, "rate_limited");
    let wait: u64 = limited.retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    call("GET", &format!("{}/nowhere", s.base), Some(BOT), None)
        .await
        .error(404, "not_found");
    call("DELETE", &ops, Some(BOT), None)
        .await
        .error(405, "not_found");
}

/// The token is in no answer, log line or event; every event the automation wrote names it,
/// with the token's fingerprint.
async fn the_token_never_shows(db: &TestDb) {
    let s = ApiServer::start(&db.url, "");
    let ops = format!("{}/v1/operations", s.base);
    let mut texts = Vec::new();
    for key in ["t-1", "t-2"] {
        texts.push(
            call("POST", &ops, Some(BOT), Some(intent(key, "onboarding")))
                .await
                .text,
        );
        texts.push(
            call("POST", &format!("{ops}/{key}/start"), Some(BOT), None)
                .await
                .text,
        );
    }
    let r = json!({"attempt": 1, "outcome": "unknown", "error": format!("echo of {BOT}")});
    texts.push(
        call(
            "POST",
            &format!("{ops}/t-1/attempts"),
            Some(BOT),
            Some(r.to_string()),
        )
        .await
        .text,
    );
    texts.push(
        call("GET", &format!("{ops}/t-1"), Some(BOT), None)
            .await
            .text,
    );
    texts.push(call("GET", &ops, Some(BOT), None).await.text);
    texts.push(call("GET", &ops, Some("settle_wrong"), None).await.text);
    let mut raw = common::Raw::connect(&db.url).await;
    let events = raw.texts("SELECT actor || ' ' || detail FROM events").await;
    assert_eq!(
        events.len(),
        5,
        "two recorded, two started, one attempt: {events:?}"
    );
    let fingerprint = &sha256(BOT)[..12];
    for e in &events {
        assert!(e.starts_with("bot "), "the automation is the actor: {e}");
        assert!(
            e.contains(&format!("\"key\":\"{fingerprint}\"")),
            "its token's fingerprint: {e}"
        );
    }
    common::wait_until("the log", Duration::from_secs(5), || {
        s.log().lines().count() >= 8
    });
    let everything = format!(
        "{}\n{}\n{}\n{}",
        texts.join("\n"),
        events.join("\n"),
        s.log(),
        s.stderr()
    );
    let secret = &BOT["settle_".len()..];
    assert!(!everything.contains(secret), "the token shows somewhere");
    assert!(
        !everything.contains(&sha256(BOT)),
        "the whole hash shows somewhere"
    );
}

/// A person's pause and claim stop an automation's start over HTTP, as they stop `settle start`.
async fn a_pause_or_a_claim_refuses_the_start(db: &TestDb) {
    let s = ApiServer::start(&db.url, "");
    let ops = format!("{}/v1/operations", s.base);
    let dir = tempfile::tempdir().unwrap();
    let lead = |args: &[&str]| {
        let r = common::settle_as(&s.db, dir.path(), "lena", args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    };
    for key in ["p-1", "p-2", "p-3"] {
        assert_eq!(
            call("POST", &ops, Some(BOT), Some(intent(key, "onboarding")))
                .await
                .status,
            201
        );
    }
    lead(&["pause", "onboarding", "--reason", "incident 7"]);
    let r = call("POST", &format!("{ops}/p-1/start"), Some(BOT), None).await;
    assert!(r.error(409, "refused").contains("paused"), "{}", r.text);
    let shown = call("GET", &format!("{ops}/p-1"), Some(BOT), None).await;
    assert_eq!(shown.body["workflow_paused"], true);
    lead(&["resume", "onboarding"]);
    lead(&["pause", "--destination", "crm", "--reason", "their outage"]);
    let r = call("POST", &format!("{ops}/p-2/start"), Some(BOT), None).await;
    assert!(
        r.error(409, "refused").contains("crm is paused"),
        "{}",
        r.text
    );
    lead(&["resume", "--destination", "crm"]);
    lead(&["claim", "p-3"]);
    let r = call("POST", &format!("{ops}/p-3/start"), Some(BOT), None).await;
    assert!(r.error(409, "refused").contains("lena"), "{}", r.text);
    let ok = call("POST", &format!("{ops}/p-1/start"), Some(BOT), None).await;
    assert_eq!(
        (ok.status, ok.body["attempt"].clone()),
        (200, json!(1)),
        "{}",
        ok.text
    );
}

/// What schemathesis, n8n and the rest found, each pinned: the server takes what the document
/// allows (a null payload, `839.0` as a whole number, an empty cursor) and refuses what it does not
/// (an attempt 0, a status below 100, a cursor that is not one, a parameter given twice, an empty
/// ingest, a name outside the keys' alphabet), and a staff action is refused to an automation
/// before its body is read.
async fn what_real_clients_found(db: &TestDb) {
    let s = ApiServer::start(&db.url, "");
    let ops = format!("{}/v1/operations", s.base);
    let post = |url: String, body: &str| {
        let body = body.to_string();
        async move { call("POST", &url, Some(BOT), Some(body)).await }
    };
    let get = |url: String| async move { call("GET", &url, Some(BOT), None).await };
    // JSON null is a payload, as the command line and JSON lines take it
    let null = json!({"key": "null-1", "workflow": "onboarding", "destination": "crm",
        "action": "a", "payload": null});
    assert_eq!(post(ops.clone(), &null.to_string()).await.status, 201);
    assert_eq!(
        get(format!("{ops}/null-1")).await.body["payload"],
        Value::Null
    );
    // a whole number however JSON writes it; a fraction or out of range, refused naming the field
    let attempts = format!("{ops}/null-1/attempts");
    for (body, field) in [
        (r#"{"outcome":"rejected","attempt":0}"#, "`attempt`"),
        (
            r#"{"outcome":"rejected","http_status":50}"#,
            "`http_status`",
        ),
        (
            r#"{"outcome":"rejected","http_status":404.5}"#,
            "`http_status`",
        ),
        (
            r#"{"outcome":"rejected","retry_after":-1}"#,
            "`retry_after`",
        ),
    ] {
        let a = post(attempts.clone(), body).await;
        assert!(
            a.error(400, "invalid").contains(field),
            "{body}: {}",
            a.text
        );
    }
    let a = post(
        attempts.clone(),
        r#"{"outcome":"rejected","http_status":422.0}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let shown = get(format!("{ops}/null-1")).await;
    assert_eq!(
        shown.body["attempt_log"][0]["http_status"], 422,
        "{}",
        shown.text
    );
    // names in the keys' alphabet, said in the refusal
    let odd = json!({"key": "odd-1", "workflow": "onboarding", "destination": "ü?\"",
        "action": "a", "payload": {}});
    let a = post(ops.clone(), &odd.to_string()).await;
    assert!(
        a.error(400, "invalid")
            .contains("names use A-Z a-z 0-9 . _ : -"),
        "{}",
        a.text
    );
    // an empty cursor is the first page's; anything but a cursor given is refused
    let first = get(format!("{ops}?limit=1&cursor=")).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.body["operations"][0]["key"], "null-1");
    for query in [
        "cursor=%2B5_3",
        "cursor=5_",
        "cursor=1234567890123456789_1",
        "limit=1&limit=2",
    ] {
        let a = get(format!("{ops}?{query}")).await;
        a.error(400, "invalid");
    }
    // the body of JSON lines is required
    let a = call("POST", &format!("{}/v1/ingest", s.base), Some(BOT), None).await;
    assert!(
        a.error(400, "invalid").contains("body is required"),
        "{}",
        a.text
    );
    // a staff action: 403 before anything it sent is read
    for body in ["", "{", r#"{"colour":"red"}"#] {
        let a = post(format!("{ops}/null-1/close"), body).await;
        a.error(403, "forbidden");
        let a = post(format!("{ops}/no%20such/claim"), body).await;
        a.error(403, "forbidden");
    }
    // every error says it is settle's
    assert_eq!(a.body["error"]["origin"], "settle", "{}", a.text);
}

both_backends!(
    every_answer_of_the_table,
    every_answer_across_two_servers,
    what_real_clients_found,
    refusals,
    the_token_never_shows,
    a_pause_or_a_claim_refuses_the_start
);

/// 503 with the error object while the database is cut off, and answers again after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(settle_pg), ignore = "needs SETTLE_TEST_POSTGRES_URL")]
async fn unavailable_while_the_database_is_cut_off() {
    let db = common::postgres().await;
    settle::Ledger::open(&db.url, settle::Config::default())
        .await
        .unwrap();
    let (proxy, via) = common::Proxy::before(&db).await;
    let s = ApiServer::start(&via, "");
    let ops = format!("{}/v1/operations", s.base);
    assert_eq!(
        call("POST", &ops, Some(BOT), Some(intent("u-1", "onboarding")))
            .await
            .status,
        201
    );
    proxy.cut();
    let mut seen = None;
    for i in 0..100 {
        let r = call(
            "POST",
            &ops,
            Some(BOT),
            Some(intent(&format!("u-{}", i + 2), "onboarding")),
        )
        .await;
        if r.status == 503 {
            seen = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = seen.expect("503 while cut off");
    assert!(
        !r.error(503, "unavailable").contains("127.0.0.1"),
        "no host in the answer"
    );
    assert!(r.retry_after.is_some());
    call("GET", &format!("{}/healthz", s.base), None, None)
        .await
        .error(503, "unavailable");
    let _back = proxy.restore().await;
    common::wait_until("answers again", Duration::from_secs(20), || {
        std::thread::scope(|t| {
            t.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    call("GET", &format!("{}/healthz", s.base), None, None)
                        .await
                        .status
                        == 200
                })
            })
            .join()
            .unwrap()
        })
    });
}

/// SQLite: a database another process holds locked past the busy timeout (15 s) answers 503 with
/// the error object, naming no file; and answers again once the lock goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_while_sqlite_is_locked() {
    let db = common::sqlite();
    let s = ApiServer::start(&db.url, "");
    let ops = format!("{}/v1/operations", s.base);
    assert_eq!(
        call("POST", &ops, Some(BOT), Some(intent("l-1", "onboarding")))
            .await
            .status,
        201
    );
    let path = db.url.strip_prefix("sqlite://").unwrap().to_string();
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let r = call("POST", &ops, Some(BOT), Some(intent("l-2", "onboarding"))).await;
    let message = r.error(503, "unavailable").to_string();
    assert!(
        !message.contains("settle.db") && !message.contains('/'),
        "{message}"
    );
    assert!(r.retry_after.is_some());
    locker.execute_batch("ROLLBACK").unwrap();
    let again = call("POST", &ops, Some(BOT), Some(intent("l-2", "onboarding"))).await;
    assert_eq!(again.status, 201, "{}", again.text);
}
