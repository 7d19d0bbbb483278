//! A destination's health as every settle process on the ledger shares it: its breaker and its
//! pace (manual: Destinations and the dispatcher, Recovery that follows the destination).
//!
//! The breaker opens when, within a window (30 s), at least `failures` (5) attempts failed in a
//! way that says the destination is struggling (a timeout, a broken or refused connection, a
//! 5xx, a 503 or a 429) and they are at least half of the window's attempts. A business
//! rejection, an `auth` answer (which pauses the destination instead) and accepted answers never
//! open it. While it is open no attempt starts. After a cooldown (10 s, doubling while probes
//! fail, up to 5 m, jittered) it is `probing`: one probe at a time, across all processes; a
//! healthy probe closes it, a failed one opens it again.
//!
//! The pace is the rate at which attempts may start: none after a clean start; after a close it
//! starts at `start` (5/s), rises by `start` each second of clean answers up to `max` (or, with
//! no `max`, is lifted after a window without trouble), and halves on a 429, a 503 or a timeout;
//! a `Retry-After` holds the whole destination.
//!
//! Plain data and functions: the store keeps a [`Health`] per destination and the round applies
//! these rules under the row's lock, so that two dispatchers see one breaker and draw from one
//! pace.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

pub use crate::domain::signal::{BreakerPolicy, BreakerState, Change, Gate, Signal, signal};

/// One destination's health, as stored (JSON beside its retry budget).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    pub state: BreakerState,
    /// When it came to this state.
    pub since: DateTime<Utc>,
    /// Why it opened (the last opening's reason).
    pub why: Option<String>,
    /// The window's start and what ended in it.
    pub window_start: DateTime<Utc>,
    pub window_attempts: u32,
    pub window_failures: u32,
    /// How many probes failed in a row (the cooldown doubles with each).
    pub failed_probes: u32,
    /// When an open breaker may probe.
    pub probe_at: Option<DateTime<Utc>>,
    /// A probe in flight, until when its place is held (a process that died gives it back),
    /// and its operation's key.
    pub probe_until: Option<DateTime<Utc>>,
    #[serde(default)]
    pub probe_key: Option<String>,
    /// The last probe's answer.
    pub last_probe: Option<String>,
    /// The pace in attempts a second; none: no pace.
    pub rate: Option<f64>,
    /// Attempts that may start now under the pace, and when they were last counted.
    pub tokens: f64,
    pub counted_at: DateTime<Utc>,
    /// Since when the answers have been clean (the pace rises each whole second of it).
    pub clean_since: Option<DateTime<Utc>>,
    /// The last trouble (a close, or a slowing failure): with no `pace_max` the pace is lifted
    /// a window after it.
    pub calm_since: Option<DateTime<Utc>>,
    /// A `Retry-After` holds the whole destination until then.
    pub hold_until: Option<DateTime<Utc>>,
    /// Opened or closed by a person: left so until a person changes it.
    pub by_hand: bool,
}

/// How long a probe's place is held for a process that may have died with it.
const PROBE_LEASE: Duration = Duration::from_secs(60);

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

impl Health {
    /// A destination never seen: closed, no pace.
    pub fn new(now: DateTime<Utc>) -> Health {
        Health {
            state: BreakerState::Closed,
            since: now,
            why: None,
            window_start: now,
            window_attempts: 0,
            window_failures: 0,
            failed_probes: 0,
            probe_at: None,
            probe_until: None,
            probe_key: None,
            last_probe: None,
            rate: None,
            tokens: 0.0,
            counted_at: now,
            clean_since: None,
            calm_since: None,
            hold_until: None,
            by_hand: false,
        }
    }

    /// The cooldown before the next probe: `cooldown` doubled for each failed probe, up to
    /// `cooldown_max`, then drawn from its upper half (`unit` uniform in [0, 1)) so that
    /// processes and destinations do not probe in step.
    pub fn cooldown(&self, p: &BreakerPolicy, unit: f64) -> Duration {
        let full = p
            .cooldown
            .saturating_mul(2u32.saturating_pow(self.failed_probes.min(16)))
            .min(p.cooldown_max);
        full.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
    }

    fn open(&mut self, why: String, p: &BreakerPolicy, now: DateTime<Utc>, unit: f64) {
        self.state = BreakerState::Open;
        self.since = now;
        self.why = Some(why);
        self.probe_at = Some(now + delta(self.cooldown(p, unit)));
        self.probe_until = None;
        self.probe_key = None;
        self.tokens = 0.0;
        self.clean_since = None;
    }

