//! One HTTP/3 request: its plan, its body, its delay and its response, with the same rules as
//! the HTTP/2 front end (the head and body come from the same code).
//!
//! Unlike HTTP/2, every request is a task: QUIC delivers the end of a request stream (FIN)
//! separately from its head, so there is no cheap way to know inline that a request has no
//! body, and quinn drives the streams' I/O itself, so a task costs no extra wake-ups.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::server::{RequestResolver, RequestStream};
use http::Method;

use crate::behaviour::{self, Delay, FILLER};
use crate::http2::response::{self, Reply};
use crate::server::Shared;

type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// After refusing a body, how long the rest of it is still read and discarded before the
/// server asks the client to stop sending (with H3_NO_ERROR, as RFC 9114 §4.1 says). As for
/// HTTP/2, some clients report a failed transfer instead of the 413 if the stream is cut while
/// they are still sending.
const LINGER_TIME: Duration = Duration::from_secs(1);

/// Serves one request stream to its end. Errors only mean the peer reset the stream or the
/// connection went away: nobody is left to answer, so they end the task quietly.
pub(super) async fn serve(
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
    shared: Arc<Shared>,
) {
    let Ok((request, mut stream)) = resolver.resolve_request().await else { return };
    let (parts, ()) = request.into_parts();
    let head_only = parts.method == Method::HEAD;
    let max_body = shared.config.max_body_size();
    if let Some(len) = response::declared_length(&parts).filter(|&len| len > max_body) {
        // Refused before reading a byte, as the other front ends do.
        let reply = response::text(413, &behaviour::body_too_large(Some(len), max_body), head_only);
        if send(&mut stream, reply).await.is_ok() {
            linger(&mut stream).await;
        }
        return;
    }
    let (reply, delay) = response::for_request(&parts, head_only, &shared);
    // Counted while it may wait, as Nighthawk counts requests for its linear delay.
    let active = shared.state.begin_active();
    let (reply, delay, refused) = match drain(&mut stream, max_body).await {
        Drained::Complete => (reply, delay, false),
        Drained::TooLarge => {
            let message = behaviour::body_too_large(None, max_body);
            (response::text(413, &message, head_only), Delay::None, true)
        }
        Drained::Reset => return,
    };
    let wait = delay.now(&shared.state);
    if !wait.is_zero() {
        // h3 does not surface a peer's STOP_SENDING before the next write, so a cancelled
        // request sleeps out its delay; the connection's end still aborts it.
        tokio::time::sleep(wait).await;
    }
    let sent = send(&mut stream, reply).await;
    drop(active);
    if sent.is_ok() && refused {
        linger(&mut stream).await;
    }
}

/// Sends the head, the payload in slices of the shared filler (or of the echo), and FIN.
async fn send(stream: &mut Stream, reply: Reply) -> Result<(), h3::error::StreamError> {
    let Reply { head, mut payload } = reply;
    stream.send_response(head).await?;
    while payload.len() > 0 {
        stream.send_data(payload.split_to(FILLER.len())).await?;
    }
    stream.finish().await
}

enum Drained {
    Complete,
    TooLarge,
    /// The peer reset the stream or the connection failed.
    Reset,
}

/// Reads the request body to its end, counting it; the data itself is dropped, and quinn
/// returns the flow-control credit as it is read.
async fn drain(stream: &mut Stream, max_body: u64) -> Drained {
    let mut total = 0u64;
    loop {
        match stream.recv_data().await {
            Ok(Some(chunk)) => {
                total = total.saturating_add(chunk.remaining() as u64);
                if total > max_body {
                    return Drained::TooLarge;
                }
            }
            Ok(None) => return Drained::Complete,
            Err(_) => return Drained::Reset,
        }
    }
}

/// Discards what is left of a refused body for at most [`LINGER_TIME`], then asks the peer to
/// stop sending.
async fn linger(stream: &mut Stream) {
    let discard = async { while let Ok(Some(_)) = stream.recv_data().await {} };
    if tokio::time::timeout(LINGER_TIME, discard).await.is_err() {
        stream.stop_sending(Code::H3_NO_ERROR);
    }
}
