//! `[automations.NAME]`: who may write to the ledger over the HTTP API (manual: The HTTP API), known by the
//! SHA-256 of their bearer token, with the workflows they may write and read and their rate.

use serde::{Deserialize, Deserializer};

/// The rate a token may send requests at when its automation sets none (manual: The HTTP API).
pub const DEFAULT_RATE: f64 = 100.0;
/// The burst a token may send at once when its automation sets none.
pub const DEFAULT_BURST: u32 = 200;

/// `[automations.NAME]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AutomationConfig {
    /// The SHA-256 of its bearer token, 64 hex digits (`settle token new NAME` prints it).
    #[serde(deserialize_with = "sha256_hex")]
    pub token_sha256: String,
    /// The workflows it may write and read (`"*"`: all).
    pub workflows: Vec<String>,
    /// Requests a second (`"100/s"`, `"6000/m"`, or a number a second).
    #[serde(default = "default_rate", deserialize_with = "rate")]
    pub rate: f64,
    /// Requests it may send at once above its rate.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

impl AutomationConfig {
    /// Whether it may write and read `workflow`.
    pub fn covers(&self, workflow: &str) -> bool {
        self.workflows.iter().any(|w| w == "*" || w == workflow)
    }

    /// Its workflows, or `None` where it has them all (`"*"`).
    pub fn scope(&self) -> Option<Vec<String>> {
        (!self.workflows.iter().any(|w| w == "*")).then(|| self.workflows.clone())
    }
}

fn default_rate() -> f64 {
    DEFAULT_RATE
}

fn default_burst() -> u32 {
    DEFAULT_BURST
}

fn sha256_hex<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    let text = String::deserialize(d)?.to_ascii_lowercase();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(serde::de::Error::custom(
            "token_sha256 is the token's SHA-256 in 64 hex digits (`settle token new NAME` prints it)",
        ));
    }
    Ok(text)
}

/// `"100/s"`, `"6000/m"`, `"50000/h"`, or a number: requests a second, above zero.
pub fn parse_rate(text: &str) -> std::result::Result<f64, String> {
    let bad = || format!("{text:?}: a rate is like \"100/s\" or \"6000/m\"");
    let (n, per) = text.trim().split_once('/').unwrap_or((text.trim(), "s"));
    let n: f64 = n.trim().parse().map_err(|_| bad())?;
    let seconds = match per.trim() {
        "s" | "sec" | "second" => 1.0,
        "m" | "min" | "minute" => 60.0,
        "h" | "hour" => 3600.0,
        _ => return Err(bad()),
    };
    let rate = n / seconds;
    if !rate.is_finite() || rate <= 0.0 {
        return Err(bad());
    }
    Ok(rate)
}

pub(super) fn rate<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Rate {
        Number(f64),
        Text(String),
    }
    match Rate::deserialize(d)? {
        Rate::Number(n) => parse_rate(&n.to_string()),
        Rate::Text(t) => parse_rate(&t),
    }
    .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_reads_per_second_minute_or_hour_and_refuses_nonsense() {
        assert_eq!(parse_rate("100/s"), Ok(100.0));
        assert_eq!(parse_rate("6000/m"), Ok(100.0));
        assert_eq!(parse_rate("7200/h"), Ok(2.0));
        assert_eq!(parse_rate("5"), Ok(5.0));
        assert!(parse_rate("0/s").is_err());
        assert!(parse_rate("-1/s").is_err());
        assert!(parse_rate("ten/s").is_err());
        assert!(parse_rate("10/day").is_err());
    }

    #[test]
    fn a_bad_automation_is_one_line_naming_its_key() {
        let sha = "a".repeat(64);
        let ok = format!("[automations.bot]\ntoken_sha256 = \"{sha}\"\nworkflows = [\"w\"]\n");
        let c = crate::Config::parse(&ok, "t.toml").unwrap();
        assert_eq!(c.automations["bot"].rate, DEFAULT_RATE);
        assert!(c.automations["bot"].covers("w") && !c.automations["bot"].covers("x"));
        assert_eq!(c.max_body, 1024 * 1024);
        for (toml, why) in [
            (
                "[automations.bot]\ntoken_sha256 = \"abc\"\nworkflows = [\"w\"]\n".to_string(),
                "64 hex digits",
            ),
            (
                format!("[automations.bot]\ntoken_sha256 = \"{sha}\"\nworkflows = []\n"),
                "automations.bot.workflows",
            ),
            (
                format!(
                    "[automations.bot]\ntoken_sha256 = \"{sha}\"\nworkflows = [\"w\"]\nrate = \"fast\"\n"
                ),
                "a rate is like",
            ),
            (
                format!("{ok}[automations.other]\ntoken_sha256 = \"{sha}\"\nworkflows = [\"w\"]\n"),
                "the same token is also bot's",
            ),
            (
                "[operators.eve]\nrole = \"automation\"\n".to_string(),
                "not a staff role",
            ),
            ("max_body = \"10\"\n".to_string(), "max_body is from 1KiB"),
        ] {
            let e = crate::Config::parse(&toml, "t.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(why) && !e.contains('\n'), "{toml}: {e}");
        }
    }
}