    fn close(&mut self, p: &BreakerPolicy, now: DateTime<Utc>) {
        self.state = BreakerState::Closed;
        self.since = now;
        self.failed_probes = 0;
        self.probe_at = None;
        self.probe_until = None;
        self.probe_key = None;
        self.window_start = now;
        self.window_attempts = 0;
        self.window_failures = 0;
        // a backlog waits behind it: it goes at the pace the destination shows it takes
        self.rate = Some(p.pace_start.max(0.1));
        self.tokens = 1.0;
        self.counted_at = now;
        self.clean_since = Some(now);
        self.calm_since = Some(now);
    }

    /// Takes in an attempt's answer (`probe`: it was the probe). `retry_after` holds the whole
    /// destination. Returns the change people are told of, if any.
    pub fn observe(
        &mut self,
        signal: Signal,
        retry_after: Option<Duration>,
        probe: bool,
        p: &BreakerPolicy,
        now: DateTime<Utc>,
        unit: f64,
    ) -> Option<Change> {
        if let Some(after) = retry_after
            && matches!(signal, Signal::Failing { .. })
        {
            let until = now + delta(after.min(p.cooldown_max));
            self.hold_until = Some(self.hold_until.map_or(until, |h| h.max(until)));
        }
        self.pace_after(signal, p, now);
        if probe {
            return self.probed(signal, p, now, unit);
        }
        if now - self.window_start >= delta(p.window) {
            self.window_start = now;
            self.window_attempts = 0;
            self.window_failures = 0;
        }
        if signal == Signal::Neutral {
            return None;
        }
        self.window_attempts += 1;
        let Signal::Failing { why, .. } = signal else {
            return None;
        };
        self.window_failures += 1;
        let enough = self.window_failures >= p.failures.max(1)
            && self.window_failures * 2 >= self.window_attempts;
        if self.state == BreakerState::Closed && enough && !self.by_hand {
            let why = format!(
                "{} of {} attempts failed within {}: the last {why}",
                self.window_failures,
                self.window_attempts,
                crate::domain::time::format_duration(p.window)
            );
            self.open(why.clone(), p, now, unit);
            return Some(Change::Opened { why });
        }
        None
    }

    /// A probe's answer: healthy closes, failing opens again with a longer cooldown.
    fn probed(
        &mut self,
        signal: Signal,
        p: &BreakerPolicy,
        now: DateTime<Utc>,
        unit: f64,
    ) -> Option<Change> {
        match signal {
            Signal::Healthy => {
                self.last_probe = Some("healthy".into());
                self.close(p, now);
                Some(Change::Closed)
            }
            Signal::Failing { why, .. } => {
                self.last_probe = Some(why.to_string());
                self.failed_probes = self.failed_probes.saturating_add(1);
                let why = self.why.clone().unwrap_or_else(|| why.to_string());
                self.open(why, p, now, unit);
                None
            }
            // a rejection of the probe's request says the destination answers: healthy
            Signal::Neutral => {
                self.last_probe = Some("answered".into());
                self.close(p, now);
                Some(Change::Closed)
            }
        }
    }

    /// The pace after an answer: halved on a slowing failure; raised by `pace_start` for each
    /// whole second of clean answers, up to `pace_max` (with none, lifted after a window without
    /// trouble).
    fn pace_after(&mut self, signal: Signal, p: &BreakerPolicy, now: DateTime<Utc>) {
        match signal {
            Signal::Failing { slows: true, .. } => {
                let rate = self.rate.unwrap_or(p.pace_max.unwrap_or(f64::MAX));
                let floor = (p.pace_start / 4.0).max(0.1);
                self.rate = Some((rate / 2.0).max(floor).min(p.pace_max.unwrap_or(f64::MAX)));
                self.tokens = self.tokens.min(1.0);
                self.clean_since = Some(now);
                self.calm_since = Some(now);
            }
            Signal::Failing { .. } | Signal::Neutral => {}
            Signal::Healthy => {
                let (Some(rate), Some(since)) = (self.rate, self.clean_since) else {
                    return;
                };
                let seconds = (now - since).num_milliseconds() / 1000;
                if seconds < 1 {
                    return;
                }
                let raised = rate + p.pace_start * seconds as f64;
                let calm = self.calm_since.unwrap_or(since);
                self.rate = match p.pace_max {
                    Some(max) => Some(raised.min(max)),
                    None if now - calm >= delta(p.window) => None,
                    None => Some(raised),
                };
                self.clean_since = Some(since + TimeDelta::seconds(seconds));
            }
        }
    }

