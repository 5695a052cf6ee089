//! The statistics each format prints, checked against an oracle that never touches the
//! implementation: the test keeps the raw samples it recorded (3001 latencies from 1 µs to
//! 10 s, 3001 body sizes from 1 B to 1 MB, dealt to two workers and merged into `global`),
//! computes the truth from them directly (exact sort and nearest-rank percentiles, integer sums
//! for the mean and population standard deviation), then parses every printed number back out
//! of human, CSV, dotted and Prometheus text.
//!
//! The allowed error is what the formats promise and no more: HdrHistogram keeps 3 significant
//! digits, so a percentile may be off by 0.1% of its value (it reports its bucket's highest
//! equivalent value); then the printed form may round or truncate to its last digit. Means,
//! standard deviations, minima, maxima and counts are exact in the histogram's companion
//! moments, so they get only the printed form's rounding.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashMap;

use shrike_output::OutputFormat;

/// HdrHistogram's precision at 3 significant digits (its buckets are at most 1/1024 wide).
const HDR_RELATIVE: f64 = 0.001;

/// The quantiles every format prints, as permilles (integers, so ranks are computed exactly).
const PERMILLES: [u64; 9] = [0, 500, 750, 800, 900, 950, 990, 999, 1000];

const LATENCY: &str = "benchmark_http_client.request_to_response";
const BODY: &str = "benchmark_http_client.response_body_size";

/// The true statistics of a set of raw samples.
struct Truth {
    sorted: Vec<u64>,
    sum: u128,
    sum_sq: u128,
}

impl Truth {
    fn new(samples: &[u64]) -> Truth {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let sum = sorted.iter().map(|&x| u128::from(x)).sum();
        let sum_sq = sorted.iter().map(|&x| u128::from(x) * u128::from(x)).sum();
        Truth { sorted, sum, sum_sq }
    }

    fn n(&self) -> u64 {
        self.sorted.len() as u64
    }

    /// The 1-based nearest rank of a quantile: ceil(q·n), at least 1, in integers.
    fn rank(&self, permille: u64) -> u64 {
        ((permille * self.n()).div_ceil(1000)).max(1)
    }

    /// Nearest-rank percentile: the smallest sample with at least q·n samples at or below it.
    fn percentile(&self, permille: u64) -> u64 {
        self.sorted[(self.rank(permille) - 1) as usize]
    }

    fn count_at_or_below(&self, v: f64) -> u64 {
        self.sorted.partition_point(|&x| (x as f64) <= v) as u64
    }

    fn mean(&self) -> f64 {
        self.sum as f64 / self.n() as f64
    }

    /// Population standard deviation from exact integer sums: n²·var = n·Σx² − (Σx)².
    fn pstdev(&self) -> f64 {
        let n = u128::from(self.n());
        ((n * self.sum_sq - self.sum * self.sum) as f64).sqrt() / n as f64
    }

    fn min(&self) -> u64 {
        self.sorted[0]
    }

    fn max(&self) -> u64 {
        self.sorted[self.sorted.len() - 1]
    }
}

/// The truths for each result name, for latency and body size.
fn truths(known: &crate::common::Known) -> HashMap<(String, &'static str), Truth> {
    let mut m = HashMap::new();
    for (name, s) in &known.latency {
        m.insert((name.clone(), LATENCY), Truth::new(s));
    }
    for (name, s) in &known.body {
        m.insert((name.clone(), BODY), Truth::new(s));
    }
    m
}

/// `printed` is `truth` within `relative` of it plus `unit` (the printed form's rounding).
fn assert_near(what: &str, printed: f64, truth: f64, relative: f64, unit: f64) {
    let allowed = relative * truth.abs() + unit;
    assert!(
        (printed - truth).abs() <= allowed,
        "{what}: printed {printed}, true {truth} (off by {}, allowed {allowed})",
        (printed - truth).abs()
    );
}

/// A printed percentile is the true nearest-rank value within HdrHistogram's precision.
fn assert_percentile(what: &str, printed: f64, t: &Truth, permille: u64, unit: f64) {
    assert_near(what, printed, t.percentile(permille) as f64, HDR_RELATIVE, unit);
}

/// A printed "samples at or below the value" count: at least the rank (the value is at or above
/// the rank's sample), at most the samples within one histogram bucket above it.
fn assert_count(what: &str, count: u64, t: &Truth, permille: u64) {
    let lo = if permille == 0 { 1 } else { t.rank(permille) };
    let hi = t.count_at_or_below(t.percentile(permille) as f64 * (1.0 + HDR_RELATIVE));
    assert!((lo..=hi).contains(&count), "{what}: count {count}, true range {lo}..={hi}");
}

