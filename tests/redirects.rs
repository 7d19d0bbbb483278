//! A destination, a lookup or a channel that answers with a redirect (manual: Redirects): settle
//! follows none. A 302 or a 307 is never `succeeded`, and the place it
//! points to receives nothing (not the body, not the configured secret); a 303 after a request
//! is an unknown outcome; the destination that moved is paused, saying where it points; a
//! channel's redirect is a failed try, said plainly by `settle notify test`. Through the real
//! binary: the dispatcher and the gateway on both backends.

mod common;

use std::time::Duration;

use common::TestDb;
use common::api::{ApiServer, TOOL, config_text, tool_automation};
use common::receivers::HttpReceiver;
use serde_json::{Value, json};

/// What settle sends to the destinations, from its environment.
const DEST_KEY: &str = "redirect_dest_5ecret_4242";

/// Destinations `moved` (302), `moved307`, `seeother` (303) and `found` (a lookup answering
/// 302), each sent the secret in `X-Api-Key`.
fn destinations(moved: &[HttpReceiver; 4]) -> String {
    let to = |r: &HttpReceiver| r.url.clone();
    format!(
        r#"
[destinations.moved]
url = "{}"
headers = {{ X-Api-Key = "${{SETTLE_T_DEST_KEY}}" }}
[destinations.moved307]
url = "{}"
headers = {{ X-Api-Key = "${{SETTLE_T_DEST_KEY}}" }}
[destinations.seeother]
url = "{}"
headers = {{ X-Api-Key = "${{SETTLE_T_DEST_KEY}}" }}
[destinations.found]
lookup = true
lookup_url = "{}?key={{key}}"
headers = {{ X-Api-Key = "${{SETTLE_T_DEST_KEY}}" }}
"#,
        to(&moved[0]),
        to(&moved[1]),
        to(&moved[2]),
        to(&moved[3])
    )
}

/// Four redirecting destinations pointing at `target`, which carries a token in its query.
fn redirecting(target: &HttpReceiver) -> [HttpReceiver; 4] {
    let to = format!("{}/elsewhere?token=s3cret-query", target.url);
    [
        HttpReceiver::redirecting(302, &to),
        HttpReceiver::redirecting(307, &to),
        HttpReceiver::redirecting(303, &to),
        HttpReceiver::redirecting(302, &to),
    ]
}

fn record(d: &common::Drill, key: &str, destination: &str) {
    d.run(&[
        "record",
        "--key",
        key,
        "--workflow",
        "onboarding",
        "--destination",
        destination,
        "--action",
        "create_task",
        "--payload",
        r#"{"title":"Kickoff call"}"#,
    ]);
}

fn show(d: &common::Drill, key: &str) -> Value {
    serde_json::from_str(&d.run(&["show", key, "--json"])).unwrap()
}

async fn the_dispatcher_follows_no_redirect(db: &TestDb) {
    let target = HttpReceiver::start(None);
    let moved = redirecting(&target);
    let d = common::drill_with(&db.url, &destinations(&moved));
    d.run(&["init"]);
    for (key, dest) in [
        ("k302", "moved"),
        ("k307", "moved307"),
        ("k303", "seeother"),
    ] {
        record(&d, key, dest);
    }
    let out = d
        .cmd(&["dispatch", "--until-settled"])
        .env("SETTLE_T_DEST_KEY", DEST_KEY)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for key in ["k302", "k307"] {
        let op = show(&d, key);
        assert_ne!(op["state"], "succeeded", "{op}");
        assert_eq!(op["state"], "retry_wait", "not done, waiting: {op}");
        let error = op["attempt_log"][0]["error"].as_str().unwrap();
        assert!(error.contains("redirected to http://127.0.0.1:"), "{error}");
        assert!(error.contains("not followed"), "{error}");
        assert!(
            !error.contains("s3cret-query"),
            "the query is not kept: {error}"
        );
    }
    let op = show(&d, "k303");
    assert_eq!(
        op["state"], "unknown",
        "a 303 may point at what was made: {op}"
    );
    // the destinations that moved wait for a person, who is told where they point
    let stats: Value = serde_json::from_str(&d.run(&["stats", "--json"])).unwrap();
    let paused = stats["paused_destinations"].to_string();
    assert!(
        paused.contains("moved") && paused.contains("moved307"),
        "{stats}"
    );
    let text = d.run(&["stats"]);
    assert!(text.contains("which settle does not follow"), "{text}");
    assert!(
        target.received().is_empty(),
        "the redirect's target got nothing"
    );
    // each destination was sent to once, with its secret, and nothing after the pause
    for (r, n) in [(&moved[0], 1), (&moved[1], 1), (&moved[2], 1)] {
        assert_eq!(r.received().len(), n);
    }
    // a lookup's redirect is no answer: the outcome stays unknown
    record(&d, "k-look", "found");
    d.run(&[
        "attempt",
        "--key",
        "k-look",
        "--outcome",
        "unknown",
        "--error",
        "read timeout",
    ]);
    let out = d
        .cmd(&["lookup", "k-look", "--yes"])
        .env("SETTLE_T_DEST_KEY", DEST_KEY)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("redirect, not followed"), "{said}");
    assert_eq!(show(&d, "k-look")["state"], "unknown");
    assert!(target.received().is_empty());
}

