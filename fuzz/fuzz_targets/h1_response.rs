//! The client's HTTP/1.1 response reader (status line, headers, content-length, chunked,
//! close-delimited bodies): any bytes from a server. The first byte says whether the request
//! was HEAD. Reading a slice never waits, so one poll finishes the read.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use shrike_engine::h1::ResponseReader;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else { return };
    let mut reader = ResponseReader::new();
    let mut rx = 0u64;
    // Two responses in a row: the second starts from what the first left buffered.
    for _ in 0..2 {
        let read = pin!(reader.read_response(&mut rest, flags & 1 == 1, &mut rx));
        let mut cx = Context::from_waker(Waker::noop());
        match read.poll(&mut cx) {
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(_)) => return,
            Poll::Pending => panic!("reading from a slice never waits"),
        }
    }
});
