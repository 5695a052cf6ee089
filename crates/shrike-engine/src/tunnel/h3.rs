//! `CONNECT` over HTTP/3 (RFC 9114 §4.4), Nighthawk's `--tunnel-protocol http3` for HTTP/1.1
//! and HTTP/2 load: each connection of the run is a request stream on a QUIC connection to the
//! proxy (one per worker, reopened when it closes or the proxy sends GOAWAY), and the
//! tunnel's bytes are the stream's DATA frames. The proxy's stream limit is QUIC's: quinn
//! holds a new stream back until the proxy grants credit, as the HTTP/3 load pool does.
//!
//! Written on quinn rather than the h3 crate: h3 0.0.8 always sends `:scheme` and `:path`,
//! which make a `CONNECT` malformed (§4.4; quic-go's server refuses it). A tunnel needs little
//! of HTTP/3: a control stream with empty SETTINGS, one HEADERS frame whose QPACK block uses
//! the static table only (we offer no dynamic table, so the proxy's answer uses none either,
//! RFC 9204 §3.2.3), and DATA frames.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use shrike_h2::capsule::{encode_varint, varint};
use shrike_stats::Counter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::qpack::{connect_block, qpack_status};
use super::{authority_of, proxy_failed, Tunnel};
use crate::config::{Endpoint, Protocol};
use crate::pool::cx::PoolCx;
use crate::transport::{unless_stopped, Transport};

/// HTTP/3 frame and stream types (RFC 9114 §7.2, §6.2).
const DATA: u64 = 0x0;
const HEADERS: u64 = 0x1;
const SETTINGS: u64 = 0x4;
const GOAWAY: u64 = 0x7;
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220) and SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1).
const ENABLE_CONNECT_PROTOCOL: u64 = 0x8;
const H3_DATAGRAM: u64 = 0x33;
const CONTROL_STREAM: u64 = 0x0;
const QPACK_ENCODER_STREAM: u64 = 0x2;
const QPACK_DECODER_STREAM: u64 = 0x3;
/// H3_STREAM_CREATION_ERROR: a unidirectional stream of a type we do not take.
const STREAM_CREATION_ERROR: u32 = 0x103;
/// H3_REQUEST_CANCELLED: the tunnel's end, when it was not finished.
pub(super) const REQUEST_CANCELLED: u32 = 0x10c;
/// The largest frame read whole (a head, SETTINGS); DATA is streamed at any size.
const MAX_FRAME: u64 = 64 * 1024;
/// The largest DATA frame written: larger writes are split.
const MAX_DATA: usize = 64 * 1024;

#[derive(Clone)]
pub(crate) struct QuicProxy {
    pub(super) conn: quinn::Connection,
    peer: Rc<Peer>,
    /// CONNECT-UDP tunnels' inboxes by quarter stream id (RFC 9297 §2.1), which the
    /// connection's datagram reader fills.
    pub(super) inboxes: Arc<Inboxes>,
}

/// What the proxy's control stream said.
#[derive(Default)]
struct Peer {
    /// Closed, or the proxy sent GOAWAY: no new tunnels on it.
    done: Cell<bool>,
    /// The proxy's SETTINGS, once read.
    settings: Cell<Option<PeerSettings>>,
    /// Woken when SETTINGS arrive or the connection closes.
    changed: tokio::sync::Notify,
}

/// The proxy's SETTINGS that CONNECT-UDP needs.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PeerSettings {
    pub(super) extended_connect: bool,
    pub(super) datagrams: bool,
}

impl QuicProxy {
    /// The proxy's SETTINGS; `None` if the connection closed first.
    pub(super) async fn settings(&self) -> Option<PeerSettings> {
        loop {
            let changed = self.peer.changed.notified();
            if let Some(s) = self.peer.settings.get() {
                return Some(s);
            }
            if self.peer.done.get() {
                return None;
            }
            changed.await;
        }
    }
}

/// A CONNECT-UDP tunnel's received datagrams, and the waker of the QUIC endpoint reading them.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) queue: Mutex<(VecDeque<Bytes>, Option<Waker>)>,
    /// The tunnel's stream or the proxy connection ended.
    pub(super) closed: AtomicBool,
}

