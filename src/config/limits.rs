//! `[limits]` (manual: Running settle for a team): the deadlines and caps of every listener
//! `settle serve` and `settle dispatch --metrics` open, so that no stranger can hold them, nor
//! one person fill them.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::bounds::listener_timeout;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Connections open at once on each listener (the SSH console, the HTTP API, the metrics);
    /// lowered at start to what the process's handle limit holds.
    #[serde(default = "max_connections", deserialize_with = "count")]
    pub max_connections: usize,
    /// Of those, from one client address.
    #[serde(default = "per_address", deserialize_with = "count")]
    pub max_connections_per_address: usize,
    /// SSH connections not yet logged in, at once (OpenSSH's `MaxStartups`).
    #[serde(default = "max_startups", deserialize_with = "count")]
    pub max_startups: usize,
    /// Of those, from one client address.
    #[serde(default = "startups_per_address", deserialize_with = "count")]
    pub max_startups_per_address: usize,
    /// How long an SSH connection has to log in (OpenSSH's `LoginGraceTime`).
    #[serde(default = "login_grace", deserialize_with = "listener_timeout")]
    pub login_grace: Duration,
    /// Keys an SSH connection may offer before it is closed (OpenSSH's `MaxAuthTries`).
    #[serde(default = "max_auth_tries", deserialize_with = "count")]
    pub max_auth_tries: usize,
    /// Sessions one operator may hold at once, within `--max-sessions`.
    #[serde(default = "sessions_per_operator", deserialize_with = "count")]
    pub sessions_per_operator: usize,
    /// How long an HTTP request's headers may take to arrive whole; also how long a connection
    /// may wait, idle, for its next request.
    #[serde(default = "header_timeout", deserialize_with = "listener_timeout")]
    pub header_timeout: Duration,
    /// How long an HTTP request's body may take to arrive whole.
    #[serde(default = "body_timeout", deserialize_with = "listener_timeout")]
    pub body_timeout: Duration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: max_connections(),
            max_connections_per_address: per_address(),
            max_startups: max_startups(),
            max_startups_per_address: startups_per_address(),
            login_grace: login_grace(),
            max_auth_tries: max_auth_tries(),
            sessions_per_operator: sessions_per_operator(),
            header_timeout: header_timeout(),
            body_timeout: body_timeout(),
        }
    }
}

fn max_connections() -> usize {
    512
}
fn per_address() -> usize {
    256
}
fn max_startups() -> usize {
    64
}
fn startups_per_address() -> usize {
    10
}
fn login_grace() -> Duration {
    Duration::from_secs(30)
}
fn max_auth_tries() -> usize {
    6
}
fn sessions_per_operator() -> usize {
    8
}
fn header_timeout() -> Duration {
    Duration::from_secs(10)
}
fn body_timeout() -> Duration {
    Duration::from_secs(30)
}

/// A count of the limits: 1 to 100,000.
fn count<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    let n = u64::deserialize(d)?;
    if !(1..=100_000).contains(&n) {
        return Err(serde::de::Error::custom("a limit is from 1 to 100000"));
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn limits_read_within_their_range() {
        let c = Config::parse(
            "[limits]\nmax_connections = 100\nlogin_grace = \"20s\"\nheader_timeout = \"5s\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.limits.max_connections, 100);
        assert_eq!(c.limits.login_grace.as_secs(), 20);
        assert_eq!(c.limits.max_startups, 64, "the rest keep their defaults");
        for (bad, says) in [
            ("[limits]\nmax_connections = 0\n", "from 1 to 100000"),
            ("[limits]\nlogin_grace = \"2h\"\n", "login_grace"),
            ("[limits]\nheader_timout = \"5s\"\n", "unknown field"),
        ] {
            let e = Config::parse(bad, "t.toml").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
