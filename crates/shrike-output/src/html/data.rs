//! The numbers the report's script draws, computed from the results.
//!
//! Everything that needs a histogram is computed here, exactly, so the page never estimates:
//! the percentile spectrum (the same points the JSON result prints), summary percentiles, and
//! bucketed counts for the latency histogram. Durations are nanoseconds throughout; the script
//! picks display units.

use serde_json::{json, Map, Value};
use shrike_stats::{Counter, Counters, Interval, IntervalStat, StatId, Statistic};

use super::Input;
use crate::spectrum::spectrum;
use crate::timestamp::format_rfc3339;

/// Version of the embedded data's shape, for scripts that read a report's JSON block.
const DATA_VERSION: u64 = 1;

/// Histogram bins per decade of latency: 10 gives bins ~26% wide, fine enough to show modes
/// and coarse enough that a few thousand samples still fill them.
const BINS_PER_DECADE: f64 = 10.0;

/// Quantiles the summary table shows (1.0 is the maximum).
const SUMMARY_QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];

/// Quantiles of each interval the over-time plots use; all are in [`IntervalStat::QUANTILES`].
const INTERVAL_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 1.0];

/// Counters that count a failed request: error statuses, requests reset or failed after they
/// were sent, and requests that never went out because no connection could be opened. The
/// default failure predicates watch the same set. Open-loop overflow is reported on its own:
/// it is load the client could not offer, not an answer the target gave.
const ERROR_COUNTERS: [Counter; 5] = [
    Counter::Http4xx,
    Counter::Http5xx,
    Counter::HttpXxx,
    Counter::StreamResets,
    Counter::PoolConnectionFailure,
];

/// Option keys that name the target, in preference order (`uri` is Nighthawk's name).
const TARGET_KEYS: [&str; 4] = ["uri", "url", "target", "multi_target_endpoints"];

/// The two latencies every plot shows, with the keys the script knows them by.
const LATENCIES: [(&str, StatId); 2] =
    [("scheduled", StatId::ScheduledToResponse), ("service", StatId::RequestToResponse)];