pub(super) type Inboxes = Mutex<HashMap<u64, Arc<Inbox>>>;

impl Inbox {
    /// Datagrams waiting beyond this are dropped, as a full socket buffer drops them.
    const MAX_QUEUED: usize = 4096;

    fn push(&self, d: Bytes) {
        if let Ok(mut q) = self.queue.lock() {
            if q.0.len() < Self::MAX_QUEUED {
                q.0.push_back(d);
            }
            if let Some(w) = q.1.take() {
                w.wake();
            }
        }
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Relaxed);
        if let Ok(mut q) = self.queue.lock() {
            if let Some(w) = q.1.take() {
                w.wake();
            }
        }
    }
}

/// A tunnelled connection to `endpoint` through the proxy, the target's TLS inside it if any.
pub(crate) async fn connect(cx: &PoolCx, t: &Tunnel, endpoint: &Endpoint) -> Option<Transport> {
    let authority = authority_of(&endpoint.target);
    let proxy = proxy_conn(cx, t).await?;
    cx.state.borrow_mut().counters.inc(Counter::CxTotal);
    let started = Instant::now();
    let attempt = tokio::time::timeout(cx.connect.timeout, request(&proxy, &authority));
    let outcome = unless_stopped(cx, attempt).await?;
    let stream = super::settle(cx, t, &authority, started, outcome)?;
    let inner_tls = endpoint.tls.as_ref().map(|tls| (tls, endpoint.target.authority.as_str()));
    Transport::over(cx, inner_tls, stream).await
}

/// The worker's QUIC connection to the proxy: the open one, or a new one.
pub(super) async fn proxy_conn(cx: &PoolCx, t: &Tunnel) -> Option<QuicProxy> {
    let alive = |c: &QuicProxy| !c.peer.done.get();
    cx.tunnel_quic.get(alive, |_| true, || open(cx, t)).await
}

/// A new QUIC connection to the proxy, its control stream open and its driver spawned on the
/// worker.
async fn open(cx: &PoolCx, t: &Tunnel) -> Option<QuicProxy> {
    // Invariant: the spec refuses an http3 tunnel without TLS to the proxy.
    let Some((tls, mut config)) = t.tls.as_ref().and_then(|tls| Some((tls, tls.quic.clone()?)))
    else {
        return proxy_failed(cx, t, "HTTP/3 to the proxy needs TLS".into());
    };
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(std::time::Duration::from_secs(10)));
    if cx.connect.protocol == Protocol::Http3 {
        // CONNECT-UDP: the load's QUIC packets (1,200 bytes at least) ride in this
        // connection's DATAGRAM frames, which QUIC's 1,200-byte starting MTU cannot hold.
        // Start at what a 1,500-byte Ethernet path carries (quinn's own discovery ceiling).
        transport.initial_mtu(1452);
    }
    config.transport_config(Arc::new(transport));
    let mut last = String::new();
    for addr in &t.proxy.addrs {
        let bind: SocketAddr = match cx.connect.bind_address {
            Some(ip) if ip.is_ipv6() == addr.is_ipv6() => (ip, 0).into(),
            _ if addr.is_ipv6() => (Ipv6Addr::UNSPECIFIED, 0).into(),
            _ => (Ipv4Addr::UNSPECIFIED, 0).into(),
        };
        let endpoint = match quinn::Endpoint::client(bind) {
            Ok(e) => e,
            Err(e) => {
                last = format!("a UDP socket for proxy {addr}: {e}");
                continue;
            }
        };
        let describe = || format!("QUIC handshake with proxy {addr} ({})", tls.describe_sni());
        let connecting = match endpoint.connect_with(config.clone(), *addr, &tls.server_name_str())
        {
            Ok(c) => c,
            Err(e) => {
                last = format!("{} failed: {e}", describe());
                continue;
            }
        };
        let limit = cx.connect.timeout.min(crate::pool::h3::QUIC_HANDSHAKE_TIMEOUT);
        let attempt = tokio::time::timeout(limit, connecting);
        let conn = match unless_stopped(cx, attempt).await? {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                let e = e.to_string();
                last =
                    format!("{} failed: {e}{}", describe(), crate::tls::certificate_hint(&e, true));
                continue;
            }
            Err(_) => {
                last = format!("{} timed out", describe());
                continue;
            }
        };
        cx.state.borrow_mut().counters.inc(Counter::SslHandshake);
        return start(cx, t, conn).await;
    }
    let mut st = cx.state.borrow_mut();
    st.counters.inc(Counter::CxConnectFail);
    st.note_error(|| format!("proxy {}: {last}", t.uri));
    None
}

