//! Tidy CSV: one observation per row, one table for everything, ready for pandas, R or a
//! spreadsheet pivot.
//!
//! Fixed columns: `result,kind,name,measure,quantile,value,unit`.
//!
//! | kind | name | measure | quantile | value | unit |
//! |---|---|---|---|---|---|
//! | `statistic` | statistic id | `count` | | samples | `samples` |
//! | `statistic` | statistic id | `mean`, `pstdev`, `min`, `max` | | number | `ns` or `bytes` |
//! | `percentile` | statistic id | `value` | q in [0, 1] | value at q | `ns` or `bytes` |
//! | `percentile` | statistic id | `count` | q in [0, 1] | samples at or below the value | `samples` |
//! | `counter` | counter name | `value` | | total | `count` |
//! | `status_code` | code (`503`) | `count` | | responses | `count` |
//!
//! Rows come per result (workers, then `global`); every statistic is listed, and its percentiles
//! (at the human report's quantiles: 0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1) only when it
//! has samples. Durations are nanoseconds: whole for min, max and percentiles, fractional for
//! mean and pstdev. Quoting and line endings (CRLF) follow RFC 4180.

use std::io;

use shrike_stats::{RunResult, StatKind, WorkerResult};

use crate::human::QUANTILES;

pub const HEADER: [&str; 7] = ["result", "kind", "name", "measure", "quantile", "value", "unit"];

pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    let mut s = String::new();
    row(&HEADER, &mut s);
    for r in result.workers.iter().chain(std::iter::once(&result.global)) {
        worker(r, &mut s);
    }
    out.write_all(s.as_bytes())
}

fn worker(r: &WorkerResult, s: &mut String) {
    let name = r.name.as_str();
    // Foreign statistics and counters (read from another tool's file) too: nothing read is lost.
    for (id, kind, stat) in r.all_stats() {
        let unit = match kind {
            StatKind::Duration => "ns",
            StatKind::Size => "bytes",
        };
        let stat_row = |measure: &str, value: String, unit: &str, s: &mut String| {
            row(&[name, "statistic", id, measure, "", &value, unit], s);
        };
        stat_row("count", stat.count().to_string(), "samples", s);
        stat_row("mean", stat.mean().to_string(), unit, s);
        stat_row("pstdev", stat.pstdev().to_string(), unit, s);
        stat_row("min", stat.min().to_string(), unit, s);
        stat_row("max", stat.max().to_string(), unit, s);
        if !stat.has_percentiles() {
            continue;
        }
        for q in QUANTILES {
            let p = stat.percentile(q);
            let q = q.to_string();
            row(&[name, "percentile", id, "value", &q, &p.value.to_string(), unit], s);
            row(&[name, "percentile", id, "count", &q, &p.count.to_string(), "samples"], s);
        }
    }
    for (c, v) in r.counters.non_zero_named() {
        row(&[name, "counter", c, "value", "", &v.to_string(), "count"], s);
    }
    for (code, n) in r.status_codes.non_zero() {
        row(&[name, "status_code", &format!("{code:03}"), "count", "", &n.to_string(), "count"], s);
    }
}

/// One record, fields quoted when RFC 4180 requires it, terminated by CRLF.
fn row(fields: &[&str], s: &mut String) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        if f.contains([',', '"', '\r', '\n']) {
            s.push('"');
            s.push_str(&f.replace('"', "\"\""));
            s.push('"');
        } else {
            s.push_str(f);
        }
    }
    s.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        let mut s = String::new();
        row(&["a", "b,c", "say \"hi\"", "x\ny", ""], &mut s);
        assert_eq!(s, "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\",\r\n");
    }
}
