//! `from_json` rejects bad documents with an error naming the field, and never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use shrike_output::{from_json, ReadError};
use shrike_stats::StatId;

fn doc() -> Value {
    serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap()
}

/// Applies `edit` to a valid document and returns the error message reading it gives.
fn error_after(edit: impl FnOnce(&mut Value)) -> (String, Option<String>) {
    let mut d = doc();
    edit(&mut d);
    let err = from_json(&d.to_string()).expect_err("edited document should be rejected");
    (err.to_string(), err.path().map(str::to_string))
}

fn set(d: &mut Value, pointer: &str, v: Value) {
    *d.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer}")) = v;
}

#[test]
fn syntax_errors_say_where() {
    let err = from_json("{\"timestamp\": ").unwrap_err();
    assert!(matches!(err, ReadError::Syntax(_)));
    assert!(err.to_string().starts_with("not valid JSON: "), "{err}");
    assert!(err.to_string().contains("line 1"), "{err}");
    assert_eq!(err.path(), None);
    assert!(from_json("").is_err());
    assert_eq!(
        from_json("[]").unwrap_err().to_string(),
        "(document): expected an object, found an array"
    );
}

/// Without Shrike's parts (as Nighthawk writes it) a document still reads: termination
/// unknown reads as completed, a missing start falls back to the global one, and a statistic
/// without its histogram keeps its summary but can no longer be merged exactly.
#[test]
fn nighthawk_shaped_output_reads() {
    let mut d = doc();
    set(&mut d, "/shrike/termination", json!({"kind": "interrupted", "detail": ""}));
    d.as_object_mut().unwrap().remove("shrike");
    d.pointer_mut("/results/1").unwrap().as_object_mut().unwrap().remove("execution_start");
    let stat = d.pointer_mut("/results/2/statistics/1").unwrap().as_object_mut().unwrap();
    assert_eq!(stat["id"], StatId::RequestToResponse.id());
    stat.remove("shrike_histogram");
    let r = from_json(&d.to_string()).unwrap();
    assert_eq!(r.termination, shrike_stats::Termination::Completed);
    assert_eq!(r.workers[1].execution_start, r.global.execution_start);
    let full = from_json(&crate::common::json_text(&crate::common::sample())).unwrap();
    let (exact, summary) = (
        full.global.stats.get(StatId::RequestToResponse),
        r.global.stats.get(StatId::RequestToResponse),
    );
    assert!(exact.has_histogram() && !summary.has_histogram());
    assert_eq!(summary.count(), exact.count());
    assert_eq!(summary.max(), exact.max());
    // The printed spectrum was computed from the histogram, so its points agree with it.
    for q in [0.0, 0.5, 0.9, 0.990625, 1.0] {
        assert_eq!(summary.percentile(q), exact.percentile(q), "q={q}");
    }
    // Between printed points (0.99 is not one) the next point up answers: never below.
    assert_eq!(summary.value_at_quantile(0.99), exact.value_at_quantile(0.990625));
    assert!(summary.value_at_quantile(0.99) >= exact.value_at_quantile(0.99));
    assert_eq!(r.global.without_histogram().as_deref(), Some(StatId::RequestToResponse.id()));
    assert_eq!(full.global.without_histogram(), None);
}

#[test]
fn bad_histogram_names_its_path() {
    let (msg, path) =
        error_after(|d| set(d, "/results/2/statistics/5/shrike_histogram", json!("not base64!")));
    assert!(
        msg.starts_with("results[2].statistics[5].shrike_histogram: histogram is not valid base64"),
        "{msg}"
    );
    assert_eq!(path.as_deref(), Some("results[2].statistics[5].shrike_histogram"));

    let (msg, _) = error_after(|d| {
        set(d, "/results/0/statistics/1/shrike_histogram", json!("aGVsbG8gd29ybGQ="))
    });
    assert!(
        msg.starts_with("results[0].statistics[1].shrike_histogram: histogram payload is not"),
        "{msg}"
    );
}

#[test]
fn histogram_must_agree_with_count() {
    let (msg, _) = error_after(|d| set(d, "/results/0/statistics/1/count", json!("601")));
    assert_eq!(
        msg,
        "results[0].statistics[1].shrike_histogram: holds 600 samples but count is 601"
    );
}

