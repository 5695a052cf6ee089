//! Jobs files (`shrike jobs` / `replay` input, plain or zstd) and HAR recordings, picked by the
//! first byte.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    if which & 1 == 0 {
        let reader = std::io::Cursor::new(rest.to_vec());
        if let Ok(jobs) = shrike_jobs::JobReader::from_reader("fuzz".into(), Box::new(reader)) {
            for job in jobs.take(10_000) {
                if job.is_err() {
                    break;
                }
            }
        }
    } else if let Ok(text) = std::str::from_utf8(rest) {
        let _ = shrike_jobs::har::read_har(text);
    }
});
