//! Writing JSON and reading it back loses nothing that matters: moments, histograms, counters,
//! windows, termination; and every printed percentile is reproducible from the stored histogram.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use shrike_output::from_json;
use shrike_stats::duration::format_proto_ns;
use shrike_stats::{RunResult, StatId, StatKind, Statistic, Termination, WorkerResult};

fn assert_close(a: f64, b: f64, what: &str) {
    let tol = 1e-9 * a.abs().max(b.abs()).max(1.0);
    assert!((a - b).abs() <= tol, "{what}: {a} != {b}");
}

fn assert_worker_eq(orig: &WorkerResult, back: &WorkerResult) {
    assert_eq!(orig.name, back.name);
    assert_eq!(orig.execution_start, back.execution_start, "{}", orig.name);
    assert_eq!(orig.execution_duration, back.execution_duration, "{}", orig.name);
    assert_eq!(orig.sending_duration, back.sending_duration, "{}", orig.name);
    assert_eq!(orig.counters, back.counters, "{}", orig.name);
    assert_eq!(orig.status_codes, back.status_codes, "{}", orig.name);
    for &id in StatId::ALL {
        let (o, b) = (orig.stats.get(id), back.stats.get(id));
        let what = format!("{} {}", orig.name, id.id());
        assert_eq!(o.count(), b.count(), "{what} count");
        assert_eq!(o.min(), b.min(), "{what} min");
        assert_eq!(o.max(), b.max(), "{what} max");
        assert_eq!(o.histogram(), b.histogram(), "{what} histogram");
        match id.kind() {
            // Proto3 durations hold whole nanoseconds, so duration moments round-trip rounded.
            StatKind::Duration => {
                assert_eq!(o.mean().round(), b.mean(), "{what} mean");
                assert_close(o.pstdev().round(), b.pstdev(), &format!("{what} pstdev"));
            }
            StatKind::Size => {
                assert_close(o.mean(), b.mean(), &format!("{what} mean"));
                assert_close(o.pstdev(), b.pstdev(), &format!("{what} pstdev"));
            }
        }
    }
}

#[test]
fn everything_round_trips() {
    let orig = crate::common::sample();
    let back = from_json(&crate::common::json_text(&orig)).unwrap();
    assert_eq!(back.timestamp, orig.timestamp);
    assert_eq!(back.options, orig.options);
    assert_eq!(back.termination, orig.termination);
    assert_eq!(back.workers.len(), 2);
    for (o, b) in orig.workers.iter().zip(&back.workers) {
        assert_worker_eq(o, b);
    }
    assert_worker_eq(&orig.global, &back.global);
    assert_eq!(orig.intervals.len(), 4);
    assert_eq!(back.intervals, orig.intervals, "the time series round-trips exactly");
    // Sanity: the fixture really exercises both kinds and a multi-second outlier.
    assert!(orig.global.stats.get(StatId::ResponseBodySize).count() == 1000);
    assert_eq!(orig.global.stats.get(StatId::RequestToResponse).max(), 5_000_000_000);
}

#[test]
fn read_back_is_stable() {
    // Writing what was read produces the same document (modulo the writer's environment,
    // which is the same machine here).
    let text = crate::common::json_text(&crate::common::sample());
    let again = crate::common::json_text(&from_json(&text).unwrap());
    assert_eq!(text, again);
}

#[test]
fn global_histogram_is_the_exact_merge_of_the_workers() {
    let back = from_json(&crate::common::json_text(&crate::common::sample())).unwrap();
    for &id in StatId::ALL {
        let mut merged = Statistic::new();
        for w in &back.workers {
            merged.merge(w.stats.get(id));
        }
        let g = back.global.stats.get(id);
        assert_eq!(merged.histogram(), g.histogram(), "{}", id.id());
        assert_eq!(merged.count(), g.count(), "{}", id.id());
    }
    assert_eq!(back.global.counters.get(shrike_stats::Counter::Http2xx), 1000);
}

#[test]
fn printed_percentiles_are_reproducible_from_the_histogram() {
    let doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    let mut checked = 0;
    for result in doc["results"].as_array().unwrap() {
        for stat in result["statistics"].as_array().unwrap() {
            let id = StatId::from_id(stat["id"].as_str().unwrap()).unwrap();
            let hist =
                Statistic::decode_histogram(stat["shrike_histogram"].as_str().unwrap()).unwrap();
            let count: u64 = stat["count"].as_str().unwrap().parse().unwrap();
            let percentiles = stat["percentiles"].as_array().unwrap();
            assert_eq!(percentiles.is_empty(), count == 0, "{}", id.id());
            for p in percentiles {
                let q = p["percentile"].as_f64().unwrap();
                let v = hist.value_at_quantile(q);
                let want_count = hist.count_between(0, v).to_string();
                assert_eq!(p["count"].as_str(), Some(want_count.as_str()), "{} q={q}", id.id());
                match id.kind() {
                    StatKind::Duration => {
                        assert_eq!(p["duration"].as_str(), Some(format_proto_ns(v).as_str()));
                    }
                    StatKind::Size => {
                        assert_eq!(p["raw_value"].as_u64(), Some(v));
                    }
                }
                checked += 1;
            }
            if let Some(last) = percentiles.last() {
                assert_eq!(last["percentile"].as_f64(), Some(1.0));
                assert_eq!(last["count"].as_str(), Some(count.to_string().as_str()));
            }
        }
    }
    // 3 results x 6 non-empty statistics, each with a few dozen spectrum points.
    assert!(checked > 3 * 6 * 10, "only {checked} percentiles checked");
}

#[test]
fn every_termination_kind_round_trips() {
    for t in [
        Termination::Completed,
        Termination::Interrupted,
        Termination::TerminationPredicate("benchmark.http_2xx:100".into()),
        Termination::FailurePredicate("benchmark.http_5xx:0".into()),
    ] {
        let mut r: RunResult = crate::common::tiny();
        r.termination = t.clone();
        assert_eq!(from_json(&crate::common::json_text(&r)).unwrap().termination, t);
    }
}

#[test]
fn empty_run_round_trips() {
    let r = RunResult::new(serde_json::json!({}), Vec::new(), Termination::Interrupted);
    let back = from_json(&crate::common::json_text(&r)).unwrap();
    assert!(back.workers.is_empty());
    assert_worker_eq(&r.global, &back.global);
}

#[test]
fn to_json_value_matches_written_text() {
    let r = crate::common::sample();
    let parsed: Value = serde_json::from_str(&crate::common::json_text(&r)).unwrap();
    assert_eq!(shrike_output::to_json_value(&r), parsed);
}

#[test]
fn files_without_a_time_series_still_read() {
    let mut doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    doc["shrike"].as_object_mut().unwrap().remove("intervals");
    let back = from_json(&doc.to_string()).unwrap();
    assert!(back.intervals.is_empty());
}

#[test]
fn a_bad_interval_names_its_field() {
    let mut doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    doc["shrike"]["intervals"][2]["statistics"][1]["count"] = Value::String("7".into());
    let err = from_json(&doc.to_string()).unwrap_err();
    assert_eq!(err.path(), Some("shrike.intervals[2].statistics[1].shrike_histogram"), "{err}");
}
