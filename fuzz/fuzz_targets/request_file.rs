//! Request lists (`--request-file`): JSON Lines, JSON and YAML, picked by the first byte.
//! Body files resolve in a directory that does not exist, so no input reads the disk.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::request_file(data));
