//! RFC 3339 timestamps, as proto3 JSON writes them (`2026-11-21T05:27:52.123456789Z`).
//!
//! Written by hand instead of pulling in a date crate: we only need UTC, and the civil-date
//! arithmetic is Howard Hinnant's well-known `days_from_civil` / `civil_from_days`.

use std::time::{Duration, SystemTime};

const SECS_PER_DAY: i64 = 86_400;
const NANOS_PER_SEC: u32 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimestampError {
    #[error("invalid RFC 3339 timestamp {0:?}: expected e.g. \"2026-11-21T05:27:52.123456789Z\"")]
    Syntax(String),
    #[error("invalid RFC 3339 timestamp {0:?}: {1} is out of range")]
    OutOfRange(String, &'static str),
    #[error("timestamp {0:?} cannot be represented on this platform")]
    Unrepresentable(String),
}

/// Formats `t` in UTC with 0, 3, 6 or 9 fractional digits (the proto3 JSON convention, and the
/// same precision rule `shrike_stats::duration::format_proto` uses for durations).
pub fn format_rfc3339(t: SystemTime) -> String {
    let (secs, nanos) = split_unix(t);
    let days = secs.div_euclid(SECS_PER_DAY);
    let rem = secs.rem_euclid(SECS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    let frac = if nanos == 0 {
        String::new()
    } else if nanos % 1_000_000 == 0 {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    };
    format!("{year:04}-{month:02}-{day:02}T{hh:02}:{mm:02}:{ss:02}{frac}Z")
}

/// Parses an RFC 3339 timestamp: `Z` or a `±hh:mm` offset (or ISO 8601's `±hhmm`, which HAR
/// exporters write), up to 9 fractional digits.
pub fn parse_rfc3339(input: &str) -> Result<SystemTime, TimestampError> {
    let syntax = || TimestampError::Syntax(input.to_string());
    let range = |what| TimestampError::OutOfRange(input.to_string(), what);
    let b = input.as_bytes();
    // The fixed-width prefix `YYYY-MM-DDTHH:MM:SS` is 19 bytes.
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return Err(syntax());
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(syntax());
    }
    let year = digits(&b[0..4]).ok_or_else(syntax)?;
    let month = digits(&b[5..7]).ok_or_else(syntax)?;
    let day = digits(&b[8..10]).ok_or_else(syntax)?;
    let hour = digits(&b[11..13]).ok_or_else(syntax)?;
    let minute = digits(&b[14..16]).ok_or_else(syntax)?;
    let second = digits(&b[17..19]).ok_or_else(syntax)?;

    let mut rest = &b[19..];
    let mut nanos: u32 = 0;
    if let Some((b'.', tail)) = rest.split_first() {
        let n = tail.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return Err(syntax());
        }
        let frac = digits(&tail[..n]).ok_or_else(syntax)?;
        // Scale "123" (ms) up to nanoseconds; n <= 9 so this stays below 10^9.
        nanos = u32::try_from(frac * 10u64.pow(9 - n as u32)).map_err(|_| syntax())?;
        rest = &tail[n..];
    }
    let offset_secs: i64 = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
            let oh = digits(&[*h1, *h2]).ok_or_else(syntax)?;
            let om = digits(&[*m1, *m2]).ok_or_else(syntax)?;
            if oh > 23 || om > 59 {
                return Err(range("offset"));
            }
            let off = (oh * 3600 + om * 60) as i64;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return Err(syntax()),
    };

    if !(1..=12).contains(&month) {
        return Err(range("month"));
    }
    if day < 1 || day > days_in_month(year as i64, month as u32) as u64 {
        return Err(range("day"));
    }
    // Leap seconds (:60) are rejected like proto3's Timestamp does; SystemTime cannot hold them.
    if hour > 23 || minute > 59 || second > 59 {
        return Err(range("time of day"));
    }
    let days = days_from_civil(year as i64, month as u32, day as u32);
    let secs = days * SECS_PER_DAY + (hour * 3600 + minute * 60 + second) as i64 - offset_secs;
    join_unix(secs, nanos).ok_or_else(|| TimestampError::Unrepresentable(input.to_string()))
}

/// Parses a run of ASCII digits (at most 9, so the value always fits).
fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |acc, &c| acc * 10 + u64::from(c - b'0')))
}

/// Seconds since the epoch (negative before 1970, saturating far outside any real clock) and
/// the non-negative nanosecond part.
fn split_unix(t: SystemTime) -> (i64, u32) {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (i64::try_from(d.as_secs()).unwrap_or(i64::MAX), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, NANOS_PER_SEC - d.subsec_nanos())
            }
        }
    }
}

fn join_unix(secs: i64, nanos: u32) -> Option<SystemTime> {
    let epoch = SystemTime::UNIX_EPOCH;
    if secs >= 0 {
        epoch.checked_add(Duration::new(secs.unsigned_abs(), nanos))
    } else {
        epoch
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
            .checked_add(Duration::from_nanos(u64::from(nanos)))
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // The casts are lossless: day is in 1..=31 and month in 1..=12 by construction.
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(at(0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00Z");
        assert_eq!(
            format_rfc3339(at(1_795_238_872, 123_456_789)),
            "2026-11-21T05:27:52.123456789Z"
        );
        assert_eq!(format_rfc3339(at(1_795_238_872, 120_000_000)), "2026-11-21T05:27:52.120Z");
        assert_eq!(format_rfc3339(at(1_795_238_872, 123_000)), "2026-11-21T05:27:52.000123Z");
        let before = SystemTime::UNIX_EPOCH - Duration::new(1, 500_000_000);
        assert_eq!(format_rfc3339(before), "1969-12-31T23:59:58.500Z");
    }

    #[test]
    fn round_trips_across_days_and_eras() {
        let mut secs = 0u64;
        // Steps by a prime number of seconds so every month, leap years and 2100 are covered.
        while secs < 5_000_000_000 {
            let t = at(secs, (secs % 1_000_000_007) as u32 % NANOS_PER_SEC);
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Ok(t), "{}", format_rfc3339(t));
            secs += 7_776_013;
        }
        let old = SystemTime::UNIX_EPOCH - Duration::new(86_400 * 400, 1);
        assert_eq!(parse_rfc3339(&format_rfc3339(old)), Ok(old));
    }

    #[test]
    fn parses_offsets_and_lowercase() {
        let z = parse_rfc3339("2026-11-21T05:27:52Z");
        assert_eq!(parse_rfc3339("2026-11-21T07:27:52+02:00"), z);
        assert_eq!(parse_rfc3339("2026-11-21T00:57:52-04:30"), z);
        assert_eq!(parse_rfc3339("2026-11-21T00:57:52-0430"), z);
        assert_eq!(parse_rfc3339("2026-11-21t05:27:52z"), z);
        assert_eq!(parse_rfc3339("2026-11-21T05:27:52.5Z"), Ok(at(1_795_238_872, 500_000_000)));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "",
            "2026-11-21",
            "2026-11-21T05:27:52",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T05:27:60Z",
            "2026-11-21T05:27:52.Z",
            "2026-11-21T05:27:52.1234567891Z",
            "2026-11-21T05:27:52+2:00",
            "2026-11-21T05:27:52+24:00",
            "+026-11-21T05:27:52Z",
            "2026-11-21T05:27:52Zjunk",
            "2026-11-21T05:27:52.\u{e9}Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
