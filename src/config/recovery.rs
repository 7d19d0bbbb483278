//! A destination's recovery settings (manual: Destinations and the dispatcher): its breaker
//! (`breaker = { window, failures, cooldown }`) and its pace (`pace = { start, max }`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::config::bounds::opt_breaker_time;
use crate::domain::breaker::BreakerPolicy;

/// `[destinations.NAME] breaker = { ... }`: when it opens and how long it waits to probe.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfig {
    /// The window its failures are counted in (default 30s).
    #[serde(default, deserialize_with = "opt_breaker_time")]
    pub window: Option<Duration>,
    /// Failures within the window, at least half its attempts, that open it (default 5).
    #[serde(default)]
    pub failures: Option<u32>,
    /// The wait before its first probe (default 10s; doubled while probes fail, up to 5m).
    #[serde(default, deserialize_with = "opt_breaker_time")]
    pub cooldown: Option<Duration>,
}

/// `[destinations.NAME] pace = { ... }`: attempts a second, e.g. `"40/s"`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PaceConfig {
    /// The pace after the breaker closes (default 5/s).
    #[serde(default, deserialize_with = "opt_rate")]
    pub start: Option<f64>,
    /// Never more (the destination's documented limit); unset: no limit once it is well.
    #[serde(default, deserialize_with = "opt_rate")]
    pub max: Option<f64>,
}

fn opt_rate<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    super::automations::rate(d).map(Some)
}

/// The breaker's policy of a destination with these settings (defaults where unset); an error
/// names the key.
pub(super) fn breaker_policy(
    breaker: Option<&BreakerConfig>,
    pace: Option<&PaceConfig>,
    probe_url: Option<&str>,
) -> std::result::Result<BreakerPolicy, String> {
    let d = BreakerPolicy::default();
    let (b, p) = (
        breaker.cloned().unwrap_or_default(),
        pace.cloned().unwrap_or_default(),
    );
    if let Some(url) = probe_url {
        let parsed = reqwest::Url::parse(url).ok();
        if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
            return Err(format!(
                "probe_url: `{}` is not an http(s) URL",
                crate::domain::escape_text(&crate::domain::url::shown_url(url))
            ));
        }
    }
    if b.failures == Some(0) {
        return Err("breaker.failures: must be at least 1".into());
    }
    let start = p.start.unwrap_or(d.pace_start);
    let start = match p.max {
        Some(max) if p.start.is_some() && start > max => {
            return Err(format!(
                "pace.start ({start}/s) is above pace.max ({max}/s)"
            ));
        }
        Some(max) => start.min(max),
        None => start,
    };
    Ok(BreakerPolicy {
        window: b.window.unwrap_or(d.window),
        failures: b.failures.unwrap_or(d.failures),
        cooldown: b.cooldown.unwrap_or(d.cooldown),
        cooldown_max: d.cooldown_max.max(b.cooldown.unwrap_or(d.cooldown)),
        pace_start: start,
        pace_max: p.max,
        by_url: probe_url.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn read(table: &str) -> Result<Config, String> {
        Config::parse(
            &format!("[destinations.crm]\nurl = \"http://crm.internal/tasks\"\n{table}\n"),
            "settle.toml",
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_destinations_breaker_and_pace_are_read_with_their_defaults() {
        let c = read("breaker = { failures = 3, cooldown = \"5s\" }\npace = { max = \"2400/m\" }")
            .unwrap();
        let b = c.destination("crm").breaker;
        assert_eq!((b.failures, b.cooldown.as_secs()), (3, 5));
        assert_eq!(b.window.as_secs(), 30);
        assert_eq!((b.pace_start, b.pace_max), (5.0, Some(40.0)));
        assert_eq!(c.destination("other").breaker, Default::default());
        // a start above the max is clamped only where the start was not given
        let slow = read("pace = { max = \"2/s\" }").unwrap();
        assert_eq!(slow.destination("crm").breaker.pace_start, 2.0);
        let probed = read("probe_url = \"https://crm.internal/health\"").unwrap();
        assert!(probed.destination("crm").breaker.by_url);
        assert!(!c.destination("crm").breaker.by_url);
    }

    #[test]
    fn nonsense_is_refused_naming_its_key() {
        for (table, said) in [
            ("breaker = { failures = 0 }", "breaker.failures"),
            ("breaker = { window = \"2d\" }", "from 1s to 1h"),
            ("breaker = { opens = 3 }", "opens"),
            ("pace = { start = \"50/s\", max = \"40/s\" }", "pace.start"),
            ("pace = { max = \"fast\" }", "a rate is like"),
            ("probe_url = \"ftp://crm.internal/health\"", "probe_url"),
            ("probe_url = \"/health\"", "not an http(s) URL"),
        ] {
            let e = read(table).unwrap_err();
            assert!(e.contains(said), "{table}: {e}");
            assert!(e.contains("settle.toml"), "{table}: {e}");
        }
    }
}
