//! The HTTP/3 front end: QUIC on `quinn`, HTTP/3 framing on `h3`. One task accepts QUIC
//! connections on the UDP socket; each connection is a task that accepts request streams, and
//! each request is a task of its own (see [`stream`]). Responses are built by the same code as
//! HTTP/2's, from the same [`ResponsePlan`](crate::behaviour::ResponsePlan), so the two cannot drift apart.
//!
//! Shutdown mirrors HTTP/2's: each connection sends GOAWAY naming the first request it will not
//! serve, finishes the requests already accepted, then closes with H3_NO_ERROR. The endpoint
//! stops accepting connections at once. The drain timeout bounds all of it; stragglers are
//! aborted and the endpoint closed.
//!
//! Limits: the idle timeout is QUIC's own (RFC 9000 §10.1), so any packet, a client's PING
//! included, keeps a connection alive and an expired one closes without a CONNECTION_CLOSE;
//! there is no header timeout (the QUIC handshake timeout bounds a silent client, and h3 reads
//! a request head as one frame). After the request cap's Nth request the connection sends
//! GOAWAY as on shutdown.

mod proxy;
mod stream;

use std::io;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use quinn::VarInt;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::server::Shared;
use crate::state::Totals;
use crate::stats::LimitKind;
use crate::ServerConfig;

/// Per-stream receive window: a request body of a few MiB streams without waiting a round trip
/// per window, as HTTP/2's does.
const STREAM_WINDOW: u32 = 1 << 20;
/// Connection receive window: several streams uploading at once each get their full window.
const CONNECTION_WINDOW: u32 = 16 << 20;
/// How long the endpoint may take to tell peers their connections closed once every connection
/// has ended. Loopback needs microseconds; this only bounds a peer that stopped answering.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// The peer's longest wait before acknowledging (RFC 9000's default max_ack_delay).
const MAX_ACK_DELAY: Duration = Duration::from_millis(25);
/// The application error code of a connection closed by shutdown: H3_NO_ERROR.
const H3_NO_ERROR: VarInt = VarInt::from_u32(0x100);

/// A QUIC endpoint ready to serve HTTP/3, created before the server starts so a socket or TLS
/// problem is reported before anything is served.
pub(crate) struct Endpoint {
    endpoint: quinn::Endpoint,
}

impl Endpoint {
    /// Wraps `socket` in a QUIC endpoint. Needs TLS in `config` (HTTP/3 has no plaintext form)
    /// and a running tokio runtime (the endpoint drives its socket from a task of its own).
    pub(crate) fn new(socket: UdpSocket, config: &ServerConfig) -> io::Result<Self> {
        let Some(tls) = config.tls() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "HTTP/3 needs TLS: QUIC has no plaintext form (configure a certificate)",
            ));
        };
        let crypto = QuicServerConfig::try_from(tls.quic()).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("TLS unusable for QUIC: {e}"))
        })?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(Arc::new(transport(config)));
        // tokio requires a non-blocking socket; a caller's std socket usually is not.
        socket.set_nonblocking(true)?;
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(server),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        Ok(Self { endpoint })
    }

    /// Accepts connections until `shutdown` changes, then drains (see the module docs).
    /// At most `max_connections` QUIC connections are served at once, counted apart from TCP.
    pub(crate) async fn serve(self, shared: Arc<Shared>, mut shutdown: watch::Receiver<()>) {
        let endpoint = self.endpoint;
        let limit = Arc::new(Semaphore::new(shared.config.max_connections().get()));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                Some(_) = connections.join_next() => {}
                incoming = endpoint.accept() => {
                    // `None` only once the endpoint is closed, which nothing else does.
                    let Some(incoming) = incoming else { break };
                    // No backlog to wait in, unlike TCP: a refused client learns at once
                    // instead of retransmitting its Initial into silence.
                    let Ok(permit) = limit.clone().try_acquire_owned() else {
                        incoming.refuse();
                        continue;
                    };
                    let task = connection(incoming, permit, shared.clone(), shutdown.clone());
                    connections.spawn(task);
                }
            }
        }
        // Refuses connection attempts from here on rather than leaving them unanswered.
        endpoint.set_server_config(None);
        let deadline = Instant::now() + shared.config.drain_timeout();
        let drain = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout_at(deadline.into(), drain).await.is_err() {
            connections.shutdown().await;
            endpoint.close(H3_NO_ERROR, b"server shutting down");
        }
        // Lets the CONNECTION_CLOSE frames go out before the socket is dropped.
        let _ = tokio::time::timeout(CLOSE_FLUSH, endpoint.wait_idle()).await;
    }
}

