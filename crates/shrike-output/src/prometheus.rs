//! Prometheus text exposition format 0.0.4, for a push gateway or a textfile collector.
//!
//! - Every statistic is a summary in base units: `shrike_<id>_seconds` for latencies,
//!   `shrike_<id>_bytes` for sizes (`.` in ids becomes `_`), with `quantile` samples at the
//!   human report's quantiles plus `_sum` and `_count`. Quantiles 0 and 1 are the exact min and
//!   max; the others come from the histogram, kept within [min, max].
//! - Every counter is a counter named `shrike_<name>_total` (names already ending in `_total`
//!   keep one suffix).
//! - `shrike_http_responses_total{code="503"}` counts responses per exact status code.
//! - `shrike_execution_duration_seconds` and `shrike_execution_start_timestamp_seconds` are
//!   gauges of each result's window.
//!
//! Each sample has a `worker` label (`worker_0`, …, or `global`, the exact merge: sum over
//! `worker!="global"` or read `global`, never both). Labels given with `--label` are added to
//! every sample: `key=value` becomes the label `key` (when `key` is a valid, unreserved label
//! name); any other labels are joined with spaces into one `label` label.

use std::fmt::Write as _;
use std::io;

use serde_json::Value;
use shrike_stats::duration::seconds_decimal;
use shrike_stats::{Counter, RunResult, StatId, StatKind, WorkerResult};

use crate::human::QUANTILES;

/// Labels Shrike sets itself; a user label of the same name would clash.
const RESERVED_LABELS: [&str; 5] = ["worker", "quantile", "code", "le", "label"];

pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    out.write_all(render(result).as_bytes())
}

pub fn render(result: &RunResult) -> String {
    let mut s = String::new();
    let base = base_labels(&result.options);
    let results: Vec<(&WorkerResult, String)> = result
        .workers
        .iter()
        .chain(std::iter::once(&result.global))
        .map(|r| (r, labels(&[("worker", &r.name)], &base)))
        .collect();

    // One family at a time: the format forbids a family's samples being split up.
    for id in StatId::ALL.iter().copied() {
        summary(id, &results, &mut s);
    }
    for &c in Counter::ALL {
        let name = counter_name(c);
        family(&name, "counter", &format!("Shrike counter {}.", c.name()), &mut s);
        for (r, l) in &results {
            let _ = writeln!(s, "{name}{{{l}}} {}", r.counters.get(c));
        }
    }
    let name = "shrike_http_responses_total";
    family(name, "counter", "Responses per exact HTTP status code.", &mut s);
    for (r, _) in &results {
        for (code, n) in r.status_codes.non_zero() {
            let l = labels(&[("worker", &r.name), ("code", &format!("{code:03}"))], &base);
            let _ = writeln!(s, "{name}{{{l}}} {n}");
        }
    }
    let name = "shrike_execution_duration_seconds";
    family(name, "gauge", "Length of the result's execution window.", &mut s);
    for (r, l) in &results {
        let _ = writeln!(s, "{name}{{{l}}} {}", r.execution_duration.as_secs_f64());
    }
    let name = "shrike_execution_start_timestamp_seconds";
    family(name, "gauge", "Start of the result's execution window, Unix time.", &mut s);
    for (r, l) in &results {
        let t = r.execution_start.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let _ = writeln!(s, "{name}{{{l}}} {}", t.as_secs_f64());
    }
    s
}

fn family(name: &str, kind: &str, help: &str, s: &mut String) {
    let _ = writeln!(s, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(s, "# TYPE {name} {kind}");
}

fn summary(id: StatId, results: &[(&WorkerResult, String)], s: &mut String) {
    // Durations print as exact decimal seconds from whole nanoseconds; sizes as bytes.
    let (unit, value): (&str, fn(u64) -> String) = match id.kind() {
        StatKind::Duration => ("seconds", seconds_decimal),
        StatKind::Size => ("bytes", |v| v.to_string()),
    };
    let name = format!("shrike_{}_{unit}", sanitize(id.id()));
    family(&name, "summary", &format!("{} [{}].", id.title(), id.id()), s);
    for (r, l) in results {
        let stat = r.stats.get(id);
        if stat.count() > 0 {
            for q in QUANTILES {
                let v = match q {
                    0.0 => stat.min(),
                    1.0 => stat.max(),
                    _ => stat.value_at_quantile(q).max(stat.min()).min(stat.max()),
                };
                let _ = writeln!(s, "{name}{{{l},quantile=\"{q}\"}} {}", value(v));
            }
        }
        // The mean is exact, so mean × count is the exact sum up to rounding to a whole unit.
        let sum = (stat.mean() * stat.count() as f64).round() as u64;
        let _ = writeln!(s, "{name}_sum{{{l}}} {}", value(sum));
        let _ = writeln!(s, "{name}_count{{{l}}} {}", stat.count());
    }
}

/// The Prometheus name of a counter: `shrike_<name>_total` with `.` and `-` as `_`.
pub fn counter_name(c: Counter) -> String {
    let base = format!("shrike_{}", sanitize(c.name()));
    if base.ends_with("_total") {
        base
    } else {
        base + "_total"
    }
}

/// A metric or label name from a Shrike name: anything outside `[a-zA-Z0-9_]` becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

fn valid_label_name(k: &str) -> bool {
    k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with("__")
        && !RESERVED_LABELS.contains(&k)
}

/// The user's `--label`s as label pairs (see the module docs).
fn base_labels(options: &Value) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut loose: Vec<&str> = Vec::new();
    let given = options.get("labels").and_then(Value::as_array);
    for l in given.into_iter().flatten().filter_map(Value::as_str) {
        match l.split_once('=') {
            Some((k, v)) if valid_label_name(k.trim()) => {
                let k = k.trim().to_string();
                // The first value given for a key wins; a label may only appear once.
                if !pairs.iter().any(|(have, _)| *have == k) {
                    pairs.push((k, v.to_string()));
                }
            }
            _ => loose.push(l),
        }
    }
    if !loose.is_empty() {
        pairs.push(("label".into(), loose.join(" ")));
    }
    pairs
}

/// `k="v",…` with the sample's own labels first.
fn labels(own: &[(&str, &str)], base: &[(String, String)]) -> String {
    let mut s = String::new();
    let all = own.iter().copied().chain(base.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape_label(v));
    }
    s
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_labels() {
        assert_eq!(counter_name(Counter::Http2xx), "shrike_benchmark_http_2xx_total");
        assert_eq!(counter_name(Counter::CxTotal), "shrike_upstream_cx_total");
        let base = base_labels(&json!({"labels": ["env=prod", "x=\"q\"", "nightly", "9=a", "b"]}));
        assert_eq!(
            labels(&[("worker", "global")], &base),
            "worker=\"global\",env=\"prod\",x=\"\\\"q\\\"\",label=\"nightly 9=a b\""
        );
    }
}
