//! Nighthawk's `dotted` format: one `key: value` line per number, for statsd-style pipelines
//! and grep.
//!
//! The key layout is Nighthawk's (`DottedStringOutputFormatterImpl`), so existing scrapers keep
//! working. For every result (workers, then `global`) and every statistic:
//!
//! ```text
//! global.benchmark_http_client.request_to_response.samples: 1000
//! global.benchmark_http_client.request_to_response.mean: 123          (µs; raw bytes for sizes)
//! global.benchmark_http_client.request_to_response.pstdev: 45
//! global.benchmark_http_client.request_to_response.min: 61
//! global.benchmark_http_client.request_to_response.max: 5000000
//! global.benchmark_http_client.request_to_response.permilles-990.count: 990
//! global.benchmark_http_client.request_to_response.permilles-990.microseconds: 456
//! global.benchmark_http_client.response_body_size.permilles-500.value: 612
//! ```
//!
//! then every non-zero counter as `global.benchmark.http_2xx:1000` (Nighthawk writes counters
//! without the space). Durations are whole microseconds, truncated as protobuf's
//! `DurationToMicroseconds` does. Permilles are taken at Nighthawk's quantiles (0, 500, 750, 800,
//! 900, 950, 990, 999, 1000), computed from the histogram at exactly that quantile; a statistic
//! without samples prints no permille lines, as Nighthawk's has no percentiles then.

use std::fmt::Write as _;
use std::io;

use shrike_stats::{RunResult, StatKind, Statistic, WorkerResult};

/// The quantiles Nighthawk's dotted (and console) output iterates.
pub const QUANTILES: [f64; 9] = [0.0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0];

pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    let mut s = String::new();
    for r in result.workers.iter().chain(std::iter::once(&result.global)) {
        worker(r, &mut s);
    }
    out.write_all(s.as_bytes())
}

/// Microseconds of a nanosecond value, truncated toward zero.
fn micros(ns: f64) -> u64 {
    // Moments are rounded to whole ns first, as the JSON document stores them.
    (ns.round() as u64) / 1000
}

fn worker(r: &WorkerResult, s: &mut String) {
    // Foreign statistics and counters (read from another tool's file) too: nothing read is lost.
    for (id, kind, stat) in r.all_stats() {
        let prefix = format!("{}.{id}", r.name);
        let _ = writeln!(s, "{prefix}.samples: {}", stat.count());
        match kind {
            StatKind::Duration => {
                let _ = writeln!(s, "{prefix}.mean: {}", micros(stat.mean()));
                let _ = writeln!(s, "{prefix}.pstdev: {}", micros(stat.pstdev()));
                let _ = writeln!(s, "{prefix}.min: {}", stat.min() / 1000);
                let _ = writeln!(s, "{prefix}.max: {}", stat.max() / 1000);
            }
            StatKind::Size => {
                let _ = writeln!(s, "{prefix}.mean: {}", stat.mean());
                let _ = writeln!(s, "{prefix}.pstdev: {}", stat.pstdev());
                let _ = writeln!(s, "{prefix}.min: {}", stat.min());
                let _ = writeln!(s, "{prefix}.max: {}", stat.max());
            }
        }
        permilles(&prefix, kind, stat, s);
    }
    for (c, v) in r.counters.non_zero_named() {
        let _ = writeln!(s, "{}.{c}:{v}", r.name);
    }
}

fn permilles(prefix: &str, kind: StatKind, stat: &Statistic, s: &mut String) {
    if !stat.has_percentiles() {
        return;
    }
    for q in QUANTILES {
        let p = stat.percentile(q);
        let key = format!("{prefix}.permilles-{:.0}", q * 1000.0);
        let _ = writeln!(s, "{key}.count: {}", p.count);
        match kind {
            StatKind::Duration => {
                let _ = writeln!(s, "{key}.microseconds: {}", p.value / 1000);
            }
            StatKind::Size => {
                let _ = writeln!(s, "{key}.value: {}", p.value);
            }
        }
    }
}
