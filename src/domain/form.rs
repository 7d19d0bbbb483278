//! A form body (application/x-www-form-urlencoded) read as JSON, as Stripe reads `a[b][0]=v`:
//! nested keys become objects, values stay text, and a later field wins over an earlier one it
//! meets (`a=1&a[b]=2` gives `{"a": {"b": "2"}}`, `a[b]=2&a=1` gives `{"a": "1"}`), as a repeated
//! field does: any form of text fields is read, none refused for its shape. The gateway takes a
//! form as the payload, and the simulator reads one the same way.

use serde_json::Value;

/// The form's fields as one JSON object.
pub fn read_form(received: &str) -> std::result::Result<Value, String> {
    let mut root = Value::Object(Default::default());
    for pair in received.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (form_decode(k)?, form_decode(v)?);
        let (head, rest) = k.split_once('[').unwrap_or((&k, ""));
        let mut path = vec![head.to_string()];
        path.extend(
            rest.split('[')
                .filter(|p| !p.is_empty())
                .map(|p| p.trim_end_matches(']').to_string()),
        );
        let mut at = &mut root;
        for (i, part) in path.iter().enumerate() {
            if !at.is_object() {
                // an earlier field's text, met by this later one's path: the later wins
                *at = Value::Object(Default::default());
            }
            let Value::Object(map) = at else {
                unreachable!("made an object above")
            };
            at = map.entry(part.clone()).or_insert_with(|| {
                if i + 1 == path.len() {
                    Value::Null
                } else {
                    Value::Object(Default::default())
                }
            });
        }
        *at = Value::String(v);
    }
    Ok(root)
}

fn form_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| "bad percent-encoding in the form".to_string())?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "the form is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_keys_become_objects_and_values_stay_text() {
        let v = read_form("name=Ada+L&customer%5Bid%5D=42&customer[tags][0]=a%26b").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "Ada L", "customer": {"id": "42", "tags": {"0": "a&b"}}})
        );
        assert!(read_form("a=%zz").is_err());
        // a later field wins over an earlier one it meets, as a repeated one does
        assert_eq!(
            read_form("a=1&a[b]=2").unwrap(),
            serde_json::json!({"a": {"b": "2"}})
        );
        assert_eq!(
            read_form("a[b]=2&a=1").unwrap(),
            serde_json::json!({"a": "1"})
        );
        assert_eq!(read_form("a=1&a=2").unwrap(), serde_json::json!({"a": "2"}));
        assert_eq!(
            read_form("=1&[x]=2").unwrap(),
            serde_json::json!({"": {"x": "2"}})
        );
    }
}
