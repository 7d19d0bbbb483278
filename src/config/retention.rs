//! `[retention]` (SPEC 22): how long a terminal operation is kept whole, whether settle prunes by
//! itself, and how long a pruned operation's key still answers.

use std::time::Duration;

use serde::Deserialize;

use super::{Config, opt_retention};

/// The shortest `key_horizon` whatever the destinations say: a key answers for 30 days after
/// its operation became terminal.
pub const MIN_KEY_HORIZON: Duration = Duration::from_secs(30 * 86_400);

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// How long a `succeeded` operation is kept after it became terminal (default: forever).
    #[serde(default, deserialize_with = "opt_retention")]
    pub succeeded: Option<Duration>,
    /// How long a `closed` operation is kept after it was closed (default: forever).
    #[serde(default, deserialize_with = "opt_retention")]
    pub closed: Option<Duration>,
    /// `settle serve` and `settle dispatch` prune in the background.
    #[serde(default)]
    pub auto: bool,
    /// How long a pruned operation's key answers as a live one, counted from when it became
    /// terminal (default: the longest destination `key_retention`, at least 30 days).
    #[serde(default, deserialize_with = "opt_retention")]
    pub key_horizon: Option<Duration>,
}

impl RetentionConfig {
    /// Whether any terminal operation is ever pruned.
    pub fn prunes(&self) -> bool {
        self.succeeded.is_some() || self.closed.is_some()
    }
}

impl Config {
    /// How long a pruned operation's key answers as a live one (SPEC 22).
    pub fn key_horizon(&self) -> Duration {
        let longest = self
            .destinations
            .values()
            .filter_map(|d| d.key_retention)
            .max()
            .unwrap_or_default();
        self.retention
            .key_horizon
            .unwrap_or(longest.max(MIN_KEY_HORIZON))
    }
}
