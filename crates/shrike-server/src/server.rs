//! The accept loops (TCP, and QUIC when serving HTTP/3): connection cap, per-connection tasks
//! and two-phase shutdown.

use std::future::Future;
use std::io;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::state::{ServerState, ServerTotals, Totals};
use crate::stats::LimitKind;
use crate::{conn, h1, http2, http3, ServerConfig};

/// Everything a connection needs, shared by all of them.
pub(crate) struct Shared {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) state: ServerState,
    pub(crate) h1: h1::FixedParts,
    /// HTTP/2's server-wide headers, HPACK-encoded.
    pub(crate) h2: http2::FixedBlock,
    /// HTTP/3's, as `http` types.
    pub(crate) h3: http2::FixedParts,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Shared {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Shared {
        Shared {
            h1: h1::FixedParts::new(&config),
            h2: http2::FixedBlock::new(&config),
            h3: http2::FixedParts::new(&config),
            tls: config.tls().map(|tls| tls.acceptor()),
            state: ServerState::new(),
            config,
        }
    }

    /// The statistics endpoint's answer (the counts as JSON) when `path` names the endpoint;
    /// each front end passes the path as its protocol compares it.
    pub(crate) fn stats_answer(&self, path: &[u8]) -> Option<String> {
        let endpoint = self.config.stats_path()?;
        (path == endpoint.as_bytes()).then(|| {
            self.state.stats().to_json(self.state.active(), self.state.totals().snapshot())
        })
    }
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
/// Past the connection cap a new TCP connection is accepted and reset at once (RST), counted as
/// `connections_refused` in the statistics, as Envoy's overflow does: the client learns at once
/// instead of hanging in the listen backlog, and the connections already served keep their
/// share of the server.
///
/// Accept errors (a peer resetting before it was accepted, running out of file descriptors)
/// are retried with a back-off rather than ending the server: a load test should see a slow
/// server, not a vanished one.
pub async fn run(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<ServerTotals> {
    run_with_udp(listener, None, config, shutdown).await
}

/// [`run`], plus HTTP/3 over QUIC on `udp` when given.
///
/// HTTP/3 needs TLS in `config` (an `InvalidInput` error otherwise, before anything is
/// served). Bind `udp` to the listener's address so clients find HTTP/3 on the same port
/// number; every TCP response then advertises it with `alt-svc: h3=":PORT"` (unless the
/// configuration sets its own `alt-svc`). Both protocols share the server-wide request state
/// (linear delay, previous-request delta) and the totals; the connection cap applies to TCP
/// and QUIC connections separately, so a flood over one cannot shut out the other. On
/// shutdown each QUIC connection sends GOAWAY, finishes the requests it has accepted and
/// closes, within the same drain timeout as TCP.
pub async fn run_with_udp(
    listener: TcpListener,
    udp: Option<UdpSocket>,
    config: Arc<ServerConfig>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<ServerTotals> {
    let (quic, config) = match udp {
        None => (None, config),
        Some(udp) => {
            let port = udp.local_addr()?.port();
            let quic = http3::Endpoint::new(udp, &config)?;
            (Some(quic), Arc::new(config.with_alt_svc(port)))
        }
    };
    let shared = Arc::new(Shared::new(config));
    // Everything waits on `changed()`, which completes when the sender is dropped.
    let (notify, watch) = watch::channel(());
    let signal = async move {
        shutdown.await;
        drop(notify);
    };
    let tcp = serve_tcp(listener, shared.clone(), watch.clone());
    let quic = async {
        if let Some(quic) = quic {
            quic.serve(shared.clone(), watch).await;
        }
    };
    tokio::join!(signal, tcp, quic);
    Ok(shared.state.totals().snapshot())
}

/// The TCP accept loop and its drain.
async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<()>) {
    let limit = Arc::new(Semaphore::new(shared.config.max_connections().get()));
    let mut connections = JoinSet::new();
    let mut backoff = Duration::ZERO;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            // Reaping finished tasks here keeps the set from growing with every connection.
            Some(_) = connections.join_next() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = Duration::ZERO;
                    let Ok(permit) = limit.clone().try_acquire_owned() else {
                        refuse(stream, &shared);
                        continue;
                    };
                    Totals::count(&shared.state.totals().accepted);
                    let task = conn::serve(stream, shared.clone(), shutdown.clone());
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
                        _ = shutdown.changed() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(shared.config.drain_timeout(), drain).await.is_err() {
        connections.shutdown().await;
    }
}

/// Turns away a connection over the cap. Accepting and resetting it, rather than leaving it
/// in the listen backlog, frees its file descriptor at once and tells the client plainly
/// (ECONNRESET) instead of letting it wait for a slot that may never come; a reset rather than
/// a FIN so it cannot be mistaken for a keep-alive close before a response.
fn refuse(stream: tokio::net::TcpStream, shared: &Shared) {
    let _ = stream.set_zero_linger();
    drop(stream);
    shared.state.stats().limit(LimitKind::ConnectionRefused);
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
