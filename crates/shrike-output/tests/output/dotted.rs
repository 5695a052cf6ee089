//! Dotted output: Nighthawk's key layout, every result, statistic and counter.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use shrike_output::OutputFormat;
use shrike_stats::StatId;

fn parse(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        // Statistics are `key: value`, counters `key:value`, as Nighthawk writes them.
        let (k, v) = line.rsplit_once(':').unwrap_or_else(|| panic!("no colon: {line}"));
        assert!(m.insert(k.to_string(), v.trim().to_string()).is_none(), "duplicate {k}");
    }
    m
}

#[test]
fn keys_and_values_follow_nighthawk() {
    let r = crate::common::sample();
    let text = crate::common::text(OutputFormat::Dotted, &r);
    let m = parse(&text);
    let g = r.global.stats.get(StatId::RequestToResponse);
    let p = "global.benchmark_http_client.request_to_response";
    assert_eq!(m[&format!("{p}.samples")], "1000");
    assert_eq!(m[&format!("{p}.mean")], ((g.mean().round() as u64) / 1000).to_string());
    assert_eq!(m[&format!("{p}.min")], (g.min() / 1000).to_string());
    assert_eq!(m[&format!("{p}.max")], "5000000");
    for (permille, q) in [(0, 0.0), (500, 0.5), (750, 0.75), (800, 0.8), (900, 0.9), (950, 0.95)]
        .into_iter()
        .chain([(990, 0.99), (999, 0.999), (1000, 1.0)])
    {
        let pc = g.percentile(q);
        let key = format!("{p}.permilles-{permille}");
        assert_eq!(m[&format!("{key}.count")], pc.count.to_string(), "{key}");
        assert_eq!(m[&format!("{key}.microseconds")], (pc.value / 1000).to_string(), "{key}");
    }
    // Sizes: raw values under `.value`.
    let body = r.global.stats.get(StatId::ResponseBodySize);
    let b = "global.benchmark_http_client.response_body_size";
    assert_eq!(m[&format!("{b}.permilles-500.value")], body.percentile(0.5).value.to_string());
    assert_eq!(m[&format!("{b}.mean")], body.mean().to_string());
    // Counters without a space, per result.
    assert!(text.contains("\nglobal.benchmark.http_2xx:1000\n"), "{text}");
    assert!(text.contains("\nworker_0.upstream_cx_total:4\n"));
    assert_eq!(m["worker_1.benchmark_http_client.request_to_response.samples"], "400");
    // Every statistic of every result has its five summary keys; empty ones no permilles.
    let samples = m.keys().filter(|k| k.ends_with(".samples")).count();
    assert_eq!(samples, 3 * StatId::COUNT);
    assert_eq!(m["global.sequencer.blocking.samples"], "0");
    assert!(!m.keys().any(|k| k.starts_with("global.sequencer.blocking.permilles")));
    // Lines for exactly: per statistic 5 + 18 permille lines when non-empty, plus counters.
    let non_empty: usize = [&r.workers[0], &r.workers[1], &r.global]
        .iter()
        .map(|w| w.stats.iter().filter(|(_, s)| s.count() > 0).count())
        .sum();
    let counters: usize =
        [&r.workers[0], &r.workers[1], &r.global].iter().map(|w| w.counters.non_zero().len()).sum();
    assert_eq!(text.lines().count(), 3 * StatId::COUNT * 5 + non_empty * 18 + counters);
}