/// Names this build does not know are kept, not rejected: dropping them would lose
/// measurements, and other tools (Nighthawk, Envoy) write many.
#[test]
fn unknown_names_are_kept() {
    let mut d = doc();
    let id = d.pointer("/results/1/statistics/3/id").unwrap().clone();
    set(&mut d, "/results/1/statistics/3/id", json!("benchmark.bogus"));
    set(&mut d, "/results/2/counters/0/name", json!("benchmark.http_9xx"));
    let want = d.pointer("/results/2/counters/0/value").unwrap().as_str().unwrap().to_string();
    let r = from_json(&d.to_string()).unwrap();
    let known = StatId::from_id(id.as_str().unwrap()).unwrap();
    let f = &r.workers[1].foreign;
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].id.as_str(), f[0].kind), ("benchmark.bogus", known.kind()));
    assert_eq!(
        f[0].stat.count(),
        from_json(&crate::common::json_text(&crate::common::sample())).unwrap().workers[1]
            .stats
            .get(known)
            .count()
    );
    // It was stored with its histogram, so it stays exact.
    assert!(f[0].stat.has_histogram());
    assert_eq!(r.global.counters.get_named("benchmark.http_9xx").to_string(), want);
}

#[test]
fn duplicates_are_errors() {
    let (msg, _) = error_after(|d| {
        let rtr = StatId::RequestToResponse.id();
        set(d, "/results/0/statistics/0/id", json!(rtr));
        // Make the copy otherwise consistent so the duplicate itself is what is reported.
        let second = d.pointer("/results/0/statistics/1").unwrap().clone();
        set(d, "/results/0/statistics/0", second);
    });
    assert_eq!(
        msg,
        "results[0].statistics[1].id: statistic \"benchmark_http_client.request_to_response\" appears twice"
    );
    let (msg, _) = error_after(|d| {
        let first = d.pointer("/results/0/counters/0").unwrap().clone();
        d.pointer_mut("/results/0/counters").unwrap().as_array_mut().unwrap().push(first);
    });
    assert_eq!(msg, "results[0].counters[4].name: counter \"benchmark.http_2xx\" appears twice");
    let (msg, _) = error_after(|d| set(d, "/results/0/name", json!("global")));
    assert_eq!(msg, "results[2].name: a second result is named \"global\"");
}

#[test]
fn global_is_required() {
    let (msg, path) = error_after(|d| set(d, "/results/2/name", json!("worker_2")));
    assert_eq!(msg, "results: no result is named \"global\"");
    assert_eq!(path.as_deref(), Some("results"));
}

#[test]
fn mistyped_fields_name_path_and_types() {
    let cases: Vec<(&str, Value, &str)> =
        vec![
        ("/results", json!({}), "results: expected an array, found an object"),
        ("/results/1", json!("worker"), "results[1]: expected an object, found a string"),
        ("/results/0/counters/1/value", json!(true),
            "results[0].counters[1].value: expected an unsigned integer string, found a boolean"),
        ("/results/0/counters/1/value", json!(-5),
            "results[0].counters[1].value: -5 is not an unsigned integer"),
        ("/results/0/counters/1/value", json!("12a"),
            "results[0].counters[1].value: \"12a\" is not an unsigned integer"),
        ("/results/0/counters/1/value", json!("99999999999999999999"),
            "results[0].counters[1].value: \"99999999999999999999\" does not fit in a uint64"),
        ("/results/0/statistics/9/raw_mean", json!("655.1"),
            "results[0].statistics[9].raw_mean: expected a number, found a string"),
        ("/results/0/statistics/9/raw_pstdev", json!(-1.0),
            "results[0].statistics[9].raw_pstdev: must be a finite, non-negative number"),
        ("/results/0/statistics/1/mean", json!(0.0001),
            "results[0].statistics[1].mean: expected a string, found a number"),
        ("/options", json!([]), "options: expected an object, found an array"),
        ("/shrike/schema_version", json!(2),
            "shrike.schema_version: unsupported schema version 2 (this build reads version 1)"),
        ("/shrike/termination/kind", json!("exploded"),
            "shrike.termination.kind: unknown termination kind \"exploded\" (expected one of \
             completed, termination_predicate, failure_predicate, interrupted)"),
    ];
    for (pointer, value, want) in cases {
        let (msg, _) = error_after(|d| set(d, pointer, value.clone()));
        assert_eq!(msg, want, "{pointer} = {value}");
    }
}

