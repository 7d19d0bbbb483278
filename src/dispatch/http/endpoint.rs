//! One destination's (or action's) settings as the dispatcher resolved them from the config:
//! where and how to send, how to read the answer, how to look a key up.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::Value;

use crate::config::{AnswerClass, BodyKind};

/// One destination's (or action's) resolved settings.
#[derive(Debug)]
pub struct Endpoint {
    pub(super) destination: String,
    pub(super) url: String,
    pub(super) method: reqwest::Method,
    pub(super) body: BodyKind,
    pub(super) headers: HeaderMap,
    pub(super) idempotency_header: Option<HeaderName>,
    pub(super) reference: String,
    pub(super) status: HashMap<u16, AnswerClass>,
    pub(super) lookup: Option<Lookup>,
    pub timeout: Duration,
    /// The values read from the environment: scrubbed from anything a destination answers.
    pub(super) secrets: Vec<String>,
}

#[derive(Debug)]
pub(super) struct Lookup {
    pub(super) url: String,
    pub(super) method: reqwest::Method,
    pub(super) body: Option<Value>,
    pub(super) found: String,
}
