//! Prometheus output read by the official Python client's parser.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::Value;
use shrike_output::OutputFormat;
use shrike_stats::StatId;

/// Families as [{name, type, help, samples: [{name, labels, value}]}].
fn families(text: &str) -> Vec<Value> {
    let out = crate::common::python(
        "import sys, json\n\
         from prometheus_client.parser import text_string_to_metric_families\n\
         fams = []\n\
         for f in text_string_to_metric_families(sys.stdin.read()):\n\
         \x20   fams.append({'name': f.name, 'type': f.type, 'help': f.documentation,\n\
         \x20       'samples': [{'name': s.name, 'labels': s.labels, 'value': s.value} for s in f.samples]})\n\
         print(json.dumps(fams))",
        text,
    );
    serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().clone()
}

fn sample(fams: &[Value], name: &str, labels: &[(&str, &str)]) -> f64 {
    let hits: Vec<f64> = fams
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap())
        .filter(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][k] == *v))
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(hits.len(), 1, "{name} {labels:?}: {hits:?}");
    hits[0]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
}

#[test]
fn official_parser_reads_summaries_counters_and_labels() {
    let r = crate::common::sample();
    let fams = families(&crate::common::text(OutputFormat::Prometheus, &r));
    let fam = |n: &str| fams.iter().find(|f| f["name"] == n).unwrap_or_else(|| panic!("{n}"));

    let name = "shrike_benchmark_http_client_request_to_response_seconds";
    assert_eq!(fam(name)["type"], "summary");
    let g = r.global.stats.get(StatId::RequestToResponse);
    for q in ["0.5", "0.9", "0.99", "0.999"] {
        // The histogram's bucket edge, kept within the exact extremes (p99.9 is the 5 s
        // outlier's bucket, whose edge lies above 5 s).
        let v = g.value_at_quantile(q.parse().unwrap()).max(g.min()).min(g.max());
        let want = v as f64 / 1e9;
        let got = sample(&fams, name, &[("worker", "global"), ("quantile", q)]);
        assert!(close(got, want), "q={q}: {got} vs {want}");
    }
    // Quantiles 0 and 1 are the exact extremes (the 5 s outlier).
    assert_eq!(sample(&fams, name, &[("worker", "global"), ("quantile", "1")]), 5.0);
    assert!(close(
        sample(&fams, name, &[("worker", "global"), ("quantile", "0")]),
        g.min() as f64 / 1e9
    ));
    assert_eq!(sample(&fams, &format!("{name}_count"), &[("worker", "global")]), 1000.0);
    assert_eq!(sample(&fams, &format!("{name}_count"), &[("worker", "worker_1")]), 400.0);
    let sum = sample(&fams, &format!("{name}_sum"), &[("worker", "global")]);
    assert!(close(sum, g.mean() * 1000.0 / 1e9), "{sum}");

    // Sizes in bytes.
    let body = "shrike_benchmark_http_client_response_header_size_bytes";
    assert_eq!(sample(&fams, body, &[("worker", "worker_0"), ("quantile", "0.5")]), 150.0);

    // Counters: the parser strips `_total` from the family name.
    assert_eq!(fam("shrike_benchmark_http_2xx")["type"], "counter");
    assert_eq!(sample(&fams, "shrike_benchmark_http_2xx_total", &[("worker", "global")]), 1000.0);
    assert_eq!(sample(&fams, "shrike_upstream_cx_total", &[("worker", "worker_1")]), 3.0);
    assert_eq!(
        sample(&fams, "shrike_upstream_cx_rx_bytes_total", &[("worker", "global")]),
        987_654.0
    );
    assert_eq!(sample(&fams, "shrike_benchmark_pool_overflow_total", &[("worker", "global")]), 0.0);
    assert_eq!(
        sample(&fams, "shrike_http_responses_total", &[("worker", "worker_0"), ("code", "204")]),
        2.0
    );
    assert_eq!(sample(&fams, "shrike_execution_duration_seconds", &[("worker", "global")]), 2.0);

    // --label values: key=value becomes a label, the rest one `label` label; on every sample.
    for f in &fams {
        for s in f["samples"].as_array().unwrap() {
            assert_eq!(s["labels"]["env"], "ci", "{s}");
            assert_eq!(s["labels"]["label"], "nightly", "{s}");
        }
        assert!(!f["help"].as_str().unwrap().is_empty());
    }
    // One family per statistic, counter and the extra families; no family twice.
    let mut names: Vec<&str> = fams.iter().map(|f| f["name"].as_str().unwrap()).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n);
    assert_eq!(n, StatId::COUNT + shrike_stats::Counter::COUNT + 3);
}
