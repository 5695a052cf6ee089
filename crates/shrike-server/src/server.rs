//! The accept loop: connection cap, per-connection tasks and two-phase shutdown.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::state::{ServerState, ServerTotals};
use crate::{conn, h1, http2, ServerConfig};

/// Everything a connection needs, shared by all of them.
pub(crate) struct Shared {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) state: ServerState,
    pub(crate) h1: h1::Prepared,
    pub(crate) h2: http2::Prepared,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Serves HTTP/1.1 and HTTP/2 on `listener` until `shutdown` completes, then drains.
///
/// Without TLS in `config`, each connection speaks HTTP/1.1, or HTTP/2 when it opens with the
/// HTTP/2 preface (prior knowledge, "h2c"). With TLS, ALPN picks the protocol (`h2` or
/// `http/1.1`; no ALPN means HTTP/1.1). A failed or timed-out TLS handshake closes only its
/// own connection and is counted in the returned totals.
///
/// Works on current-thread and multi-thread runtimes alike; each connection is its own task.
/// Shutdown has two phases: when `shutdown` completes the listener is closed, idle connections
/// close at once, busy HTTP/1.1 ones after their current response (which says
/// `connection: close`) and HTTP/2 ones send GOAWAY and finish the streams already accepted.
/// `run` returns when all have finished, or after the configured drain timeout, when the
/// stragglers are aborted.
///
/// Accept errors (a peer resetting before it was accepted, running out of file descriptors)
/// are retried with a back-off rather than ending the server: a load test should see a slow
/// server, not a vanished one. The `io::Result` leaves room for front ends whose setup can fail.
pub async fn run(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<ServerTotals> {
    let shared = Arc::new(Shared {
        h1: h1::Prepared::new(&config),
        h2: http2::Prepared::new(&config),
        tls: config.tls().map(|tls| tls.acceptor()),
        state: ServerState::new(),
        config,
    });
    let limit = Arc::new(Semaphore::new(shared.config.max_connections().get()));
    // Connections wait on `changed()`, which completes when the sender is dropped.
    let (notify, watch) = watch::channel(());
    let mut connections = JoinSet::new();
    let mut backoff = Duration::ZERO;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            // Reaping finished tasks here keeps the set from growing with every connection.
            Some(_) = connections.join_next() => {}
            accepted = accept(&listener, &limit) => match accepted {
                Ok((stream, permit)) => {
                    backoff = Duration::ZERO;
                    let task = conn::serve(stream, shared.clone(), watch.clone());
                    connections.spawn(async move {
                        task.await;
                        drop(permit);
                    });
                }
                Err(e) if is_connection_error(&e) => {}
                Err(_) => {
                    // Usually EMFILE/ENFILE/ENOBUFS: waiting lets connections finish and free
                    // resources, where spinning would burn the CPU they need.
                    backoff = (backoff * 2).clamp(Duration::from_millis(1), Duration::from_secs(1));
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    drop(notify);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(shared.config.drain_timeout(), drain).await.is_err() {
        connections.shutdown().await;
    }
    Ok(shared.state.totals().snapshot())
}

async fn accept(
    listener: &TcpListener,
    limit: &Arc<Semaphore>,
) -> io::Result<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    // Waiting for a permit before accepting leaves excess connections in the kernel backlog
    // instead of accepting sockets the server cannot serve.
    let permit = limit
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| io::Error::other("connection semaphore closed"))?;
    let (stream, _) = listener.accept().await?;
    Ok((stream, permit))
}

/// Errors that concern only the connection being accepted, not the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}
