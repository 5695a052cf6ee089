//! The JSON fortio's report UI (`fortio report`) loads: fortio's `fhttp.HTTPRunnerResults`
//! (which embeds `periodic.RunnerResults`) with its Go field names and exact Go types, so the
//! file decodes into fortio's structs and its UI and tools show it like one of their own runs.
//!
//! Mapping from the global result:
//! - `DurationHistogram`: `benchmark_http_client.request_to_response` in seconds;
//!   `ErrorsDurationHistogram`: the same for non-2xx responses (fortio counts those as errors).
//! - `Sizes` / `HeaderSizes`: response body and header sizes in bytes.
//! - Histogram `Data` uses fortio's own bucket boundaries (`stats.histogramBucketValues`),
//!   filled from the HdrHistogram, so the bars look like fortio's. fortio's fixed 1 ms default
//!   resolution would put a whole loopback run in one bar, so the resolution is the smallest
//!   power of ten of recorded units (1 ns, 1 byte) at which the max lies within the last bound
//!   (100000 units): a 330 µs max gives 10 ns units. `Count`, `Min`, `Max`, `Sum`, `Avg` and
//!   `StdDev` are the exact moments; `Percentiles` are at fortio's default list (50, 75, 90,
//!   99, 99.9).
//! - A statistic read without a histogram (Nighthawk's JSON) has only its printed percentile
//!   points; its `Data` then has one bucket per point that adds samples, from the previous
//!   point's value to this one's, as Nighthawk's own fortio output does. Re-binning those into
//!   fortio's bounds would invent where the samples lie within each span.
//! - `StartTime`: the global execution start; `ID`: fortio's `YYYY-MM-DD-HHMMSS_labels`, in UTC.
//! - `RetCodes`: every status code seen, with its exact count.
//! - `RequestedQPS`: requests per second × workers as a string (`"max"` when unpaced);
//!   `NumThreads`: connections × workers (fortio's UI labels it connections, as Nighthawk
//!   does); `ActualQPS`: responses / execution duration; `SocketCount`: `upstream_cx_total`;
//!   `BytesSent` / `BytesReceived`: the upstream byte counters.

use std::io;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use shrike_stats::duration::parse_proto;
use shrike_stats::{Counter, RunResult, StatId, Statistic};

use crate::timestamp::format_rfc3339;

/// fortio's bucket bounds (`stats.histogramBucketValues`) in units of the resolution. Bucket
/// `i` holds values in `]BUCKETS[i-1], BUCKETS[i]]`; one more bucket holds what lies beyond the
/// last bound, up to the max.
const BUCKETS: [u64; 56] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18, 20, 25, 30, 35, 40, 45, 50, 60, 70, 80,
    90, 100, 120, 140, 160, 180, 200, 250, 300, 350, 400, 450, 500, 600, 700, 800, 900, 1000, 2000,
    3000, 4000, 5000, 7500, 10000, 20000, 30000, 40000, 50000, 75000, 100000,
];

/// fortio's default `-p` percentiles.
const PERCENTILES: [f64; 5] = [50.0, 75.0, 90.0, 99.0, 99.9];

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct FortioResult {
    run_type: &'static str,
    labels: String,
    start_time: String,
    #[serde(rename = "RequestedQPS")]
    requested_qps: String,
    requested_duration: String,
    #[serde(rename = "ActualQPS")]
    actual_qps: f64,
    /// Go's `time.Duration`: int64 nanoseconds.
    actual_duration: i64,
    num_threads: i64,
    version: String,
    duration_histogram: HistogramData,
    errors_duration_histogram: HistogramData,
    exactly: i64,
    jitter: bool,
    uniform: bool,
    no_catch_up: bool,
    #[serde(rename = "RunID")]
    run_id: i64,
    #[serde(rename = "ID")]
    id: String,
    ret_codes: std::collections::BTreeMap<String, i64>,
    sizes: HistogramData,
    header_sizes: HistogramData,
    #[serde(rename = "URL")]
    url: String,
    socket_count: i64,
    bytes_sent: i64,
    bytes_received: i64,
    abort_on: i64,
}

