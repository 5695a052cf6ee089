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
use shrike_stats::Counter;

use super::h2::{proxy_conn, reason, request, Slot};
use super::{authority_of, Tunnel};
use crate::pool::cx::PoolCx;
use crate::target::Target;
use crate::transport::unless_stopped;

/// The capsule type of an HTTP Datagram (RFC 9297 §3.5).
const DATAGRAM: u64 = 0;
/// A capsule longer than any UDP payload is the proxy's error, not something to buffer.
const MAX_CAPSULE: u64 = 65_535 + 8;

/// A QUIC endpoint whose packets all go through a new CONNECT-UDP tunnel to `target`, which
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
    // An IPv6 literal's colons are percent-encoded in the path (RFC 9298 §2).
    let host = target.host.replace(':', "%3A");
    let uri = format!(
        "{scheme}://{}/.well-known/masque/udp/{host}/{}/",
        authority_of(&t.proxy),
        target.port
    );
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
    let socket = Arc::new(Datagrams { peer, io, _slot: slot });
    let runtime = Arc::new(quinn::TokioRuntime);
    match quinn::Endpoint::new_with_abstract_socket(Default::default(), None, socket, runtime) {
        Ok(e) => Some(e),
        Err(e) => {
            let mut st = cx.state.borrow_mut();
            st.counters.inc(Counter::CxConnectFail);
            st.note_error(|| format!("a QUIC endpoint over the tunnel to {what}: {e}"));
            None
        }
    }
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

fn lost(why: String) -> io::Error {
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
        let mut capsule = BytesMut::with_capacity(data.len() + 10);
        put_varint(&mut capsule, DATAGRAM);
        put_varint(&mut capsule, data.len() as u64 + 1);
        // Context id 0: a UDP payload (RFC 9298 §5).
        capsule.put_u8(0);
        capsule.put_slice(data);
        let mut io = self.io.lock().map_err(|_| lost("the tunnel's lock".into()))?;
        io.send.send_data(capsule.freeze(), false).map_err(|e| lost(reason(&e)))
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
            match capsule(&io.buf)? {
                Some((kind, value)) => {
                    let c = io.buf.split_to(value.end);
                    let payload = &c[value.start..];
                    // Other capsule types and contexts are skipped (RFC 9297 §3.2).
                    let Some(data) = payload.strip_prefix(&[0]).filter(|_| kind == DATAGRAM) else {
                        continue;
                    };
                    let (Some(buf), Some(m)) = (bufs.first_mut(), meta.first_mut()) else {
                        return Poll::Ready(Ok(0));
                    };
                    // Larger than the endpoint reads: dropped, as a socket would truncate it.
                    if data.len() > buf.len() {
                        continue;
                    }
                    buf[..data.len()].copy_from_slice(data);
                    let len = data.len();
                    *m = RecvMeta { addr: self.peer, len, stride: len, ecn: None, dst_ip: None };
                    return Poll::Ready(Ok(1));
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
struct Writable;

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, _: &mut Context) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A whole capsule at the start of `b`: its type and where its value lies; `None` until all
/// of it arrived; an error for one longer than any datagram.
fn capsule(b: &[u8]) -> io::Result<Option<(u64, std::ops::Range<usize>)>> {
    let Some((kind, a)) = varint(b) else { return Ok(None) };
    let Some((len, n)) = varint(&b[a..]) else { return Ok(None) };
    if len > MAX_CAPSULE {
        return Err(lost(format!("the proxy sent a {len}-byte capsule")));
    }
    let value = a + n..a + n + len as usize;
    Ok((value.end <= b.len()).then_some((kind, value)))
}

/// A QUIC variable-length integer (RFC 9000 §16) at the start of `b`, and its length.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let n = 1usize << (first >> 6);
    let rest = b.get(1..n)?;
    let v = rest.iter().fold(u64::from(first & 0x3f), |v, &x| v << 8 | u64::from(x));
    Some((v, n))
}

fn put_varint(b: &mut BytesMut, v: u64) {
    match v {
        0..0x40 => b.put_u8(v as u8),
        0x40..0x4000 => b.put_u16(v as u16 | 0x4000),
        0x4000..0x4000_0000 => b.put_u32(v as u32 | 0x8000_0000),
        _ => b.put_u64(v | 0xc000_0000_0000_0000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_capsules_round_trip_and_wait_for_their_whole() {
        for v in [0, 63, 64, 16_383, 16_384, 1 << 30, (1 << 62) - 1] {
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(varint(&b), Some((v, b.len())), "{v}");
            assert_eq!(varint(&b[..b.len() - 1]), None, "{v} cut short");
        }
        let mut b = BytesMut::new();
        put_varint(&mut b, DATAGRAM);
        put_varint(&mut b, 300);
        b.put_slice(&[7; 300]);
        let whole = capsule(&b).expect("well formed");
        assert_eq!(whole, Some((DATAGRAM, 3..303)));
        assert_eq!(capsule(&b[..302]).expect("well formed"), None);
        let mut huge = BytesMut::new();
        put_varint(&mut huge, DATAGRAM);
        put_varint(&mut huge, 1 << 20);
        assert!(capsule(&huge).is_err());
    }
}
