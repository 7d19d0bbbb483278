//! A payload is the business request: settle sends exactly the JSON it was given. Numbers keep
//! their written form (serde_json's `arbitrary_precision`: `123456789012345678901234567890`, `1.0`
//! and `-0` are not rounded or rewritten), an object that names a key twice is refused rather
//! than silently keeping the last, and no text holds a NUL (which PostgreSQL cannot store, and
//! SQLite would store where PostgreSQL refuses: refused on both alike).

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// How serde_json hands a number over when `arbitrary_precision` is on: a one-entry map under
/// this key, holding the number as written.
pub(crate) const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Parses a payload's JSON text: duplicate keys and NUL characters are refused, numbers kept as
/// written.
pub fn parse_payload(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// How deep a payload may nest, objects and arrays counted: what JSON read by any entrance may
/// hold (serde_json reads 127 levels), so that a payload stored can always be read again.
pub const MAX_DEPTH: usize = 127;

/// A payload given as a value (the library's `Intent`, a correction's edits): no NUL in any key
/// or string, and no deeper than [`MAX_DEPTH`]. Walked without recursion, so that no depth
/// given can exhaust the stack.
pub fn check_payload(value: &Value) -> Result<(), String> {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let nested = matches!(v, Value::Array(_) | Value::Object(_));
        if nested && depth > MAX_DEPTH {
            return Err(format!("the payload nests deeper than {MAX_DEPTH} levels"));
        }
        match v {
            Value::String(s) if s.contains('\0') => return Err(nul("a payload string")),
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => {
                for (k, item) in map {
                    if k.contains('\0') {
                        return Err(nul("a payload key"));
                    }
                    stack.push((item, depth + 1));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The most a payload may hold when the config does not say (manual: Configuration: `max_payload`).
pub const DEFAULT_MAX_PAYLOAD: usize = 256 * 1024;

/// A payload of `bytes` (its canonical JSON, as it would be stored) within `limit`, or why not:
/// its size and the limit, in one line.
pub fn check_size(bytes: usize, limit: usize) -> Result<(), String> {
    if bytes <= limit {
        return Ok(());
    }
    Err(format!(
        "the payload is {}; the limit is {} (max_payload): nothing of it is stored",
        size_text(bytes),
        size_text(limit)
    ))
}

/// A size for a person: `300.0 KiB`, `1.5 MiB`, `512 B`.
pub fn size_text(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}

/// A size as the config writes it: a number of bytes, or a text like `256KiB`, `1 MiB`, `300KB`.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim();
    let times: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1000.0,
        "kib" | "k" => 1024.0,
        "mb" => 1_000_000.0,
        "mib" | "m" => 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "'{text}' is not a size: write bytes, or e.g. 256KiB, 1MiB"
            ));
        }
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size: write bytes, or e.g. 256KiB, 1MiB"))?;
    Ok((n * times).round() as usize)
}

/// A text given to settle (an error, a reference, a note, a reason): no NUL.
pub fn check_text(what: &str, text: &str) -> Result<(), String> {
    if text.contains('\0') {
        return Err(nul(what));
    }
    Ok(())
}

fn nul(what: &str) -> String {
    format!("{what} holds a NUL character (\\u0000), which cannot be stored")
}

/// Deserializes one JSON value, refusing duplicate keys and NUL characters.
#[derive(Clone, Copy)]
pub struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that JSON cannot hold"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        check_text("a payload string", v).map_err(E::custom)?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        check_text("a payload string", &v).map_err(E::custom)?;
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if first && key == NUMBER_TOKEN {
                // a number, as written
                let text: String = map.next_value()?;
                let n: serde_json::Number = text.parse().map_err(de::Error::custom)?;
                return Ok(Value::Number(n));
            }
            first = false;
            check_text("a payload key", &key).map_err(de::Error::custom)?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key \"{}\" appears twice in one object",
                    crate::domain::escape_text(&key)
                )));
            }
            let v = map.next_value_seed(Strict)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// For `#[serde(deserialize_with)]`: a payload field of a larger document, parsed strictly.
pub fn deserialize_strict<'de, D: de::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Strict.deserialize(d)
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn sizes_read_and_said() {
        assert_eq!(parse_size("256KiB"), Ok(262_144));
        assert_eq!(parse_size("1 MiB"), Ok(1_048_576));
        assert_eq!(parse_size("300KB"), Ok(300_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err() && parse_size("3 GB").is_err());
        assert_eq!(size_text(300 * 1024), "300.0 KiB");
        assert!(check_size(256 * 1024, DEFAULT_MAX_PAYLOAD).is_ok());
        assert_eq!(
            check_size(300 * 1024, DEFAULT_MAX_PAYLOAD).unwrap_err(),
            "the payload is 300.0 KiB; the limit is 256.0 KiB (max_payload): nothing of it is stored"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fingerprint::canonical_json;

    #[test]
    fn numbers_keep_their_written_form() {
        // keys in sorted order: the canonical form is the text itself
        let text = r#"{"big":123456789012345678901234567890,"long":1.00000000000000000001,"n":7,"neg":-0,"small":1e-7}"#;
        let v = parse_payload(text).unwrap();
        assert_eq!(canonical_json(&v), text);
        assert_eq!(v["n"].as_u64(), Some(7));
        // an exponent keeps its value and digits; serde_json writes its sign
        let v = parse_payload(r#"{"e":1e400}"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"e":1e+400}"#);
    }

    #[test]
    fn duplicate_keys_and_nul_are_refused() {
        let err = parse_payload(r#"{"a":1,"b":{"c":1,"c":2}}"#).unwrap_err();
        assert!(err.contains("\"c\" appears twice"), "{err}");
        assert!(parse_payload(r#"{"a":1,"a":1}"#).is_err());
        let err = parse_payload(r#"{"a":"x\u0000y"}"#).unwrap_err();
        assert!(err.contains("NUL"), "{err}");
        assert!(parse_payload(r#"{"x\u0000":1}"#).is_err());
        assert!(parse_payload(r#"{"a":1} trailing"#).is_err());
        assert!(check_payload(&serde_json::json!({"a": ["x\u{0}"]})).is_err());
        assert!(check_payload(&serde_json::json!({"a": ["x"]})).is_ok());
    }
}