async fn the_gateway_follows_no_redirect(db: &TestDb) {
    let target = HttpReceiver::start(None);
    let moved = redirecting(&target);
    let extra = format!("{}{}", tool_automation(), destinations(&moved));
    let s = ApiServer::start_env(
        &db.url,
        &config_text(&extra),
        &[],
        &[("SETTLE_T_DEST_KEY", DEST_KEY)],
    );
    let http = reqwest::Client::new();
    for (dest, key) in [("moved", "gw-302"), ("moved307", "gw-307")] {
        let send = || {
            http.post(format!("{}/gateway/{dest}/create_task", s.base))
                .bearer_auth(TOOL)
                .header("idempotency-key", key)
                .json(&json!({"title": "Kickoff call"}))
                .send()
        };
        let first = send().await.unwrap();
        let status = first.status().as_u16();
        assert!(
            first.headers().get("location").is_none(),
            "no Location handed on"
        );
        let body: Value = first.json().await.unwrap();
        assert_eq!(status, 503, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("not followed"), "{message}");
        assert!(
            !message.contains(DEST_KEY) && !message.contains("s3cret"),
            "{message}"
        );
        // a repeat sends nothing: the destination waits for a person
        let again = send().await.unwrap();
        assert_eq!(again.status().as_u16(), 503);
        let view = http
            .get(format!("{}/v1/operations/{key}", s.base))
            .bearer_auth(TOOL)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_ne!(view["state"], "succeeded", "{view}");
    }
    assert_eq!(moved[0].received().len(), 1, "sent once");
    assert_eq!(moved[1].received().len(), 1, "sent once");
    assert_eq!(
        moved[0].headers()[0].get("x-api-key").map(String::as_str),
        Some(DEST_KEY),
        "the destination got its secret"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        target.received().is_empty(),
        "the redirect's target got nothing"
    );
}

both_backends!(
    the_dispatcher_follows_no_redirect,
    the_gateway_follows_no_redirect
);

/// A webhook channel that answers 307: not sent, said plainly, the message re-posted nowhere.
#[test]
fn a_channels_redirect_is_a_failed_try() {
    let target = HttpReceiver::start(None);
    let hook = HttpReceiver::redirecting(307, &format!("{}/steal", target.url));
    let db = common::sqlite();
    let d = common::drill_with(
        &db.url,
        "[channels.hook]\nkind = \"webhook\"\nurl_env = \"SETTLE_T_HOOK\"\nsecret_env = \"SETTLE_T_SECRET\"\n",
    );
    let out = d
        .cmd(&["notify", "test", "hook"])
        .env("SETTLE_T_HOOK", &hook.url)
        .env("SETTLE_T_SECRET", "hook-secret-1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not sent: HTTP 307: a redirect to http://127.0.0.1:")
            && err.contains("not followed"),
        "{err}"
    );
    assert!(
        !err.contains("/steal"),
        "only where it points, not its path: {err}"
    );
    assert_eq!(hook.received().len(), 1);
    assert!(
        target.received().is_empty(),
        "the signed message went nowhere else"
    );
}