/// fortio's `stats.HistogramData`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct HistogramData {
    count: i64,
    min: f64,
    max: f64,
    sum: f64,
    avg: f64,
    std_dev: f64,
    data: Vec<Bucket>,
    percentiles: Vec<FortioPercentile>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Bucket {
    start: f64,
    end: f64,
    /// Cumulative percentage up to and including this bucket.
    percent: f64,
    count: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct FortioPercentile {
    percentile: f64,
    value: f64,
}

pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    let mut buf = serde_json::to_vec_pretty(&document(result))?;
    buf.push(b'\n');
    out.write_all(&buf)
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn document(result: &RunResult) -> FortioResult {
    let g = &result.global;
    let o = &result.options;
    let labels: Vec<&str> = o
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let labels = labels.join(" ");
    let requested_qps = match crate::options::requested_rate(result) {
        Some(r) => format!("{r}"),
        None => "max".into(),
    };
    let requested_duration = match o.get("duration").and_then(Value::as_str) {
        Some(d) => match parse_proto(d) {
            Ok(d) => go_duration(d),
            Err(_) => d.to_string(),
        },
        None => "until stop".into(),
    };
    let connections = o.get("connections").and_then(Value::as_u64).unwrap_or(0);
    let secs = g.execution_duration.as_secs_f64();
    let rtr = g.stats.get(StatId::RequestToResponse);
    let actual_qps = if secs > 0.0 { rtr.count() as f64 / secs } else { 0.0 };
    let mut errors = Statistic::new();
    for id in [
        StatId::Latency1xx,
        StatId::Latency3xx,
        StatId::Latency4xx,
        StatId::Latency5xx,
        StatId::LatencyXxx,
    ] {
        errors.merge(g.stats.get(id));
    }
    let url = match o.get("uri") {
        Some(Value::String(u)) => u.clone(),
        _ => o
            .get("multi_target_endpoints")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    };
    let start = format_rfc3339(g.execution_start);
    FortioResult {
        run_type: "HTTP",
        id: run_id(g.execution_start, &labels),
        labels,
        start_time: start,
        requested_qps,
        requested_duration,
        actual_qps,
        actual_duration: int(u64::try_from(g.execution_duration.as_nanos()).unwrap_or(u64::MAX)),
        num_threads: int(connections * result.workers.len().max(1) as u64),
        version: env!("CARGO_PKG_VERSION").into(),
        duration_histogram: histogram(rtr, 1e9),
        errors_duration_histogram: histogram(&errors, 1e9),
        exactly: 0,
        jitter: o
            .get("jitter_uniform")
            .and_then(Value::as_str)
            .and_then(|j| parse_proto(j).ok())
            .is_some_and(|j| !j.is_zero()),
        uniform: false,
        no_catch_up: false,
        run_id: 0,
        ret_codes: g
            .status_codes
            .non_zero()
            .into_iter()
            .map(|(c, n)| (c.to_string(), int(n)))
            .collect(),
        sizes: histogram(g.stats.get(StatId::ResponseBodySize), 1.0),
        header_sizes: histogram(g.stats.get(StatId::ResponseHeaderSize), 1.0),
        url,
        socket_count: int(g.counters.get(Counter::CxTotal)),
        bytes_sent: int(g.counters.get(Counter::CxTxBytesTotal)),
        bytes_received: int(g.counters.get(Counter::CxRxBytesTotal)),
        abort_on: 0,
    }
}

/// fortio's `HistogramData` of `stat`. `per_unit` recorded units make one output unit (1e9 ns
/// per second; 1 for bytes); dividing by it rounds correctly where multiplying by 1e-9 would not.
fn histogram(stat: &Statistic, per_unit: f64) -> HistogramData {
    let n = stat.count();
    let out = |raw: u64| raw as f64 / per_unit;
    let data = if stat.has_histogram() {
        fortio_buckets(stat, per_unit)
    } else {
        summary_buckets(stat, per_unit)
    };
    let percentiles = if !stat.has_percentiles() {
        Vec::new()
    } else {
        PERCENTILES
            .iter()
            .map(|&p| FortioPercentile {
                percentile: p,
                value: out(stat.clamped_quantile(p / 100.0)),
            })
            .collect()
    };
    HistogramData {
        count: int(n),
        min: out(stat.min()),
        max: out(stat.max()),
        sum: stat.mean() * n as f64 / per_unit,
        avg: stat.mean() / per_unit,
        std_dev: stat.pstdev() / per_unit,
        data,
        percentiles,
    }
}

/// `Data` from the histogram, in fortio's bucket bounds (see the module docs).
fn fortio_buckets(stat: &Statistic, per_unit: f64) -> Vec<Bucket> {
    let out = |raw: u64| raw as f64 / per_unit;
    let (min, max) = (out(stat.min()), out(stat.max()));
    // Size of one bucket unit in recorded units (see the module docs), in integers so that a
    // sample on a bound is compared exactly.
    let last = BUCKETS[BUCKETS.len() - 1];
    let mut resolution: u64 = 1;
    while stat.max() > last.saturating_mul(resolution) {
        resolution = resolution.saturating_mul(10);
    }
    let bound = |i: usize| BUCKETS[i].saturating_mul(resolution);
    let mut counts = [0u64; BUCKETS.len() + 1];
    if stat.count() > 0 {
        for v in stat.histogram().iter_recorded() {
            // An HDR bucket's samples lie in [lowest, highest equivalent], 3 digits apart; the
            // lowest keeps a sample recorded exactly on a fortio bound in the bucket it closes.
            let lowest = stat.histogram().lowest_equivalent(v.value_iterated_to());
            let i = (0..BUCKETS.len()).find(|&i| lowest <= bound(i)).unwrap_or(BUCKETS.len());
            counts[i] += v.count_at_value();
        }
    }
    let total: u64 = counts.iter().sum();
    let mut data = Vec::new();
    let mut cumulative = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        cumulative += c;
        let lo = if i == 0 { 0.0 } else { out(bound(i - 1)) };
        let hi = if i < BUCKETS.len() { out(bound(i)) } else { max };
        data.push(Bucket {
            start: lo.max(min),
            end: hi.min(max),
            percent: 100.0 * cumulative as f64 / total as f64,
            count: int(c),
        });
    }
    data
}

