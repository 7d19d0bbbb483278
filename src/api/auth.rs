//! Who may call the HTTP API (manual: The HTTP API): `[automations]` by the SHA-256 of their bearer token,
//! compared in constant time, and each token's rate (a token bucket).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::domain::{Identity, Role};
use crate::ledger::Ledger;

/// A new bearer token: `settle_` and 32 random bytes in hex. Shown once; only its SHA-256 is
/// kept (in the config).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    format!("settle_{}", hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token's SHA-256 in hex, as `token_sha256` holds it.
pub fn token_sha256(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// What an event names a token by: the first 12 hex digits of its SHA-256.
pub fn token_fingerprint(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

/// Equal, in a time that does not depend on where two strings of one length differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// One automation as the server knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Automation {
    pub name: String,
    pub sha256: String,
    /// `None`: every workflow.
    pub workflows: Option<Vec<String>>,
    pub rate: f64,
    pub burst: u32,
}

impl Automation {
    pub fn identity(&self) -> Identity {
        Identity {
            name: self.name.clone(),
            role: Role::Automation,
            fingerprint: token_fingerprint(&self.sha256),
        }
    }
}

/// `[automations]`, re-read on SIGHUP.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Automations(Vec<Automation>);

impl Automations {
    pub fn from_config(config: &Config) -> Automations {
        Automations(
            config
                .automations
                .iter()
                .map(|(name, a)| Automation {
                    name: name.clone(),
                    sha256: a.token_sha256.clone(),
                    workflows: a.scope(),
                    rate: a.rate,
                    burst: a.burst,
                })
                .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The automation a bearer token belongs to. Every configured hash is compared, whatever
    /// matches first, each in constant time.
    pub fn find(&self, token: &str) -> Option<&Automation> {
        let presented = token_sha256(token);
        let mut found = None;
        for a in &self.0 {
            if same(presented.as_bytes(), a.sha256.as_bytes()) {
                found = Some(a);
            }
        }
        found
    }
}

/// The bearer token of an `Authorization` header's value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Each token's bucket: `burst` requests at once, refilled at `rate` a second. The bucket is the
/// ledger's, shared by every settle process (manual: Running settle for a team): a process takes
/// what the rate refills in [`HELD`] at a time and spends it; where the database cannot be asked,
/// a bucket of this process's own stands in.
#[derive(Default)]
pub struct Rates {
    /// This process's own buckets (the stand-in).
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
    /// Requests taken from each token's shared bucket and not spent yet, and until when it was
    /// found empty (asked again only after: a flood over the rate is refused here).
    held: Mutex<HashMap<String, Held>>,
    /// One take from each token's shared bucket at a time in this process: concurrent requests
    /// wait for it and spend what it took, rather than each draining the bucket by a share.
    taking: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Requests held unspent; and, when the shared bucket was found empty, until when it is not asked
/// again and when a request is back.
type Held = (u32, Option<(Instant, Instant)>);

/// How much of the rate a process takes from the shared bucket at once: what it refills in this
/// time (at least one request). What a process holds unspent is at most this much of the rate.
pub const HELD: Duration = Duration::from_millis(50);

impl Rates {
    /// Takes one request from `who`'s shared bucket (a few at a time from the ledger, spent
    /// here): `Err(wait)` when it is empty, with how long until one is back.
    pub async fn take_shared(&self, ledger: &Ledger, who: &Automation) -> Result<(), Duration> {
        if let Some(spent) = self.spend_held(who, Instant::now()) {
            return spent;
        }
        let one = {
            let mut taking = self.taking.lock().unwrap_or_else(|e| e.into_inner());
            taking.entry(who.sha256.clone()).or_default().clone()
        };
        let _one = one.lock().await;
        // another request may have taken while this one waited
        let now = Instant::now();
        if let Some(spent) = self.spend_held(who, now) {
            return spent;
        }
        let burst = who.burst.max(1);
        // a share of the burst at most, so that other processes find requests in it too
        let chunk = ((who.rate * HELD.as_secs_f64()).floor() as u32).clamp(1, (burst / 4).max(1));
        let taken = ledger.take_rate(&who.sha256, chunk, who.rate, burst).await;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.entry(who.sha256.clone()).or_default();
        match taken {
            Ok((0, wait)) => {
                mine.1 = Some((now + wait.min(HELD), now + wait));
                Err(wait)
            }
            Ok((n, _)) => {
                *mine = (mine.0 + n - 1, None);
                Ok(())
            }
            Err(_) => {
                drop(held);
                self.take(who, now)
            }
        }
    }

    /// One request spent from what this process holds of `who`'s shared bucket, or its wait
    /// where the bucket was found empty a moment ago; `None`: the bucket is to be asked.
    fn spend_held(&self, who: &Automation, now: Instant) -> Option<Result<(), Duration>> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get_mut(&who.sha256) {
            Some((n, _)) if *n > 0 => {
                *n -= 1;
                Some(Ok(()))
            }
            Some((_, Some((ask_after, back)))) if *ask_after > now => {
                Some(Err(back.saturating_duration_since(now)))
            }
            _ => None,
        }
    }

    /// Takes one request from `who`'s bucket: `Err(wait)` when it is empty, with how long until
    /// one is back.
    pub fn take(&self, who: &Automation, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let burst = f64::from(who.burst.max(1));
        let (tokens, since) = buckets.entry(who.sha256.clone()).or_insert((burst, now));
        let refilled =
            (*tokens + now.saturating_duration_since(*since).as_secs_f64() * who.rate).min(burst);
        *since = now;
        if refilled >= 1.0 {
            *tokens = refilled - 1.0;
            Ok(())
        } else {
            *tokens = refilled;
            Err(Duration::from_secs_f64((1.0 - refilled) / who.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot(rate: f64, burst: u32) -> Automation {
        Automation {
            name: "bot".into(),
            sha256: token_sha256("t"),
            workflows: None,
            rate,
            burst,
        }
    }

    #[test]
    fn a_token_is_found_by_its_hash_only_and_named_by_twelve_hex_digits() {
        let token = new_token();
        let sha = token_sha256(&token);
        assert_eq!(sha.len(), 64);
        let mut config = Config::default();
        config.automations.insert(
            "bot".into(),
            crate::config::AutomationConfig {
                token_sha256: sha.clone(),
                workflows: vec!["onboarding".into()],
                rate: 100.0,
                burst: 200,
            },
        );
        let all = Automations::from_config(&config);
        let found = all.find(&token).expect("its own token");
        assert_eq!(found.name, "bot");
        assert_eq!(
            found.workflows.as_deref(),
            Some(&["onboarding".to_string()][..])
        );
        assert_eq!(found.identity().fingerprint, sha[..12]);
        assert!(all.find(&format!("{token}x")).is_none());
        assert!(all.find(&sha).is_none(), "the hash is not the token");
        assert_eq!(bearer(&format!("Bearer {token}")), Some(token.as_str()));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn a_bucket_lets_a_burst_through_then_the_rate_and_says_how_long_to_wait() {
        let rates = Rates::default();
        let who = bot(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(rates.take(&who, t0).is_ok());
        }
        let wait = rates.take(&who, t0).unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100));
        assert!(rates.take(&who, t0 + Duration::from_millis(100)).is_ok());
        assert!(rates.take(&who, t0 + Duration::from_millis(110)).is_err());
        // a long quiet refills to the burst, no more
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(rates.take(&who, later).is_ok());
        }
        assert!(rates.take(&who, later).is_err());
    }
}
