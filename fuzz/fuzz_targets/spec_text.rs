//! The small parsers of user input, picked by the first byte: durations, k6-style stages,
//! predicates, SLOs, relaxed JSON, and a whole run spec as JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shrike_spec::{Predicate, PredicateKind, RatePlan, RunSpec};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    match which % 6 {
        0 => {
            let _ = shrike_stats::duration::parse_duration(text);
        }
        1 => {
            let _ = RatePlan::parse_stages(text);
        }
        2 => {
            let _ = Predicate::parse(text, PredicateKind::Failure);
        }
        3 => {
            let _ = shrike_plan::capacity::slo::Slo::parse(text);
        }
        4 => {
            let _ = shrike_stats::relaxed::parse(text);
        }
        _ => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                if let Ok(spec) = RunSpec::from_json(&v) {
                    // What a valid spec writes reads back to the same spec.
                    let again = RunSpec::from_json(&spec.to_json()).expect("canonical form reads");
                    assert_eq!(again.to_json(), spec.to_json());
                }
            }
        }
    }
});
