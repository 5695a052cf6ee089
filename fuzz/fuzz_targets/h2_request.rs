//! The test server's HTTP/2 connection (framing, HPACK, stream states, flow control, request
//! bodies, timers): any frames from a client, read in chunks of any size.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::h2_request(data));
