//! Durations as users type them and as proto3 JSON writes them.
//!
//! Input: a bare number means seconds (Nighthawk's `--duration 30`, `--jitter-uniform .00001`);
//! a suffix `ns`, `us`/`µs`, `ms`, `s`, `m` or `h` picks the unit (`"0.25s"`, `250ms`).
//! Output: proto3 JSON durations (`"0.000123s"`) and compact human units (`123.456us`).

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("invalid duration {0:?}: expected a number with an optional unit (ns, us, ms, s, m, h), e.g. \"0.25s\" or \"250ms\"")]
    Invalid(String),
    #[error("duration {0:?} is negative")]
    Negative(String),
    #[error("duration {0:?} is too large")]
    TooLarge(String),
}

/// Parses `"5"`, `"0.25s"`, `".00001s"`, `"250ms"`, `"10us"`, `"2m"`, `"1h"`.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let ns_per_unit: f64 = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return Err(DurationError::Invalid(input.to_string())),
    };
    if num.starts_with('-') {
        return Err(DurationError::Negative(input.to_string()));
    }
    let value: f64 = num.parse().map_err(|_| DurationError::Invalid(input.to_string()))?;
    if !value.is_finite() {
        return Err(DurationError::Invalid(input.to_string()));
    }
    let ns = (value * ns_per_unit).round();
    if ns > u64::MAX as f64 {
        return Err(DurationError::TooLarge(input.to_string()));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// Proto3 JSON duration: seconds with 0, 3, 6 or 9 fractional digits and an `s` suffix.
pub fn format_proto(d: Duration) -> String {
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        format!("{secs}s")
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{secs}.{:03}s", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{secs}.{:06}s", nanos / 1_000)
    } else {
        format!("{secs}.{nanos:09}s")
    }
}

/// Seconds as an exact decimal number (`340` ns → `0.00000034`), for formats that want plain
/// seconds: dividing by 1e9 in floating point would print `0.00000034000000000000003`.
pub fn seconds_decimal(ns: u64) -> String {
    let (secs, frac) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if frac == 0 {
        return secs.to_string();
    }
    let digits = format!("{frac:09}");
    format!("{secs}.{}", digits.trim_end_matches('0'))
}

/// Proto3 JSON duration of a nanosecond count.
pub fn format_proto_ns(ns: u64) -> String {
    format_proto(Duration::from_nanos(ns))
}

/// Parses a proto3 JSON duration (`"1.5s"`, `"-0.001s"` rejected). Strict: requires the `s`.
pub fn parse_proto(s: &str) -> Result<Duration, DurationError> {
    match s.trim().strip_suffix('s') {
        Some(num) if !num.ends_with(['m', 'u', 'n', 'µ']) => parse_duration(num),
        _ => Err(DurationError::Invalid(s.to_string())),
    }
}

/// A compact human rendering with 4 significant figures: `812ns`, `108.3us`, `4.083ms`, `1.250s`.
pub fn format_human_ns(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        return format!("{ns:.0}ns");
    } else if ns < 1e6 {
        (ns / 1e3, "us")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if v >= 100.0 {
        1
    } else if v >= 10.0 {
        2
    } else {
        3
    };
    format!("{v:.decimals$}{unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn seconds_are_exact_decimals() {
        use super::seconds_decimal;
        assert_eq!(seconds_decimal(340), "0.00000034");
        assert_eq!(seconds_decimal(0), "0");
        assert_eq!(seconds_decimal(2_000_000_000), "2");
        assert_eq!(seconds_decimal(1_500_000_001), "1.500000001");
    }

    use super::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("0.25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration(".00001s"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1x", "-1s", "nan", "inf", "1e400", "s", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn proto_round_trip() {
        for ns in [0u64, 1, 1000, 1_000_000, 123_456_789, 5_000_000_000, 1_500_000_000] {
            let s = format_proto_ns(ns);
            assert_eq!(parse_proto(&s), Ok(Duration::from_nanos(ns)), "{s}");
        }
        assert_eq!(format_proto_ns(123_000), "0.000123s");
        assert_eq!(format_proto_ns(5_000_000_000), "5s");
        assert!(parse_proto("250ms").is_err());
    }

    #[test]
    fn human_units() {
        assert_eq!(format_human_ns(812.0), "812ns");
        assert_eq!(format_human_ns(108_312.0), "108.3us");
        assert_eq!(format_human_ns(4_083_000.0), "4.083ms");
        assert_eq!(format_human_ns(1_250_000_000.0), "1.250s");
    }
}
