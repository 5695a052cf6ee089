//! Opening a connection: TCP, then TLS (with ALPN) for `https://` targets. Both pools use this,
//! and both codecs run unchanged over either kind of stream through [`Transport`].
//!
//! The handshake happens inside the connect, so it is part of `queue_to_connect`, exactly as
//! Nighthawk measures it.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use rustls::{AlertDescription, HandshakeKind};
use shrike_stats::Counter;
use shrike_uring::UringStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::config::{Endpoint, Protocol};
use crate::pool::cx::PoolCx;
use crate::stamped::StampedTcp;
use crate::tls::TlsClient;

/// A connected stream, plain or TLS, on the run's I/O backend: what a protocol reads and
/// writes, as any tokio stream. An enum inside rather than a boxed trait object so the h1 hot
/// path stays statically dispatched.
#[derive(Debug)]
pub struct Transport(Stream);

#[derive(Debug)]
pub(crate) enum Stream {
    Plain(Socket),
    /// TLS to the target, or to a proxy tunnelling to a plain target.
    Tls(Box<TlsStream<Socket>>),
    /// TLS to the target inside a TLS connection to a proxy's tunnel.
    TlsInTls(Box<TlsStream<TlsStream<Socket>>>),
    /// A tunnel that is a stream of an HTTP/2 connection to the proxy, and TLS inside one.
    H2(Box<crate::tunnel::h2::H2Stream>),
    TlsInH2(Box<TlsStream<crate::tunnel::h2::H2Stream>>),
    /// A tunnel that is a request stream of a QUIC connection to the proxy, and TLS inside one.
    H3(Box<crate::tunnel::h3::H3Stream>),
    TlsInH3(Box<TlsStream<crate::tunnel::h3::H3Stream>>),
}

/// A TCP connection on the run's I/O backend: tokio's epoll (with the kernel's receive
/// timestamps under `--read-coalesce`), or the worker's io_uring (which stamps its own).
#[derive(Debug)]
pub(crate) enum Socket {
    Tcp(TcpStream),
    Stamped(StampedTcp),
    Uring(UringStream),
}

impl Transport {
    /// When the last bytes read arrived, by the kernel's stamp, on a stream that has them
    /// (`--read-coalesce`); `None` elsewhere, where the caller's clock read is the arrival.
    pub fn arrival(&self) -> Option<Instant> {
        let socket = match &self.0 {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_ref().0,
            Stream::TlsInTls(t) => t.get_ref().0.get_ref().0,
            Stream::H2(_) | Stream::TlsInH2(_) | Stream::H3(_) | Stream::TlsInH3(_) => return None,
        };
        match socket {
            Socket::Stamped(s) => s.arrival(),
            Socket::Uring(s) => s.arrival(),
            Socket::Tcp(_) => None,
        }
    }
}

impl Transport {
    /// Writes what a plain epoll TCP socket takes at once, without a task context: the
    /// readiness check and one `send`, where `poll_write` adds the cooperative budget and
    /// a waker registration on every request. `Ok(0)` on every other
    /// stream (TLS must be flushed; io_uring submits) and when the socket is full: the
    /// caller then writes the rest the usual way.
    #[inline]
    pub fn try_send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Stream::Plain(Socket::Tcp(s)) = &mut self.0 else { return Ok(0) };
        match s.try_write(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }
}