/// `Data` from printed percentile points (a statistic read without a histogram): one bucket per
/// point that adds samples, spanning from the previous point's value (the min for the first).
fn summary_buckets(stat: &Statistic, per_unit: f64) -> Vec<Bucket> {
    let out = |raw: u64| raw as f64 / per_unit;
    let total = stat.count();
    let mut data = Vec::new();
    let (mut below, mut start) = (0u64, stat.min());
    for p in stat.spectrum() {
        if p.count > below && total > 0 {
            // Clamped as everywhere else: a printed point is a bucket's top edge.
            let end = p.value.max(stat.min()).min(stat.max());
            data.push(Bucket {
                start: out(start),
                end: out(end),
                percent: 100.0 * p.count as f64 / total as f64,
                count: int(p.count - below),
            });
            (below, start) = (p.count, end);
        }
    }
    data
}

/// fortio's result id: the start time as `2006-01-02-150405` plus the labels' alphanumerics.
fn run_id(start: std::time::SystemTime, labels: &str) -> String {
    let stamp = format_rfc3339(start);
    // RFC 3339 UTC: YYYY-MM-DDTHH:MM:SS...; fortio uses local time, UTC is what we know.
    let base: String = stamp
        .get(..19)
        .map(|s| s.replace('T', "-").replace(':', ""))
        .unwrap_or_else(|| stamp.clone());
    if labels.is_empty() {
        return base;
    }
    let mut id = base + "_";
    let mut last = '_';
    for c in labels.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c);
            last = c;
        } else if last != '_' {
            id.push('_');
            last = '_';
        }
    }
    id.truncate(64);
    id
}

/// Go's `time.Duration.String()`: `1.5s`, `2m0s`, `1h0m0s`, `250ms`.
pub(crate) fn go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let frac = |value: u128, unit: u128, suffix: &str| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return format!("{whole}{suffix}");
        }
        let digits = unit.ilog10() as usize;
        let f = format!("{rest:0digits$}");
        format!("{whole}.{}{suffix}", f.trim_end_matches('0'))
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return frac(ns, 1_000, "µs");
    }
    if ns < 1_000_000_000 {
        return frac(ns, 1_000_000, "ms");
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, (secs % 3600) / 60);
    let s = frac(
        u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
        "s",
    );
    match (h, m) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let d = Duration::from_millis;
        assert_eq!(go_duration(d(0)), "0s");
        assert_eq!(go_duration(d(1500)), "1.5s");
        assert_eq!(go_duration(d(2000)), "2s");
        assert_eq!(go_duration(d(120_000)), "2m0s");
        assert_eq!(go_duration(d(3_723_500)), "1h2m3.5s");
        assert_eq!(go_duration(d(250)), "250ms");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::from_nanos(15)), "15ns");
    }

    #[test]
    fn buckets_follow_fortio_bounds_at_a_resolution_fitting_the_max() {
        let mut s = Statistic::new();
        for v in [1_000u64, 1_000, 1_000, 2_500, 1_000_000] {
            s.record(v);
        }
        // Max 1 ms: 10 ns units, so 1 us = 100 units, 2.5 us = 250, 1 ms = 100000.
        let h = histogram(&s, 1e9);
        let got: Vec<(f64, f64, i64)> = h.data.iter().map(|b| (b.start, b.end, b.count)).collect();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(near(got[0].0, 1e-6) && near(got[0].1, 1e-6) && got[0].2 == 3, "{got:?}");
        assert!(near(got[1].0, 2e-6) && near(got[1].1, 2.5e-6) && got[1].2 == 1, "{got:?}");
        assert!(near(got[2].0, 750e-6) && near(got[2].1, 1e-3) && got[2].2 == 1, "{got:?}");
        assert_eq!(h.data.last().map(|b| b.percent), Some(100.0));
        assert!((h.data[0].percent - 60.0).abs() < 1e-12);
        assert_eq!(h.count, 5);
        assert!((h.sum - 1.0055e-3).abs() < 1e-15);
        assert!(histogram(&Statistic::new(), 1e9).data.is_empty());
    }

    #[test]
    fn run_ids_follow_fortio() {
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_795_238_872);
        assert_eq!(run_id(t, ""), "2026-11-21-052752");
        assert_eq!(run_id(t, "a b--c"), "2026-11-21-052752_a_b_c");
    }
}
