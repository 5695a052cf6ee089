//! The `date` response header, formatted at most once per second per thread.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const HTTP_DATE_LEN: usize = 29;

#[derive(Clone, Copy)]
struct Cached {
    second: u64,
    text: [u8; HTTP_DATE_LEN],
}

thread_local! {
    // Per thread rather than shared: no lock or atomic on the hot path, and a runtime worker
    // formats at most once per second.
    static CACHE: Cell<Cached> = const {
        Cell::new(Cached { second: u64::MAX, text: [0; HTTP_DATE_LEN] })
    };
}

/// Appends the current time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn append_now(out: &mut Vec<u8>) {
    let second = unix_now();
    let text = CACHE.with(|cache| {
        let mut cached = cache.get();
        if cached.second != second {
            cached = Cached { second, text: format(second) };
            cache.set(cached);
        }
        cached.text
    });
    out.extend_from_slice(&text);
}

/// Whole seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    // A clock before 1970 is a broken host; the epoch is as good an answer as any.
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn format(unix_seconds: u64) -> [u8; HTTP_DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = unix_seconds / 86_400;
    let secs_of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    put2(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    // Four digits cover every year an HTTP date can express.
    let year = year % 10_000;
    put2(&mut out[12..14], year / 100);
    put2(&mut out[14..16], year % 100);
    put2(&mut out[17..19], secs_of_day / 3600);
    put2(&mut out[20..22], secs_of_day / 60 % 60);
    put2(&mut out[23..25], secs_of_day % 60);
    out
}

fn put2(dst: &mut [u8], v: u64) {
    dst[0] = b'0' + (v / 10 % 10) as u8;
    dst[1] = b'0' + (v % 10) as u8;
}

/// Howard Hinnant's days-to-civil algorithm for the proleptic Gregorian calendar.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(&format(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&format(1_767_225_599), b"Wed, 31 Dec 2025 23:59:59 GMT");
    }

    #[test]
    fn append_now_is_well_formed() {
        let mut out = Vec::new();
        append_now(&mut out);
        append_now(&mut out);
        assert_eq!(out.len(), 2 * HTTP_DATE_LEN);
        assert!(out.ends_with(b" GMT"));
    }
}
