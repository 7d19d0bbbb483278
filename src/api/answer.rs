//! The HTTP API's answers: JSON safe for a terminal, and one error object for every answer that
//! is not 2xx, `{"error": {"code", "message", "origin": "settle"}}`, its message one redacted
//! line; at the gateway also `settle_state`, the operation's state, where a tool that shows only
//! an error's body (n8n) can read it.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::Error;

/// A JSON answer with its status.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match crate::domain::safe_json::to_json(value, false) {
        Ok(text) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            text + "\n",
        )
            .into_response(),
        Err(e) => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unavailable",
            format!("cannot encode the answer: {e}"),
        )
        .into_response(),
    }
}

/// An answer that is not 2xx.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// `Retry-After`, in whole seconds.
    pub retry_after: Option<u64>,
    /// The operation's state, at the gateway (`settle_state`).
    pub state: Option<crate::domain::State>,
    /// The key whose correction answers for this one (`corrected_as`).
    pub corrected_as: Option<String>,
}

impl Failure {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Failure {
        let message = message.into();
        // one line: a message is never split, whatever a value inside it held
        let message = crate::domain::escape_text(message.trim()).into_owned();
        Failure {
            status,
            code,
            message,
            retry_after: None,
            state: None,
            corrected_as: None,
        }
    }

    /// The correction that answers for the key, said in the body (`corrected_as`).
    pub fn corrected_as(mut self, key: &str) -> Failure {
        self.corrected_as = Some(key.to_string());
        self
    }

    /// The operation's state after the request, said in the body (`settle_state`).
    pub fn with_state(mut self, state: crate::domain::State) -> Failure {
        self.state = Some(state);
        self
    }

    /// 400, naming what is wrong.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    pub fn retry_after(mut self, seconds: u64) -> Failure {
        self.retry_after = Some(seconds.max(1));
        self
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let (status, code) = match &e {
            Error::Invalid(_) | Error::Unstorable(_) => (StatusCode::BAD_REQUEST, "invalid"),
            Error::Refused(_) => (StatusCode::CONFLICT, "refused"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        };
        let message = match e {
            // never the database's own words to a client: they may name hosts
            Error::Unavailable(_) => "the ledger's database is unreachable; try again".to_string(),
            other => other.to_string(),
        };
        let f = Failure::new(status, code, message);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            f.retry_after(1)
        } else {
            f
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    /// Always `settle`: at the gateway, a body without it is the destination's own.
    origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    settle_state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    corrected_as: Option<&'a str>,
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
                origin: "settle",
                settle_state: self.state.map(|s| s.as_str()),
                corrected_as: self.corrected_as.as_deref(),
            },
        };
        let mut r = json(self.status, &body);
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

/// What a handler answers: a JSON answer, or the error object.
pub type Answer = Result<Response, Failure>;
