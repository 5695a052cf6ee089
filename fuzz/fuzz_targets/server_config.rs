//! The `x-nighthawk-test-server-config` parser (JSON, or Nighthawk's YAML flow), through the
//! server-wide defaults path that reads the same shape.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::server_config(data));
