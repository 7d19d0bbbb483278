//! The durations and sizes of the config, each read within the range its use makes sense of.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::domain::time::parse_duration_within;

const SECOND: Duration = Duration::from_secs(1);
const MILLI: Duration = Duration::from_millis(1);
const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// A duration field of the config, read within the range its use makes sense of (a lease of a
/// century is a typo, and one too large to add to the clock would stop settle): `$name` reads a
/// required field, `$opt` an optional one. An error names the file, line and key.
macro_rules! bounded {
    ($name:ident, $opt:ident, $min:expr, $max:expr) => {
        pub(super) fn $name<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Duration, D::Error> {
            let text = String::deserialize(d)?;
            parse_duration_within(&text, $min, $max).map_err(serde::de::Error::custom)
        }
        #[allow(dead_code)]
        pub(super) fn $opt<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Option<Duration>, D::Error> {
            $name(d).map(Some)
        }
    };
}

bounded!(lease_or_timeout, opt_lease_or_timeout, SECOND, days(7));
bounded!(age_limit, opt_age_limit, SECOND, days(365));
bounded!(retention, opt_retention, SECOND, days(3650));
bounded!(step_gap, opt_step_gap, SECOND, days(365));
bounded!(backoff, opt_backoff, MILLI, days(7));
bounded!(
    listener_timeout,
    opt_listener_timeout,
    SECOND,
    Duration::from_secs(600)
);
bounded!(
    breaker_time,
    opt_breaker_time,
    SECOND,
    Duration::from_secs(3600)
);
bounded!(
    http_timeout,
    opt_http_timeout,
    MILLI,
    Duration::from_secs(3600)
);

/// `max_body`: bytes, or a size with its unit; from 1 KiB to 16 MiB.
pub(super) fn body_size<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    size_within(d, "max_body")
}

/// `max_payload`: bytes, or a size with its unit; from 1 KiB to 16 MiB.
pub(super) fn payload_size<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<usize, D::Error> {
    size_within(d, "max_payload")
}

/// A size of the config, bytes or a text with its unit, from 1 KiB to 16 MiB.
fn size_within<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
) -> std::result::Result<usize, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    let bytes = match Size::deserialize(d)? {
        Size::Bytes(n) => usize::try_from(n).unwrap_or(usize::MAX),
        Size::Text(t) => {
            crate::domain::payload::parse_size(&t).map_err(serde::de::Error::custom)?
        }
    };
    if !(1024..=16 * 1024 * 1024).contains(&bytes) {
        return Err(serde::de::Error::custom(format!(
            "{what} is from 1KiB to 16MiB"
        )));
    }
    Ok(bytes)
}
