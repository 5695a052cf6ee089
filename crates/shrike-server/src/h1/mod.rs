//! The HTTP/1.1 front end: a hand-written codec over any byte stream (TCP or TLS), with
//! httparse for heads.

mod chunked;
mod conn;
mod proxy;
mod request;
mod response;

pub(crate) use conn::{serve, READ_BUF};
pub(crate) use response::{itoa, FixedParts};

/// The server's request head parser, body framing and chunked decoder over one input, as the
/// connection loop runs them (for `fuzz/`, through [`crate::fuzzing`]). Panics are the bugs
/// a fuzzer looks for; errors are answers.
pub(crate) fn fuzz_request(data: &[u8]) {
    let mut headers = [httparse::EMPTY_HEADER; request::MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(&data[..data.len().min(request::MAX_HEAD)]) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return,
    };
    let Ok(framing) = request::framing(&req) else { return };
    let _ = (framing.keep_alive, framing.http10, framing.expect_continue, framing.head);
    if let request::BodyFraming::Chunked = framing.body {
        let mut decoder = chunked::ChunkedDecoder::new(1 << 20);
        let mut rest = &data[head..];
        while !rest.is_empty() {
            match decoder.feed(rest) {
                Ok((used, done)) => {
                    if done || used == 0 {
                        return;
                    }
                    rest = &rest[used..];
                }
                Err(_) => return,
            }
        }
    }
}
