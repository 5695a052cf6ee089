//! Stored results: the JSON reader (forged documents, histograms and all) and the histogram
//! decoder on raw bytes. What reads back must write and read again.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::result_json(data));
