//! The `x-nighthawk-test-server-config` parser (JSON, or Nighthawk's YAML flow), through the
//! server-wide defaults path that reads the same shape.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shrike_server::ServerConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ServerConfig::builder().defaults_json(text.to_string()).build();
});
