//! The client's HTTP/1.1 response reader (status line, headers, content-length, chunked,
//! close-delimited bodies): any bytes from a server. The first byte says whether the request
//! was HEAD. Reading a slice never waits, so one poll finishes the read.
//!
//! Differential too: a reader that reads an origin-latency header parses every head, while a
//! plain one answers a head it has seen before from the thread's remembered last head (which
//! earlier inputs of this process have left there). Both must read the same responses and fail
//! the same way.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use shrike_engine::h1::ResponseReader;

/// Up to two responses in a row (the second starts from what the first left buffered):
/// (status, header bytes, body bytes, close) for each, or the error that ended the reading.
fn read_two(mut reader: ResponseReader, mut input: &[u8], head: bool) -> Vec<String> {
    let mut rx = 0u64;
    let mut out = Vec::new();
    for _ in 0..2 {
        let read = pin!(reader.read_response(&mut input, head, &mut rx));
        let mut cx = Context::from_waker(Waker::noop());
        match read.poll(&mut cx) {
            Poll::Ready(Ok(i)) => {
                out.push(format!("{} {} {} {}", i.status, i.header_bytes, i.body_bytes, i.close))
            }
            Poll::Ready(Err(e)) => {
                out.push(e.to_string());
                break;
            }
            Poll::Pending => panic!("reading from a slice never waits"),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let head = flags & 1 == 1;
    let plain = read_two(ResponseReader::new(), rest, head);
    let name: Rc<[u8]> = Rc::from(&b"x-fuzz-origin-latency"[..]);
    let parsing = ResponseReader::new().with_latency_header(Some(name));
    assert_eq!(plain, read_two(parsing, rest, head), "the remembered head answered differently");
});
