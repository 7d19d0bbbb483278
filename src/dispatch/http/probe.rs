//! A destination's health asked directly (manual: Recovery that follows the destination): while
//! its breaker probes, a `GET probe_url` instead of a real attempt, so that nothing is created and
//! nothing can become unknown. Any 2xx is healthy; the request carries the destination's headers
//! (a health endpoint may want the same credentials) and never follows a redirect.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::domain::Outcome;
use crate::domain::breaker::{Signal, signal};

/// Where and how a destination's health is asked.
#[derive(Debug)]
pub struct Probe {
    pub(super) url: String,
    pub(super) headers: HeaderMap,
    pub(super) timeout: Duration,
}

impl Probe {
    /// Asks once: what the answer says of the destination's health.
    pub async fn ask(&self, client: &reqwest::Client) -> Signal {
        let sent = client
            .get(&self.url)
            .headers(self.headers.clone())
            .timeout(self.timeout)
            .send()
            .await;
        match sent {
            Ok(resp) if resp.status().is_success() => Signal::Healthy,
            Ok(resp) => match signal(Outcome::Transient, Some(resp.status().as_u16())) {
                // the health endpoint's own answer: anything but 2xx is not well
                Signal::Neutral | Signal::Healthy => Signal::Failing {
                    why: "the probe URL answered neither 2xx nor 5xx",
                    slows: false,
                },
                failing => failing,
            },
            Err(e) => {
                let seen = super::answers::transport_failure(&e, self.timeout);
                signal(seen.outcome, None)
            }
        }
    }
}