/// Opens our control stream (SETTINGS: HTTP/3 datagrams; no dynamic table, no push) and
/// spawns the tasks that read the proxy's unidirectional streams and its datagrams for as long
/// as the connection lives.
async fn start(cx: &PoolCx, t: &Tunnel, conn: quinn::Connection) -> Option<QuicProxy> {
    let mut control = match conn.open_uni().await {
        Ok(s) => s,
        Err(e) => return proxy_failed(cx, t, format!("HTTP/3 control stream: {e}")),
    };
    let mut settings = Vec::new();
    put_varint(&mut settings, H3_DATAGRAM);
    put_varint(&mut settings, 1);
    let mut preface = Vec::new();
    put_varint(&mut preface, CONTROL_STREAM);
    put_varint(&mut preface, SETTINGS);
    put_varint(&mut preface, settings.len() as u64);
    preface.extend_from_slice(&settings);
    if let Err(e) = control.write_all(&preface).await {
        return proxy_failed(cx, t, format!("HTTP/3 control stream: {e}"));
    }
    let peer = Rc::new(Peer::default());
    let inboxes = Arc::new(Inboxes::default());
    let proxy = QuicProxy { conn: conn.clone(), peer: peer.clone(), inboxes: inboxes.clone() };
    let datagrams = conn.clone();
    tokio::task::spawn_local(async move {
        // Closing the control stream would be a connection error: it lives with this task.
        let _control = control;
        while let Ok(recv) = conn.accept_uni().await {
            tokio::task::spawn_local(read_uni(recv, peer.clone()));
        }
        peer.done.set(true);
        peer.changed.notify_waiters();
    });
    tokio::task::spawn_local(async move {
        while let Ok(d) = datagrams.read_datagram().await {
            let Some((quarter, n)) = varint(&d) else { continue };
            let inbox = inboxes.lock().ok().and_then(|m| m.get(&quarter).cloned());
            // A datagram for a tunnel already gone is dropped (RFC 9297 §2.1).
            if let Some(inbox) = inbox {
                inbox.push(d.slice(n..));
            }
        }
        if let Ok(m) = inboxes.lock() {
            m.values().for_each(|i| i.close());
        }
    });
    Some(proxy)
}

/// One of the proxy's unidirectional streams: its control stream is read for GOAWAY (which
/// retires the connection for new tunnels), QPACK's are drained (they carry nothing without a
/// dynamic table), and any other kind is refused (RFC 9114 §6.2).
async fn read_uni(recv: quinn::RecvStream, peer: Rc<Peer>) {
    let mut r = tokio::io::BufReader::new(recv);
    let Ok(kind) = read_varint(&mut r).await else { return };
    match kind {
        CONTROL_STREAM => {
            while let (Ok(frame), Ok(len)) = (read_varint(&mut r).await, read_varint(&mut r).await)
            {
                if frame == GOAWAY {
                    peer.done.set(true);
                }
                if frame == SETTINGS && len <= MAX_FRAME {
                    let mut payload = vec![0; len as usize];
                    if r.read_exact(&mut payload).await.is_err() {
                        return;
                    }
                    peer.settings.set(Some(peer_settings(&payload)));
                    peer.changed.notify_waiters();
                    continue;
                }
                let mut frame = (&mut r).take(len);
                let skipped = tokio::io::copy(&mut frame, &mut tokio::io::sink()).await;
                if skipped.ok() != Some(len) {
                    return;
                }
            }
        }
        QPACK_ENCODER_STREAM | QPACK_DECODER_STREAM => {
            let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
        }
        _ => {
            let _ = r.into_inner().stop(quinn::VarInt::from_u32(STREAM_CREATION_ERROR));
        }
    }
}

