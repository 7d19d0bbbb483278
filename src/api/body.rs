//! Request bodies read field by field, so that a bad one is a 400 naming its field (SPEC 20).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::answer::Failure;

/// The body as its bytes, or 413 over `max_body` with the error object.
pub fn bytes(body: Result<Bytes, BytesRejection>, max_body: usize) -> Result<Bytes, Failure> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
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

    /// A whole number from 0 to `max`.
    pub fn number(&mut self, name: &str, max: u64) -> Result<Option<u64>, Failure> {
        match self.take(name) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64().filter(|n| *n <= max) {
                Some(n) => Ok(Some(n)),
                None => Err(Failure::invalid(format!(
                    "field `{name}`: must be a whole number from 0 to {max}"
                ))),
            },
            Some(_) => Err(Failure::invalid(format!(
                "field `{name}`: must be a number"
            ))),
        }
    }
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
        assert!(f.number("n", 10).unwrap_err().message.contains("field `n`"));
        assert_eq!(f.number("m", 10).unwrap(), Some(3));
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
}
