//! The client's HTTP/2 codec (framing, HPACK, flow control, stream states): any bytes from a
//! server, read in chunks of any size, with up to seven streams open, some sending bodies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::h2_response(data));
