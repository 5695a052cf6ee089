//! HTTP/2 for the multiplexing pool ([`super::mux`]): connecting (h2c with prior knowledge,
//! or TLS with ALPN `h2`), driving a connection with the client codec of [`conn`], one
//! request's exchange, and what HTTP/2's errors mean for the run. Response bodies are counted
//! and their flow-control window given back as data arrives; nothing is stored.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderName, Request};
use shrike_stats::{Counter, Counters};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::mux::{with_trace, Answer, Mux, MuxConn, MuxPool, StreamFailure};
use super::{capacity_freed, Pool, Pools};
pub use crate::requests::h2::RequestTemplate;
use crate::requests::Renderer;
use crate::trace::TraceIds;
use crate::transport::{self, Transport};
use conn::{Ended, Failure, Handle};

pub mod captured;
mod conn;
use shrike_h2::{frame, hpack};

/// For the fuzz target (`fuzz/fuzz_targets/h2_response.rs`): see [`conn::fuzz_server_bytes`].
#[doc(hidden)]
pub fn fuzz_server_bytes(data: &[u8]) {
    conn::fuzz_server_bytes(data);
}

/// The HTTP/2 protocol of the multiplexing pool.
pub(crate) struct H2;

type H2Conn = MuxConn<H2>;

impl Mux for H2 {
    type Sender = Handle;
    type ConnData = ();
    /// Socket bytes of every connection, counted under the codec.
    type PoolData = Rc<IoBytes>;
    const NAME: &'static str = "h2";