/// The data block of a report of `inputs`.
pub fn report_data(title: &str, inputs: &[Input<'_>]) -> Value {
    let bins = Bins::covering(inputs);
    json!({
        "version": DATA_VERSION,
        "title": title,
        "generator": concat!("shrike ", env!("CARGO_PKG_VERSION")),
        "histogram": {"bins_per_decade": BINS_PER_DECADE, "first": bins.first, "count": bins.count},
        "files": inputs.iter().map(|i| file(i, &bins)).collect::<Vec<_>>(),
    })
}

fn sum(c: &Counters, which: &[Counter]) -> u64 {
    which.iter().map(|&k| c.get(k)).sum()
}

fn file(input: &Input<'_>, bins: &Bins) -> Value {
    let r = input.result;
    let g = &r.global;
    let secs = g.execution_duration.as_secs_f64();
    let window = g.rate_window().as_secs_f64();
    let responses = g.counters.responses();
    let errors: Map<String, Value> = ERROR_COUNTERS
        .iter()
        .filter(|&&c| g.counters.get(c) > 0)
        .map(|&c| (c.name().to_string(), json!(g.counters.get(c))))
        .collect();
    let latency: Map<String, Value> =
        LATENCIES.iter().map(|&(key, id)| (key.to_string(), stat(g.stats.get(id), bins))).collect();
    json!({
        "label": input.label,
        "target": target(&r.options),
        "protocol": r.options.get("protocol").and_then(Value::as_str).unwrap_or(""),
        "started": format_rfc3339(g.execution_start),
        "duration_s": secs,
        // Each generator's workers, for a fleet (its result has an entry per generator).
        "workers": match crate::fleet::generators(r) {
            Some(_) => r.options.get("workers").and_then(Value::as_u64).unwrap_or(1) as usize,
            None => r.workers.len(),
        },
        "requested_rps": crate::options::requested_rate(r),
        // Over the sending window, as the summary states it: the drain sends nothing.
        "achieved_rps": if window > 0.0 { Some(responses as f64 / window) } else { None },
        "requests": g.counters.get(Counter::RqTotal),
        "responses": responses,
        "errors": sum(&g.counters, &ERROR_COUNTERS),
        "error_counters": errors,
        "overflow": g.counters.get(Counter::PoolOverflow),
        // How late the client was allowed to send (a budget, an idle strategy): latency from
        // the schedule holds that lateness, so runs that differ in it differ there by choice.
        "pacing": json!([
            r.options.get("max_lateness").cloned().unwrap_or(Value::Null),
            r.options.get("sequencer_idle_strategy").cloned().unwrap_or(Value::Null),
        ]),
        "termination": {
            "description": r.termination.describe(),
            "failure": r.verdict.is_failure(),
            "verdict": r.verdict.describe(),
        },
        "latency": latency,
        "status_codes": g.status_codes.non_zero(),
        "counters": g.counters.non_zero().iter().map(|(c, n)| json!([c.name(), n]))
            .collect::<Vec<_>>(),
        "options": flatten_options(&r.options),
        "intervals": r.intervals.iter().map(interval).collect::<Vec<_>>(),
        "replay": replay(r),
        // A coordinated run's generators, one row each (`null` for other runs).
        "generators": crate::fleet::generators(r).map_or(Value::Null, |g| {
            Value::Array(g.iter().map(|g| json!({
                "name": g.name, "address": g.address, "state": g.state, "why": g.why,
                "fate": g.fate(),
                "requests": g.requests, "rate": g.rate, "errors": g.errors, "p99_ns": g.p99_ns,
            })).collect())
        }),
    })
}

/// A replay's own numbers (`null` for other runs): its jobs, its speed, and the canary diff
/// against the captured answers, most frequent difference first.
fn replay(r: &shrike_stats::RunResult) -> Value {
    let Some(options) = r.options.get("replay").filter(|_| crate::options::is_replay(r)) else {
        return Value::Null;
    };
    let c = &r.global.counters;
    let mut differences: Vec<(&String, &u64)> = r.differences.iter().collect();
    differences.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    json!({
        "time_scale": options.get("time_scale"),
        "jobs": options.get("jobs"),
        "jobs_started": c.get(Counter::JobsStarted),
        "jobs_completed": c.get(Counter::JobsCompleted),
        "canary_matched": c.get(Counter::CanaryMatched),
        "canary_differed": c.get(Counter::CanaryDiffered),
        "canary_max_differences": options.get("canary_max_differences"),
        "differences": differences.iter().map(|(k, n)| json!([k, n])).collect::<Vec<_>>(),
        // How late requests left their captured time, over the whole replay (ns).
        "lateness": SUMMARY_QUANTILES
            .iter()
            .map(|&q| json!([q, r.global.stats.get(StatId::SendLateness).clamped_quantile(q)]))
            .collect::<Vec<_>>(),
    })
}

/// The benchmarked target(s), if the options name any.
fn target(options: &Value) -> String {
    let found = TARGET_KEYS.iter().find_map(|k| match options.get(k)? {
        Value::String(t) if !t.is_empty() => Some(t.clone()),
        Value::Array(list) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            (!names.is_empty()).then(|| names.join(", "))
        }
        _ => None,
    });
    found.unwrap_or_default()
}

/// One latency statistic: summary, spectrum and bucketed counts. Values are clamped to the
/// exact `[min, max]`: the histogram reports a bucket's edge, which can lie just outside them.
fn stat(s: &Statistic, bins: &Bins) -> Value {
    let clamp = |v: u64| v.max(s.min()).min(s.max());
    let points = |ps: Vec<shrike_stats::Percentile>| -> Vec<Value> {
        ps.iter().map(|p| json!([p.quantile, clamp(p.value)])).collect()
    };
    json!({
        "count": s.count(),
        "mean": s.mean(),
        "pstdev": s.pstdev(),
        "min": s.min(),
        "max": s.max(),
        "summary": points(SUMMARY_QUANTILES.iter().map(|&q| s.percentile(q)).collect()),
        "spectrum": points(spectrum(s)),
        "bins": bins.counts(s),
    })
}

