//! Durations as people type them (`90s`, `15m`, `2h`, `3d`) and ages as the console shows them.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// The longest duration settle reads anywhere: a hundred years, which can still be added to or
/// taken from any time settle meets.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `t + d`, saturating at the end of chrono's calendar instead of panicking.
pub fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `t - d`, saturating at the start of chrono's calendar instead of panicking.
pub fn before(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Parses a duration for a use that needs it between `min` and `max`; the error names the range.
pub fn parse_duration_within(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let out_of_range = || {
        format!(
            "bad duration '{}': must be from {} to {}",
            crate::domain::escape_text(text),
            format_duration(min),
            format_duration(max)
        )
    };
    let ms = parse_millis(text)?.ok_or_else(out_of_range)?;
    let d = Duration::from_millis(ms);
    if d < min || d > max {
        return Err(out_of_range());
    }
    Ok(d)
}

/// Parses `90s`, `15m`, `2h`, `3d`, `500ms` or a sum of them such as `1h30m`, up to
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_within(text, Duration::ZERO, MAX_DURATION)
}

/// The milliseconds a duration's text gives (`None`: too many to count), or why it is no duration.
fn parse_millis(text: &str) -> Result<Option<u64>, String> {
    let bad = || {
        format!(
            "bad duration '{}': use a number and a unit, e.g. 90s, 15m, 2h, 3d",
            crate::domain::escape_text(text)
        )
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: Option<u64> = Some(0);
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        // a number too long for u64 is still a number: too large, not malformed
        let n: Option<u64> = rest[..digits].parse().ok();
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let millis_per: u64 = match rest[..unit_len].trim() {
            "ms" => 1,
            "s" | "sec" | "secs" => 1_000,
            "m" | "min" | "mins" => 60_000,
            "h" | "hr" | "hrs" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            _ => return Err(bad()),
        };
        total = match (total, n) {
            (Some(t), Some(n)) => n.checked_mul(millis_per).and_then(|v| t.checked_add(v)),
            _ => None,
        };
        rest = rest[unit_len..].trim_start();
    }
    Ok(total)
}

/// Formats a duration as the console shows ages: `45s`, `12m`, `3h 5m`, `2d 4h`.
pub fn format_age(d: chrono::TimeDelta) -> String {
    let secs = d.num_seconds().max(0);
    let (days, hours, mins) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {mins}m")
    } else if mins > 0 {
        format!("{mins}m")
    } else {
        format!("{secs}s")
    }
}

/// Formats a duration the way the configuration reads it back, e.g. `5m` or `1h30m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

/// The nearest-rank percentile `p` (0..=100) of sorted values.
pub fn percentile(sorted: &[i64], p: usize) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_examples_and_sums() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(
            parse_duration("3d").unwrap(),
            Duration::from_secs(3 * 86_400)
        );
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in ["", "abc", "10", "5x", "m5", "-3s", "99999999999999999999d"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("bad duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn durations_stay_in_range_and_times_never_overflow() {
        assert!(parse_duration("106751991d").is_err());
        assert!(parse_duration("36500d").is_ok());
        let err = parse_duration_within(
            "10d",
            Duration::from_secs(1),
            Duration::from_secs(7 * 86_400),
        )
        .unwrap_err();
        assert!(err.contains("from 1s to 7d"), "{err}");
        let now = Utc::now();
        assert_eq!(after(now, Duration::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(before(now, Duration::MAX), DateTime::<Utc>::MIN_UTC);
        assert_eq!(
            after(now, Duration::from_secs(60)),
            now + TimeDelta::seconds(60)
        );
        assert!(parse_duration("\u{1b}]0;x").unwrap_err().contains("\\x1b"));
        let err = parse_duration("106751991d").unwrap_err();
        assert!(err.contains("from 0s to 36500d"), "{err}");
        assert!(
            parse_duration("99999999999999999999999d")
                .unwrap_err()
                .contains("from 0s")
        );
    }

    #[test]
    fn ages_read_like_the_spec() {
        assert_eq!(format_age(TimeDelta::seconds(45)), "45s");
        assert_eq!(format_age(TimeDelta::seconds(12 * 60 + 5)), "12m");
        assert_eq!(format_age(TimeDelta::seconds(3 * 3600 + 5 * 60)), "3h 5m");
        assert_eq!(
            format_age(TimeDelta::seconds(2 * 86_400 + 4 * 3600 + 59)),
            "2d 4h"
        );
        assert_eq!(format_age(TimeDelta::seconds(-5)), "0s");
    }

    #[test]
    fn durations_format_back() {
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(super::percentile(&v, 50), Some(5));
        assert_eq!(super::percentile(&v, 90), Some(9));
        assert_eq!(super::percentile(&[7], 90), Some(7));
        assert_eq!(super::percentile(&[], 50), None);
    }
}
