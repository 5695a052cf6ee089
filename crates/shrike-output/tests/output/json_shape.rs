//! The JSON document has the proto3-JSON shape of Nighthawk's `Output`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use shrike_stats::duration::parse_proto;
use shrike_stats::{StatId, StatKind};

fn is_uint_string(v: &Value) -> bool {
    v.as_str().is_some_and(|s| !s.is_empty() && s.parse::<u64>().is_ok())
}

fn is_duration_string(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.ends_with('s') && parse_proto(s).is_ok())
}

#[test]
fn top_level_shape() {
    let text = crate::common::json_text(&crate::common::sample());
    assert!(text.starts_with("{\n  \"options\": "), "2-space pretty print:\n{}", &text[..40]);
    assert!(text.ends_with("}\n"));
    // Nighthawk's field order, not alphabetical, with Shrike's block last.
    let pos = |k: &str| text.find(&format!("\n  \"{k}\":")).unwrap();
    assert!(pos("options") < pos("results"));
    assert!(pos("results") < pos("version"));
    assert!(pos("version") < pos("timestamp"));
    assert!(pos("timestamp") < pos("shrike"));

    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["timestamp"], "2026-11-21T05:27:55.123456789Z");
    assert_eq!(doc["options"]["uri"], "http://127.0.0.1:8080/");
    assert_eq!(doc["options"]["connections"], 4);
    let v = &doc["version"]["version"];
    let want: Vec<u64> = env!("CARGO_PKG_VERSION").split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(
        [&v["major_number"], &v["minor_number"], &v["patch"]].map(|x| x.as_u64().unwrap()),
        [want[0], want[1], want[2]]
    );
    let s = &doc["shrike"];
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["tool_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(s["termination"]["kind"], "completed");
    assert_eq!(s["termination"]["detail"], "");
    assert_eq!(s["environment"]["os"], std::env::consts::OS);
    assert_eq!(s["environment"]["arch"], std::env::consts::ARCH);
    assert!(s["environment"]["available_parallelism"].is_u64());
}

#[test]
fn results_are_workers_then_global() {
    let doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    let names: Vec<&str> =
        doc["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["worker_0", "worker_1", "global"]);
    let global = &doc["results"][2];
    assert_eq!(global["execution_start"], "2026-11-21T05:27:52.123456789Z");
    assert_eq!(global["execution_duration"], "2s");
    assert_eq!(doc["results"][1]["execution_duration"], "1.999s");
    let counters = global["counters"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = counters
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("benchmark.http_2xx", "1000"),
            ("upstream_cx_rx_bytes_total", "987654"),
            ("upstream_cx_total", "7"),
            ("upstream_rq_total", "1000"),
        ]
    );
}

#[test]
fn statistics_use_strings_durations_and_raw_fields() {
    let doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    for result in doc["results"].as_array().unwrap() {
        let stats = result["statistics"].as_array().unwrap();
        // Every statistic, in canonical order, even the empty ones.
        let ids: Vec<&str> = stats.iter().map(|s| s["id"].as_str().unwrap()).collect();
        let want: Vec<&str> = StatId::ALL.iter().map(|id| id.id()).collect();
        assert_eq!(ids, want);
        for (stat, &id) in stats.iter().zip(StatId::ALL) {
            assert!(is_uint_string(&stat["count"]), "{stat}");
            assert!(stat["shrike_histogram"].as_str().is_some_and(|h| !h.is_empty()));
            let o = stat.as_object().unwrap();
            match id.kind() {
                StatKind::Duration => {
                    for k in ["mean", "pstdev", "min", "max"] {
                        assert!(is_duration_string(&stat[k]), "{} {k}: {}", id.id(), stat[k]);
                    }
                    for k in ["raw_mean", "raw_pstdev", "raw_min", "raw_max"] {
                        assert!(!o.contains_key(k), "{} has {k}", id.id());
                    }
                }
                StatKind::Size => {
                    assert!(stat["raw_mean"].is_f64(), "{stat}");
                    assert!(stat["raw_pstdev"].is_f64(), "{stat}");
                    assert!(is_uint_string(&stat["raw_min"]), "{stat}");
                    assert!(is_uint_string(&stat["raw_max"]), "{stat}");
                    for k in ["mean", "pstdev", "min", "max"] {
                        assert!(!o.contains_key(k), "{} has {k}", id.id());
                    }
                }
            }
            for p in stat["percentiles"].as_array().unwrap() {
                assert!(p["percentile"].is_f64(), "{p}");
                assert!(is_uint_string(&p["count"]), "{p}");
                let p = p.as_object().unwrap();
                match id.kind() {
                    StatKind::Duration => {
                        assert!(is_duration_string(&p["duration"]));
                        assert!(!p.contains_key("raw_value"));
                    }
                    StatKind::Size => {
                        // A number, as Nighthawk writes its double `raw_value`.
                        assert!(p["raw_value"].is_u64(), "{:?}", p["raw_value"]);
                        assert!(!p.contains_key("duration"));
                    }
                }
            }
        }
    }
}

