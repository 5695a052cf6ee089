//! The test server's HTTP/1.1 request head parser, body framing (content-length,
//! transfer-encoding, their conflicts) and chunked decoder: any bytes from a client.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::h1_request(data));
