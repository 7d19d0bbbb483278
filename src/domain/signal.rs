//! What a destination's answers say of its health, and what its breaker lets through: the terms
//! of [`crate::domain::breaker`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::Outcome;

/// The breaker's settings for one destination.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerPolicy {
    pub window: Duration,
    pub failures: u32,
    pub cooldown: Duration,
    pub cooldown_max: Duration,
    /// The pace after a close, in attempts a second.
    pub pace_start: f64,
    /// The most attempts a second ever (the destination's documented limit), if known.
    pub pace_max: Option<f64>,
    /// It probes with `GET probe_url` instead of a real attempt.
    pub by_url: bool,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            window: Duration::from_secs(30),
            failures: 5,
            cooldown: Duration::from_secs(10),
            cooldown_max: Duration::from_secs(300),
            pace_start: 5.0,
            pace_max: None,
            by_url: false,
        }
    }
}

/// The breaker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BreakerState {
    Closed,
    Open,
    Probing,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::Probing => "probing",
        }
    }

    pub fn parse(text: &str) -> Result<BreakerState, String> {
        match text {
            "closed" => Ok(BreakerState::Closed),
            "open" => Ok(BreakerState::Open),
            "probing" => Ok(BreakerState::Probing),
            other => Err(format!("not a breaker state: {other}")),
        }
    }
}

/// What an attempt's answer says of the destination's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// It answered, and took the request.
    Healthy,
    /// It is struggling: counts toward opening; `slows` halves the pace (a 429, a 503, a
    /// timeout).
    Failing { why: &'static str, slows: bool },
    /// Says nothing of its health (a business rejection, `auth`, a 409 while the first request
    /// runs).
    Neutral,
}

/// The signal of an attempt's outcome and status.
pub fn signal(outcome: Outcome, http_status: Option<u16>) -> Signal {
    match (outcome, http_status) {
        (Outcome::Accepted, _) => Signal::Healthy,
        (_, Some(429)) => Signal::Failing {
            why: "HTTP 429: too many requests",
            slows: true,
        },
        (_, Some(503)) => Signal::Failing {
            why: "HTTP 503: unavailable",
            slows: true,
        },
        (_, Some(408)) => Signal::Failing {
            why: "HTTP 408: request timeout",
            slows: true,
        },
        (_, Some(s)) if s >= 500 => Signal::Failing {
            why: "HTTP 5xx",
            slows: false,
        },
        (_, Some(_)) => Signal::Neutral,
        // no answer at all: sent and lost (a timeout or a broken connection)
        (Outcome::Unknown, None) => Signal::Failing {
            why: "no answer (a timeout or a broken connection)",
            slows: true,
        },
        // never reached it: a refused connection or a failed DNS lookup
        (Outcome::Transient, None) => Signal::Failing {
            why: "unreachable (a refused connection)",
            slows: false,
        },
        (_, None) => Signal::Neutral,
    }
}

/// A change of the breaker that people are told of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Opened { why: String },
    Closed,
}

/// Whether attempts may start at a destination now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gate {
    /// Up to this many (`usize::MAX`: no pace).
    Send(usize),
    /// One probe: the caller starts one attempt and marks it the probe.
    Probe,
    /// Nothing starts before this moment.
    Held(DateTime<Utc>),
}
