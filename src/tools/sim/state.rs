//! What the simulator holds: its faults and profile, the tasks it made, and the state every
//! request shares.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What can go wrong, on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 422: a business rejection; nothing created.
    Reject,
    /// The task is created, then the connection breaks before the answer.
    DropAfterCommit,
    /// The task is created, then the answer comes after the client has given up.
    LateAfterCommit,
    /// 503 with `Retry-After` before anything is created.
    Unavailable,
    /// The task is created, then a 500.
    ErrorAfterCommit,
    /// 422 whose plain-text body holds a NUL byte (`bad\0request`); nothing created.
    RejectNul,
    /// 422 whose body quotes the request it got (its body and headers), secrets and all;
    /// nothing created.
    Echo,
    /// The request is lost on its way: the connection breaks and nothing is created (an unknown
    /// outcome that a look at the destination finds absent).
    Lost,
}

impl Fault {
    /// The faults a random schedule draws from (`--fault-rate`).
    pub const ALL: [Fault; 5] = [
        Fault::Reject,
        Fault::DropAfterCommit,
        Fault::LateAfterCommit,
        Fault::Unavailable,
        Fault::ErrorAfterCommit,
    ];

    /// Every fault that can be asked for by name.
    pub const NAMED: [Fault; 8] = [
        Fault::Reject,
        Fault::DropAfterCommit,
        Fault::LateAfterCommit,
        Fault::Unavailable,
        Fault::ErrorAfterCommit,
        Fault::RejectNul,
        Fault::Echo,
        Fault::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Reject => "reject",
            Fault::DropAfterCommit => "drop",
            Fault::LateAfterCommit => "late",
            Fault::Unavailable => "unavailable",
            Fault::ErrorAfterCommit => "error",
            Fault::RejectNul => "reject-nul",
            Fault::Echo => "echo",
            Fault::Lost => "lost",
        }
    }

    pub fn parse(text: &str) -> std::result::Result<Fault, String> {
        Fault::NAMED
            .into_iter()
            .find(|f| f.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown fault '{}': use reject, drop, late, unavailable, error, reject-nul, echo or lost",
                    crate::domain::escape_text(text)
                )
            })
    }
}

/// How this simulated destination behaves.
#[derive(Clone, Debug)]
pub struct Profile {
    pub dedupe: bool,
    pub key_retention: Duration,
    /// Applied to every create (a request header overrides it).
    pub fault: Option<Fault>,
    /// Chance of a random fault per create, drawn from a schedule seeded by `seed`.
    pub fault_rate: f64,
    /// What the random schedule draws from (never empty).
    pub fault_kinds: Vec<Fault>,
    pub seed: u64,
    /// How long a `late` answer waits.
    pub late: Duration,
    /// The profile's fault hits only the first request of each key (a drill's lost response).
    pub fault_first_only: bool,
    /// How long every create takes (a real destination is not instant): at least `latency`, at
    /// most `latency_max`, drawn anew for each request.
    pub latency: Duration,
    pub latency_max: Duration,
    /// Every request but `/stats` needs this header (lower-case name, value), else 401.
    pub require_header: Option<(String, String)>,
    /// The status of a successful create: 201 (default), 200, or 204 with no body.
    pub answer: u16,
    /// A repeated key answers `409 already exists` (HubSpot) instead of the original task.
    pub exists_409: bool,
    /// Requests a second above which every route but `/stats` answers 429 (`Retry-After: 1`).
    pub rate_limit: Option<f64>,
    /// Windows of the run in which the destination is down.
    pub outages: Vec<Outage>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            dedupe: true,
            key_retention: Duration::from_secs(86_400),
            fault: None,
            fault_rate: 0.0,
            fault_kinds: Fault::ALL.to_vec(),
            seed: 1,
            late: Duration::from_secs(10),
            fault_first_only: false,
            latency: Duration::ZERO,
            latency_max: Duration::ZERO,
            require_header: None,
            answer: 201,
            exists_409: false,
            rate_limit: None,
            outages: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Task {
    pub id: String,
    pub key: Option<String>,
    pub body: Value,
    /// The request's body exactly as it arrived.
    #[serde(default)]
    pub received: String,
    /// The request's headers as they arrived (names in lower case): what a drill reads to see
    /// which credentials reached the destination.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
}

/// The business records: what a drill counts.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Records {
    pub(super) tasks: Vec<Task>,
    /// Every create request that arrived, whatever came of it.
    #[serde(default)]
    pub(super) requests: u64,
    /// The faults injected, by kind (what a chaos run reports).
    #[serde(default)]
    pub(super) faults: std::collections::BTreeMap<String, u64>,
    /// Requests met by an outage (`outage`) and by the rate limit (`limited`).
    #[serde(default)]
    pub(super) health: std::collections::BTreeMap<String, u64>,
}

pub(super) struct Sim {
    pub(super) profile: Profile,
    pub(super) records: Mutex<Records>,
    /// Keys whose first request is still being made.
    pub(super) running: Mutex<Vec<String>>,
    pub(super) rng: Mutex<StdRng>,
    pub(super) state_file: Option<PathBuf>,
    /// Keys that have been asked for at least once (for `fault_first_only`).
    pub(super) seen: Mutex<std::collections::HashSet<String>>,
    /// When it started: its outages are counted from here.
    pub(super) started: std::time::Instant,
    /// The rate limit's bucket, where the profile sets one.
    pub(super) limit: Option<Mutex<Limit>>,
}

