//! HTTP/2 (the `h2` crate's client) for the multiplexing pool ([`super::mux`]): connecting
//! (h2c with prior knowledge, or TLS with ALPN `h2`), driving a connection, one request's
//! exchange, and what HTTP/2's errors mean. Response bodies are counted and their
//! flow-control capacity is released as data arrives; nothing is stored.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::Reason;
use http::{HeaderName, Request};
use shrike_stats::{Counter, Counters};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::mux::{Answer, ConnState, Mux, MuxConn, MuxPool, StreamFailure};
use super::{capacity_freed, Pool, Pools};
use crate::requests::h2::origin_latency;
pub use crate::requests::h2::RequestTemplate;
use crate::transport::{self, Transport};

/// Receive windows. Bodies are consumed as they arrive, so the window only bounds how much a
/// server may send ahead of the reader; large windows keep flow control out of the
/// measurement for big responses (Envoy defaults to 256 MiB for both).
const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;

/// Streams `h2` opens before the server's SETTINGS tell the real limit: RFC 9113 §6.5.2
/// recommends servers allow at least 100 (hyper's default too).
const PRE_SETTINGS_STREAMS: usize = 100;

/// The largest response head (HPACK-sized, RFC 7541 §4.1) a stream accepts, announced as
/// SETTINGS_MAX_HEADER_LIST_SIZE. `h2` buffers a head until it is whole, so this bounds what a
/// server can make each connection hold (`h2`'s default is 16 MiB); 64 KiB is about Envoy's
/// default (60 KiB), and twice what the HTTP/1.1 reader takes.
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// HPACK's per-entry overhead (RFC 7541 §4.1), used to size response headers.
const HPACK_ENTRY_OVERHEAD: u64 = 32;

/// The HTTP/2 protocol of the multiplexing pool.
pub(crate) struct H2;

type H2Conn = MuxConn<H2>;