fn interval(i: &Interval) -> Value {
    let latency: Map<String, Value> = LATENCIES
        .iter()
        .chain(&[("lateness", StatId::SendLateness)])
        .map(|&(key, id)| {
            let summary = i.stats.iter().find(|s| s.id == id).filter(|s| s.count > 0);
            (key.to_string(), summary.map_or(Value::Null, interval_stat))
        })
        .collect();
    json!({
        "start_s": i.start.as_secs_f64(),
        "duration_s": i.duration.as_secs_f64(),
        "responses": i.counters.responses(),
        "errors": sum(&i.counters, &ERROR_COUNTERS),
        "overflow": i.counters.get(Counter::PoolOverflow),
        "latency": latency,
    })
}

fn interval_stat(s: &IntervalStat) -> Value {
    let clamp = |v: u64| v.max(s.min).min(s.max);
    let qs: Vec<Value> =
        INTERVAL_QUANTILES.iter().map(|&q| json!([q, s.at(q).map(clamp)])).collect();
    json!({"count": s.count, "mean": s.mean, "percentiles": qs})
}

/// The options as `[key, text]` rows: nested objects flatten to dotted keys
/// (`request_options.request_method`); lists of plain values join with commas. Options left
/// unset (null, empty lists and objects) are omitted so the table shows what was chosen.
fn flatten_options(options: &Value) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    flatten("", options, &mut rows);
    rows
}

fn flatten(key: &str, v: &Value, rows: &mut Vec<(String, String)>) {
    let join = |k: &str| if key.is_empty() { k.to_string() } else { format!("{key}.{k}") };
    match v {
        Value::Null => {}
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&join(k), v, rows);
            }
        }
        Value::Array(a) if a.is_empty() => {}
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            let items: Vec<String> = a.iter().map(scalar).collect();
            rows.push((key.to_string(), items.join(", ")));
        }
        Value::Array(a) => {
            // Nighthawk's header lists ({"header": {"key": k, "value": v}}) read as `k: v`.
            let headers: Option<Vec<String>> = a.iter().map(header).collect();
            let text = headers.map_or_else(|| v.to_string(), |h| h.join("; "));
            rows.push((key.to_string(), text));
        }
        v => rows.push((key.to_string(), scalar(v))),
    }
}

