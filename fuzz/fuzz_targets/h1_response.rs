//! The client's HTTP/1.1 response reader (status line, headers, content-length, chunked,
//! close-delimited bodies): any bytes from a server. The first byte says whether the request
//! was HEAD. Reading a slice never waits, so one poll finishes the read.
//!
//! Differential too: a reader that reads an origin-latency header parses every head, while a
//! plain one answers a head it has seen before from the thread's remembered last head (which
//! earlier inputs of this process have left there). Both must read the same responses and fail
//! the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::h1_response(data));
