//! CONNECT-UDP (RFC 9298) over HTTP/2's extended CONNECT (RFC 8441): HTTP/3 load through a
//! proxy, Nighthawk's `--tunnel-protocol http2` with HTTP/3 load. Each QUIC connection of the
//! run is a stream on an HTTP/2 connection to the proxy (shared as `CONNECT` tunnels share
//! them: [`super::h2`]), asking for `/.well-known/masque/udp/{host}/{port}/`. Its QUIC packets
//! travel as DATAGRAM capsules (RFC 9297) in the stream's DATA, and the stream is the socket
//! of the connection's own QUIC endpoint ([`quinn::AsyncUdpSocket`]).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use h2::{RecvStream, SendStream};
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use shrike_h2::capsule;
use shrike_stats::Counter;

use super::h2::{proxy_conn, reason, request, Slot};
use super::{authority_of, Tunnel};
use crate::pool::cx::PoolCx;
use crate::target::Target;
use crate::transport::unless_stopped;

/// A QUIC endpoint whose packets all go through a new CONNECT-UDP tunnel over HTTP/2 to
/// `target`, which
/// its connection is to address as `peer`; `None` when the tunnel failed (counted in
/// `benchmark.tunnel_failure` and noted, as a refused `CONNECT` is).
pub(crate) async fn endpoint(
    cx: &PoolCx,
    t: &Tunnel,
    target: &Target,
    peer: SocketAddr,
) -> Option<quinn::Endpoint> {
    let conn = proxy_conn(cx, t).await?;
    let slot = Slot::take(&conn);
    let started = Instant::now();
    let scheme = if t.tls.is_some() { "https" } else { "http" };
    let uri = format!("{scheme}://{}{}", authority_of(&t.proxy), masque_path(target));
    let connect = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(uri)
        .header("capsule-protocol", "?1")
        .extension(h2::ext::Protocol::from_static("connect-udp"));
    let attempt = tokio::time::timeout(cx.connect.timeout, request(&conn, connect));
    let outcome = unless_stopped(cx, attempt).await?;
    // A proxy without extended CONNECT resets the stream (Go's server: PROTOCOL_ERROR); by
    // then its SETTINGS have said why.
    let outcome = outcome.map(|r| {
        r.map_err(|why| match conn.extended_connect() {
            true => why,
            false => format!(
                "{why}; the proxy does not offer extended CONNECT (RFC 8441, \
                 SETTINGS_ENABLE_CONNECT_PROTOCOL), which CONNECT-UDP over HTTP/2 needs"
            ),
        })
    });
    let what = format!("{} (CONNECT-UDP)", authority_of(target));
    let (send, recv) = super::settle(cx, t, &what, started, outcome)?;
    let io = Mutex::new(Io { send, recv, buf: BytesMut::new() });
    endpoint_over(cx, &what, Arc::new(Datagrams { peer, io, _slot: slot }))
}

/// A QUIC endpoint whose socket is a tunnel's (`what` names it in messages); `None` when
/// quinn refuses it (counted as a failed connect and noted).
pub(super) fn endpoint_over(
    cx: &PoolCx,
    what: &str,
    socket: Arc<dyn quinn::AsyncUdpSocket>,
) -> Option<quinn::Endpoint> {
    let runtime = Arc::new(quinn::TokioRuntime);
    // The target may send only QUIC's minimum packet size to us (the max_udp_payload_size
    // transport parameter): a proxy forwarding HTTP/3 datagrams fits that in its own packets
    // (masque-go drops the tunnel over a larger one, "DATAGRAM frame too large"), where a
    // 1,452-byte packet, which the target's path MTU discovery would reach, does not fit.
    let mut config = quinn::EndpointConfig::default();
    if let Err(e) = config.max_udp_payload_size(1200) {
        cx.state.borrow_mut().note_error(|| format!("a QUIC endpoint over {what}: {e}"));
        return None;
    }
    match quinn::Endpoint::new_with_abstract_socket(config, None, socket, runtime) {
        Ok(e) => Some(e),
        Err(e) => {
            let mut st = cx.state.borrow_mut();
            st.counters.inc(Counter::CxConnectFail);
            st.note_error(|| format!("a QUIC endpoint over the tunnel to {what}: {e}"));
            None
        }
    }
}