/// The settings CONNECT-UDP needs from a SETTINGS frame's payload.
fn peer_settings(mut payload: &[u8]) -> PeerSettings {
    let mut s = PeerSettings::default();
    while let Some((id, a)) = varint(payload) {
        let Some((value, b)) = varint(&payload[a..]) else { break };
        match id {
            ENABLE_CONNECT_PROTOCOL => s.extended_connect = value == 1,
            H3_DATAGRAM => s.datagrams = value == 1,
            _ => {}
        }
        payload = &payload[a + b..];
    }
    s
}

async fn read_varint<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<u64> {
    let first = r.read_u8().await?;
    let mut b = [first, 0, 0, 0, 0, 0, 0, 0];
    let n = 1usize << (first >> 6);
    r.read_exact(&mut b[1..n]).await?;
    varint(&b[..n]).map(|(v, _)| v).ok_or_else(|| io::ErrorKind::InvalidData.into())
}

pub(super) fn put_varint(out: &mut Vec<u8>, v: u64) {
    let (b, n) = encode_varint(v);
    out.extend_from_slice(&b[..n]);
}

/// `CONNECT authority` on a new stream, and its 2xx.
async fn request(proxy: &QuicProxy, authority: &str) -> Result<H3Stream, String> {
    let (send, recv, reader) = exchange(proxy, &connect_block(authority)).await?;
    Ok(H3Stream { send, recv, reader, wbuf: Vec::new(), finished: false })
}

/// A request (its QPACK `block`) on a new stream, and its 2xx: the stream, and what was read
/// past the answer.
pub(super) async fn exchange(
    proxy: &QuicProxy,
    block: &[u8],
) -> Result<(quinn::SendStream, quinn::RecvStream, FrameReader), String> {
    let lost = |e: &dyn std::fmt::Display| format!("the proxy connection failed: {e}");
    let (mut send, mut recv) = proxy.conn.open_bi().await.map_err(|e| lost(&e))?;
    let mut frame = Vec::with_capacity(block.len() + 8);
    put_varint(&mut frame, HEADERS);
    put_varint(&mut frame, block.len() as u64);
    frame.extend_from_slice(block);
    send.write_all(&frame).await.map_err(|e| lost(&e))?;
    let mut reader = FrameReader::default();
    loop {
        let (kind, payload) = reader.next_whole(&mut recv).await?;
        match kind {
            HEADERS => {
                let status = qpack_status(&payload)?;
                if (100..200).contains(&status) {
                    // Interim: the final answer follows.
                    continue;
                }
                if !(200..300).contains(&status) {
                    let reason = http::StatusCode::from_u16(status)
                        .ok()
                        .and_then(|s| s.canonical_reason())
                        .unwrap_or("");
                    return Err(format!("the proxy answered {status} {reason}"));
                }
                return Ok((send, recv, reader));
            }
            DATA => return Err("the proxy sent DATA before its answer".into()),
            // Reserved and unknown frame types are skipped (§9).
            _ => {}
        }
    }
}

/// Frames read from a request stream: whole frames for heads, and DATA streamed.
#[derive(Default)]
pub(super) struct FrameReader {
    /// Read and not yet used.
    buf: Vec<u8>,
    /// Bytes of the current DATA frame not yet read.
    data_left: u64,
    /// Bytes of a frame being skipped.
    skip_left: u64,
    /// The stream ended (or trailers came): nothing more is DATA.
    ended: bool,
}

impl FrameReader {
    /// A frame header at the start of `buf`: type, length and header size.
    fn header(&self) -> Option<(u64, u64, usize)> {
        let (kind, a) = varint(&self.buf)?;
        let (len, b) = varint(&self.buf[a..])?;
        Some((kind, len, a + b))
    }

