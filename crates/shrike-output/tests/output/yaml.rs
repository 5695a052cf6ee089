//! YAML output read by a real YAML parser (PyYAML, YAML 1.1 rules) equals the JSON document.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::{json, Value};
use shrike_output::OutputFormat;

/// PyYAML's safe loader, re-emitted as JSON (dict order kept).
fn load(yaml: &str) -> Value {
    let out = crate::common::python(
        "import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))",
        yaml,
    );
    serde_json::from_str(&out).unwrap()
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn yaml_document_equals_json_document_value_for_value() {
    let r = crate::common::sample();
    let yaml = crate::common::text(OutputFormat::Yaml, &r);
    let from_yaml = load(&yaml);
    let json_doc: Value = serde_json::from_str(&crate::common::json_text(&r)).unwrap();
    assert_eq!(from_yaml, json_doc);
    // Key order is the JSON writer's (Nighthawk's field order), not alphabetical.
    assert_eq!(keys(&from_yaml), ["options", "results", "version", "timestamp", "shrike"]);
    assert_eq!(keys(&from_yaml), keys(&json_doc));
    assert_eq!(keys(&from_yaml["results"][0]), keys(&json_doc["results"][0]));
    // uint64 values stay strings, quantiles stay numbers, intervals are there.
    assert_eq!(from_yaml["results"][2]["statistics"][1]["count"], json!("1000"));
    assert!(from_yaml["results"][2]["statistics"][1]["percentiles"][3]["percentile"].is_f64());
    assert_eq!(from_yaml["shrike"]["intervals"].as_array().unwrap().len(), 4);
}

#[test]
fn strings_that_look_like_other_things_stay_strings() {
    let tricky = [
        "yes",
        "No",
        "off",
        "ON",
        "y",
        "n",
        "true",
        "null",
        "~",
        "",
        "0.5",
        "1e3",
        "0x1f",
        "0o17",
        "012",
        "2026-11-21",
        "2026-11-21T05:27:52Z",
        "12:30:00",
        ".inf",
        "-.inf",
        ".nan",
        "a: b",
        "a #b",
        "#c",
        "- x",
        "? q",
        "[1]",
        "{a: 1}",
        "&anchor",
        "*ref",
        "!tag",
        "|",
        ">",
        "%x",
        "@x",
        "`x",
        "'quoted'",
        "\"dq\"",
        " lead",
        "trail ",
        "tab\there",
        "line\nbreak",
        "cr\r",
        "nul\u{0}",
        "bell\u{7}",
        "del\u{7f}",
        "nel\u{85}",
        "ls\u{2028}",
        "bom\u{feff}",
        "ünï",
        "日本語",
        "emoji 🦅",
        "back\\slash",
        "http://127.0.0.1:8080/path?q=1&r=2",
        "=",
        "<<",
        "worker_0",
        "benchmark.http_2xx",
        "a/b-c.d",
    ];
    let mut doc = serde_json::Map::new();
    for (i, t) in tricky.iter().enumerate() {
        doc.insert((*t).to_string(), json!(t));
        doc.insert(format!("list{i}"), json!([t, [t], {"k": t}]));
    }
    doc.insert(
        "numbers".into(),
        json!([
            0,
            -1,
            u64::MAX,
            i64::MIN,
            0.5,
            -0.25,
            1e-7,
            2.5e-12,
            1e300,
            300.0,
            1.0,
            123456.789
        ]),
    );
    doc.insert("empties".into(), json!({"o": {}, "a": [], "n": null, "t": true, "f": false}));
    doc.insert("nested".into(), json!([[1, [2, [3]]], [{"a": [{"b": []}]}]]));
    let doc = Value::Object(doc);
    let yaml = shrike_output::yaml::to_string(&doc);
    assert_eq!(load(&yaml), doc, "{yaml}");
}