#[test]
fn bad_durations_and_timestamps_are_explained() {
    let (msg, _) = error_after(|d| set(d, "/results/0/execution_duration", json!("5")));
    assert!(msg.starts_with("results[0].execution_duration: invalid duration \"5\""), "{msg}");
    let (msg, _) = error_after(|d| set(d, "/results/1/statistics/1/max", json!("-1s")));
    assert!(msg.starts_with("results[1].statistics[1].max: "), "{msg}");
    let (msg, _) = error_after(|d| set(d, "/timestamp", json!("yesterday")));
    assert!(msg.starts_with("timestamp: invalid RFC 3339 timestamp \"yesterday\""), "{msg}");
    let (msg, _) =
        error_after(|d| set(d, "/results/2/execution_start", json!("2026-02-30T00:00:00Z")));
    assert!(msg.contains("day is out of range"), "{msg}");
}

#[test]
fn inconsistent_moments_are_rejected() {
    let (msg, _) = error_after(|d| set(d, "/results/0/statistics/1/min", json!("9s")));
    assert_eq!(msg, "results[0].statistics[1]: min 9000000000 is greater than max 5000000000");
}

#[test]
fn missing_fields_are_named() {
    for (parent, key, want) in [
        ("", "timestamp", "timestamp: missing"),
        ("", "options", "options: missing"),
        ("", "results", "results: missing"),
        ("/shrike", "termination", "shrike.termination: missing"),
        ("/shrike/termination", "kind", "shrike.termination.kind: missing"),
        ("/results/1/statistics/10", "raw_max", "results[1].statistics[10].raw_max: missing"),
        ("/results/2/counters/3", "value", "results[2].counters[3].value: missing"),
    ] {
        let (msg, _) = error_after(|d| {
            d.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key).unwrap();
        });
        assert_eq!(msg, want);
    }
    let (msg, _) = error_after(|d| {
        set(d, "/shrike/termination", json!({"kind": "failure_predicate", "detail": ""}))
    });
    assert_eq!(msg, "shrike.termination.detail: a predicate termination must name the predicate");
}

#[test]
fn tolerated_variations_still_read() {
    let mut d = doc();
    // Plain integers for uint64 (proto3 parsers accept both), unknown extra fields, and a
    // statistic missing entirely (written by a build with fewer statistics).
    set(&mut d, "/results/0/counters/0/value", json!(600));
    d.as_object_mut().unwrap().insert("future_field".into(), json!({"x": 1}));
    d.pointer_mut("/results/1/statistics").unwrap().as_array_mut().unwrap().remove(14);
    let r = from_json(&d.to_string()).unwrap();
    assert_eq!(r.workers[0].counters.get(shrike_stats::Counter::Http2xx), 600);
}

#[test]
fn truncated_input_never_panics() {
    let text = crate::common::json_text(&crate::common::tiny());
    let step = (text.len() / 400).max(1);
    for end in (0..text.len()).step_by(step) {
        if text.is_char_boundary(end) {
            assert!(from_json(&text[..end]).is_err(), "truncated at {end} was accepted");
        }
    }
}

#[test]
fn garbage_bytes_never_panic() {
    let text = crate::common::json_text(&crate::common::tiny());
    let bytes = text.as_bytes();
    let step = (bytes.len() / 300).max(1);
    for i in (0..bytes.len()).step_by(step) {
        for b in [b'0', b'9', b'"', b'{', b'-', b'A', b'/', b' '] {
            let mut mutated = bytes.to_vec();
            mutated[i] = b;
            // Any outcome but a panic is fine: some edits land in ignored fields.
            let _ = from_json(&String::from_utf8_lossy(&mutated));
        }
    }
    for junk in ["null", "0", "\"x\"", "{}", "{\"shrike\": []}", "{\"shrike\": {}}", "\u{0}"] {
        assert!(from_json(junk).is_err(), "{junk:?}");
    }
}

/// Replaces every leaf and every container in the document, one at a time, with values of
/// every JSON type.
#[test]
fn mistyped_values_anywhere_never_panic() {
    let base: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::tiny())).unwrap();
    let mut pointers = Vec::new();
    collect_pointers(&base, String::new(), &mut pointers);
    let replacements =
        [json!(null), json!(true), json!(-1), json!(1.5e300), json!("x"), json!([]), json!({})];
    let mut rejected = 0;
    for p in &pointers {
        // Percentile entries are derived data that reading ignores; skip most of them to keep
        // the test fast while still covering their shape.
        if p.contains("/percentiles/") && !p.contains("/percentiles/0") {
            continue;
        }
        for r in &replacements {
            let mut d = base.clone();
            *d.pointer_mut(p).unwrap() = r.clone();
            if from_json(&d.to_string()).is_err() {
                rejected += 1;
            }
        }
    }
    assert!(rejected > pointers.len(), "suspiciously few rejections: {rejected}");
}

fn collect_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                collect_pointers(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                collect_pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    if !at.is_empty() {
        out.push(at);
    }
}
