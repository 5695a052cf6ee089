//! Request lists (`--request-file`): JSON Lines, JSON and YAML, picked by the first byte.
//! Body files resolve in a directory that does not exist, so no input reads the disk.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shrike_engine::requests::file::parse;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let ext = ["jsonl", "json", "yaml"][usize::from(which) % 3];
    let _ = parse("fuzz", ext, text, Path::new("/nonexistent-shrike-fuzz"), &[], &[]);
});
