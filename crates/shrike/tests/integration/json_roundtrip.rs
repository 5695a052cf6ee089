//! A JSON result read back reproduces its printed percentiles, and `global` is the exact merge
//! of the workers.

use std::time::Duration;

use crate::support::*;
use shrike_stats::{StatId, Statistic, WorkerResult};

#[test]
fn json_histograms_reproduce_percentiles_and_merge_exactly() {
    let server = Server::start(&[]);
    let out = run(
        &[
            "run",
            &server.url("/"),
            "--rps",
            "300",
            "--duration",
            "1",
            "--concurrency",
            "2",
            "--connections",
            "4",
            "--output-format",
            "json",
            "--label",
            "roundtrip",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let v = json(&out);
    assert_eq!(v["options"]["labels"][0], "roundtrip");
    assert_eq!(v["options"]["requests_per_second"], 300.0);

    // Every printed percentile is reproduced by the stored histogram.
    let mut checked = 0;
    for result in v["results"].as_array().expect("results") {
        for stat in result["statistics"].as_array().expect("statistics") {
            let enc = stat["shrike_histogram"].as_str().expect("histogram");
            let h = Statistic::decode_histogram(enc).expect("decodes");
            assert_eq!(h.len().to_string(), stat["count"].as_str().expect("count"));
            for p in stat["percentiles"].as_array().expect("percentiles") {
                let q = p["percentile"].as_f64().expect("q");
                let value = h.value_at_quantile(q);
                let printed = match (p.get("duration"), p.get("raw_value")) {
                    (Some(d), _) => (secs(d) * 1e9).round() as u64,
                    // A number, as Nighthawk writes it (older Shrike results wrote a string).
                    (_, Some(r)) => r.as_u64().expect("raw_value is a whole number"),
                    _ => panic!("percentile without a value: {p}"),
                };
                assert_eq!(value, printed, "{} q={q}", stat["id"]);
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} percentiles checked");

    // Reading back through the library gives the same numbers, and the global is the exact
    // merge of the two workers.
    let parsed = shrike_output::from_json(&out.stdout).expect("from_json");
    assert_eq!(parsed.workers.len(), 2);
    let merged = WorkerResult::merge_all("global", &parsed.workers);
    for &id in StatId::ALL {
        let (a, b) = (merged.stats.get(id), parsed.global.stats.get(id));
        assert_eq!(a.histogram(), b.histogram(), "{}", id.id());
        assert_eq!(a.count(), b.count());
        assert_eq!((a.min(), a.max()), (b.min(), b.max()), "{}", id.id());
    }
    assert_eq!(merged.counters, parsed.global.counters);
    let req = parsed.global.stats.get(StatId::RequestToResponse).count();
    assert_eq!(req, 600);
}
