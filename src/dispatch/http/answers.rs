//! What an answer means: its class, its reference, when to retry (manual: Destinations and the dispatcher).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::endpoint::Endpoint;
use crate::config::AnswerClass;
use crate::domain::Outcome;

/// The outcome of one HTTP exchange (manual: States, Destinations and the dispatcher).
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub outcome: Outcome,
    pub http_status: Option<u16>,
    pub reference: Option<String>,
    pub error: Option<String>,
    pub retry_after: Option<Duration>,
    /// An `auth` answer: pause the destination, with this reason.
    pub pause: Option<String>,
}

impl Observed {
    pub(super) fn new(outcome: Outcome, http_status: Option<u16>) -> Observed {
        Observed {
            outcome,
            http_status,
            reference: None,
            error: None,
            retry_after: None,
            pause: None,
        }
    }

    pub(super) fn error(self, error: String) -> Observed {
        Observed {
            error: Some(error),
            ..self
        }
    }
}

/// A destination's answer as it came: what the gateway hands back to its caller (manual: The gateway).
#[derive(Clone, Debug)]
pub struct Raw {
    pub status: u16,
    pub content_type: Option<String>,
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

/// An answer as it arrived: status, `Retry-After`, a redirect's `Location` (as
/// [`crate::outbound::location`] shows it), and the body (`None`: it broke off).
pub struct Answer<'a> {
    pub status: u16,
    pub retry_after: Option<&'a str>,
    pub location: Option<&'a str>,
    pub body: Option<&'a [u8]>,
}

/// The class of a status by the defaults (manual: Destinations and the dispatcher).
pub(super) fn default_class(status: u16) -> AnswerClass {
    match status {
        200..=299 => AnswerClass::Accepted,
        401 | 403 | 407 => AnswerClass::Auth,
        408 | 409 | 425 | 429 | 503 => AnswerClass::Transient,
        400..=499 => AnswerClass::Rejected,
        _ => AnswerClass::Unknown,
    }
}

/// Classifies an answer under a destination's settings (its `status` overrides, its
/// `reference` pointer): a pure function of the answer, the settings and the clock (for a
/// `Retry-After` date).
pub fn classify(answer: &Answer, endpoint: &Endpoint, now: DateTime<Utc>) -> Observed {
    let status = answer.status;
    let class = match endpoint.status.get(&status) {
        Some(class) => *class,
        None if is_redirect(status) => return redirected(answer, endpoint),
        None => default_class(status),
    };
    let seen = Observed::new(Outcome::Unknown, Some(status));
    let text = || {
        let body = String::from_utf8_lossy(answer.body.unwrap_or_default());
        let body = body.trim();
        if body.is_empty() {
            String::new()
        } else {
            format!(": {}", body.chars().take(300).collect::<String>())
        }
    };
    match class {
        AnswerClass::Accepted => match answer.body {
            None => seen.error(format!("HTTP {status} but the answer could not be read")),
            Some(body) => Observed {
                outcome: Outcome::Accepted,
                reference: if endpoint.reference.is_empty() {
                    None
                } else {
                    serde_json::from_slice::<Value>(body)
                        .ok()
                        .and_then(|v| pointed(&v, &endpoint.reference))
                },
                ..seen
            },
        },
        AnswerClass::Auth => Observed {
            outcome: Outcome::Transient,
            pause: Some(format!(
                "HTTP {status} from {}: check its credentials",
                endpoint.destination
            )),
            ..seen
        }
        .error(format!(
            "HTTP {status}: the credentials were refused; not done, the destination is paused"
        )),
        AnswerClass::Transient => Observed {
            outcome: Outcome::Transient,
            retry_after: answer.retry_after.and_then(|v| retry_after(v, now)),
            ..seen
        }
        .error(format!("HTTP {status}: not done, try later")),
        AnswerClass::Rejected => Observed {
            outcome: Outcome::Rejected,
            ..seen
        }
        .error(format!("HTTP {status}{}", text())),
        AnswerClass::Unknown => seen.error(format!("HTTP {status}: outcome not known")),
    }
}

/// The statuses that point elsewhere (a 304 is an answer about a cached copy: unknown).
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 300..=303 | 305 | 307 | 308)
}

/// A redirect, which settle never follows (its `status` may say otherwise): a 303 after a
/// request may point at what it made, so its outcome is not known; any other moved the
/// endpoint, so nothing was done there, and the destination is paused as for refused
/// credentials: one moved URL must not turn a queue into rejections, nor be sent again and
/// again (manual: Destinations and the dispatcher).
fn redirected(answer: &Answer, endpoint: &Endpoint) -> Observed {
    let status = answer.status;
    let to = answer.location.unwrap_or("no Location");
    let seen = Observed::new(Outcome::Unknown, Some(status));
    if status == 303 {
        return seen.error(format!(
            "HTTP 303 to {to}: the destination may have done it (settle follows no redirect); outcome not known"
        ));
    }
    // where it points, its host only: the path may carry the request's values
    let origin = crate::outbound::origin(to);
    Observed {
        outcome: Outcome::Transient,
        pause: Some(format!(
            "HTTP {status} from {}: it redirects to {origin}, which settle does not follow: check its url",
            endpoint.destination
        )),
        ..seen
    }
    .error(format!(
        "HTTP {status}: redirected to {to}, not followed: not done, the destination is paused"
    ))
}

/// `Retry-After` as seconds or an HTTP date.
pub(super) fn retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&Utc) - now).to_std().unwrap_or_default())
}

/// A request that got no answer: provably not sent when the connection was never made,
/// unknown when it may have arrived.
pub(super) fn transport_failure(e: &reqwest::Error, timeout: Duration) -> Observed {
    if e.is_connect() {
        Observed::new(Outcome::Transient, None)
            .error("connect error: the request was not sent".into())
    } else if e.is_timeout() {
        Observed::new(Outcome::Unknown, None)
            .error(format!("no answer within {}s", timeout.as_secs_f32()))
    } else {
        Observed::new(Outcome::Unknown, None).error("the connection broke before the answer".into())
    }
}

/// Reads an answer's body, up to [`ANSWER_LIMIT`]; `None` when the connection broke first.
pub(super) async fn read_capped(mut resp: reqwest::Response) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        let room = ANSWER_LIMIT - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == ANSWER_LIMIT {
            break;
        }
    }
    Some(body)
}

/// How much of an answer is read: enough for any error text or reference; a destination that
/// sends more cannot fill the dispatcher's memory.
pub(super) const ANSWER_LIMIT: usize = 256 * 1024;

/// The value at a JSON pointer, as text; `None` when absent or null.
pub(super) fn pointed(body: &Value, pointer: &str) -> Option<String> {
    match body.pointer(pointer)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}