fn transport(config: &ServerConfig) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    // Past QUIC's range (2^62 ms) no timeout would ever fire anyway.
    let idle = quinn::IdleTimeout::try_from(config.limits().idle_timeout).ok();
    transport
        .max_idle_timeout(idle)
        .max_concurrent_bidi_streams(VarInt::from_u32(config.max_concurrent_streams().get()))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW));
    if config.proxy().is_some() {
        // CONNECT-UDP: a load's QUIC packets (1,200 bytes at least) ride in this connection's
        // DATAGRAM frames, which QUIC's 1,200-byte starting MTU cannot hold. Start at what a
        // 1,500-byte Ethernet path carries (quinn's own discovery ceiling).
        transport.initial_mtu(1452);
    }
    transport
}

/// One QUIC connection: the handshake, then HTTP/3 until the peer leaves or shutdown drains it.
async fn connection(
    incoming: quinn::Incoming,
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
) {
    let totals = shared.state.totals();
    let handshake = async {
        let connecting = incoming.accept().ok()?;
        tokio::time::timeout(shared.config.tls_handshake_timeout(), connecting).await.ok()?.ok()
    };
    let quic = tokio::select! {
        biased;
        // Nothing has been served on this connection yet, so shutdown can drop it outright.
        _ = shutdown.changed() => return,
        quic = handshake => quic,
    };
    let Some(quic) = quic else {
        // Counted rather than logged, as for TCP: a misconfigured client would otherwise flood
        // stderr with one line per attempt.
        Totals::count(&totals.tls_handshake_failures);
        return;
    };
    Totals::count(&totals.tls_handshakes);
    Totals::count(&totals.http3);
    let mut builder = h3::server::builder();
    // As for HTTP/2: h3's limit bounds memory, the configured cap is checked per request.
    builder.max_field_section_size(u64::from(shared.config.limits().library_header_list_size()));
    // A proxy offers CONNECT-UDP: extended CONNECT (RFC 9220) and HTTP/3 datagrams (RFC 9297).
    let tunnels = shared.config.proxy().map(|_| Arc::new(proxy::Tunnels::new(shutdown.clone())));
    if tunnels.is_some() {
        builder.enable_extended_connect(true).enable_datagram(true);
    }
    let conn = tokio::select! {
        biased;
        _ = shutdown.changed() => return,
        conn = builder.build::<_, Bytes>(h3_quinn::Connection::new(quic.clone())) => conn,
    };
    let Ok(mut conn) = conn else { return };
    // Aborted when the connection ends: its handle would otherwise keep the QUIC connection
    // open past `conn`, and the peer would never get its CONNECTION_CLOSE.
    let carrier =
        tunnels.as_ref().map(|t| tokio::spawn(t.clone().carry(quic.clone(), shared.clone())));
    // Dropping the set when the connection ends aborts requests still running: with the
    // connection gone they could not answer anyway.
    let mut requests = JoinSet::new();
    let mut draining = false;
    let sleeper = crate::timer::LazySleeper::default();
    let limits = *shared.config.limits();
    let mut accepted: u64 = 0;
    loop {
        tokio::select! {
            biased;
            // `changed` fails once the server drops the sender: that is the signal.
            _ = shutdown.changed(), if !draining => {
                draining = true;
                // One past the last accepted request: RFC 9114 §5.2's "first request not
                // processed". h3 rejects later streams with H3_REQUEST_REJECTED, which
                // clients may retry safely.
                if conn.shutdown(1).await.is_err() {
                    break;
                }
            }
            // Reaping finished requests keeps the set from growing with every request.
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            // Also processes the control stream (the peer's SETTINGS and GOAWAY).
            next = conn.accept() => match next {
                Ok(Some(resolver)) => {
                    let task = stream::serve(
                        resolver,
                        shared.clone(),
                        quic.clone(),
                        sleeper.clone(),
                        tunnels.clone(),
                    );
                    requests.spawn(task);
                    accepted += 1;
                    if limits.is_last(accepted) && !draining {
                        shared.state.stats().limit(LimitKind::MaxRequestsReached);
                        draining = true;
                        // As on shutdown: later streams are rejected with H3_REQUEST_REJECTED.
                        if conn.shutdown(1).await.is_err() {
                            break;
                        }
                    }
                }
                // The peer closed the connection (or went away), or h3 saw both sides' GOAWAY
                // and every request finished.
                Ok(None) | Err(_) => break,
            },
        }
        if draining && requests.is_empty() {
            break;
        }
    }
    // Closing discards stream data the peer has not acknowledged yet, such as the end of the
    // last response, and neither h3 nor quinn says when that has arrived. A client that saw
    // GOAWAY may close first (and a connection that failed is closed already); otherwise three
    // times the time an acknowledgement can take covers it, with room for a lost packet.
    if matches!(quic.close_reason(), Some(quinn::ConnectionError::TimedOut)) {
        shared.state.stats().limit(LimitKind::IdleTimeout);
    }
    let grace = (quic.rtt() + MAX_ACK_DELAY) * 3;
    let _ = tokio::time::timeout(grace, quic.closed()).await;
    if let Some(c) = carrier {
        c.abort();
    }
    // Dropping `conn` closes the QUIC connection with H3_NO_ERROR; the endpoint sends it.
}
