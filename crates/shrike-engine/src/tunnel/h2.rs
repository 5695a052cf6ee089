//! `CONNECT` over HTTP/2 (RFC 9113 §8.5): each connection of the run is a stream on an HTTP/2
//! connection to the proxy, which carries as many tunnels as the proxy allows streams; a
//! worker opens another when its connections are full. The h2 crate runs the proxy
//! connection (its task drives it); the tunnel's bytes are the stream's DATA frames.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use shrike_stats::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{authority_of, proxy_failed, Tunnel};
use crate::config::Endpoint;
use crate::pool::cx::PoolCx;
use crate::transport::{dial, handshake, unless_stopped, Transport};

#[derive(Clone)]
pub(crate) struct ProxyConn {
    send: SendRequest<Bytes>,
    /// Tunnels open or being opened on it (each holds a [`Slot`]; atomic because a UDP
    /// tunnel's slot lives in the QUIC endpoint's socket, which must be `Send`).
    live: Arc<AtomicUsize>,
    /// Set by its driver task when the connection ends.
    closed: Rc<Cell<bool>>,
}

/// One of a proxy connection's streams, taken before its `CONNECT` is sent and given back when
/// the tunnel ends (or its `CONNECT` fails).
pub(super) struct Slot(Arc<AtomicUsize>);

impl Slot {
    pub(super) fn take(conn: &ProxyConn) -> Slot {
        conn.live.fetch_add(1, Relaxed);
        Slot(conn.live.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// A tunnelled connection to `endpoint` through the proxy, the target's TLS inside it if any.
pub(crate) async fn connect(cx: &PoolCx, t: &Tunnel, endpoint: &Endpoint) -> Option<Transport> {
    let authority = authority_of(&endpoint.target);
    let conn = proxy_conn(cx, t).await?;
    let slot = Slot::take(&conn);
    cx.state.borrow_mut().counters.inc(Counter::CxTotal);
    let started = Instant::now();
    let connect = http::Request::builder().method(http::Method::CONNECT).uri(&authority);
    let attempt = tokio::time::timeout(cx.connect.timeout, request(&conn, connect));
    let outcome = unless_stopped(cx, attempt).await?;
    let (send, recv) = super::settle(cx, t, &authority, started, outcome)?;
    let stream = H2Stream { send, recv, pending: Bytes::new(), _slot: slot };
    let inner_tls = endpoint.tls.as_ref().map(|tls| (tls, endpoint.target.authority.as_str()));
    Transport::over(cx, inner_tls, stream).await
}

impl ProxyConn {
    /// Whether the proxy's SETTINGS offered extended CONNECT (RFC 8441).
    pub(super) fn extended_connect(&self) -> bool {
        self.send.is_extended_connect_protocol_enabled()
    }
}

/// A proxy connection with room for another stream: one open, or a new one.
pub(super) async fn proxy_conn(cx: &PoolCx, t: &Tunnel) -> Option<ProxyConn> {
    let alive = |c: &ProxyConn| !c.closed.get();
    let room = |c: &ProxyConn| c.live.load(Relaxed) < c.send.current_max_send_streams();
    cx.tunnel_conns.get(alive, room, || open(cx, t)).await
}

/// A new HTTP/2 connection to the proxy (TLS with ALPN h2 when the tunnel has TLS, prior
/// knowledge otherwise), its driver spawned on the worker.
async fn open(cx: &PoolCx, t: &Tunnel) -> Option<ProxyConn> {
    let (addr, socket) = dial(cx, &t.proxy.addrs, "proxy ").await?;
    let io = match &t.tls {
        None => Transport::over(cx, None, socket).await?,
        Some(tls) => {
            let s = handshake(
                cx,
                tls,
                &format!("proxy {addr}"),
                crate::config::Protocol::Http2,
                socket,
            )
            .await?;
            Transport::over(cx, None, s).await?
        }
    };
    let attempt = tokio::time::timeout(cx.connect.timeout, h2::client::handshake(io));
    let (send, connection) = match unless_stopped(cx, attempt).await? {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => return proxy_failed(cx, t, format!("the HTTP/2 handshake failed: {e}")),
        Err(_) => return proxy_failed(cx, t, "the HTTP/2 handshake timed out".into()),
    };
    let closed = Rc::new(Cell::new(false));
    let on_end = closed.clone();
    tokio::task::spawn_local(async move {
        let _ = connection.await;
        on_end.set(true);
    });
    Some(ProxyConn { send, live: Arc::default(), closed })
}

/// A `CONNECT` (`connect`, its body to come) on a new stream, and its 2xx.
pub(super) async fn request(
    conn: &ProxyConn,
    connect: http::request::Builder,
) -> Result<(SendStream<Bytes>, RecvStream), String> {
    let connect = connect.body(()).map_err(|e| format!("a CONNECT that cannot be sent: {e}"))?;
    let mut send = conn.send.clone().ready().await.map_err(|e| reason(&e))?;
    let (answer, stream) = send.send_request(connect, false).map_err(|e| reason(&e))?;
    let answer = answer.await.map_err(|e| reason(&e))?;
    let status = answer.status();
    if !status.is_success() {
        return Err(format!(
            "the proxy answered {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        ));
    }
    Ok((stream, answer.into_body()))
}

pub(super) fn reason(e: &h2::Error) -> String {
    match e.reason() {
        Some(r) if e.is_remote() => format!("the proxy reset the stream ({r:?})"),
        _ => e.to_string(),
    }
}

/// A tunnel: one HTTP/2 stream as a byte stream.
pub(crate) struct H2Stream {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// Received and not yet read.
    pending: Bytes,
    _slot: Slot,
}

impl std::fmt::Debug for H2Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("H2Stream")
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        // The tunnel's end: the stream is reset if it was not ended already.
        self.send.send_reset(h2::Reason::CANCEL);
    }
}

fn to_io(e: h2::Error) -> io::Error {
    match e.reason() {
        Some(r) => {
            io::Error::new(io::ErrorKind::ConnectionReset, format!("tunnel stream reset: {r:?}"))
        }
        None => io::Error::other(e),
    }
}

impl AsyncRead for H2Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(to_io(e))),
                Some(Ok(data)) => {
                    // What we took, the proxy may send again (the window stays open).
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    this.pending = data;
                }
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.send.reserve_capacity(buf.len());
        match ready!(this.send.poll_capacity(cx)) {
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Some(Err(e)) => Poll::Ready(Err(to_io(e))),
            Some(Ok(n)) => {
                let n = n.min(buf.len());
                match this.send.send_data(Bytes::copy_from_slice(&buf[..n]), false) {
                    Ok(()) => Poll::Ready(Ok(n)),
                    Err(e) => Poll::Ready(Err(to_io(e))),
                }
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The connection's task writes what was queued.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        Poll::Ready(this.send.send_data(Bytes::new(), true).map_err(to_io))
    }
}
