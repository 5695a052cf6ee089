//! The HTTP/2 front end, on the `h2` crate: one task drives each connection and answers simple
//! requests inline; requests that must wait get a task of their own (see [`stream`]).
//!
//! Shutdown is HTTP/2's graceful one: GOAWAY, then the connection keeps serving the streams it
//! has already accepted and closes once they are done. New streams are refused by the GOAWAY.
//! The accept loop's drain timeout bounds all of it.

// HTTP/3 builds its responses with the same code.
pub(crate) mod response;
mod stream;

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub(crate) use response::Prepared;

use crate::server::Shared;

/// Per-stream receive window: large enough that a request body of a few MiB streams without
/// waiting for a WINDOW_UPDATE per 64 KiB (the protocol default) on every round trip.
const STREAM_WINDOW: u32 = 1 << 20;
/// Connection receive window: several streams uploading at once each get their full window.
const CONNECTION_WINDOW: u32 = 16 << 20;
/// Same limit on a request head as the HTTP/1.1 front end (h2's default is 16 MiB).
const MAX_HEADER_LIST: u32 = 64 * 1024;

pub(crate) async fn serve<S>(io: S, shared: Arc<Shared>, mut shutdown: watch::Receiver<()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(shared.config.max_concurrent_streams().get())
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST);
    let mut conn = tokio::select! {
        biased;
        // No stream has been accepted yet, so shutdown can drop the connection outright.
        _ = shutdown.changed() => return,
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
    loop {
        tokio::select! {
            biased;
            // A fault asked for the whole connection to go: GOAWAY with an error, then close.
            () = kill.notified() => {
                conn.abrupt_shutdown(h2::Reason::INTERNAL_ERROR);
                let flush = async { while let Some(Ok(_)) = conn.accept().await {} };
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), flush).await;
                break;
            }
            // `changed` fails once the accept loop drops the sender: that is the signal.
            _ = shutdown.changed(), if !draining => {
                conn.graceful_shutdown();
                draining = true;
            }
            // Reaping finished streams keeps the set from growing with every request.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            // Polling `accept` also drives the connection's I/O for every open stream; after
            // GOAWAY it yields `None` once the accepted streams have completed.
            next = conn.accept() => match next {
                Some(Ok((request, respond))) => {
                    stream::accept(request, respond, &shared, &mut tasks, &ctx);
                }
                // A connection error: the peer vanished or broke the protocol.
                Some(Err(_)) | None => break,
            },
        }
    }
}