impl Mux for H2 {
    type Sender = SendRequest<Bytes>;
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

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS, which `h2` reads under a lock (so only
    /// after our own limit passed). Before the server's SETTINGS arrive `h2` holds back
    /// streams beyond [`PRE_SETTINGS_STREAMS`], and streams a server with a lower limit
    /// refuses are retried.
    fn server_room(sender: &SendRequest<Bytes>, active: u32) -> bool {
        (active as usize) < sender.current_max_send_streams()
    }

    /// Connect, start the streams that waited, then drive the connection until it closes.
    async fn connection_task(pools: Rc<Pools>, conn: Rc<H2Conn>) {
        let p = MuxPool::<H2>::of(&pools, conn.pool);
        let Some((sender, connection)) = handshake(&pools, &conn, p.data.clone()).await else {
            p.connect_failed(&pools, &conn);
            return;
        };
        pools.cx.state.borrow_mut().counters.inc(Counter::CxHttp2Total);
        p.connected(&pools, &conn, sender);
        let result = connection.await;
        let state = p.disconnected(&conn);
        connection_ended(&pools, &conn, state, result).await;
        // A connection slot is free again.
        capacity_freed(&pools);
    }

    async fn exchange(
        sender: SendRequest<Bytes>,
        request: (Request<()>, Bytes),
        latency_header: Option<&HeaderName>,
        sent: &mut Instant,
    ) -> Result<Answer, StreamFailure> {
        exchange(sender, request, latency_header, sent).await.map_err(StreamError::judge)
    }

    fn flush_counters(pool: &MuxPool<H2>, counters: &mut Counters) {
        counters.add(Counter::CxRxBytesTotal, pool.data.rx.take());
        counters.add(Counter::CxTxBytesTotal, pool.data.tx.take());
    }
}

/// Socket bytes, counted under the h2 codec (it owns the stream) and folded into the worker's
/// counters at the end.
#[derive(Debug, Default)]
pub(crate) struct IoBytes {
    rx: Cell<u64>,
    tx: Cell<u64>,
}

type Handshaken = (SendRequest<Bytes>, h2::client::Connection<Counted<Transport>, Bytes>);

/// Connects (TCP, then TLS with ALPN h2, or h2c with prior knowledge) and starts HTTP/2.
async fn handshake(pools: &Pools, conn: &H2Conn, io_bytes: Rc<IoBytes>) -> Option<Handshaken> {
    let endpoint = &pools.cfg.endpoints[conn.pool];
    let io = transport::connect(&pools.cx, endpoint).await?;
    let io = Counted { io, bytes: io_bytes };
    let res = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .initial_max_send_streams(PRE_SETTINGS_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Bytes>(io)
        .await;
    match res {
        Ok(pair) => Some(pair),
        Err(e) => {
            let mut st = pools.cx.state.borrow_mut();
            st.counters.inc(Counter::CxConnectFail);
            st.counters.inc(Counter::CxProtocolError);
            st.note_error(|| format!("HTTP/2 handshake with {}: {e}", endpoint.target.url()));
            None
        }
    }
}

/// Counts why a connection's driver ended: our close, the server's GOAWAY (with or without
/// an error code), an I/O failure, or a protocol error.
async fn connection_ended(
    pools: &Pools,
    conn: &Rc<H2Conn>,
    state: ConnState<SendRequest<Bytes>>,
    result: Result<(), h2::Error>,
) {
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
    match (state, result) {
        // We still held the sender, so the server ended the connection. A graceful GOAWAY
        // (NO_ERROR) ends the driver with Ok just like our own close; the sender tells them
        // apart, since h2 keeps the GOAWAY as the connection's error for new requests.
        (ConnState::Ready(sender), Ok(())) => {
            if let Err(e) = sender.ready().await {
                if e.is_go_away() && e.is_remote() {
                    note_goaway(pools, conn);
                }
                destroyed(false);
            }
        }
        (_, Ok(())) => {}
        (_, Err(e)) if e.is_go_away() && e.is_remote() => {
            note_goaway(pools, conn);
            destroyed(false);
            // A GOAWAY carrying an error code is the server declaring a connection error.
            if let Some(reason) = e.reason().filter(|r| *r != Reason::NO_ERROR) {
                let mut st = pools.cx.state.borrow_mut();
                st.counters.inc(Counter::CxProtocolError);
                st.note_error(|| {
                    format!("HTTP/2 connection to {}: GOAWAY {reason:?} from the server", url())
                });
            }
        }
        (_, Err(e)) => {
            // An I/O error is the server's close or reset; anything else is our codec
            // refusing the server's frames (it sends GOAWAY and closes).
            destroyed(!e.is_io());
            let mut st = pools.cx.state.borrow_mut();
            if !e.is_io() {
                st.counters.inc(Counter::CxProtocolError);
            }
            st.note_error(|| format!("HTTP/2 connection to {}: {e}", url()));
        }
    }
}

fn note_goaway(pools: &Pools, conn: &Rc<H2Conn>) {
    MuxPool::<H2>::of(pools, conn.pool).note_goaway(pools, conn);
}

/// What went wrong with a stream, and whether the server can have processed it.
struct StreamError {
    err: h2::Error,
    /// True once the response head arrived: the request was certainly processed.
    responded: bool,
}

impl From<h2::Error> for StreamError {
    fn from(err: h2::Error) -> Self {
        StreamError { err, responded: false }
    }
}

impl StreamError {
    fn judge(self) -> StreamFailure {
        let err = &self.err;
        let goaway = err.is_go_away() && err.is_remote();
        StreamFailure {
            responded: self.responded,
            goaway,
            // REFUSED_STREAM, or cut off by GOAWAY before any response.
            refused: goaway || err.reason() == Some(Reason::REFUSED_STREAM),
            // Only errors our codec found in the server's frames count as connection protocol
            // errors here: a reset is stream-level, a GOAWAY (the server's with an error code,
            // or ours when our codec refused the server's frames) is counted once by the
            // connection task rather than once per stream it took down, and I/O errors are
            // neither.
            protocol_error: !err.is_io() && !err.is_reset() && !err.is_go_away(),
            message: describe(err),
        }
    }
}

/// An error message that names the HTTP/2 error code, so distinct failures stay distinct in
/// the run's error summary.
fn describe(err: &h2::Error) -> String {
    match err.reason() {
        Some(r) if err.is_reset() && err.is_remote() => {
            format!("HTTP/2 stream reset by the server: {r:?}")
        }
        Some(r) if err.is_go_away() && err.is_remote() => {
            format!("HTTP/2 stream ended by the server's GOAWAY: {r:?}")
        }
        Some(r) => format!("HTTP/2 stream error {r:?}: {err}"),
        None => format!("HTTP/2 stream: {err}"),
    }
}

/// Sends the request and reads the response to its end. Returns (status, header bytes, body
/// bytes). Header bytes are the HPACK size of the response head: for each field (`:status`
/// included) name length + value length + 32 (RFC 7541 §4.1), independent of how well the
/// server compressed it. `sent` is set when the stream is actually opened.
async fn exchange(
    sender: SendRequest<Bytes>,
    (request, body): (Request<()>, Bytes),
    latency_header: Option<&HeaderName>,
    sent: &mut Instant,
) -> Result<Answer, StreamError> {
    let mut sender = sender.ready().await?;
    // Waiting for the connection to accept another stream is queueing, not service time.
    *sent = Instant::now();
    let has_body = !body.is_empty();
    let (response, mut stream) = sender.send_request(request, !has_body)?;
    drop(sender);
    if has_body {
        send_body(&mut stream, body).await?;
    }
    let response = response.await?;
    let status = response.status().as_u16();
    let origin = origin_latency(response.headers(), latency_header);
    let header_bytes = response
        .headers()
        .iter()
        .fold(":status".len() as u64 + 3 + HPACK_ENTRY_OVERHEAD, |acc, (k, v)| {
            acc + (k.as_str().len() + v.len()) as u64 + HPACK_ENTRY_OVERHEAD
        });
    let mut body = response.into_body();
    let mut body_bytes = 0u64;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|err| StreamError { err, responded: true })?;
        body_bytes += chunk.len() as u64;
        // Give the window back at once: the body is counted, never kept.
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    Ok((status, header_bytes, body_bytes, origin))
}

/// Sends the body as flow control allows: each chunk waits for window from the server.
async fn send_body(stream: &mut h2::SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await;
        let n = match granted {
            Some(Ok(n)) => n,
            Some(Err(e)) => return Err(e),
            // The stream closed under us (reset); the response future reports why.
            None => return Ok(()),
        };
        if n == 0 {
            continue;
        }
        let chunk = data.split_to(n.min(data.len()));
        stream.send_data(chunk, data.is_empty())?;
    }
    Ok(())
}

/// Counts the bytes the h2 codec reads and writes on the socket.
struct Counted<T> {
    io: T,
    bytes: Rc<IoBytes>,
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

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.bytes.tx.set(this.bytes.tx.get() + n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
