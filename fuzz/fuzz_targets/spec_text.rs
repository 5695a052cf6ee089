//! The small parsers of user input, picked by the first byte: durations, k6-style stages,
//! predicates, SLOs, relaxed JSON, and a whole run spec as JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::spec_text(data));
