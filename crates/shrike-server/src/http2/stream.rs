//! One HTTP/2 request: its plan, its body, its delay and its response.
//!
//! A request that has no body and no delay is answered inline by the connection task, without
//! spawning: the head and as much of the body as the peer's flow-control windows allow go out at
//! once, and only a body larger than the windows continues in a task. Everything else (request
//! bodies, delays) runs in a task of its own so one slow stream never holds up the others.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{Method, Request};
use tokio::task::JoinSet;

use super::response::{self, Payload, Reply};
use crate::behaviour::{self, Delay};
use crate::server::Shared;

/// Largest credit asked for at once. The peer's window bounds what it grants anyway; this only
/// keeps one huge body from reserving connection credit every other stream is waiting for.
const MAX_RESERVE: u64 = 1 << 20;
/// After refusing a body, how long the rest of it is still read and discarded. Ending the
/// stream at once with RST_STREAM(NO_ERROR) is what RFC 9113 §8.1 allows, but clients such as
/// curl 7.x then report a failed transfer instead of the 413; the HTTP/1.1 front end lingers
/// for the same reason.
const LINGER_TIME: Duration = Duration::from_secs(1);

/// Starts answering `request`; work that has to wait is spawned on `tasks`.
pub(crate) fn accept(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: &Arc<Shared>,
    tasks: &mut JoinSet<()>,
) {
    let (parts, body) = request.into_parts();
    let max_body = shared.config.max_body_size();
    let head_only = parts.method == Method::HEAD;
    let declared = response::declared_length(&parts);
    if let Some(len) = declared.filter(|&len| len > max_body) {
        // Refused before reading a byte, as HTTP/1.1 does. Dropping the body after the linger
        // makes h2 end the stream with RST_STREAM(NO_ERROR) if the peer is still sending.
        let reply = response::text(413, &behaviour::body_too_large(Some(len), max_body), head_only);
        send_inline(respond, reply, tasks);
        tasks.spawn(linger(body));
        return;
    }
    let (reply, delay) = response::for_request(&parts, head_only, shared);
    if body.is_end_stream() && delay.is_none() {
        send_inline(respond, reply, tasks);
        return;
    }
    let shared = shared.clone();
    tasks.spawn(async move {
        // Counted while it may wait, as Nighthawk counts requests for its linear delay.
        let active = shared.state.begin_active();
        let mut body = body;
        let (reply, delay, refused) = match drain(&mut body, max_body).await {
            Drained::Complete => (reply, delay, false),
            Drained::TooLarge => {
                let message = behaviour::body_too_large(None, max_body);
                (response::text(413, &message, head_only), Delay::None, true)
            }
            Drained::Reset => return,
        };
        let wait = delay.now(&shared.state);
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                // The client gave up: free the slot (and the active count) at once.
                _ = poll_fn(|cx| respond.poll_reset(cx)) => return,
            }
        }
        if let Ok(Some(mut rest)) = start(&mut respond, reply) {
            let _ = send_rest(&mut rest.0, &mut rest.1).await;
        }
        if refused {
            drop(active);
            linger(body).await;
        }
    });
}

fn send_inline(mut respond: SendResponse<Bytes>, reply: Reply, tasks: &mut JoinSet<()>) {
    // An error means the peer reset the stream or the connection is going away: nobody is
    // left to answer.
    if let Ok(Some((mut stream, mut payload))) = start(&mut respond, reply) {
        tasks.spawn(async move {
            let _ = send_rest(&mut stream, &mut payload).await;
        });
    }
}

/// Sends the head and whatever of the payload the peer's windows allow now. Returns what is
/// left when the rest has to wait for flow-control credit.
fn start(
    respond: &mut SendResponse<Bytes>,
    reply: Reply,
) -> Result<Option<(SendStream<Bytes>, Payload)>, h2::Error> {
    let Reply { head, mut payload } = reply;
    if payload.len() == 0 {
        respond.send_response(head, true)?;
        return Ok(None);
    }
    let mut stream = respond.send_response(head, false)?;
    stream.reserve_capacity(reserve(&payload));
    send_available(&mut stream, &mut payload)?;
    Ok((payload.len() > 0).then_some((stream, payload)))
}

/// Sends the rest of a payload as the peer grants credit.
async fn send_rest(stream: &mut SendStream<Bytes>, payload: &mut Payload) -> Result<(), h2::Error> {
    while payload.len() > 0 {
        stream.reserve_capacity(reserve(payload));
        match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(_)) => send_available(stream, payload)?,
            Some(Err(e)) => return Err(e),
            // The stream was reset.
            None => return Ok(()),
        }
    }
    Ok(())
}

fn reserve(payload: &Payload) -> usize {
    usize::try_from(payload.len().min(MAX_RESERVE)).unwrap_or(usize::MAX)
}

/// Sends as much as the stream's assigned capacity covers, never more: data beyond the peer's
/// window would only pile up in h2's send buffer.
fn send_available(stream: &mut SendStream<Bytes>, payload: &mut Payload) -> Result<(), h2::Error> {
    loop {
        let capacity = stream.capacity();
        if capacity == 0 || payload.len() == 0 {
            return Ok(());
        }
        let chunk = payload.split_to(capacity);
        stream.send_data(chunk, payload.len() == 0)?;
    }
}

enum Drained {
    Complete,
    TooLarge,
    /// The peer reset the stream or the connection failed.
    Reset,
}

/// Reads the request body to its end, counting it and returning the flow-control credit of
/// every chunk at once so the peer can keep sending; the data itself is dropped.
async fn drain(body: &mut RecvStream, max_body: u64) -> Drained {
    let mut total = 0u64;
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else { return Drained::Reset };
        let _ = body.flow_control().release_capacity(chunk.len());
        total = total.saturating_add(chunk.len() as u64);
        if total > max_body {
            return Drained::TooLarge;
        }
    }
    // Trailers end the stream too; reading them lets it close cleanly instead of being reset.
    match body.trailers().await {
        Ok(_) => Drained::Complete,
        Err(_) => Drained::Reset,
    }
}

/// Discards what is left of a refused body for at most [`LINGER_TIME`].
async fn linger(mut body: RecvStream) {
    let discard = async {
        while let Some(Ok(chunk)) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, discard).await;
}