fn header(v: &Value) -> Option<String> {
    let h = v.get("header")?;
    Some(format!("{}: {}", h.get("key")?.as_str()?, h.get("value")?.as_str()?))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// Log-spaced latency bins shared by every result in the report, so overlaid histograms line
/// up. Bin `i` covers `[10^((first+i)/BINS_PER_DECADE), 10^((first+i+1)/BINS_PER_DECADE))` ns.
struct Bins {
    first: i64,
    count: usize,
}

impl Bins {
    fn covering(inputs: &[Input<'_>]) -> Bins {
        let stats = inputs.iter().flat_map(|i| {
            LATENCIES.iter().map(|&(_, id)| i.result.global.stats.get(id)).filter(|s| s.count() > 0)
        });
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for s in stats {
            lo = lo.min(s.min().max(1));
            hi = hi.max(s.max().max(1));
        }
        if hi == 0 {
            return Bins { first: 0, count: 0 };
        }
        let first = Self::index(lo);
        Bins { first, count: (Self::index(hi) - first + 1) as usize }
    }

    /// The absolute bin of a value (bins are indexed from 1 ns = 10^0).
    fn index(v: u64) -> i64 {
        ((v.max(1) as f64).log10() * BINS_PER_DECADE).floor() as i64
    }

    /// Sample counts per bin. Each histogram bucket (3 significant digits, far finer than a
    /// bin) goes to the bin holding its midpoint.
    fn counts(&self, s: &Statistic) -> Vec<u64> {
        let mut out = vec![0u64; self.count];
        if self.count == 0 || s.count() == 0 {
            return out;
        }
        if !s.has_histogram() {
            // Only printed points (Nighthawk's JSON): each span between consecutive points goes
            // to the bin of its midpoint, as a histogram bucket does; spans are rarely wider
            // than a bin except in the sparse tail.
            let (mut below, mut start) = (0u64, s.min());
            for p in s.spectrum() {
                if p.count > below {
                    let end = p.value.max(s.min()).min(s.max());
                    let mid = start + (end.saturating_sub(start)) / 2;
                    let i = (Self::index(mid) - self.first).clamp(0, self.count as i64 - 1);
                    out[i as usize] += p.count - below;
                    (below, start) = (p.count, end);
                }
            }
            return out;
        }
        let h = s.histogram();
        for v in h.iter_recorded() {
            let mid = h.median_equivalent(v.value_iterated_to());
            let i = (Self::index(mid) - self.first).clamp(0, self.count as i64 - 1) as usize;
            out[i] += v.count_at_value();
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use shrike_stats::{RunResult, Termination, WorkerResult};
    use std::time::{Duration, SystemTime};

    fn result(rps: f64, latencies: &[u64]) -> RunResult {
        let mut w = WorkerResult::new("worker_0", SystemTime::UNIX_EPOCH);
        w.execution_duration = Duration::from_secs(2);
        for &v in latencies {
            w.stats.record(StatId::ScheduledToResponse, v + 1000);
            w.stats.record(StatId::RequestToResponse, v);
        }
        w.counters.add(Counter::Http2xx, latencies.len() as u64 - 1);
        w.counters.add(Counter::Http5xx, 1);
        w.counters.add(Counter::StreamResets, 2);
        w.counters.add(Counter::PoolOverflow, 7);
        w.status_codes.add(200, latencies.len() as u64 - 1);
        w.status_codes.add(503, 1);
        let opts = json!({"uri": "http://127.0.0.1:1/", "requests_per_second": rps,
                          "workers": 2, "protocol": "http1", "labels": [],
                          "tls": {"ca": null, "insecure": false},
                          "request_options": {"request_headers": [
                              {"header": {"key": "a", "value": "1"}},
                              {"header": {"key": "b", "value": "{\"x\": 2}"}}]},
                          "odd": [{"k": 1}]});
        RunResult::new(opts, vec![w], Termination::Completed)
    }

    #[test]
    fn summary_numbers_are_exact() {
        let lat: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let r = result(50.0, &lat);
        let d = report_data("t", &[Input { label: "base", result: &r }]);
        let f = &d["files"][0];
        assert_eq!(f["label"], "base");
        assert_eq!(f["target"], "http://127.0.0.1:1/");
        assert_eq!(f["requested_rps"], 100.0);
        assert_eq!(f["responses"], 1000);
        assert_eq!(f["achieved_rps"], 500.0);
        // 1 5xx + 2 resets; overflow is separate.
        assert_eq!(f["errors"], 3);
        assert_eq!(f["overflow"], 7);
        assert_eq!(f["status_codes"], json!([[200, 999], [503, 1]]));
        let svc = &f["latency"]["service"];
        assert_eq!(svc["count"], 1000);
        let summary = svc["summary"].as_array().unwrap();
        assert_eq!(summary[0][0], 0.5);
        let p50 = summary[0][1].as_u64().unwrap();
        assert!((499_000..=501_000).contains(&p50), "{p50}");
        // The maximum is the exact maximum, not the bucket edge.
        assert_eq!(summary[4][1], 1_000_000);
        let sp = svc["spectrum"].as_array().unwrap();
        assert!(sp.len() > 20);
        assert_eq!(sp.last().unwrap()[1], 1_000_000);
        let bins: u64 = svc["bins"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum();
        assert_eq!(bins, 1000);
    }

    /// A statistic read without a histogram (Nighthawk's JSON) still fills the density plot:
    /// every sample lands in a bin, each span near its midpoint.
    #[test]
    fn summary_statistics_fill_the_bins() {
        let mut r = result(10.0, &[1_000]);
        let points = [(0.0, 1, 1_000), (0.5, 5, 5_000), (0.9, 9, 9_000), (1.0, 10, 1_000_000)];
        let points = points
            .iter()
            .map(|&(quantile, count, value)| shrike_stats::Percentile { quantile, count, value })
            .collect();
        let stat = Statistic::from_summary(10, 104_500.0, 1.0, 1_000, 1_000_000, points);
        r.global.stats.set(StatId::RequestToResponse, stat);
        let d = report_data("t", &[Input { label: "nh", result: &r }]);
        let bins: Vec<u64> = d["files"][0]["latency"]["service"]["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .collect();
        assert_eq!(bins.iter().sum::<u64>(), 10);
        // The last span (9us .. 1ms, one sample) sits at its midpoint, ~505us, not at 1ms.
        let last = bins.iter().rposition(|&b| b > 0).unwrap();
        assert_eq!(bins[last], 1);
        // Bins start at the smallest min plotted, 1us (request_to_response's).
        let mid_bin = (Bins::index(504_500) - Bins::index(1_000)) as usize;
        assert_eq!(last, mid_bin, "{bins:?}");
    }

    #[test]
    fn bins_are_shared_and_log_spaced() {
        let a = result(10.0, &[1_000, 10_000, 100_000]);
        let b = result(10.0, &[5_000_000, 5_000_000]);
        let d =
            report_data("t", &[Input { label: "a", result: &a }, Input { label: "b", result: &b }]);
        // 1µs .. 5ms (scheduled adds 1µs): log10 from 3 to 6.7, 10 bins per decade.
        assert_eq!(d["histogram"]["first"], 30);
        let n = d["histogram"]["count"].as_u64().unwrap() as usize;
        assert_eq!(n, 66 - 30 + 1);
        let svc_a: Vec<u64> = d["files"][0]["latency"]["service"]["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(svc_a.len(), n);
        assert_eq!((svc_a[0], svc_a[10], svc_a[20]), (1, 1, 1));
        let svc_b = &d["files"][1]["latency"]["service"]["bins"];
        assert_eq!(svc_b[n - 1], 2);
    }

    #[test]
    fn options_flatten_to_rows_without_unset_values() {
        let r = result(1.0, &[1]);
        let rows = flatten_options(&r.options);
        let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"tls.insecure"));
        let find = |k: &str| rows.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(find("request_options.request_headers"), Some("a: 1; b: {\"x\": 2}"));
        assert_eq!(find("odd"), Some("[{\"k\":1}]"), "other lists of objects stay JSON");
        assert_eq!(find("requests_per_second"), Some("1.0"));
        assert!(!keys.contains(&"tls.ca"), "null options are omitted");
        assert!(!keys.contains(&"labels"), "empty lists are omitted");
    }

    #[test]
    fn intervals_carry_counts_and_their_summaries() {
        let mut counters = Counters::new();
        counters.add(Counter::Http2xx, 9);
        counters.add(Counter::Http4xx, 1);
        counters.add(Counter::PoolConnectionFailure, 2);
        counters.add(Counter::PoolOverflow, 4);
        let mut s = Statistic::new();
        for v in 1..=100u64 {
            s.record(v * 10_000);
        }
        let i = Interval {
            start: Duration::from_millis(1500),
            duration: Duration::from_millis(500),
            counters,
            stats: vec![
                IntervalStat::summarize(StatId::RequestToResponse, &s),
                IntervalStat::summarize(StatId::ScheduledToResponse, &Statistic::new()),
            ],
        };
        let v = interval(&i);
        assert_eq!((v["start_s"].as_f64(), v["duration_s"].as_f64()), (Some(1.5), Some(0.5)));
        assert_eq!((v["responses"].as_u64(), v["errors"].as_u64()), (Some(10), Some(3)));
        assert_eq!(v["overflow"], 4);
        // No samples reads as "no point", not as a latency of zero.
        assert_eq!(v["latency"]["scheduled"], Value::Null);
        let ps = &v["latency"]["service"]["percentiles"];
        assert_eq!(ps[0][0], 0.5);
        assert_eq!(ps[0][1], s.value_at_quantile(0.5));
        assert_eq!(ps[3], json!([1.0, 1_000_000]), "the maximum is exact");
    }

    #[test]
    fn unpaced_or_unknown_rate_has_no_requested_rate() {
        let mut r = result(0.0, &[1]);
        assert_eq!(crate::options::requested_rate(&r), None);
        r.options = json!({"requests_per_second": "25"});
        assert_eq!(crate::options::requested_rate(&r), Some(25.0));
    }
}
