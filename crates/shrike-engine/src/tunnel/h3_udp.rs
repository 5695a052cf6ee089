//! CONNECT-UDP (RFC 9298) over HTTP/3 (RFC 9220's extended CONNECT): HTTP/3 load through a
//! MASQUE proxy, each QUIC connection of the run a request stream on the worker's QUIC
//! connection to the proxy ([`super::h3`]). Its QUIC packets travel as HTTP/3 datagrams
//! (RFC 9297: QUIC DATAGRAM frames, each led by the stream's quarter id and context id 0),
//! which the proxy connection's reader sorts into each tunnel's inbox; the tunnel is the
//! socket of the connection's own QUIC endpoint ([`quinn::AsyncUdpSocket`]).
//!
//! Nighthawk refuses HTTP/3 load over an HTTP/3 tunnel; MASQUE relays (masque-go, Cloudflare's)
//! speak only this, so Shrike carries it.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, SendDatagramError, UdpPoller};
use shrike_h2::capsule;

use super::h3::{exchange, proxy_conn, put_varint, Inbox, Inboxes, REQUEST_CANCELLED};
use super::qpack::connect_udp_block;
use super::udp::{deliver, endpoint_over, lost, masque_path, Writable};
use super::{authority_of, Tunnel};
use crate::pool::cx::PoolCx;
use crate::target::Target;
use crate::transport::unless_stopped;

/// A QUIC endpoint whose packets all go through a new CONNECT-UDP tunnel to `target`, which
/// its connection is to address as `peer`; `None` when the tunnel failed (counted in
/// `benchmark.tunnel_failure` and noted, as a refused `CONNECT` is).
pub(super) async fn endpoint(
    cx: &PoolCx,
    t: &Tunnel,
    target: &Target,
    peer: SocketAddr,
) -> Option<quinn::Endpoint> {
    let proxy = proxy_conn(cx, t).await?;
    let started = Instant::now();
    let what = format!("{} (CONNECT-UDP)", authority_of(target));
    let attempt = tokio::time::timeout(cx.connect.timeout, open(&proxy, t, target, peer));
    let outcome = unless_stopped(cx, attempt).await?;
    let socket = super::settle(cx, t, &what, started, outcome)?;
    endpoint_over(cx, &what, Arc::new(socket))
}

/// The extended CONNECT and its 2xx, once the proxy's SETTINGS allow it.
async fn open(
    proxy: &super::h3::QuicProxy,
    t: &Tunnel,
    target: &Target,
    peer: SocketAddr,
) -> Result<H3Datagrams, String> {
    let settings = proxy.settings().await.ok_or("the proxy closed the connection")?;
    if !settings.extended_connect {
        return Err("the proxy does not offer extended CONNECT (RFC 9220, \
                    SETTINGS_ENABLE_CONNECT_PROTOCOL), which CONNECT-UDP over HTTP/3 needs"
            .into());
    }
    if !settings.datagrams {
        return Err("the proxy does not offer HTTP/3 datagrams (RFC 9297, SETTINGS_H3_DATAGRAM), \
                    which CONNECT-UDP over HTTP/3 carries"
            .into());
    }
    let block = connect_udp_block(&authority_of(&t.proxy), &masque_path(target));
    let (send, recv, _) = exchange(proxy, &block).await?;
    let quarter = u64::from(send.id()) / 4;
    let inbox = Arc::new(Inbox::default());
    if let Ok(mut m) = proxy.inboxes.lock() {
        m.insert(quarter, inbox.clone());
    }
    // The stream carries no capsules we use: read and dropped to its end, which ends the
    // tunnel. Aborted (and the stream stopped) when the tunnel is dropped.
    let ended = inbox.clone();
    let reader = tokio::task::spawn_local(async move {
        let mut recv = recv;
        let _ = tokio::io::copy(&mut recv, &mut tokio::io::sink()).await;
        ended.close();
    });
    let mut prefix = Vec::with_capacity(9);
    put_varint(&mut prefix, quarter);
    // Context id 0: a UDP payload (RFC 9298 §5).
    prefix.push(0);
    Ok(H3Datagrams {
        peer,
        conn: proxy.conn.clone(),
        prefix,
        quarter,
        inbox,
        inboxes: proxy.inboxes.clone(),
        send: Mutex::new(send),
        reader: reader.abort_handle(),
    })
}

/// The tunnel as a UDP socket: a datagram sent is an HTTP/3 datagram on the proxy
/// connection; one received is what the proxy connection's reader put in `inbox`.
struct H3Datagrams {
    peer: SocketAddr,
    conn: quinn::Connection,
    /// The quarter stream id and context id every datagram starts with.
    prefix: Vec<u8>,
    quarter: u64,
    inbox: Arc<Inbox>,
    inboxes: Arc<Inboxes>,
    /// The request stream: open for as long as the tunnel is.
    send: Mutex<quinn::SendStream>,
    /// The task reading the stream's other half.
    reader: tokio::task::AbortHandle,
}

impl fmt::Debug for H3Datagrams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CONNECT-UDP tunnel over HTTP/3 to {}", self.peer)
    }
}

impl Drop for H3Datagrams {
    fn drop(&mut self) {
        if let Ok(mut m) = self.inboxes.lock() {
            m.remove(&self.quarter);
        }
        if let Ok(send) = self.send.get_mut() {
            let _ = send.reset(quinn::VarInt::from_u32(REQUEST_CANCELLED));
        }
        self.reader.abort();
    }
}

impl AsyncUdpSocket for H3Datagrams {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable)
    }

    /// Queues the datagram on the proxy connection. One too large for its DATAGRAM frames (a
    /// path MTU probe of the load's connection) is dropped, as a link drops it.
    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let mut d = BytesMut::with_capacity(self.prefix.len() + transmit.contents.len());
        d.put_slice(&self.prefix);
        d.put_slice(transmit.contents);
        match self.conn.send_datagram(d.freeze()) {
            Ok(()) | Err(SendDatagramError::TooLarge) => Ok(()),
            Err(e) => Err(lost(format!("the proxy connection: {e}"))),
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut q = self.inbox.queue.lock().map_err(|_| lost("the tunnel's lock".into()))?;
        while let Some(d) = q.0.pop_front() {
            // Other contexts are skipped (RFC 9298 §4).
            let Some(data) = capsule::udp_payload(capsule::DATAGRAM, &d) else { continue };
            if let Some(n) = deliver(self.peer, data, bufs, meta) {
                return Poll::Ready(Ok(n));
            }
        }
        if self.inbox.closed.load(Relaxed) {
            return Poll::Ready(Err(lost("the proxy ended the CONNECT-UDP tunnel".into())));
        }
        q.1 = Some(cx.waker().clone());
        Poll::Pending
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        // The tunnel has no address of its own; QUIC only asks which family it is.
        Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
    }
}