    fn pool(pool: &Pool) -> Option<&MuxPool<H2>> {
        match pool {
            Pool::H2(p) => Some(p),
            _ => None,
        }
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS arrive; streams a
    /// server with a lower limit refuses are retried), and no GOAWAY yet.
    fn server_room(sender: &Handle, active: u32) -> bool {
        sender.has_room(active)
    }

    /// Connect, start the streams that waited, then drive the connection until it closes.
    async fn connection_task(pools: Rc<Pools>, conn: Rc<H2Conn>) {
        let p = MuxPool::<H2>::of(&pools, conn.pool);
        let endpoint = &pools.cfg.endpoints[conn.pool];
        let Some(io) = transport::connect(&pools.cx, endpoint).await else {
            p.connect_failed(&pools, &conn);
            return;
        };
        let io = Counted { io, bytes: p.data.clone() };
        let c = conn::Conn::new(p.latency_header.clone());
        pools.cx.state.borrow_mut().counters.inc(Counter::CxHttp2Total);
        p.connected(&pools, &conn, c.handle());
        let ended = conn::drive(&c, io).await;
        p.disconnected(&conn);
        connection_ended(&pools, &conn, ended);
        // A connection slot is free again.
        capacity_freed(&pools);
    }

    /// The HPACK head block and the body. A fixed request's block was encoded once, with its
    /// template; a rendered or traced one is encoded per request.
    type Outgoing = (Bytes, Bytes);

    fn outgoing(
        template: &RequestTemplate,
        renderer: &Renderer,
        trace: Option<TraceIds>,
    ) -> (Bytes, Bytes) {
        match (template.h2_block(), trace) {
            (Some(block), None) => (block.clone(), template.body.clone()),
            _ => Self::replayed(with_trace(template.build(renderer), trace)),
        }
    }

    fn replayed((request, body): (Request<()>, Bytes)) -> (Bytes, Bytes) {
        (encode_head(&request), body)
    }

    async fn exchange(
        sender: Handle,
        (block, body): (Bytes, Bytes),
        _latency_header: Option<&HeaderName>,
        sent: &mut Instant,
    ) -> Result<Answer, StreamFailure> {
        conn::exchange(sender, &block, body, sent).await.map_err(judge)
    }

    fn flush_counters(pool: &MuxPool<H2>, counters: &mut Counters) {
        counters.add(Counter::CxRxBytesTotal, pool.data.rx.take());
        counters.add(Counter::CxTxBytesTotal, pool.data.tx.take());
    }
}

/// A request's head as one HPACK block: the pseudo-headers first (RFC 9113 §8.3.1), then the
/// fields, none indexed (see [`hpack::encode_field`]).
pub(crate) fn encode_head(r: &Request<()>) -> Bytes {
    let mut out = Vec::with_capacity(128);
    encode_fields(r, &mut out);
    Bytes::from(out)
}

fn encode_fields(r: &Request<()>, out: &mut Vec<u8>) {
    let uri = r.uri();
    hpack::encode_field(out, b":method", r.method().as_str().as_bytes());
    hpack::encode_field(out, b":scheme", uri.scheme_str().unwrap_or("http").as_bytes());
    if let Some(a) = uri.authority() {
        hpack::encode_field(out, b":authority", a.as_str().as_bytes());
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    hpack::encode_field(out, b":path", path.as_bytes());
    for (k, v) in r.headers() {
        hpack::encode_field(out, k.as_str().as_bytes(), v.as_bytes());
    }
}

/// Socket bytes, counted under the h2 codec (it owns the stream) and folded into the worker's
/// counters at the end.
#[derive(Debug, Default)]
pub(crate) struct IoBytes {
    rx: Cell<u64>,
    tx: Cell<u64>,
}

/// Counts why a connection's driver ended: our close, the server's GOAWAY (with or without
/// an error code), an I/O failure, or a protocol error.
fn connection_ended(pools: &Pools, conn: &Rc<H2Conn>, ended: Ended) {
    let url = || pools.cfg.endpoints[conn.pool].target.url();
    // Read before anything awaits: the streams the driver just failed have not run yet, so
    // they are still counted active.
    let active = conn.active.get() > 0;
    let destroyed = |local: bool| {
        let mut st = pools.cx.state.borrow_mut();
        let (c, with_rq) = match local {
            true => (Counter::CxDestroyLocal, Counter::CxDestroyLocalWithActiveRq),
            false => (Counter::CxDestroyRemote, Counter::CxDestroyRemoteWithActiveRq),
        };
        st.counters.inc(c);
        if active {
            st.counters.inc(with_rq);
        }
    };
    match ended {
        Ended::Local => {}
        Ended::GoAway(code) => {
            MuxPool::<H2>::of(pools, conn.pool).note_goaway(pools, conn);
            destroyed(false);
            // A GOAWAY carrying an error code is the server declaring a connection error.
            if code != frame::NO_ERROR {
                let mut st = pools.cx.state.borrow_mut();
                st.counters.inc(Counter::CxProtocolError);
                st.note_error(|| {
                    let reason = frame::reason(code);
                    format!("HTTP/2 connection to {}: GOAWAY {reason} from the server", url())
                });
            }
        }
        Ended::Io(msg) => {
            destroyed(false);
            let mut st = pools.cx.state.borrow_mut();
            st.note_error(|| format!("HTTP/2 connection to {}: {msg}", url()));
        }
        Ended::Protocol(code, msg) => {
            // Our codec refused the server's frames: we sent GOAWAY and closed.
            destroyed(true);
            let mut st = pools.cx.state.borrow_mut();
            st.counters.inc(Counter::CxProtocolError);
            st.note_error(|| {
                let reason = frame::reason(code);
                format!("HTTP/2 connection to {}: {msg} (we sent GOAWAY {reason})", url())
            });
        }
    }
}

/// What a failed stream means for the shared policy. The message names the HTTP/2 error
/// code, so distinct failures stay distinct in the run's error summary.
fn judge((failure, responded): conn::StreamError) -> StreamFailure {
    let before_limit = matches!(failure, Failure::RefusedBeforeSettings);
    let (goaway, refused, message) = match failure {
        Failure::Reset(code) => (
            false,
            code == frame::REFUSED_STREAM,
            format!("HTTP/2 stream reset by the server: {}", frame::reason(code)),
        ),
        Failure::RefusedBeforeSettings => (
            false,
            true,
            format!(
                "HTTP/2 stream reset by the server: {} (opened before its SETTINGS arrived)",
                frame::reason(frame::REFUSED_STREAM)
            ),
        ),
        Failure::Malformed(why) => {
            (false, false, format!("HTTP/2 stream error PROTOCOL_ERROR: {why}"))
        }
        // Above the GOAWAY's last stream id, or never sent: not processed (RFC 9113 §6.8),
        // so refused, and sent again.
        Failure::GoAway(code) => (
            true,
            true,
            format!("HTTP/2 stream refused by the server's GOAWAY: {}", frame::reason(code)),
        ),
        // At or below it, and the connection ended before the answer: the server may have
        // acted on it, so it is failed, never sent twice.
        Failure::Conn(Ended::GoAway(code)) => (
            true,
            false,
            format!("HTTP/2 stream ended by the server's GOAWAY: {}", frame::reason(code)),
        ),
        Failure::Conn(Ended::Io(msg)) => {
            (false, false, format!("HTTP/2 stream: connection error: {msg}"))
        }
        Failure::Conn(Ended::Protocol(code, msg)) => {
            (false, false, format!("HTTP/2 stream error {}: {msg}", frame::reason(code)))
        }
        // Not sent: the connection was closing or out of stream ids. Retried elsewhere.
        Failure::Conn(Ended::Local) | Failure::Exhausted => {
            (false, true, "HTTP/2 connection closed before the stream opened".to_string())
        }
    };
    // Only the connection task counts connection protocol errors (once per connection, not
    // once per stream they took down); a reset is stream-level.
    StreamFailure { responded, goaway, refused, before_limit, protocol_error: false, message }
}

/// Counts the bytes the h2 codec reads and writes on the socket.
struct Counted<T> {
    io: T,
    bytes: Rc<IoBytes>,
}

impl conn::Arrival for Counted<Transport> {
    fn arrival(&self) -> Option<Instant> {
        self.io.arrival()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        this.bytes.rx.set(this.bytes.rx.get() + n);
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.bytes.tx.set(this.bytes.tx.get() + n as u64);
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
