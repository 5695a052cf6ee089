//! Jobs files (`shrike jobs` / `replay` input, plain or zstd) and HAR recordings, picked by the
//! first byte.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::jobs(data));