/// Hands a datagram from `peer` to the QUIC endpoint reading into `bufs`: how many it took,
/// or `None` when `data` is larger than the endpoint reads and is dropped, as a socket would
/// truncate it.
pub(super) fn deliver(
    peer: SocketAddr,
    data: &[u8],
    bufs: &mut [IoSliceMut<'_>],
    meta: &mut [RecvMeta],
) -> Option<usize> {
    let (Some(buf), Some(m)) = (bufs.first_mut(), meta.first_mut()) else { return Some(0) };
    let len = data.len();
    buf.get_mut(..len)?.copy_from_slice(data);
    *m = RecvMeta { addr: peer, len, stride: len, ecn: None, dst_ip: None };
    Some(1)
}

/// RFC 9298 §3's default URI template's path to `target`.
pub(super) fn masque_path(target: &Target) -> String {
    // An IPv6 literal's colons are percent-encoded in the path (RFC 9298 §2).
    let host = target.host.replace(':', "%3A");
    format!("/.well-known/masque/udp/{host}/{}/", target.port)
}

/// The tunnel's stream as a UDP socket: a datagram sent is a capsule written, a capsule read
/// is a datagram received from `peer`.
struct Datagrams {
    peer: SocketAddr,
    io: Mutex<Io>,
    _slot: Slot,
}

struct Io {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// Received bytes not yet a whole capsule.
    buf: BytesMut,
}

impl fmt::Debug for Datagrams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CONNECT-UDP tunnel to {}", self.peer)
    }
}

impl Drop for Datagrams {
    fn drop(&mut self) {
        // The tunnel's end: its stream is reset if not ended already.
        if let Ok(io) = self.io.get_mut() {
            io.send.send_reset(h2::Reason::CANCEL);
        }
    }
}

pub(super) fn lost(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, why)
}

impl AsyncUdpSocket for Datagrams {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable)
    }

    /// Queues the datagram on the stream; the proxy connection's task writes it. The stream's
    /// flow control may hold it there a while, as a socket's buffer would; QUIC's congestion
    /// control bounds how much is ever queued.
    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let data = transmit.contents;
        let prefix = capsule::datagram_prefix(data.len());
        let mut c = BytesMut::with_capacity(data.len() + prefix.as_slice().len());
        c.put_slice(prefix.as_slice());
        c.put_slice(data);
        let mut io = self.io.lock().map_err(|_| lost("the tunnel's lock".into()))?;
        io.send.send_data(c.freeze(), false).map_err(|e| lost(reason(&e)))
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut guard = self.io.lock().map_err(|_| lost("the tunnel's lock".into()))?;
        let io = &mut *guard;
        loop {
            let whole = capsule::parse(&io.buf).map_err(|capsule::TooLong(len)| {
                lost(format!("the proxy sent a {len}-byte capsule"))
            })?;
            match whole {
                Some((kind, value)) => {
                    let c = io.buf.split_to(value.end);
                    let Some(data) = capsule::udp_payload(kind, &c[value.start..]) else {
                        continue;
                    };
                    if let Some(n) = deliver(self.peer, data, bufs, meta) {
                        return Poll::Ready(Ok(n));
                    }
                }
                None => match ready!(io.recv.poll_data(cx)) {
                    Some(Ok(d)) => {
                        // What we took, the proxy may send again (the window stays open).
                        let _ = io.recv.flow_control().release_capacity(d.len());
                        io.buf.extend_from_slice(&d);
                    }
                    Some(Err(e)) => return Poll::Ready(Err(lost(reason(&e)))),
                    None => {
                        let why = "the proxy ended the CONNECT-UDP stream".to_string();
                        return Poll::Ready(Err(lost(why)));
                    }
                },
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        // The tunnel has no address of its own; QUIC only asks which family it is.
        Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
    }
}

/// Always writable: a send is queued on the stream, never refused.
#[derive(Debug)]
pub(super) struct Writable;

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, _: &mut Context) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