/// Half of the last printed digit's place: the most that rounding to it can move a value.
fn half_last_digit(text: &str) -> f64 {
    let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
    0.5 * 10f64.powi(-(decimals as i32))
}

// ---- human ----

/// A human duration (`812ns`, `108.3us`, `4.083ms`, `1.250s`) in ns, and its rounding in ns.
fn human_duration(text: &str) -> (f64, f64) {
    let (number, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .into_iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale)))
        .filter(|(n, _)| n.parse::<f64>().is_ok())
        .unwrap_or_else(|| panic!("not a human duration: {text:?}"));
    (number.parse::<f64>().unwrap() * scale, half_last_digit(number) * scale)
}

fn human_size(text: &str) -> (f64, f64) {
    (text.parse().unwrap_or_else(|_| panic!("not a size: {text:?}")), half_last_digit(text))
}

#[test]
fn human_prints_the_true_statistics() {
    let known = crate::common::known_samples();
    let truths = truths(&known);
    let text = crate::common::human_text(&known.result);
    // The human report shows the global result only.
    for (id, title, parse) in [
        (LATENCY, "Request start to response end", human_duration as fn(&str) -> (f64, f64)),
        (BODY, "Response body size", human_size),
    ] {
        let t = &truths[&("global".to_string(), id)];
        let block: Vec<&str> = text
            .lines()
            .skip_while(|l| !(l.starts_with(title) && l.ends_with(&format!("[{id}]"))))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        let field = |label: &str| -> &str {
            let line = block.iter().find(|l| l.trim_start().starts_with(label));
            line.and_then(|l| l.split_whitespace().nth(1)).unwrap_or_else(|| panic!("{id} {label}"))
        };
        assert_eq!(field("samples:"), t.n().to_string(), "{id}");
        for (label, truth) in [
            ("mean:", t.mean()),
            ("pstdev:", t.pstdev()),
            ("min:", t.min() as f64),
            ("max:", t.max() as f64),
        ] {
            let (v, unit) = parse(field(label));
            assert_near(&format!("{id} {label}"), v, truth, 0.0, unit);
        }
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| !l.ends_with(&format!("[{id}]")))
            .skip_while(|l| !l.starts_with("  Percentile"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), PERMILLES.len(), "{id}: {rows:?}");
        for (row, p) in rows.iter().zip(PERMILLES) {
            assert_eq!(row[0].parse::<f64>().unwrap(), p as f64 / 1000.0, "{id} row {row:?}");
            let what = format!("{id} p{p}‰");
            assert_count(&what, row[1].parse().unwrap(), t, p);
            let (v, unit) = parse(row[2]);
            assert_percentile(&what, v, t, p, unit);
        }
    }
}

// ---- CSV ----

