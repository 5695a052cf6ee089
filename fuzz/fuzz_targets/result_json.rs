//! Stored results: the JSON reader (forged documents, histograms and all) and the histogram
//! decoder on raw bytes. What reads back must write and read again.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    if which & 1 == 0 {
        let _ = shrike_stats::Statistic::decode_histogram_bytes(rest);
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if let Ok(result) = shrike_output::json::from_json(text) {
        let mut out = Vec::new();
        shrike_output::json::write(&result, &mut out).expect("writing to memory");
        let text = String::from_utf8(out).expect("JSON is UTF-8");
        shrike_output::json::from_json(&text).expect("a written result reads back");
    }
});
