//! The classification of the manual's Destinations and the dispatcher as a table, the settings' resolution, and the request bodies.

use super::*;
use crate::config::Config;
use chrono::{DateTime, Utc};
use std::time::Duration;

fn endpoint(toml: &str, env: &[(&str, &str)]) -> Result<HttpDestination> {
    let config = Config::parse(toml, "test.toml")?;
    let (name, d) = config.http_destinations().into_iter().next().expect("one");
    let env = |n: &str| {
        env.iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.to_string())
    };
    HttpDestination::resolve(name, d, &env)
}

fn crm(extra: &str) -> Arc<Endpoint> {
    let toml = format!("[destinations.crm]\nurl = \"http://127.0.0.1:9/x\"\n{extra}");
    let d = endpoint(&toml, &[]).unwrap();
    d.endpoint("any").unwrap().clone()
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// One row: status, Retry-After, body (None: broke off) -> outcome, reference, retry after,
/// pauses the destination, error text starts with.
struct Row {
    status: u16,
    retry_after: Option<&'static str>,
    location: Option<&'static str>,
    body: Option<&'static str>,
    outcome: Outcome,
    reference: Option<&'static str>,
    after: Option<u64>,
    pauses: bool,
    error: Option<&'static str>,
}

const fn row(status: u16, body: Option<&'static str>, outcome: Outcome) -> Row {
    Row {
        status,
        retry_after: None,
        location: None,
        body,
        outcome,
        reference: None,
        after: None,
        pauses: false,
        error: None,
    }
}

fn check(e: &Endpoint, rows: &[Row]) {
    for r in rows {
        let answer = Answer {
            status: r.status,
            retry_after: r.retry_after,
            location: r.location,
            body: r.body.map(str::as_bytes),
        };
        let seen = classify(&answer, e, now());
        let what = format!("HTTP {} {:?}", r.status, r.body);
        assert_eq!(seen.outcome, r.outcome, "{what}");
        assert_eq!(seen.http_status, Some(r.status), "{what}");
        assert_eq!(seen.reference.as_deref(), r.reference, "{what}");
        assert_eq!(seen.retry_after, r.after.map(Duration::from_secs), "{what}");
        assert_eq!(seen.pause.is_some(), r.pauses, "{what}");
        match r.error {
            Some(start) => assert!(
                seen.error.as_deref().is_some_and(|e| e.starts_with(start)),
                "{what}: {:?}",
                seen.error
            ),
            None => assert_eq!(seen.error, None, "{what}"),
        }
    }
}

#[test]
fn the_default_classes_of_a_destination() {
    use Outcome::*;
    let e = crm("");
    check(
        &e,
        &[
            Row {
                reference: Some("T-1"),
                ..row(201, Some(r#"{"id":"T-1"}"#), Accepted)
            },
            Row {
                reference: Some("42"),
                ..row(200, Some(r#"{"id":42}"#), Accepted)
            },
            // a 204, an empty body, a body without the pointer or not JSON: accepted, no reference
            row(204, Some(""), Accepted),
            row(200, Some(r#"{"object":"charge"}"#), Accepted),
            row(200, Some(r#"{"id":null}"#), Accepted),
            row(202, Some("queued"), Accepted),
            // a 2xx whose body broke off: it may or may not be done
            Row {
                error: Some("HTTP 201 but the answer could not be read"),
                ..row(201, None, Unknown)
            },
            Row {
                pauses: true,
                error: Some("HTTP 401: the credentials were refused"),
                ..row(401, Some(r#"{"error":"expired token"}"#), Transient)
            },
            Row {
                pauses: true,
                error: Some("HTTP 403"),
                ..row(403, Some(""), Transient)
            },
            Row {
                pauses: true,
                error: Some("HTTP 407"),
                ..row(407, None, Transient)
            },
            Row {
                error: Some("HTTP 408: not done"),
                ..row(408, Some(""), Transient)
            },
            Row {
                error: Some("HTTP 409: not done"),
                ..row(409, Some(r#"{"error":"in progress"}"#), Transient)
            },
            Row {
                error: Some("HTTP 425"),
                ..row(425, Some(""), Transient)
            },
            Row {
                retry_after: Some("7"),
                after: Some(7),
                error: Some("HTTP 429: not done"),
                ..row(429, Some(""), Transient)
            },
            // Retry-After as an HTTP date, 90 s after the clock
            Row {
                retry_after: Some("Mon, 30 Nov 2026 12:01:30 GMT"),
                after: Some(90),
                error: Some("HTTP 503"),
                ..row(503, Some(""), Transient)
            },
            Row {
                retry_after: Some("soon"),
                error: Some("HTTP 503"),
                ..row(503, Some(""), Transient)
            },
            Row {
                error: Some(r#"HTTP 422: {"error":"due date is in the past"}"#),
                ..row(
                    422,
                    Some(r#"{"error":"due date is in the past"}"#),
                    Rejected,
                )
            },
            Row {
                error: Some("HTTP 400"),
                ..row(400, Some(""), Rejected)
            },
            Row {
                error: Some("HTTP 404"),
                ..row(404, None, Rejected)
            },
            Row {
                error: Some("HTTP 500: outcome not known"),
                ..row(500, Some("oops"), Unknown)
            },
            Row {
                error: Some("HTTP 502"),
                ..row(502, Some(""), Unknown)
            },
            Row {
                error: Some("HTTP 504"),
                ..row(504, Some(""), Unknown)
            },
            Row {
                error: Some("HTTP 599"),
                ..row(599, Some(""), Unknown)
            },
            Row {
                error: Some("HTTP 304"),
                ..row(304, Some(""), Unknown)
            },
        ],
    );
}

#[test]
fn overrides_and_the_reference_pointer() {
    use Outcome::*;
    // a HubSpot-like API: 409 means "already exists"; the reference is nested
    let e = crm(
        "reference = \"/data/id\"\nstatus = { 409 = \"accepted\", 404 = \"unknown\", 500 = \"rejected\", 418 = \"auth\" }",
    );
    check(
        &e,
        &[
            row(
                409,
                Some(r#"{"message":"Contact already exists. Existing ID: 7"}"#),
                Accepted,
            ),
            Row {
                reference: Some("c-9"),
                ..row(201, Some(r#"{"data":{"id":"c-9"},"id":"wrong"}"#), Accepted)
            },
            row(201, Some(r#"{"id":"top-level only"}"#), Accepted),
            Row {
                error: Some("HTTP 404: outcome not known"),
                ..row(404, Some(""), Unknown)
            },
            Row {
                error: Some("HTTP 500: boom"),
                ..row(500, Some("boom"), Rejected)
            },
            Row {
                pauses: true,
                error: Some("HTTP 418"),
                ..row(418, Some(""), Transient)
            },
            // what is not overridden keeps its default class
            Row {
                pauses: true,
                error: Some("HTTP 401"),
                ..row(401, Some(""), Transient)
            },
        ],
    );
    // `reference = ""`: no reference is taken
    let e = crm("reference = \"\"");
    check(&e, &[row(201, Some(r#"{"id":"T-1"}"#), Accepted)]);
}

#[test]
fn a_redirect_is_an_answer_never_followed() {
    use Outcome::*;
    let e = crm("");
    let to = Some("https://elsewhere.example/tasks/T-9");
    let moved = |status| Row {
        location: to,
        pauses: true,
        error: Some("HTTP "),
        ..row(status, Some(""), Transient)
    };
    check(
        &e,
        &[
            // a See Other after a request may point at what it made
            Row {
                location: to,
                error: Some(
                    "HTTP 303 to https://elsewhere.example/tasks/T-9: the destination may have done it",
                ),
                ..row(303, Some(""), Unknown)
            },
            // the others moved the endpoint: not done there, and the destination waits for a person
            moved(301),
            moved(302),
            moved(307),
            moved(308),
            moved(300),
        ],
    );
    let answer = Answer {
        status: 302,
        retry_after: None,
        location: to,
        body: Some(b""),
    };
    let seen = classify(&answer, &e, now());
    assert_eq!(
        seen.pause.as_deref(),
        Some(
            "HTTP 302 from crm: it redirects to https://elsewhere.example, which settle does not follow: check its url"
        )
    );
    assert!(
        seen.error
            .unwrap()
            .contains("redirected to https://elsewhere.example/tasks/T-9, not followed")
    );
    // a destination's own `status` says what its redirect means
    let e = crm("status = { 302 = \"accepted\" }\n");
    check(&e, &[row(302, Some(""), Accepted)]);
}

#[test]
fn an_auth_answer_names_the_destination_in_its_reason() {
    let e = crm("");
    let answer = Answer {
        status: 401,
        retry_after: None,
        location: None,
        body: Some(b""),
    };
    let seen = classify(&answer, &e, now());
    assert_eq!(
        seen.pause.as_deref(),
        Some("HTTP 401 from crm: check its credentials")
    );
}

#[test]
fn a_rejection_keeps_only_the_start_of_a_long_answer() {
    let e = crm("");
    let long = "x".repeat(5_000);
    let answer = Answer {
        status: 422,
        retry_after: None,
        location: None,
        body: Some(long.as_bytes()),
    };
    let error = classify(&answer, &e, now()).error.unwrap();
    assert_eq!(error.len(), "HTTP 422: ".len() + 300);
}

#[test]
fn settings_resolve_with_the_environment_and_action_overrides() {
    let toml = r#"
[destinations.crm]
url = "http://127.0.0.1:9/v1/{action}"
headers = { Authorization = "Bearer ${CRM_TOKEN}" }
[destinations.crm.actions.update_contact]
url = "http://127.0.0.1:9/v1/contacts/{payload.contact.id}"
method = "PATCH"
idempotency_header = ""
"#;
    let d = endpoint(toml, &[("CRM_TOKEN", "s3cret-token")]).unwrap();
    let create = d.endpoint("create_contact").unwrap();
    let update = d.endpoint("update_contact").unwrap();
    assert_eq!(create.method, reqwest::Method::POST);
    assert_eq!(update.method, reqwest::Method::PATCH);
    assert!(create.idempotency_header.is_some() && update.idempotency_header.is_none());
    // the header is inherited by the action, read from the environment, and marked sensitive
    for e in [create, update] {
        let h = e.headers.get("authorization").unwrap();
        assert_eq!(h.to_str().unwrap(), "Bearer s3cret-token");
        assert!(h.is_sensitive());
        assert_eq!(
            e.scrub_secrets("echo: Bearer s3cret-token".into()),
            "echo: Bearer [redacted]"
        );
    }
    // a missing variable names the destination and the variable, never a value
    let err = endpoint(toml, &[]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        "destination crm: header Authorization reads ${CRM_TOKEN}, which is not set in the environment"
    );
    let err = endpoint("[destinations.crm]\nurl = \"http://h/{payload}\"\n", &[]).unwrap_err();
    assert!(
        err.to_string().contains("unknown placeholder {payload}"),
        "{err}"
    );
}

#[test]
fn bad_http_settings_are_named_when_the_config_is_read() {
    for (toml, says) in [
        (
            "status = { 4o9 = \"accepted\" }",
            "`4o9` is not an HTTP status",
        ),
        ("status = { 409 = \"maybe\" }", "unknown variant `maybe`"),
        ("reference = \"id\"", "`id` is not a JSON pointer"),
        ("method = \"GET\"", "a GET must not change anything"),
        ("method = \"FETCH\"", "unknown variant `FETCH`"),
        ("body = \"xml\"", "unknown variant `xml`"),
        (
            "headers = { \"Bad Name\" = \"x\" }",
            "`Bad Name` is not a header name",
        ),
        ("lookup_method = \"DELETE\"", "GET or POST"),
        (
            "[destinations.crm.actions.a]\nurl_typo = \"x\"",
            "unknown field `url_typo`",
        ),
    ] {
        let text = format!("[destinations.crm]\nurl = \"http://h/\"\n{toml}\n");
        let err = Config::parse(&text, "c.toml").unwrap_err().to_string();
        assert!(
            err.starts_with("c.toml") && err.contains(says),
            "{toml}: {err}"
        );
    }
}

fn op(payload: &str) -> StartedOp {
    StartedOp {
        key: "onb 42/task".into(),
        destination: "crm".into(),
        action: "create".into(),
        attempt: 1,
        retry: false,
        payload: payload.into(),
        row: None,
    }
}

#[test]
fn templates_fill_and_encode_their_placeholders() {
    let o = op(r#"{"contact":{"id":"c/9 x","n":7}}"#);
    let p = Payload::new(&o.payload);
    assert_eq!(
        fill(
            "http://h/{action}/{payload.contact.id}?k={key}&n={payload.contact.n}",
            &o,
            &p,
            Encode::Url
        )
        .unwrap(),
        "http://h/create/c%2F9%20x?k=onb%2042%2Ftask&n=7"
    );
    assert_eq!(
        fill("http://h/{payload.contact.email}", &o, &p, Encode::Url).unwrap_err(),
        "the payload has no value at contact.email"
    );
    let body = serde_json::json!({"filters": [{"value": "{key}"}], "limit": 1});
    assert_eq!(
        fill_json(&body, &o, &p).unwrap(),
        serde_json::json!({"filters": [{"value": "onb 42/task"}], "limit": 1})
    );
}

#[test]
fn a_form_body_nests_keys_as_stripe_reads_them() {
    let payload = serde_json::json!({
        "amount": 2000,
        "currency": "eur",
        "metadata": {"order_id": "6735", "note": "a&b=c"},
        "items": [{"price": "p_1"}, {"price": "p_2"}],
        "capture": false,
        "description": null
    });
    let body = form_body(&payload).unwrap();
    assert_eq!(
        body,
        "amount=2000&capture=false&currency=eur&description=&items%5B0%5D%5Bprice%5D=p_1&\
         items%5B1%5D%5Bprice%5D=p_2&metadata%5Bnote%5D=a%26b%3Dc&metadata%5Border_id%5D=6735"
    );
    assert!(form_body(&serde_json::json!(["a"])).is_err());
}