#[test]
fn csv_prints_the_true_statistics() {
    let known = crate::common::known_samples();
    let truths = truths(&known);
    let text = crate::common::text(OutputFormat::Csv, &known.result);
    let rows: Vec<Vec<&str>> =
        text.split_terminator("\r\n").map(|l| l.split(',').collect()).collect();
    let cell = |result: &str, kind: &str, id: &str, measure: &str, q: &str| -> &str {
        let hits: Vec<&Vec<&str>> =
            rows.iter().filter(|r| r[..5] == [result, kind, id, measure, q]).collect();
        assert_eq!(hits.len(), 1, "{result} {kind} {id} {measure} {q}");
        hits[0][5]
    };
    let mut checked = 0;
    for ((result, id), t) in &truths {
        let stat = |m: &str| cell(result, "statistic", id, m, "").parse::<f64>().unwrap();
        let what = |m: &str| format!("{result} {id} {m}");
        assert_eq!(stat("count"), t.n() as f64, "{}", what("count"));
        // Full-precision floats: only the moments' floating-point accumulation differs.
        assert_near(&what("mean"), stat("mean"), t.mean(), 1e-12, 0.0);
        assert_near(&what("pstdev"), stat("pstdev"), t.pstdev(), 1e-9, 0.0);
        assert_eq!(stat("min"), t.min() as f64, "{}", what("min"));
        assert_eq!(stat("max"), t.max() as f64, "{}", what("max"));
        for p in PERMILLES {
            let q = (p as f64 / 1000.0).to_string();
            let what = format!("{result} {id} p{p}‰");
            // Whole ns or bytes, unrounded: exactly the histogram's value.
            let value: u64 = cell(result, "percentile", id, "value", &q).parse().unwrap();
            assert_percentile(&what, value as f64, t, p, 0.0);
            let count: u64 = cell(result, "percentile", id, "count", &q).parse().unwrap();
            assert_count(&what, count, t, p);
            if p > 0 {
                // The value is a bucket's top, so the count is exactly the samples up to it.
                assert_eq!(count, t.count_at_or_below(value as f64), "{what}");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 6, "two statistics in each of three results");
}

// ---- dotted ----

#[test]
fn dotted_prints_the_true_statistics() {
    let known = crate::common::known_samples();
    let truths = truths(&known);
    let text = crate::common::text(OutputFormat::Dotted, &known.result);
    let keys: HashMap<&str, &str> =
        text.lines().map(|l| l.rsplit_once(':').map(|(k, v)| (k, v.trim())).unwrap()).collect();
    let get = |key: String| -> f64 {
        keys.get(key.as_str()).unwrap_or_else(|| panic!("no {key}")).parse().unwrap()
    };
    for ((result, id), t) in &truths {
        let prefix = format!("{result}.{id}");
        assert_eq!(get(format!("{prefix}.samples")), t.n() as f64, "{prefix}");
        // Durations are whole microseconds, truncated: up to 1 µs (1000 ns) below the value.
        // Sizes are raw (whole bytes, or full-precision floats for the moments).
        let (scale, unit, moment_rel) =
            if *id == LATENCY { (1000.0, 1000.0, 0.0) } else { (1.0, 0.0, 1e-9) };
        for (m, truth) in [("mean", t.mean()), ("pstdev", t.pstdev())] {
            // The mean and pstdev are rounded to whole ns before truncating to µs.
            let unit = if *id == LATENCY { unit + 0.5 } else { 0.0 };
            assert_near(
                &format!("{prefix}.{m}"),
                get(format!("{prefix}.{m}")) * scale,
                truth,
                moment_rel,
                unit,
            );
        }
        for (m, truth) in [("min", t.min()), ("max", t.max())] {
            assert_near(
                &format!("{prefix}.{m}"),
                get(format!("{prefix}.{m}")) * scale,
                truth as f64,
                0.0,
                unit,
            );
        }
        let value_key = if *id == LATENCY { "microseconds" } else { "value" };
        for p in PERMILLES {
            let key = format!("{prefix}.permilles-{p}");
            let value = get(format!("{key}.{value_key}")) * scale;
            assert_percentile(&key, value, t, p, unit);
            assert_count(&key, get(format!("{key}.count")) as u64, t, p);
        }
    }
}

// ---- Prometheus ----

/// `name{labels} value` lines (no comments), as (name, labels, value).
fn prometheus_samples(text: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels
                .strip_suffix('}')
                .unwrap()
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            (name.to_string(), labels, value.parse().unwrap())
        })
        .collect()
}

#[test]
fn prometheus_prints_the_true_statistics() {
    let known = crate::common::known_samples();
    let truths = truths(&known);
    let samples = prometheus_samples(&crate::common::text(OutputFormat::Prometheus, &known.result));
    let get = |name: &str, worker: &str, quantile: Option<&str>| -> f64 {
        let hits: Vec<f64> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && l.get("worker").map(String::as_str) == Some(worker)
                    && l.get("quantile").map(String::as_str) == quantile
            })
            .map(|s| s.2)
            .collect();
        assert_eq!(hits.len(), 1, "{name} {worker} {quantile:?}");
        hits[0]
    };
    for ((result, id), t) in &truths {
        // Base units: seconds (exact decimals of whole ns) for latencies, bytes for sizes.
        let (name, scale) = if *id == LATENCY {
            ("shrike_benchmark_http_client_request_to_response_seconds", 1e9)
        } else {
            ("shrike_benchmark_http_client_response_body_size_bytes", 1.0)
        };
        let what = format!("{name} {result}");
        assert_eq!(get(&format!("{name}_count"), result, None), t.n() as f64, "{what}");
        // The sum is mean × count rounded to a whole ns or byte; the f64 parse of the printed
        // decimal adds a relative 1e-16.
        let sum = get(&format!("{name}_sum"), result, None) * scale;
        assert_near(&format!("{what} sum"), sum, t.sum as f64, 1e-12, 1.0);
        for p in PERMILLES {
            let q = (p as f64 / 1000.0).to_string();
            let v = get(name, result, Some(&q)) * scale;
            let what = format!("{what} quantile {q}");
            if p == 0 || p == 1000 {
                // The exact extremes, not bucket edges.
                let exact = if p == 0 { t.min() } else { t.max() };
                assert_near(&what, v, exact as f64, 1e-15, 0.0);
            } else {
                assert_percentile(&what, v, t, p, 1e-15 * v);
            }
        }
    }
}