impl Sim {
    pub(super) fn persist(&self, records: &Records) {
        let Some(path) = &self.state_file else { return };
        let tmp = path.with_extension("tmp");
        if let Ok(text) = serde_json::to_string(records)
            && std::fs::write(&tmp, text).is_ok()
        {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    /// How long this request takes: the profile's latency, or a draw from its range.
    pub(super) fn latency(&self) -> Duration {
        let (low, high) = (self.profile.latency, self.profile.latency_max);
        if high <= low {
            return low;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        low + Duration::from_micros(rng.random_range(0..=(high - low).as_micros() as u64))
    }

    pub(super) fn has_task(&self, key: Option<&str>) -> bool {
        let Some(k) = key else { return false };
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records.tasks.iter().any(|t| t.key.as_deref() == Some(k))
    }

    pub(super) fn fault_for(
        &self,
        headers: &HeaderMap,
        body: &Value,
        key: Option<&str>,
    ) -> std::result::Result<Option<Fault>, String> {
        // asked for by the request: an `X-Sim-Fault` header, or `_sim_fault` in the body (what a
        // dispatcher sends is the payload, so a drill can pick each operation's fault)
        let asked = match headers.get("x-sim-fault") {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| "bad X-Sim-Fault header".to_string())?,
            ),
            None => body.get("_sim_fault").and_then(Value::as_str),
        };
        if let Some(text) = asked {
            return if text == "none" {
                Ok(None)
            } else {
                Fault::parse(text).map(Some)
            };
        }
        if let Some(f) = self.profile.fault {
            if self.profile.fault_first_only {
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                let first = key.is_none_or(|k| seen.insert(k.to_string()));
                return Ok(first.then_some(f));
            }
            return Ok(Some(f));
        }
        if self.profile.fault_rate > 0.0 {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            if rng.random_bool(self.profile.fault_rate.clamp(0.0, 1.0)) {
                let kinds = &self.profile.fault_kinds;
                return Ok(kinds.get(rng.random_range(0..kinds.len().max(1))).copied());
            }
        }
        Ok(None)
    }
}

/// How the destination is down in an outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutageKind {
    /// Requests are taken and never answered (the client's timeout ends them): nothing is made.
    Hang,
    /// Connections are refused: the simulator stops listening for the window.
    Refuse,
    /// Every request is answered 503 (no `Retry-After`): nothing is made.
    Unavailable,
}

impl OutageKind {
    pub fn parse(text: &str) -> std::result::Result<OutageKind, String> {
        match text {
            "hang" => Ok(OutageKind::Hang),
            "refuse" => Ok(OutageKind::Refuse),
            "503" => Ok(OutageKind::Unavailable),
            other => Err(format!(
                "unknown outage kind '{}': use hang, refuse or 503",
                crate::domain::escape_text(other)
            )),
        }
    }
}

/// A window of the simulator's run, counted from its start, in which it is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    pub from: Duration,
    pub to: Duration,
    pub kind: OutageKind,
}

impl Outage {
    /// `FROM..TO`, e.g. `10s..50s` (from its start; `0s..` a start at once).
    pub fn parse(text: &str, kind: OutageKind) -> std::result::Result<Outage, String> {
        let bad = || {
            format!(
                "--outage '{}': a window is FROM..TO from the simulator's start, e.g. 10s..50s",
                crate::domain::escape_text(text)
            )
        };
        let (from, to) = text.split_once("..").ok_or_else(bad)?;
        let day = Duration::from_secs(86_400);
        let read = |t: &str| {
            crate::domain::time::parse_duration_within(t.trim(), Duration::ZERO, day)
                .map_err(|e| format!("--outage: {e}"))
        };
        let (from, to) = (read(from)?, read(to)?);
        if to <= from {
            return Err(format!(
                "--outage '{}': the window ends before it starts",
                crate::domain::escape_text(text)
            ));
        }
        Ok(Outage { from, to, kind })
    }
}

/// The outage under way `since` the start, if any.
pub(super) fn outage_at(outages: &[Outage], since: Duration) -> Option<Outage> {
    outages
        .iter()
        .find(|o| o.from <= since && since < o.to)
        .copied()
}

/// A shared limit of requests a second: a bucket of one second's requests, refilled at the rate.
#[derive(Debug)]
pub(super) struct Limit {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Limit {
    pub(super) fn new(per_second: f64) -> Limit {
        Limit {
            per_second,
            tokens: per_second.max(1.0),
            at: Instant::now(),
        }
    }

    /// Takes one request's place; false when the limit stands in the way.
    pub(super) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.per_second.max(1.0));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_reads_from_to_and_refuses_nonsense() {
        let o = Outage::parse("10s..50s", OutageKind::Hang).unwrap();
        assert_eq!(
            (o.from, o.to),
            (Duration::from_secs(10), Duration::from_secs(50))
        );
        assert!(Outage::parse("50s..10s", OutageKind::Hang).is_err());
        assert!(Outage::parse("10s", OutageKind::Hang).is_err());
        assert!(Outage::parse("x..10s", OutageKind::Hang).is_err());
        assert_eq!(OutageKind::parse("503"), Ok(OutageKind::Unavailable));
        assert!(OutageKind::parse("down").is_err());
        let windows = [o];
        assert_eq!(outage_at(&windows, Duration::from_secs(9)), None);
        assert_eq!(outage_at(&windows, Duration::from_secs(10)), Some(o));
        assert_eq!(outage_at(&windows, Duration::from_secs(50)), None);
    }

    #[test]
    fn the_limit_takes_one_seconds_worth_then_its_rate() {
        let start = Instant::now();
        let mut limit = Limit::new(40.0);
        let first = (0..100).filter(|_| limit.take(start)).count();
        assert_eq!(first, 40);
        // a quarter second later: ten more
        let later = start + Duration::from_millis(250);
        assert_eq!((0..100).filter(|_| limit.take(later)).count(), 10);
    }
}
