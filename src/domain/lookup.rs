//! What a destination's lookup said (manual: Destinations and the dispatcher): the work exists (with its reference), it does
//! not, or the lookup gave no answer that proves either.

use serde_json::{Value, json};

/// The answer of one lookup, as the rules take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupAnswer {
    /// The work exists: the value at the `lookup_found` pointer is its reference.
    Found { reference: String, http_status: u16 },
    /// A 404, or a 2xx without the `lookup_found` value, to a request that named the operation
    /// (a lookup that names nothing is refused when the config is loaded).
    Absent { http_status: u16 },
    /// Anything else (an error status, a timeout, a broken connection, a body that is not JSON):
    /// it proves nothing, so the outcome stays unknown.
    NoAnswer { why: String },
}

impl LookupAnswer {
    /// What it said, for a person: "found at crm: CRM-9 (HTTP 200)".
    pub fn describe(&self, destination: &str) -> String {
        match self {
            LookupAnswer::Found {
                reference,
                http_status,
            } => format!("found at {destination}: {reference} (HTTP {http_status})"),
            LookupAnswer::Absent { http_status } => {
                format!("not at {destination} (HTTP {http_status})")
            }
            LookupAnswer::NoAnswer { why } => format!("no answer from {destination} ({why})"),
        }
    }

    /// The short word for it: `found`, `absent` or `no_answer` (JSON output and grouping).
    pub fn as_str(&self) -> &'static str {
        match self {
            LookupAnswer::Found { .. } => "found",
            LookupAnswer::Absent { .. } => "absent",
            LookupAnswer::NoAnswer { .. } => "no_answer",
        }
    }

    pub fn reference(&self) -> Option<&str> {
        match self {
            LookupAnswer::Found { reference, .. } => Some(reference),
            _ => None,
        }
    }

    /// The evidence an event keeps of it: the lookup named as such, its status or why not.
    pub fn evidence(&self) -> Value {
        match self {
            LookupAnswer::Found { http_status, .. } | LookupAnswer::Absent { http_status } => {
                json!({ "by": "lookup", "answer": self.as_str(), "http_status": http_status })
            }
            LookupAnswer::NoAnswer { why } => {
                json!({ "by": "lookup", "answer": self.as_str(), "why": why })
            }
        }
    }
}
