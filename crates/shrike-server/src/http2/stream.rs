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
use h2::{Reason, RecvStream, SendStream};
use http::{Method, Request};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::response::{self, Payload, Reply};
use crate::behaviour::{self, Pacing, ResetScope, Step};
use crate::limits;
use crate::server::Shared;
use crate::timer::LazySleeper;

/// What the streams of one connection share besides the connection itself.
#[derive(Debug, Default)]
pub(crate) struct ConnCtx {
    /// One precise timer for every stream that waits.
    pub(crate) sleeper: LazySleeper,
    /// A stream whose plan resets the whole connection notifies this.
    pub(crate) kill: Arc<Notify>,
}

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
    ctx: &ConnCtx,
) {
    let (parts, body) = request.into_parts();
    let max_body = shared.config.max_body_size();
    let head_only = parts.method == Method::HEAD;
    if let Some((kind, why)) = limits::header_refusal(shared.config.limits(), &parts) {
        // Only the stream is refused: HTTP/2 framing keeps the connection's other streams and
        // later requests intact, unlike HTTP/1.1's.
        shared.state.stats().limit(kind);
        send_inline(respond, response::text(431, &why, head_only), tasks);
        tasks.spawn(linger(body));
        return;
    }
    let declared = response::declared_length(&parts);
    if let Some(len) = declared.filter(|&len| len > max_body) {
        // Refused before reading a byte, as HTTP/1.1 does. Dropping the body after the linger
        // makes h2 end the stream with RST_STREAM(NO_ERROR) if the peer is still sending.
        let reply = response::text(413, &behaviour::body_too_large(Some(len), max_body), head_only);
        send_inline(respond, reply, tasks);
        tasks.spawn(linger(body));
        return;
    }
    let (reply, pacing) = response::for_request(&parts, head_only, shared);
    if body.is_end_stream() && !pacing.is_eventful() {
        send_inline(respond, reply, tasks);
        return;
    }
    let shared = shared.clone();
    let sleeper = ctx.sleeper.clone();
    let kill = ctx.kill.clone();
    tasks.spawn(async move {
        // Counted while it may wait, as Nighthawk counts requests for its linear delay.
        let active = shared.state.begin_active();
        let mut body = body;
        let (mut reply, pacing, refused) = match drain(&mut body, max_body, &shared).await {
            Drained::Complete => (reply, pacing, false),
            Drained::TooLarge => {
                let message = behaviour::body_too_large(None, max_body);
                (response::text(413, &message, head_only), Pacing::default(), true)
            }
            Drained::Reset => return,
        };
        let wait = pacing.delay.now(&shared.state);
        if !wait.is_zero() {
            tokio::select! {
                () = sleeper.sleep(wait) => {}
                // The client gave up: free the slot (and the active count) at once.
                _ = poll_fn(|cx| respond.poll_reset(cx)) => return,
            }
        }
        match pacing.rolled.reset {
            Some(ResetScope::Stream) => return respond.send_reset(Reason::INTERNAL_ERROR),
            Some(ResetScope::Connection) => return kill.notify_one(),
            None => {}
        }
        sleeper.sleep(pacing.stall_before_head()).await;
        response::stamp_service_time(&mut reply.head, pacing.stats);
        if pacing.paced_body() && !refused {
            let _ = send_paced(&mut respond, reply, pacing, &sleeper).await;
        } else if let Ok(Some(mut rest)) = start(&mut respond, reply) {
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

/// Sends a body step by step (chunks, stall, truncation), each step handed to the connection
/// before the next is taken.
async fn send_paced(
    respond: &mut SendResponse<Bytes>,
    reply: Reply,
    pacing: Pacing,
    sleeper: &LazySleeper,
) -> Result<(), h2::Error> {
    let Reply { head, mut payload } = reply;
    let mut schedule = pacing.schedule(payload.len());
    let mut stream = respond.send_response(head, false)?;
    loop {
        match schedule.next_step() {
            Step::Send(n) => {
                let mut left = n;
                while left > 0 {
                    let capacity = stream.capacity() as u64;
                    if capacity == 0 {
                        stream
                            .reserve_capacity(usize::try_from(left.min(MAX_RESERVE)).unwrap_or(0));
                        match poll_fn(|cx| stream.poll_capacity(cx)).await {
                            Some(Ok(_)) => continue,
                            Some(Err(e)) => return Err(e),
                            None => return Ok(()),
                        }
                    }
                    let piece = payload.split_to(usize::try_from(left.min(capacity)).unwrap_or(0));
                    left -= piece.len() as u64;
                    stream.send_data(piece, false)?;
                }
            }
            Step::Wait(d) => sleeper.sleep(d).await,
            Step::Abort => {
                stream.send_reset(Reason::INTERNAL_ERROR);
                return Ok(());
            }
            Step::Done => return stream.send_data(Bytes::new(), true),
        }
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
async fn drain(body: &mut RecvStream, max_body: u64, shared: &Shared) -> Drained {
    let mut total = 0u64;
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else { return Drained::Reset };
        let _ = body.flow_control().release_capacity(chunk.len());
        shared.state.stats().request_body(chunk.len() as u64);
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