    /// Whether attempts may start now, and how many: an open breaker past its cooldown turns
    /// `probing`; a probing one gives one probe at a time.
    pub fn gate(&mut self, p: &BreakerPolicy, now: DateTime<Utc>) -> Gate {
        if let Some(h) = self.hold_until {
            if h > now {
                return Gate::Held(h);
            }
            self.hold_until = None;
        }
        match self.state {
            BreakerState::Open => match self.probe_at {
                Some(at) if at <= now && !self.by_hand => {
                    self.state = BreakerState::Probing;
                    self.since = now;
                    self.gate(p, now)
                }
                Some(at) if !self.by_hand => Gate::Held(at),
                _ => Gate::Held(now + delta(p.cooldown_max)),
            },
            BreakerState::Probing => match self.probe_until {
                Some(until) if until > now => Gate::Held(until),
                _ => Gate::Probe,
            },
            BreakerState::Closed => {
                // never above the destination's documented limit, whatever was kept
                let rate = match (self.rate, p.pace_max) {
                    (Some(r), Some(max)) => Some(r.min(max)),
                    (r, max) => r.or(max),
                };
                let Some(rate) = rate else {
                    return Gate::Send(usize::MAX);
                };
                let elapsed = (now - self.counted_at).num_milliseconds().max(0) as f64 / 1000.0;
                // at most one second's worth at once
                self.tokens = (self.tokens + elapsed * rate).min(rate.max(1.0));
                self.counted_at = now;
                match self.tokens.floor() as usize {
                    0 => Gate::Held(
                        now + TimeDelta::milliseconds(
                            ((1.0 - self.tokens) / rate * 1000.0).ceil() as i64
                        ),
                    ),
                    n => Gate::Send(n),
                }
            }
        }
    }

    /// Takes `n` starts granted by [`Health::gate`].
    pub fn took(&mut self, n: usize) {
        if self.state == BreakerState::Closed {
            self.tokens = (self.tokens - n as f64).max(0.0);
        }
    }

    /// The probe [`Health::gate`] granted was started: its place is held for the operation
    /// `key`.
    pub fn probing(&mut self, key: &str, now: DateTime<Utc>) {
        self.probe_until = Some(now + delta(PROBE_LEASE));
        self.probe_key = Some(key.to_string());
    }

    /// Whether `key`'s answer is the probe's.
    pub fn is_probe(&self, key: &str) -> bool {
        self.state == BreakerState::Probing && self.probe_key.as_deref() == Some(key)
    }

    /// Whether this health, after answers were taken in, must be written (`before`: as stored).
    /// The count of a window's attempts alone is not worth a write while the window holds no
    /// failure: a healthy destination's round writes nothing more than it did before breakers;
    /// its first failure is counted against the attempts written with it.
    pub fn worth_keeping(&self, before: Option<&Health>) -> bool {
        let plain = |h: &Health| Health {
            window_attempts: 0,
            window_start: h.since,
            counted_at: h.since,
            clean_since: None,
            ..h.clone()
        };
        match before {
            _ if self.window_failures > 0 => true,
            Some(b) => plain(b) != plain(self),
            None => {
                self.state != BreakerState::Closed
                    || self.rate.is_some()
                    || self.hold_until.is_some()
            }
        }
    }

    /// Whether it lets everything through without keeping count: closed, unpaced, not held.
    pub fn is_open_road(&self, p: &BreakerPolicy) -> bool {
        self.state == BreakerState::Closed
            && self.rate.is_none()
            && p.pace_max.is_none()
            && self.hold_until.is_none()
    }

    /// A person opens it (`settle breaker open`): held open until a person closes it. The change,
    /// unless a person held it open already.
    pub fn open_by_hand(&mut self, reason: &str, now: DateTime<Utc>) -> Option<Change> {
        let was = (self.state, self.by_hand);
        self.state = BreakerState::Open;
        self.since = now;
        self.why = Some(reason.to_string());
        self.probe_at = None;
        self.probe_until = None;
        self.probe_key = None;
        self.by_hand = true;
        (was != (BreakerState::Open, true)).then(|| Change::Opened {
            why: reason.to_string(),
        })
    }

    /// A person closes it (`settle breaker close`): sends again, at the starting pace. A closed
    /// one is left as it is.
    pub fn close_by_hand(&mut self, p: &BreakerPolicy, now: DateTime<Utc>) -> Option<Change> {
        let was = self.state;
        if was == BreakerState::Closed {
            // closed already: its pace is left as it is
            self.by_hand = false;
            return None;
        }
        self.by_hand = false;
        self.close(p, now);
        (was != BreakerState::Closed).then_some(Change::Closed)
    }
}

#[cfg(test)]
#[path = "breaker_tests.rs"]
mod tests;
