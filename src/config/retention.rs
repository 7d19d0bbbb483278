//! `[retention]` (manual: Retention and the archive): how long a terminal operation is kept whole, whether settle prunes by
//! itself, and how long a pruned operation's key still answers.

use std::time::Duration;

use serde::Deserialize;

use super::bounds::opt_retention;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn retention_reads_its_keys_and_the_horizon_defaults_from_the_destinations() {
        let c = Config::parse(
            "[retention]\nsucceeded = \"90d\"\nclosed = \"180d\"\nauto = true\n\
             [destinations.crm]\nkey_retention = \"45d\"\n[destinations.sms]\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            c.retention.succeeded,
            Some(Duration::from_secs(90 * 86_400))
        );
        assert_eq!(c.retention.closed, Some(Duration::from_secs(180 * 86_400)));
        assert!(c.retention.auto && c.retention.prunes());
        assert_eq!(c.key_horizon(), Duration::from_secs(45 * 86_400));
        // never under 30 days; a set horizon is taken as it is
        assert_eq!(Config::default().key_horizon(), MIN_KEY_HORIZON);
        assert!(!Config::default().retention.prunes());
        let set = Config::parse("[retention]\nkey_horizon = \"7d\"\n", "t").unwrap();
        assert_eq!(set.key_horizon(), Duration::from_secs(7 * 86_400));
    }

    #[test]
    fn a_bad_retention_names_its_key() {
        let err = Config::parse("[retention]\nsucceeded = \"forever\"\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("my.toml:2: key `succeeded`"), "{err}");
        let err = Config::parse("[retention]\nkeep = \"1d\"\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `keep`"), "{err}");
    }
}