#[test]
fn known_values_are_formatted_as_nighthawk_does() {
    let doc: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::tiny())).unwrap();
    let global = &doc["results"][1];
    let rtr = &global["statistics"][StatId::RequestToResponse as usize];
    assert_eq!(rtr["count"], "5");
    // (90 + 100 + 110 + 120 + 4000) us / 5 = 884us.
    assert_eq!(rtr["mean"], "0.000884s");
    assert_eq!(rtr["min"], "0.000090s");
    assert_eq!(rtr["max"], "0.004s");
    let body = &global["statistics"][StatId::ResponseBodySize as usize];
    assert_eq!(body["raw_mean"], 1118.0);
    assert_eq!(body["raw_min"], "120");
    assert_eq!(body["raw_max"], "4096");
    let empty = &global["statistics"][StatId::Latency5xx as usize];
    assert_eq!(empty["count"], "0");
    assert_eq!(empty["percentiles"], serde_json::json!([]));
    assert_eq!(empty["mean"], "0s");
    assert_eq!(global["execution_duration"], "1.500s");
}

/// Where Shrike writes Nighthawk's fields, they come in the order Nighthawk's own file has
/// them: top level, a result, a statistic of each kind and a percentile of each kind. Shrike's
/// additions are skipped. (serde_json's `preserve_order` is on in this crate, so a parsed
/// object's keys are in file order.)
#[test]
fn field_order_is_nighthawks() {
    let path = format!("{}/tests/nighthawk/output_formatter.json.gold", env!("CARGO_MANIFEST_DIR"));
    let nighthawk: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let shrike: Value =
        serde_json::from_str(&crate::common::json_text(&crate::common::sample())).unwrap();
    let size = StatId::ResponseBodySize.id();
    let shrike_stat = |id: &str| {
        let stats = shrike["results"][0]["statistics"].as_array().unwrap();
        stats.iter().find(|s| s["id"] == id).unwrap().clone()
    };
    let (nh_latency, nh_size) =
        (&nighthawk["results"][0]["statistics"][3], &nighthawk["results"][0]["statistics"][2]);
    let (sh_latency, sh_size) = (shrike_stat(StatId::RequestToResponse.id()), shrike_stat(size));
    let pairs = [
        ("top level", &nighthawk, &shrike),
        ("result", &nighthawk["results"][0], &shrike["results"][0]),
        ("duration statistic", nh_latency, &sh_latency),
        ("size statistic", nh_size, &sh_size),
        ("duration percentile", &nh_latency["percentiles"][0], &sh_latency["percentiles"][0]),
        ("size percentile", &nh_size["percentiles"][0], &sh_size["percentiles"][0]),
    ];
    for (what, nh, sh) in pairs {
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        let (nh, sh) = (keys(nh), keys(sh));
        let shared_sh: Vec<&String> = sh.iter().filter(|k| nh.contains(k)).collect();
        let shared_nh: Vec<&String> = nh.iter().filter(|k| sh.contains(k)).collect();
        assert!(shared_nh.len() >= 3, "{what}: too few shared keys to compare: {shared_nh:?}");
        assert_eq!(shared_sh, shared_nh, "{what}");
    }
}