    /// More bytes into `buf`; `false` at the end of the stream.
    fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        recv: &mut quinn::RecvStream,
    ) -> Poll<io::Result<bool>> {
        let mut chunk = [0u8; 4096];
        let mut rb = ReadBuf::new(&mut chunk);
        ready!(Pin::new(recv).poll_read(cx, &mut rb))?;
        self.buf.extend_from_slice(rb.filled());
        Poll::Ready(Ok(!rb.filled().is_empty()))
    }

    /// The next whole frame (before the tunnel is up).
    async fn next_whole(&mut self, recv: &mut quinn::RecvStream) -> Result<(u64, Vec<u8>), String> {
        loop {
            if let Some((kind, len, at)) = self.header() {
                if len > MAX_FRAME {
                    return Err(format!("the proxy sent a {len}-byte frame before its answer"));
                }
                let end = at + len as usize;
                if self.buf.len() >= end {
                    let payload = self.buf[at..end].to_vec();
                    self.buf.drain(..end);
                    return Ok((kind, payload));
                }
            }
            let more = std::future::poll_fn(|cx| self.poll_fill(cx, recv)).await;
            match more {
                Ok(true) => {}
                Ok(false) => return Err("the proxy ended the stream without an answer".into()),
                Err(e) => return Err(stream_error(e)),
            }
        }
    }
}

fn stream_error(e: io::Error) -> String {
    match e.get_ref().and_then(|e| e.downcast_ref::<quinn::ReadError>()) {
        Some(quinn::ReadError::Reset(code)) => format!("the proxy reset the stream (code {code})"),
        _ => e.to_string(),
    }
}

/// A tunnel: one HTTP/3 request stream as a byte stream.
pub(crate) struct H3Stream {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    reader: FrameReader,
    /// A framed write not yet taken by the stream.
    wbuf: Vec<u8>,
    finished: bool,
}

impl std::fmt::Debug for H3Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("H3Stream")
    }
}

impl Drop for H3Stream {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.send.reset(quinn::VarInt::from_u32(REQUEST_CANCELLED));
        }
        let _ = self.recv.stop(quinn::VarInt::from_u32(REQUEST_CANCELLED));
    }
}

impl AsyncRead for H3Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = &mut this.reader;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if r.ended {
                return Poll::Ready(Ok(()));
            }
            if r.data_left > 0 {
                let want = usize::try_from(r.data_left).unwrap_or(usize::MAX).min(buf.remaining());
                if !r.buf.is_empty() {
                    let n = want.min(r.buf.len());
                    buf.put_slice(&r.buf[..n]);
                    r.buf.drain(..n);
                    r.data_left -= n as u64;
                    return Poll::Ready(Ok(()));
                }
                // Straight into the caller's buffer: the frame's length bounds the read.
                let mut limited = ReadBuf::new(buf.initialize_unfilled_to(want));
                ready!(Pin::new(&mut this.recv).poll_read(cx, &mut limited))?;
                let n = limited.filled().len();
                if n == 0 {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the proxy ended the tunnel inside a DATA frame",
                    )));
                }
                buf.advance(n);
                r.data_left -= n as u64;
                return Poll::Ready(Ok(()));
            }
            if r.skip_left > 0 {
                let n = usize::try_from(r.skip_left).unwrap_or(usize::MAX).min(r.buf.len());
                r.buf.drain(..n);
                r.skip_left -= n as u64;
                if r.skip_left > 0 && !ready!(r.poll_fill(cx, &mut this.recv))? {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the proxy ended the tunnel inside a frame",
                    )));
                }
                continue;
            }
            match r.header() {
                Some((kind, len, at)) => {
                    r.buf.drain(..at);
                    match kind {
                        DATA => r.data_left = len,
                        // Trailers end the message.
                        HEADERS => r.ended = true,
                        _ => r.skip_left = len,
                    }
                }
                None => {
                    if !ready!(r.poll_fill(cx, &mut this.recv))? {
                        if r.buf.is_empty() {
                            return Poll::Ready(Ok(()));
                        }
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the proxy ended the tunnel inside a frame header",
                        )));
                    }
                }
            }
        }
    }
}

impl H3Stream {
    /// Writes what is framed and not yet taken.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.wbuf.is_empty() {
            let n = ready!(Pin::new(&mut self.send).poll_write(cx, &self.wbuf))?;
            self.wbuf.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H3Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(MAX_DATA);
        put_varint(&mut this.wbuf, DATA);
        put_varint(&mut this.wbuf, n as u64);
        this.wbuf.extend_from_slice(&buf[..n]);
        // Taken: the frame is ours to finish writing, on this call or the next.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_drain(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if !this.finished {
            this.finished = true;
            let _ = this.send.finish();
        }
        Poll::Ready(Ok(()))
    }
}
