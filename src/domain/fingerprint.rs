//! The fingerprint: SHA-256 of the canonical JSON of `{destination, action, payload}`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON: object keys sorted at every level, no insignificant whitespace, UTF-8 as is.
///
/// Written out explicitly rather than relying on `serde_json::Map` being a `BTreeMap`: a dependency
/// that turns on serde_json's `preserve_order` feature would otherwise silently change every
/// fingerprint.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex SHA-256 of the canonical JSON of `{destination, action, payload}`.
pub fn fingerprint(destination: &str, action: &str, payload: &Value) -> String {
    let doc =
        serde_json::json!({ "destination": destination, "action": action, "payload": payload });
    let digest = Sha256::digest(canonical_json(&doc).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_the_spec_example() {
        let payload =
            json!({"title":"Kickoff call","due":"2026-12-01","assignee":{"team":"cs","id":7}});
        assert_eq!(
            fingerprint("projects", "create_task", &payload),
            "46e51983cd02c42b4aec38b7d7688c315288f427a09b388db36a1f00bcd84867"
        );
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter_but_contents_do() {
        let a: Value = serde_json::from_str(r#"{ "b": [1, {"y":2,"x":1}], "a": "é" }"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"é","b":[1,{"x":1,"y":2}]}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":"é","b":[1,{"x":1,"y":2}]}"#);
        assert_eq!(fingerprint("d", "a", &a), fingerprint("d", "a", &b));
        assert_ne!(fingerprint("d", "a", &a), fingerprint("d", "other", &a));
        assert_ne!(
            fingerprint("d", "a", &a),
            fingerprint("d", "a", &json!({"a":"e"}))
        );
    }
}
