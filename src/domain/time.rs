//! Durations as people type them (`90s`, `15m`, `2h`, `3d`) and ages as the console shows them.

use std::time::Duration;

/// Parses `90s`, `15m`, `2h`, `3d`, `500ms` or a sum of them such as `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration '{text}': use a number and a unit, e.g. 90s, 15m, 2h, 3d");
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let millis_per = match rest[..unit_len].trim() {
            "ms" => 1,
            "s" | "sec" | "secs" => 1_000,
            "m" | "min" | "mins" => 60_000,
            "h" | "hr" | "hrs" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(millis_per)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        rest = rest[unit_len..].trim_start();
    }
    Ok(Duration::from_millis(total))
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

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
}
