//! Retry policy arithmetic: full-jitter backoff, the retention horizon, the retry budget.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// Full jitter: `random(0, min(cap, base * 2^n))` for the n-th retry (n from 0), where `unit`
    /// is a uniform sample in [0, 1). A `Retry-After` is honoured up to the cap.
    pub fn delay(&self, n: u32, unit: f64, retry_after: Option<Duration>) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(2u32.saturating_pow(n.min(31)))
            .min(self.cap);
        let jitter = ceiling.mul_f64(unit.clamp(0.0, 1.0));
        match retry_after {
            Some(after) => jitter.max(after.min(self.cap)),
            None => jitter,
        }
    }
}

/// What a destination can do for us, and how we retry against it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DestinationPolicy {
    /// Honours idempotency keys.
    pub dedupes: bool,
    /// How long it remembers a key (only meaningful when it dedupes).
    pub key_retention: Option<Duration>,
    /// Can be asked whether the work for a key exists.
    pub lookup: bool,
    /// settle itself can run that lookup (a `lookup_url` is configured): the dispatcher does for
    /// its own unknowns, and a person can ask for it (`settle lookup`, `L`).
    pub can_look_up: bool,
    /// How long an attempt may take before its outcome is unknown (`timeout`, manual: Destinations and the dispatcher): after a
    /// `409` from a deduplicating destination the next attempt waits at least this long.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Its breaker and pace (manual: Destinations and the dispatcher).
    pub breaker: crate::domain::breaker::BreakerPolicy,
}

impl DestinationPolicy {
    /// The last moment an ambiguous outcome may be retried: 80% of the key retention after the
    /// key was first sent. `None` when the destination does not deduplicate.
    pub fn horizon(&self, first_sent_at: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        if !self.dedupes {
            return None;
        }
        let first = first_sent_at?;
        let retention = self.key_retention.unwrap_or(Duration::from_secs(86_400));
        let margin = TimeDelta::from_std(retention.mul_f64(0.8)).ok()?;
        first.checked_add_signed(margin)
    }

    /// Whether a retry with the same key at `at` is covered by the destination's deduplication.
    pub fn dedupes_at(&self, first_sent_at: Option<DateTime<Utc>>, at: DateTime<Utc>) -> bool {
        self.horizon(first_sent_at).is_some_and(|h| at < h)
    }
}

/// The per-destination retry budget, a token bucket that stops retry storms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    pub tokens: u32,
}

impl RetryBudget {
    pub const CAPACITY: u32 = 500;
    pub const RETRY_COST: u32 = 5;
    pub const TIMEOUT_RETRY_COST: u32 = 10;
    pub const SUCCESS_REFUND: u32 = 1;
    /// Tokens regained per second. The manual gives the bucket's size and costs but no rate; without
    /// one, a destination that had one bad hour would never be retried again.
    pub const REFILL_PER_SECOND: f64 = 5.0;

    pub fn full() -> Self {
        RetryBudget {
            tokens: Self::CAPACITY,
        }
    }

    /// Takes the cost of one retry, or says the budget is empty (the operation waits).
    pub fn take(self, after_timeout: bool) -> Option<Self> {
        let cost = if after_timeout {
            Self::TIMEOUT_RETRY_COST
        } else {
            Self::RETRY_COST
        };
        self.tokens
            .checked_sub(cost)
            .map(|tokens| RetryBudget { tokens })
    }

    /// Tops the bucket up for the time since `since`, in whole tokens, and says from when the next
    /// top-up counts (so that frequent callers lose no fraction of a token).
    pub fn refilled(self, since: DateTime<Utc>, now: DateTime<Utc>) -> (Self, DateTime<Utc>) {
        let elapsed_ms = (now - since).num_milliseconds().max(0);
        let per_token_ms = (1000.0 / Self::REFILL_PER_SECOND) as i64;
        let gained = elapsed_ms / per_token_ms;
        let tokens = (i64::from(self.tokens) + gained).min(i64::from(Self::CAPACITY)) as u32;
        if tokens == Self::CAPACITY {
            return (RetryBudget { tokens }, now.max(since));
        }
        (
            RetryBudget { tokens },
            since + chrono::Duration::milliseconds(gained * per_token_ms),
        )
    }

    /// A first-try success refunds a token, up to the capacity.
    pub fn refund(self) -> Self {
        RetryBudget {
            tokens: (self.tokens + Self::SUCCESS_REFUND).min(Self::CAPACITY),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_under_the_exponential_ceiling_and_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, 0.999_999, None).as_millis(), 999);
        assert_eq!(p.delay(3, 0.5, None), Duration::from_secs(4));
        assert_eq!(p.delay(3, 0.0, None), Duration::ZERO);
        assert_eq!(p.delay(20, 0.5, None), Duration::from_secs(150));
        assert_eq!(p.delay(200, 1.0, None), Duration::from_secs(300));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(0, 0.1, Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
        assert_eq!(
            p.delay(0, 0.1, Some(Duration::from_secs(3600))),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn horizon_is_eighty_percent_of_retention() {
        let t0 = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let d = DestinationPolicy {
            dedupes: true,
            key_retention: Some(Duration::from_secs(10 * 3600)),
            ..Default::default()
        };
        assert_eq!(d.horizon(Some(t0)), Some(t0 + TimeDelta::hours(8)));
        assert!(d.dedupes_at(Some(t0), t0 + TimeDelta::hours(7)));
        assert!(!d.dedupes_at(Some(t0), t0 + TimeDelta::hours(8)));
        let nodedupe = DestinationPolicy {
            dedupes: false,
            ..d.clone()
        };
        assert_eq!(nodedupe.horizon(Some(t0)), None);
        assert!(!d.dedupes_at(None, t0));
    }

    #[test]
    fn budget_costs_and_refunds() {
        let b = RetryBudget::full();
        assert_eq!(b.take(false).unwrap().tokens, 495);
        assert_eq!(b.take(true).unwrap().tokens, 490);
        assert_eq!(b.refund().tokens, 500);
        assert_eq!(RetryBudget { tokens: 9 }.take(true), None);
        assert_eq!(RetryBudget { tokens: 9 }.take(false).unwrap().tokens, 4);
    }

    #[test]
    fn the_stored_budget_refills_in_whole_tokens_without_losing_fractions() {
        let t0 = chrono::DateTime::from_timestamp_millis(1_000_000).unwrap();
        let ms = chrono::Duration::milliseconds;
        // 5 tokens a second: 300 ms give one token and carry 100 ms over
        let (b, since) = RetryBudget { tokens: 0 }.refilled(t0, t0 + ms(300));
        assert_eq!((b.tokens, since), (1, t0 + ms(200)));
        let (b, since) = b.refilled(since, t0 + ms(400));
        assert_eq!((b.tokens, since), (2, t0 + ms(400)));
        // nothing gained, nothing moved
        let (b, since) = b.refilled(since, t0 + ms(450));
        assert_eq!((b.tokens, since), (2, t0 + ms(400)));
        // full: the clock restarts now
        let (b, since) = RetryBudget { tokens: 499 }.refilled(t0, t0 + ms(60_000));
        assert_eq!((b.tokens, since), (500, t0 + ms(60_000)));
        // a clock that went back gives nothing
        let (b, _) = RetryBudget { tokens: 7 }.refilled(t0, t0 - ms(5_000));
        assert_eq!(b.tokens, 7);
    }
}
