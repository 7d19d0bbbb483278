//! What the protocol is said in: an intended operation, an attempt's report, settle's own name
//! as an actor, and the attempts a batch already knows.

use std::time::Duration;

use serde_json::Value;

use crate::domain::Outcome;

/// The actor name of settle's own automatic actions (sweep, auto-pause).
pub const SYSTEM_ACTOR: &str = "settle";

/// The attempts already stored of the operations a batch touches, `(operation id, number)` to
/// outcome (`None`: still open), so that judging a repeated attempt costs no query.
pub(crate) type KnownAttempts = std::collections::HashMap<(i64, u32), Option<Outcome>>;

/// An intended operation, as an automation records it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intent {
    pub key: String,
    pub workflow: String,
    pub step: String,
    pub destination: String,
    pub action: String,
    pub payload: Value,
    /// The run this step belongs to (manual: Runs): one execution of the workflow for one case.
    pub run: Option<String>,
}

/// An attempt's outcome, as an automation reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptReport {
    pub key: String,
    /// The attempt's number; by default the open attempt, else the next one.
    pub attempt: Option<u32>,
    pub outcome: Option<Outcome>,
    pub reference: Option<String>,
    pub error: Option<String>,
    pub http_status: Option<u16>,
    pub retry_after: Option<Duration>,
}
