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

use crate::behaviour::{self, Pacing, ResetScope, Step, FILLER};
use crate::http2::response::{self, Reply};
use crate::limits;
use crate::server::Shared;
use crate::timer::LazySleeper;

/// H3_INTERNAL_ERROR, for injected resets.
const H3_INTERNAL_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x102);

pub(super) type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

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
    quic: quinn::Connection,
    sleeper: LazySleeper,
    tunnels: Option<Arc<super::proxy::Tunnels>>,
) {
    let Ok((request, mut stream)) = resolver.resolve_request().await else { return };
    let (parts, ()) = request.into_parts();
    if parts.method == Method::CONNECT {
        return super::proxy::serve(parts, stream, shared, quic, tunnels).await;
    }
    let head_only = parts.method == Method::HEAD;
    let max_body = shared.config.max_body_size();
    if let Some((kind, why)) = limits::header_refusal(shared.config.limits(), &parts) {
        shared.state.stats().limit(kind);
        shared.state.stats().refused(431);
        if send(&mut stream, response::text(431, &why, head_only)).await.is_ok() {
            linger(&mut stream).await;
        }
        return;
    }
    if let Some(len) = response::declared_length(&parts).filter(|&len| len > max_body) {
        // Refused before reading a byte, as the other front ends do.
        shared.state.stats().refused(413);
        let reply = response::text(413, &behaviour::body_too_large(Some(len), max_body), head_only);
        if send(&mut stream, reply).await.is_ok() {
            linger(&mut stream).await;
        }
        return;
    }
    let (reply, pacing) = response::for_request(&parts, head_only, &shared);
    // Counted while it may wait, as Nighthawk counts requests for its linear delay.
    let active = shared.state.begin_active();
    let (mut reply, pacing, refused) = match drain(&mut stream, max_body, &shared).await {
        Drained::Complete => (reply, pacing, false),
        Drained::TooLarge => {
            let message = behaviour::body_too_large(None, max_body);
            (response::text(413, &message, head_only), Pacing::default(), true)
        }
        Drained::Reset => return,
    };
    // h3 does not surface a peer's STOP_SENDING before the next write, so a cancelled
    // request sleeps out its delay; the connection's end still aborts it.
    sleeper.sleep(pacing.delay.now(&shared.state)).await;
    match pacing.rolled.reset {
        Some(ResetScope::Stream) => {
            stream.stop_stream(Code::H3_INTERNAL_ERROR);
            stream.stop_sending(Code::H3_INTERNAL_ERROR);
            return;
        }
        Some(ResetScope::Connection) => {
            quic.close(H3_INTERNAL_ERROR, b"injected fault: connection reset");
            return;
        }
        None => {}
    }
    sleeper.sleep(pacing.stall_before_head()).await;
    response::stamp_service_time(&mut reply.head, pacing.stats);
    let sent = if pacing.paced_body() && !refused {
        send_paced(&mut stream, reply, pacing, &sleeper).await
    } else {
        send(&mut stream, reply).await
    };
    drop(active);
    if sent.is_ok() && refused {
        linger(&mut stream).await;
    }
}

/// Sends the head, the payload in slices of the shared filler (or of the echo), and FIN.
pub(super) async fn send(stream: &mut Stream, reply: Reply) -> Result<(), h3::error::StreamError> {
    let Reply { head, mut payload } = reply;
    stream.send_response(head).await?;
    while payload.len() > 0 {
        stream.send_data(payload.split_to(FILLER.len())).await?;
    }
    stream.finish().await
}

/// Sends a body step by step (chunks, stall, truncation); each step is written before the next.
async fn send_paced(
    stream: &mut Stream,
    reply: Reply,
    pacing: Pacing,
    sleeper: &LazySleeper,
) -> Result<(), h3::error::StreamError> {
    let Reply { head, mut payload } = reply;
    let mut schedule = pacing.schedule(payload.len());
    stream.send_response(head).await?;
    loop {
        match schedule.next_step() {
            Step::Send(n) => {
                let mut left = n;
                while left > 0 {
                    let piece = payload.split_to(usize::try_from(left).unwrap_or(usize::MAX));
                    left -= piece.len() as u64;
                    stream.send_data(piece).await?;
                }
            }
            Step::Wait(d) => sleeper.sleep(d).await,
            Step::Abort => {
                stream.stop_stream(Code::H3_INTERNAL_ERROR);
                return Ok(());
            }
            Step::Done => return stream.finish().await,
        }
    }
}

enum Drained {
    Complete,
    TooLarge,
    /// The peer reset the stream or the connection failed.
    Reset,
}

/// Reads the request body to its end, counting it; the data itself is dropped, and quinn
/// returns the flow-control credit as it is read.
async fn drain(stream: &mut Stream, max_body: u64, shared: &Shared) -> Drained {
    let mut total = 0u64;
    loop {
        match stream.recv_data().await {
            Ok(Some(chunk)) => {
                shared.state.stats().request_body(chunk.remaining() as u64);
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
pub(super) async fn linger(stream: &mut Stream) {
    let discard = async { while let Ok(Some(_)) = stream.recv_data().await {} };
    if tokio::time::timeout(LINGER_TIME, discard).await.is_err() {
        stream.stop_sending(Code::H3_NO_ERROR);
    }
}
