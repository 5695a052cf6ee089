//! The HTTP/2 front end, on the `h2` crate: one task drives each connection and answers simple
//! requests inline; requests that must wait get a task of their own (see [`stream`]).
//!
//! Shutdown is HTTP/2's graceful one: GOAWAY, then the connection keeps serving the streams it
//! has already accepted and closes once they are done. New streams are refused by the GOAWAY.
//! The accept loop's drain timeout bounds all of it.
//!
//! Limits: until the first request arrives the header timeout runs, then the idle timeout
//! whenever no stream is being served; either ends the connection with GOAWAY(NO_ERROR). After
//! the request cap's Nth stream the connection sends GOAWAY and finishes what it accepted;
//! streams the client opened before it saw the GOAWAY are refused with REFUSED_STREAM, which
//! clients retry on a new connection.

// HTTP/3 builds its responses with the same code.
pub(crate) mod response;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::Connection;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

pub(crate) use response::FixedParts;

use crate::server::Shared;
use crate::stats::LimitKind;

/// Per-stream receive window: large enough that a request body of a few MiB streams without
/// waiting for a WINDOW_UPDATE per 64 KiB (the protocol default) on every round trip.
const STREAM_WINDOW: u32 = 1 << 20;
/// Connection receive window: several streams uploading at once each get their full window.
const CONNECTION_WINDOW: u32 = 16 << 20;
/// How long a closing connection may take to send its last frames (GOAWAY) to the peer.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// Serves HTTP/2 on `io`; the preface and first request must have arrived by `head_deadline`.
pub(crate) async fn serve<S>(
    io: S,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
    head_deadline: Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = *shared.config.limits();
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(shared.config.max_concurrent_streams().get())
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        // h2's own limit (16 MiB by default) bounds memory; the configured cap is checked per
        // stream so that refusals are counted and explained.
        .max_header_list_size(limits.library_header_list_size());
    let stats = shared.state.stats();
    let mut conn = tokio::select! {
        biased;
        // No stream has been accepted yet, so shutdown can drop the connection outright.
        _ = shutdown.changed() => return,
        () = tokio::time::sleep_until(head_deadline) => {
            stats.limit(LimitKind::HeaderTimeout);
            return;
        }
        conn = builder.handshake::<_, Bytes>(io) => match conn {
            Ok(conn) => conn,
            Err(_) => return,
        },
    };
    // Dropping the set when the connection ends aborts streams still running: with the
    // connection gone they could not send anything anyway.
    let mut tasks = JoinSet::new();
    let mut draining = false;
    let ctx = stream::ConnCtx::default();
    let kill = ctx.kill.clone();
    // Runs while no stream is being served: first as the header timeout, then (from the first
    // request on) as the idle timeout, re-armed whenever the last stream finishes.
    let quiet = tokio::time::sleep_until(head_deadline);
    tokio::pin!(quiet);
    let mut accepted: u64 = 0;
    loop {
        tokio::select! {
            biased;
            // A fault asked for the whole connection to go: GOAWAY with an error, then close.
            () = kill.notified() => {
                close_now(&mut conn, h2::Reason::INTERNAL_ERROR).await;
                break;
            }
            () = &mut quiet, if tasks.is_empty() => {
                let kind =
                    if accepted == 0 { LimitKind::HeaderTimeout } else { LimitKind::IdleTimeout };
                stats.limit(kind);
                close_now(&mut conn, h2::Reason::NO_ERROR).await;
                break;
            }
            // `changed` fails once the accept loop drops the sender: that is the signal.
            _ = shutdown.changed(), if !draining => {
                conn.graceful_shutdown();
                draining = true;
            }
            // Reaping finished streams keeps the set from growing with every request.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                if tasks.is_empty() {
                    quiet.as_mut().reset(Instant::now() + limits.idle_timeout);
                }
            }
            // Polling `accept` also drives the connection's I/O for every open stream; after
            // GOAWAY it yields `None` once the accepted streams have completed.
            next = conn.accept() => match next {
                Some(Ok((request, mut respond))) => {
                    accepted += 1;
                    if limits.is_last(accepted - 1) {
                        // Sent before the client saw our GOAWAY: safe for it to retry.
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    stream::accept(request, respond, &shared, &mut tasks, &ctx);
                    quiet.as_mut().reset(Instant::now() + limits.idle_timeout);
                    if limits.is_last(accepted) && !draining {
                        stats.limit(LimitKind::MaxRequestsReached);
                        conn.graceful_shutdown();
                        draining = true;
                    }
                }
                // A connection error: the peer vanished or broke the protocol.
                Some(Err(_)) | None => break,
            },
        }
    }
}

/// Sends GOAWAY with `reason` and closes, giving the frame a bounded time to leave.
async fn close_now<S, B>(conn: &mut Connection<S, B>, reason: h2::Reason)
where
    S: AsyncRead + AsyncWrite + Unpin,
    B: bytes::Buf,
{
    conn.abrupt_shutdown(reason);
    let flush = async { while let Some(Ok(_)) = conn.accept().await {} };
    let _ = tokio::time::timeout(CLOSE_FLUSH, flush).await;
}
