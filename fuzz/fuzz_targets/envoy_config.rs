//! `shrike serve --config-path`: a Nighthawk test-server configuration as an Envoy bootstrap
//! (YAML or JSON), and the server-wide defaults it yields.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::envoy_config(data));
