//! The fingerprint: SHA-256 of the canonical JSON of `{destination, action, payload}`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON: object keys sorted at every level, no insignificant whitespace, UTF-8 as is.
///
/// Written out explicitly rather than relying on `serde_json::Map` being a `BTreeMap`: a dependency
/// that turns on serde_json's `preserve_order` feature would otherwise silently change every
/// fingerprint.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // serde_json writes UTF-8, and so does every branch here
    String::from_utf8(out).unwrap_or_default()
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
    }
}

/// A string or a scalar as serde_json writes it (writing into memory cannot fail).
fn write_json<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(out, value);
}

/// Lowercase hex SHA-256 of the canonical JSON of `{destination, action, payload}`.
pub fn fingerprint(destination: &str, action: &str, payload: &Value) -> String {
    fingerprint_of_canonical(destination, action, &canonical_json(payload))
}

/// [`fingerprint`] from the payload's canonical JSON, already written: the document's keys in
/// their sorted order (`action`, `destination`, `payload`) around it, hashed as they are written.
pub fn fingerprint_of_canonical(destination: &str, action: &str, canonical: &str) -> String {
    let mut doc = Vec::with_capacity(canonical.len() + destination.len() + action.len() + 40);
    doc.extend_from_slice(b"{\"action\":");
    write_json(action, &mut doc);
    doc.extend_from_slice(b",\"destination\":");
    write_json(destination, &mut doc);
    doc.extend_from_slice(b",\"payload\":");
    doc.extend_from_slice(canonical.as_bytes());
    doc.push(b'}');
    let digest = Sha256::digest(&doc);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(HEX[usize::from(b >> 4)] as char);
        hex.push(HEX[usize::from(b & 15)] as char);
    }
    hex
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
    fn the_document_written_around_the_payload_is_the_canonical_document() {
        let payload = json!({"z": [1, 2.5, null, true], "a": {"q": "\"é\u{1}\\"}, "n": -0.0});
        for (d, a) in [("crm", "upsert"), ("d\"x", "a\\b\u{7f}é")] {
            let doc = json!({ "payload": payload, "destination": d, "action": a });
            let whole = canonical_json(&doc);
            let digest = Sha256::digest(whole.as_bytes());
            let expected: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(fingerprint(d, a, &payload), expected, "{whole}");
        }
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
