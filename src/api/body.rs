//! Request bodies read field by field, so that a bad one is a 400 naming its field (manual: The HTTP API).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::answer::Failure;

/// The body as its bytes, or 413 over `max_body` with the error object.
pub fn bytes(body: Result<Bytes, BytesRejection>, max_body: usize) -> Result<Bytes, Failure> {
    body.map_err(|r| {
        let text = r.body_text();
        if let Some(at) = text.find("the request body did not arrive within") {
            // a body that trickles holds a connection: its deadline (the listener's) passed
            Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                "invalid",
                text[at..].to_string(),
            )
        } else if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the request body is over {} (max_body): nothing of it is stored",
                    crate::domain::payload::size_text(max_body)
                ),
            )
        } else {
            Failure::invalid(format!(
                "the request body cannot be read: {}",
                r.body_text()
            ))
        }
    })
}

/// A JSON object's fields.
pub struct Fields(Map<String, Value>);

impl Fields {
    /// The body as a JSON object with only the `allowed` fields.
    pub fn parse(bytes: &[u8], allowed: &[&str]) -> Result<Fields, Failure> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| Failure::invalid(format!("the body is not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(Failure::invalid("the body must be a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(Failure::invalid(format!(
                "field `{}` is not one of {}",
                crate::domain::escape_text(unknown),
                allowed.join(", ")
            )));
        }
        Ok(Fields(map))
    }

    /// An empty body, or `{}`.
    pub fn none(bytes: &[u8]) -> Result<(), Failure> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        Fields::parse(bytes, &[]).map(|_| ())
    }

    /// A field as it came, `null` included.
    pub fn raw(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name)
    }

    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name).filter(|v| !v.is_null())
    }

    /// A text field, absent or null: `None`.
    pub fn text(&mut self, name: &str) -> Result<Option<String>, Failure> {
        match self.take(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Failure::invalid(format!(
                "field `{name}`: must be a string"
            ))),
        }
    }

    pub fn required(&mut self, name: &str) -> Result<String, Failure> {
        self.text(name)?
            .ok_or_else(|| Failure::invalid(format!("field `{name}` is required")))
    }

    /// A whole number from `min` to `max`: written as JSON Schema's `integer` allows it (`839`,
    /// `839.0`, `8.39e2`), never rounded.
    pub fn number(&mut self, name: &str, min: u64, max: u64) -> Result<Option<u64>, Failure> {
        let out_of_range = || {
            Failure::invalid(format!(
                "field `{name}`: must be a whole number from {min} to {max}"
            ))
        };
        match self.take(name) {
            None => Ok(None),
            Some(Value::Number(n)) => whole(&n)
                .filter(|n| (min..=max).contains(n))
                .map(Some)
                .ok_or_else(out_of_range),
            Some(_) => Err(Failure::invalid(format!(
                "field `{name}`: must be a number"
            ))),
        }
    }
}

/// A JSON number as a whole number from 0, where it is one: `839`, `839.0` and `8.39e2` are, as
/// JSON Schema's `integer` says; `839.5`, `-1` and numbers past `u64` are not.
fn whole(n: &serde_json::Number) -> Option<u64> {
    if let Some(n) = n.as_u64() {
        return Some(n);
    }
    // the number as written (arbitrary precision): a sign, digits, a fraction, an exponent
    let text = n.to_string();
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (text.as_str(), 0),
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    if negative {
        return None;
    }
    // where the decimal point falls among the significant digits
    let point = int.len() as i64 - (all.len() - digits.len()) as i64 + exponent;
    // a fraction, or 10^20 and more: no u64
    if !(1..=20).contains(&point) {
        return None;
    }
    let point = point as usize;
    let (whole, rest) = if point >= digits.len() {
        (format!("{digits}{}", "0".repeat(point - digits.len())), "")
    } else {
        (digits[..point].to_string(), &digits[point..])
    };
    if !rest.chars().all(|c| c == '0') {
        return None;
    }
    whole.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_body_names_its_field() {
        let msg = |r: Result<Fields, Failure>| r.err().map(|f| f.message).unwrap_or_default();
        assert!(msg(Fields::parse(b"[1]", &["key"])).contains("JSON object"));
        assert!(msg(Fields::parse(b"{\"key\":", &["key"])).contains("not valid JSON"));
        assert!(msg(Fields::parse(b"{\"kee\":1}", &["key"])).contains("field `kee`"));
        let mut f = Fields::parse(br#"{"key":5,"n":-1,"m":3}"#, &["key", "n", "m"]).unwrap();
        assert!(f.text("key").unwrap_err().message.contains("field `key`"));
        assert!(
            f.number("n", 0, 10)
                .unwrap_err()
                .message
                .contains("field `n`")
        );
        assert_eq!(f.number("m", 0, 10).unwrap(), Some(3));
        assert!(
            f.required("gone")
                .unwrap_err()
                .message
                .contains("field `gone` is required")
        );
        assert!(Fields::none(b" \n").is_ok());
        assert!(Fields::none(b"{}").is_ok());
        assert!(Fields::none(b"{\"x\":1}").is_err());
    }

    #[test]
    fn a_whole_number_may_be_written_as_json_schema_allows() {
        let read = |text: &str| {
            let mut f = Fields::parse(format!("{{\"n\":{text}}}").as_bytes(), &["n"]).unwrap();
            f.number("n", 1, 599).map_err(|e| e.message)
        };
        for (text, n) in [
            ("839", None),
            ("404", Some(404)),
            ("404.0", Some(404)),
            ("4.04e2", Some(404)),
            ("40400e-2", Some(404)),
            ("4.0400E+2", Some(404)),
        ] {
            match n {
                Some(n) => assert_eq!(read(text), Ok(Some(n)), "{text}"),
                None => assert!(read(text).is_err(), "{text}"),
            }
        }
        for text in [
            "404.5",
            "-404",
            "0",
            "0.0",
            "-0",
            "1e400",
            "1e999999999999",
            "4.04e1",
            "4e-999999999999",
            "12345678901234567890123",
        ] {
            assert!(read(text).is_err(), "{text}");
        }
        // zero where zero is allowed, however written
        let mut f = Fields::parse(br#"{"a":-0.0,"b":0e5}"#, &["a", "b"]).unwrap();
        assert_eq!(f.number("a", 0, 9).unwrap(), Some(0));
        assert_eq!(f.number("b", 0, 9).unwrap(), Some(0));
    }
}