/// `AsyncRead` and `AsyncWrite` for an enum of streams, by delegating to the variant.
macro_rules! delegate_io {
    ($ty:ident { $($variant:ident),+ }) => {
        impl AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($ty::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }

        impl AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $($ty::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $($ty::$variant(s) => Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $($ty::$variant(s) => s.is_write_vectored(),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($ty::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($ty::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_io!(Stream { Plain, Tls, TlsInTls, H2, TlsInH2, H3, TlsInH3 });

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
delegate_io!(Socket { Tcp, Stamped, Uring });

/// `stream` on the worker's io_uring when it has one (`--io-backend io_uring`), else on
/// epoll; either way stamped when `stamp` (`--read-coalesce`).
fn on_backend(stream: TcpStream, stamp: bool) -> io::Result<Socket> {
    match shrike_uring::current() {
        None if stamp => Ok(Socket::Stamped(StampedTcp::new(stream)?)),
        None => Ok(Socket::Tcp(stream)),
        Some(driver) => Ok(Socket::Uring(UringStream::new(driver, stream.into_std()?, stamp)?)),
    }
}

/// Connects to the target (trying each resolved address in order), then runs the TLS
/// handshake if the run has TLS. Counts `upstream_cx_total` per TCP connection; a failure is
/// counted in `upstream_cx_connect_fail` (or a TLS/ALPN failure also in
/// `upstream_cx_protocol_error` when the server spoke the wrong protocol) and noted with a
/// message that names the peer and the reason.
///
/// Through a tunnel ([`crate::tunnel`]), the TCP connection (and its count) is to the proxy,
/// and the target's TLS, if any, runs inside the tunnel.
///
/// The tunnels' futures are boxed: inline, they made this future (which every connection's
/// open holds, all at once when connections are prefetched) three times its direct size, and
/// the heap it grew at the start of a run stayed resident: 9.5 KB per connection instead of
/// 3.9 KB in `bench/conn_memory.py` with 9,000 connections (2026-12-06).
pub(crate) async fn connect(cx: &PoolCx, endpoint: &Endpoint) -> Option<Transport> {
    match cx.connect.tunnel.as_deref() {
        Some(t) if t.protocol == Protocol::Http2 => {
            Box::pin(crate::tunnel::h2::connect(cx, t, endpoint)).await
        }
        Some(t) if t.protocol == Protocol::Http3 => {
            Box::pin(crate::tunnel::h3::connect(cx, t, endpoint)).await
        }
        Some(t) => {
            let (addr, stream) = dial(cx, &t.proxy.addrs, "proxy ").await?;
            cx.state.borrow_mut().counters.inc(Counter::CxTotal);
            Box::pin(crate::tunnel::through(cx, t, endpoint, &addr, stream)).await
        }
        None => {
            let (addr, stream) = dial(cx, &endpoint.target.addrs, "").await?;
            cx.state.borrow_mut().counters.inc(Counter::CxTotal);
            let peer = addr.to_string();
            Transport::over(cx, endpoint.tls.as_ref().map(|t| (t, peer.as_str())), stream).await
        }
    }
}

/// A TCP connection to the first of `addrs` that takes one, on the run's I/O backend; `whom`
/// prefixes the address in messages (`"proxy "`). A failure of all is counted in
/// `upstream_cx_connect_fail` (and `_timeout`) and noted.
pub(crate) async fn dial(
    cx: &PoolCx,
    addrs: &[SocketAddr],
    whom: &str,
) -> Option<(SocketAddr, Socket)> {
    let cfg = &cx.connect;
    let mut last_err = String::new();
    let mut timed_out = false;
    for addr in addrs {
        if cfg.bind_address.is_some_and(|b| b.is_ipv4() != addr.is_ipv4()) {
            last_err =
                format!("connect to {whom}{addr}: the bind address is of the other IP family");
            continue;
        }
        let attempt = tokio::time::timeout(cfg.timeout, open(*addr, cfg.bind_address));
        let attempt = unless_stopped(cx, attempt).await?;
        let stream = match attempt {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                last_err = format!("connect to {whom}{addr}: {e}");
                continue;
            }
            Err(_) => {
                timed_out = true;
                let secs = cfg.timeout.as_secs_f64();
                last_err = format!("connect to {whom}{addr}: timed out after {secs}s");
                continue;
            }
        };
        // Requests are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        match on_backend(stream, cfg.stamp_receives) {
            Ok(s) => return Some((*addr, s)),
            Err(e) => {
                last_err = format!("connect to {whom}{addr}: setting up the socket's I/O: {e}")
            }
        }
    }
    let mut st = cx.state.borrow_mut();
    st.counters.inc(Counter::CxConnectFail);
    if timed_out {
        st.counters.inc(Counter::CxConnectTimeout);
    }
    st.note_error(|| last_err);
    None
}

/// `attempt`'s outcome, or `None` once the run is stopped (a signal or a predicate): no request
/// has gone out on a connection still being set up, so finishing the stop never waits out a
/// stalled connect or handshake. Giving up is no failure of the peer's, and is not counted as
/// one.
pub(crate) async fn unless_stopped<F: std::future::Future>(
    cx: &PoolCx,
    attempt: F,
) -> Option<F::Output> {
    tokio::select! {
        biased;
        _ = cx.stop.stopped() => None,
        out = attempt => Some(out),
    }
}

/// A TCP connection to `addr`, from `bind` (kernel-chosen port) when the run has a source
/// address.
async fn open(addr: std::net::SocketAddr, bind: Option<std::net::IpAddr>) -> io::Result<TcpStream> {
    let Some(ip) = bind else {
        return TcpStream::connect(addr).await;
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.bind((ip, 0).into()).map_err(|e| io::Error::new(e.kind(), format!("bind {ip}: {e}")))?;
    socket.connect(addr).await
}

/// Plain words for the handshake failures users cause by pointing `https://` at the wrong
/// port: rustls reports them in TLS record terms ("corrupt message of type
/// InvalidContentType") that do not say the server is simply not speaking TLS.
fn not_tls_reason(e: &io::Error) -> Option<&'static str> {
    use rustls::InvalidMessage as M;
    match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        // A plaintext HTTP server answers the ClientHello with "HTTP/1.1 400 ...": its first
        // bytes parse as an unknown record type, version or an oversized length.
        Some(rustls::Error::InvalidMessage(
            M::InvalidContentType | M::UnknownProtocolVersion | M::MessageTooLarge,
        )) => Some("the server did not answer TLS (is it plain HTTP?)"),
        Some(_) => None,
        None => match e.kind() {
            io::ErrorKind::ConnectionReset => Some(
                "the server reset the connection during the TLS handshake (is it serving TLS \
                 on this port? does it refuse this TLS version or server name?)",
            ),
            io::ErrorKind::UnexpectedEof => Some(
                "the server closed the connection during the TLS handshake (is it serving TLS \
                 on this port?)",
            ),
            _ => None,
        },
    }
}

/// The TLS half of [`connect`]: handshake with `peer` (the target, or a proxy), check the ALPN
/// answer against `protocol`, count the handshake and whether it resumed a session.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &PoolCx,
    tls: &TlsClient,
    peer: &str,
    protocol: Protocol,
    stream: S,
) -> Option<TlsStream<S>> {
    let cfg = &cx.connect;
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    let describe = || format!("TLS handshake with {peer} ({})", tls.describe_sni());
    let handshake = connector.connect(tls.server_name.clone(), stream);
    let fail = |cx: &PoolCx, msg: String, protocol_error: bool| {
        let mut st = cx.state.borrow_mut();
        st.counters.inc(Counter::CxConnectFail);
        if protocol_error {
            st.counters.inc(Counter::CxProtocolError);
        }
        st.note_error(|| msg);
        None
    };
    let handshake = unless_stopped(cx, tokio::time::timeout(cfg.timeout, handshake)).await?;
    let stream = match handshake {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            // OpenSSL-based servers refuse an ALPN list they share nothing with by alert
            // rather than by picking another protocol; say what that means.
            let no_alpn = matches!(
                e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
                Some(rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol))
            );
            let hint = if no_alpn {
                format!(
                    " (the server does not offer {} via ALPN {:?})",
                    protocol.name(),
                    String::from_utf8_lossy(protocol.alpn())
                )
            } else {
                String::new()
            };
            let advice = crate::tls::certificate_hint(&e.to_string(), peer.starts_with("proxy "));
            // The plain-words reason leads (it is what the user must act on); rustls's own
            // text follows for whoever needs the detail.
            let msg = match not_tls_reason(&e) {
                Some(reason) => format!("{} failed: {reason}; rustls: {e}", describe()),
                None => format!("{} failed: {e}{hint}{advice}", describe()),
            };
            return fail(cx, msg, no_alpn);
        }
        Err(_) => {
            let mut st = cx.state.borrow_mut();
            st.counters.inc(Counter::CxConnectTimeout);
            drop(st);
            let msg = format!("{} timed out after {}s", describe(), cfg.timeout.as_secs_f64());
            return fail(cx, msg, false);
        }
    };
    let (_, conn) = stream.get_ref();
    let alpn = conn.alpn_protocol();
    let wanted = protocol.alpn();
    // A server that ignores ALPN speaks HTTP/1.1, the protocol ALPN is optional for; HTTP/2
    // over TLS is only ever negotiated (RFC 9113 §3.2), so no ALPN answer is a mismatch.
    let ok = match alpn {
        Some(p) => p == wanted,
        None => protocol == Protocol::Http1,
    };
    if !ok {
        let got = alpn.map_or_else(
            || "no protocol".to_string(),
            |p| format!("{:?}", String::from_utf8_lossy(p)),
        );
        // A proxy that negotiates nothing speaks HTTP/1.1 only (squid's https_port does):
        // an HTTP/2 tunnel needs one that offers h2.
        let msg = match (alpn, peer.starts_with("proxy ")) {
            (None | Some(b"http/1.1"), true) => format!(
                "{}: the proxy speaks HTTP/1.1 only (it selected {got} via ALPN): \
                 --tunnel-protocol {} needs a proxy that negotiates {:?}; use \
                 --tunnel-protocol http1",
                describe(),
                protocol.name(),
                String::from_utf8_lossy(wanted)
            ),
            _ => format!(
                "{}: the server selected {got} via ALPN but {} was requested ({:?})",
                describe(),
                protocol.name(),
                String::from_utf8_lossy(wanted)
            ),
        };
        return fail(cx, msg, true);
    }
    let resumed = conn.handshake_kind() == Some(HandshakeKind::Resumed);
    let mut st = cx.state.borrow_mut();
    st.counters.inc(Counter::SslHandshake);
    if resumed {
        st.counters.inc(Counter::SslSessionReused);
    }
    Some(stream)
}

/// A stream the target's connection can run over (a socket, a TLS connection to a proxy, a
/// proxy's HTTP/2 stream), and the [`Stream`]s it makes plain and with the target's TLS inside.
pub(crate) trait Carrier: AsyncRead + AsyncWrite + Unpin + Sized {
    fn plain(self) -> Stream;
    fn with_tls(s: TlsStream<Self>) -> Stream;
}

impl Carrier for Socket {
    fn plain(self) -> Stream {
        Stream::Plain(self)
    }
    fn with_tls(s: TlsStream<Self>) -> Stream {
        Stream::Tls(Box::new(s))
    }
}

impl Carrier for TlsStream<Socket> {
    fn plain(self) -> Stream {
        Stream::Tls(Box::new(self))
    }
    fn with_tls(s: TlsStream<Self>) -> Stream {
        Stream::TlsInTls(Box::new(s))
    }
}

impl Carrier for crate::tunnel::h2::H2Stream {
    fn plain(self) -> Stream {
        Stream::H2(Box::new(self))
    }
    fn with_tls(s: TlsStream<Self>) -> Stream {
        Stream::TlsInH2(Box::new(s))
    }
}

impl Carrier for crate::tunnel::h3::H3Stream {
    fn plain(self) -> Stream {
        Stream::H3(Box::new(self))
    }
    fn with_tls(s: TlsStream<Self>) -> Stream {
        Stream::TlsInH3(Box::new(s))
    }
}

impl Transport {
    /// The target's connection over `s`: as it is, or with the target's TLS (`tls`, and the
    /// peer named in messages) inside it.
    pub(crate) async fn over<S: Carrier>(
        cx: &PoolCx,
        tls: Option<(&TlsClient, &str)>,
        s: S,
    ) -> Option<Transport> {
        Some(Transport(match tls {
            None => s.plain(),
            Some((t, peer)) => S::with_tls(handshake(cx, t, peer, cx.connect.protocol, s).await?),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::cx::ConnectOptions;
    use crate::requests::Renderer;
    use crate::stop::StopHandle;
    use crate::target::Target;
    use std::time::Duration;

    /// Every connection's open holds this future (all of them at once when prefetched), and
    /// the heap grown for them stays resident. A tunnel's steps inline in it tripled it
    /// (bench/conn_memory.py: 9.5 KB per connection instead of 3.9 KB); boxed, they cost the
    /// direct path a pointer.
    #[test]
    fn the_connect_future_stays_the_size_of_a_direct_connect() {
        let options = ConnectOptions {
            timeout: Duration::from_secs(1),
            bind_address: None,
            protocol: Protocol::Http1,
            stamp_receives: false,
            tunnel: None,
        };
        let renderer = Renderer::new(0, 1, 0);
        let cx = PoolCx::new(StopHandle::new(), options, Duration::from_secs(1), renderer, &[]);
        let target = Target::parse("http://127.0.0.1:1/").expect("a literal address");
        let endpoint = Endpoint { target, tls: None };
        let size = std::mem::size_of_val(&connect(&cx, &endpoint));
        assert!(size <= 3 * 1024, "{size} bytes");
    }
}
