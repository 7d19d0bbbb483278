//! Redaction's tests: sensitive keys, value patterns, configured paths, hints, scrubbed texts.
use super::*;
use serde_json::json;

const SECRETS: [&str; 6] = [
    "ada@example.com",
    "4111111111111111",
    "abc.def-123",
    "+44 7700 900123",
    "Zebulon Quixote",
    "hunter2",
];

#[test]
fn sensitive_keys_follow_the_spec_list() {
    for k in [
        "password",
        "PASSWD",
        "client_secret",
        "accessToken",
        "apiKey",
        "api_key",
        "api-key",
        "Authorization",
        "cookie",
        "session_id",
        "ssn",
        "IBAN",
        "card_number",
        "cvv",
        "email",
        "phone",
        "dob",
        "birthdate",
        "billing_address",
    ] {
        assert!(sensitive_key(k), "{k}");
    }
    for k in ["title", "due", "name", "id", "team", "notes"] {
        assert!(!sensitive_key(k), "{k}");
    }
}

#[test]
fn payloads_lose_keys_values_and_configured_fields() {
    let rules = [FieldRule {
        destination: Some("crm".into()),
        action: None,
        fields: vec![
            "customer.name".into(),
            "*.notes".into(),
            "items[*].address".into(),
        ],
        hint: None,
    }];
    let r = Redactor::new(&rules).unwrap();
    let payload =
        json!({"customer": {"name": "Zebulon Quixote", "email": "ada@example.com", "id": 7,
        "notes": "likes tea"}, "items": [{"address": "1 Main St", "sku": "A1"}],
        "auth": "Bearer abc.def-123", "card": "4111111111111111", "memo": "call +44 7700 900123",
        "password": "hunter2"})
        .to_string();
    let red = r.for_operation("crm", "create_customer", &payload);
    let shown = red.payload.to_string();
    for s in SECRETS.iter().chain(&["likes tea", "1 Main St"]) {
        assert!(!shown.contains(s), "{s} in {shown}");
    }
    assert_eq!(red.payload["customer"]["id"], 7);
    assert_eq!(red.payload["items"][0]["sku"], "A1");
    // the operation's own secrets are scrubbed from its error texts
    let err = red.text("409: customer Zebulon Quixote exists (likes tea)");
    assert_eq!(err, "409: customer [redacted] exists ([redacted])");
    // other destinations do not get crm's configured paths
    let other = r.for_operation("projects", "create_task", &payload);
    assert_eq!(other.payload["customer"]["name"], "Zebulon Quixote");
}

#[test]
fn the_list_scrubber_finds_what_full_redaction_removes() {
    let rules = [FieldRule {
        destination: None,
        action: None,
        fields: vec!["items[*].address".into(), "a.b".into()],
        hint: None,
    }];
    let r = Redactor::new(&rules).unwrap();
    let payload = json!({"a": {"b": "Zebulon Quixote", "c": "kept"}, "items": [{"address": "1 Main St"}],
        "contact": {"email": "ada@example.com", "phone": 447700900123_u64}, "list": [{"token": ["t0k3n-secret"]}]}).to_string();
    let text = "Zebulon Quixote at 1 Main St, ada@example.com, 447700900123, t0k3n-secret, kept";
    let full = r.for_operation("d", "a", &payload).text(text);
    assert_eq!(r.scrubber("d", "a", &payload).text(text), full);
    assert_eq!(
        full,
        "[redacted] at [redacted], [redacted], [redacted], [redacted], kept"
    );
}

/// Redaction: object keys that are themselves redacted stay distinct, so no field disappears.
#[test]
fn redacted_keys_stay_distinct() {
    let r = Redactor::default();
    let payload = serde_json::json!({
        "ada@example.com": {"role": "owner"},
        "bob@example.org": {"role": "viewer"},
        "team": "cs",
    });
    let red = r.for_operation("crm", "upsert", &payload.to_string());
    let shown = red.payload.as_object().unwrap();
    assert_eq!(shown.len(), 3, "{}", red.payload);
    assert_eq!(shown["[redacted 1]"]["role"], "owner");
    assert_eq!(shown["[redacted 2]"]["role"], "viewer");
    assert_eq!(shown["team"], "cs");
    assert!(
        !red.payload.to_string().contains("example"),
        "{}",
        red.payload
    );
}

#[test]
fn field_paths_parse_and_match() {
    assert!(FieldPath::parse("a..b").is_err());
    assert!(FieldPath::parse("a[x]").is_err());
    assert!(FieldPath::parse("a[1").is_err());
    let p = FieldPath::parse("**.iban").unwrap();
    let deep = [
        PathSeg::Key("a".into()),
        PathSeg::Index(2),
        PathSeg::Key("iban".into()),
    ];
    assert!(p.matches(&deep));
    assert!(p.matches(&deep[2..]));
    assert!(!FieldPath::parse("a.iban").unwrap().matches(&deep));
}

/// the hints (manual: Redaction): a fragment that helps find the record, never the value; off by default;
/// the marker always starts with `[redacted`; free texts still lose the whole value.
#[test]
fn hints_keep_a_fragment_only_where_asked() {
    let payload = r#"{"to":"x","phone":"+358 40 555 0142","email":"linus@example.fi","card":"4111 1111 1111 1111","token":"abcdefgh","pin_code":"1234","customer":{"ref":"AC-00017731"}}"#;
    let plain = Redactor::new(&[]).unwrap();
    let red = plain.for_operation("sms", "send", payload);
    for k in ["phone", "email", "card", "token"] {
        assert_eq!(red.payload[k], "[redacted]", "{k}: off by default");
    }
    let hinted = Redactor::new(&[]).unwrap().with_hints(true);
    let red = hinted.for_operation("sms", "send", payload);
    assert_eq!(red.payload["phone"], "[redacted …0142]");
    assert_eq!(red.payload["email"], "[redacted l…@example.fi]");
    assert_eq!(red.payload["card"], "[redacted …1111]");
    assert_eq!(
        red.payload["token"], "[redacted]",
        "no digits, no @: nothing to keep"
    );
    // a configured rule's hint, on a field no built-in rule knows
    let rules = [FieldRule {
        destination: Some("sms".into()),
        action: None,
        fields: vec!["customer.ref".into()],
        hint: Some(Hint::Last4),
    }];
    let red = Redactor::new(&rules)
        .unwrap()
        .for_operation("sms", "send", payload);
    assert_eq!(red.payload["customer"]["ref"], "[redacted …7731]");
    assert_eq!(
        red.payload["phone"], "[redacted]",
        "the rule's hint is for its field only"
    );
    // free texts still lose the whole value, with the plain marker
    let text = red.text("sent to +358 40 555 0142, ref AC-00017731");
    assert!(!text.contains("0142") && !text.contains("7731"), "{text}");
}
