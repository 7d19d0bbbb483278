//! A token's rate as one budget across every settle process on the ledger: the HTTP API takes a
//! few requests at a time from the token's shared bucket (manual: Running settle for a team).

use std::time::Duration;

use super::Ledger;
use crate::error::Result;
use crate::store::{Take, UNIT};

impl Ledger {
    /// Takes up to `want` requests from the shared bucket of the token whose fingerprint is
    /// `token` (`rate` a second, `burst` at most): how many it gave, and, when none, how long
    /// until one is back.
    pub async fn take_rate(
        &self,
        token: &str,
        want: u32,
        rate: f64,
        burst: u32,
    ) -> Result<(u32, Duration)> {
        let per_second = (rate * UNIT as f64).round().max(1.0) as i64;
        let (given, left) = self
            .store
            .take_rate(&Take {
                token,
                want: i64::from(want.max(1)),
                per_second,
                burst: i64::from(burst),
            })
            .await?;
        let wait = Duration::from_secs_f64((UNIT - left).max(0) as f64 / per_second as f64);
        Ok((given as u32, wait))
    }
}
