//! Shrike's result and Nighthawk's `Output`, both ways.
//!
//! Shrike's JSON result has Nighthawk's layout, so the `Output` message is read from it as
//! proto3 JSON: every statistic and counter lands in Nighthawk's fields, and Shrike's additions
//! travel in the extension fields (numbers from 1000, which Nighthawk's readers skip): each
//! statistic's exact histogram, the exact status codes, the sending window, and the `shrike`
//! block (how the run ended, errors, the time series) as JSON text. The options are the spec's
//! Nighthawk options ([`super::options::from_spec`]).
//!
//! Read back, an `Output` from Shrike's service is the same result, histograms and all; one
//! from Nighthawk's own service reads as Nighthawk's JSON does (summaries, no histograms).

use prost_reflect::DynamicMessage;
use serde_json::{json, Value};
use shrike_spec::RunSpec;
use shrike_stats::RunResult;

use super::{options, wire};

const OUTPUT: &str = "nighthawk.client.Output";

/// `result` of a run of `spec` as Nighthawk's `Output`.
pub fn to_output(result: &RunResult, spec: &RunSpec) -> Result<DynamicMessage, String> {
    let mut doc = shrike_output::json::to_json_value(result);
    if let Some(o) = doc.as_object_mut() {
        o.insert("options".into(), options::from_spec(spec).0);
        if let Some(shrike) = o.remove("shrike") {
            o.insert("shrike_json".into(), json!(shrike.to_string()));
        }
    }
    wire::from_json(OUTPUT, &doc).map_err(|e| format!("the result as Nighthawk's Output: {e}"))
}

/// An `Output` as Shrike's result.
pub fn from_output(output: &DynamicMessage) -> Result<RunResult, String> {
    let mut doc = wire::to_json(output)?;
    let Some(o) = doc.as_object_mut() else { return Err("the Output is not a message".into()) };
    if let Some(Value::String(s)) = o.remove("shrike_json") {
        let shrike: Value =
            serde_json::from_str(&s).map_err(|e| format!("Output.shrike_json: {e}"))?;
        o.insert("shrike".into(), shrike);
    }
    o.entry("options").or_insert_with(|| json!({}));
    o.entry("results").or_insert_with(|| json!([]));
    for r in o.get_mut("results").and_then(Value::as_array_mut).into_iter().flatten() {
        fill_defaults(r);
    }
    shrike_output::json::from_json(&doc.to_string()).map_err(|e| format!("the Output: {e}"))
}

/// proto3 JSON leaves out fields at their defaults (a zero count, an empty list); Shrike's
/// reader, like Nighthawk's JSON, has them all. Puts them back in one result.
fn fill_defaults(result: &mut Value) {
    let Some(r) = result.as_object_mut() else { return };
    r.entry("counters").or_insert_with(|| json!([]));
    r.entry("execution_duration").or_insert_with(|| json!("0s"));
    for c in r.get_mut("counters").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(c) = c.as_object_mut() {
            c.entry("value").or_insert_with(|| json!("0"));
        }
    }
    let stats = r.entry("statistics").or_insert_with(|| json!([]));
    for s in stats.as_array_mut().into_iter().flatten() {
        let Some(s) = s.as_object_mut() else { continue };
        s.entry("count").or_insert_with(|| json!("0"));
        s.entry("id").or_insert_with(|| json!(""));
        let ps = s.entry("percentiles").or_insert_with(|| json!([]));
        for p in ps.as_array_mut().into_iter().flatten() {
            if let Some(p) = p.as_object_mut() {
                p.entry("count").or_insert_with(|| json!("0"));
                p.entry("percentile").or_insert_with(|| json!(0.0));
            }
        }
    }
}
