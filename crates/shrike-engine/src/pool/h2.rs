//! The HTTP/2 pool (the `h2` crate's client): requests are streams multiplexed over up to
//! `connections` connections per worker.
//!
//! - A request goes to the first open connection with a free stream (so load concentrates on
//!   few connections, as Envoy's pool does). A connection's stream limit is
//!   `max_concurrent_streams`, further bounded by the server's SETTINGS_MAX_CONCURRENT_STREAMS.
//! - When every connection is full, a new one opens, up to `connections`.
//! - The worker's in-flight budget is `max_active_requests`; beyond it the shared dispatch
//!   logic queues, overflows or blocks the pacer, exactly as for HTTP/1.1.
//! - `max_requests_per_connection` retires a connection after that many streams; a GOAWAY
//!   retires it too (`upstream_cx_close_notify`). A retired connection finishes its streams
//!   and then closes; new streams go elsewhere, and it no longer counts against
//!   `connections` (so recycling never stalls the pool while old streams drain).
//!
//! Each stream runs as its own local task. Response bodies are counted and their flow-control
//! capacity is released as data arrives; nothing is stored.

use std::cell::{Cell, RefCell};
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

use super::{
    capacity_freed, record_connection_failure, record_failure, record_response, record_timeout,
};
use super::{request_finished, Exchange, Pool};
use crate::config::EngineConfig;
pub use crate::requests::h2::RequestTemplate;
pub(crate) use crate::requests::h2::{latency_header_name, origin_latency};
use crate::requests::OriginLatency;
use crate::transport::{self, Transport};
use crate::worker::{Ticket, WorkerCtx};

/// Receive windows. Bodies are consumed as they arrive, so the window only bounds how much a
/// server may send ahead of the reader; large windows keep flow control out of the
/// measurement for big responses (Envoy defaults to 256 MiB for both).
const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;

/// Streams `h2` opens before the server's SETTINGS tell the real limit: RFC 9113 §6.5.2
/// recommends servers allow at least 100 (hyper's default too).
const PRE_SETTINGS_STREAMS: usize = 100;

/// HPACK's per-entry overhead (RFC 7541 §4.1), used to size response headers.
const HPACK_ENTRY_OVERHEAD: u64 = 32;

enum ConnState {
    /// Connecting or in the h2 handshake; requests assigned meanwhile wait here.
    Connecting(Vec<Ticket>),
    Ready(SendRequest<Bytes>),
    /// No sender is held: once its streams end, `h2` closes the connection gracefully.
    Closed,
}

struct H2Conn {
    /// The endpoint's pool (`ctx.pools[pool]`) this connection belongs to.
    pool: usize,
    state: RefCell<ConnState>,
    /// Streams assigned and not finished.
    active: Cell<u32>,
    /// Streams ever assigned (for `max_requests_per_connection`).
    started: Cell<u64>,
    /// Takes no new streams (limit reached, GOAWAY, closed); no longer in the pool's list.
    retired: Cell<bool>,
    goaway: Cell<bool>,
}

impl H2Conn {
    /// Whether another stream fits: under our limit first (a plain integer compare), and only
    /// then under the server's SETTINGS_MAX_CONCURRENT_STREAMS, which `h2` reads under a
    /// lock. Before the server's SETTINGS arrive only our limit is known; until then `h2`
    /// holds back streams beyond [`PRE_SETTINGS_STREAMS`], and streams a server with a lower
    /// limit refuses are retried.
    fn has_room(&self, configured: u32) -> bool {
        let active = self.active.get();
        if active >= configured {
            return false;
        }
        match &*self.state.borrow() {
            Ready(s) => (active as usize) < s.current_max_send_streams(),
            _ => true,
        }
    }
}

use ConnState::{Closed, Connecting, Ready};

/// Socket bytes, counted under the h2 codec (it owns the stream) and folded into the worker's
/// counters at the end.
#[derive(Debug, Default)]
struct IoBytes {
    rx: Cell<u64>,
    tx: Cell<u64>,
}

pub(crate) struct H2Pool {
    index: usize,
    /// Connections that take new streams, in opening order.
    conns: RefCell<Vec<Rc<H2Conn>>>,
    /// Streams in flight in this worker.
    active: Cell<u32>,
    max_active: u32,
    max_streams: u32,
    max_conns: usize,
    /// One per request-source entry.
    templates: Box<[RequestTemplate]>,
    /// The origin-latency header name, parsed once.
    latency_header: Option<HeaderName>,
    io: Rc<IoBytes>,
    closing: Cell<bool>,
}

impl H2Pool {
    pub fn new(cfg: &EngineConfig, index: usize, templates: Box<[RequestTemplate]>) -> H2Pool {
        H2Pool {
            index,
            conns: RefCell::new(Vec::new()),
            active: Cell::new(0),
            max_active: cfg.streams.max_active_requests.get(),
            max_streams: cfg.streams.max_concurrent_streams.get(),
            max_conns: cfg.connections.get() as usize,
            templates,
            latency_header: latency_header_name(cfg),
            io: Rc::new(IoBytes::default()),
            closing: Cell::new(false),
        }
    }

    /// Starts a stream on a connection with room, opening a connection if all are full.
    pub fn try_start(&self, ctx: &Rc<WorkerCtx>, ticket: Ticket) -> Result<(), Ticket> {
        if self.closing.get() || self.active.get() >= self.max_active {
            return Err(ticket);
        }
        let pick = self.conns.borrow().iter().find(|c| c.has_room(self.max_streams)).cloned();
        let conn = match pick {
            Some(c) => c,
            None if self.conns.borrow().len() < self.max_conns => self.open(ctx),
            None => return Err(ticket),
        };
        self.assign(ctx, &conn, ticket);
        Ok(())
    }

    fn open(&self, ctx: &Rc<WorkerCtx>) -> Rc<H2Conn> {
        let conn = Rc::new(H2Conn {
            pool: self.index,
            state: RefCell::new(Connecting(Vec::new())),
            active: Cell::new(0),
            started: Cell::new(0),
            retired: Cell::new(false),
            goaway: Cell::new(false),
        });
        self.conns.borrow_mut().push(conn.clone());
        tokio::task::spawn_local(connection_task(ctx.clone(), conn.clone(), self.io.clone()));
        conn
    }

    fn assign(&self, ctx: &Rc<WorkerCtx>, conn: &Rc<H2Conn>, ticket: Ticket) {
        conn.active.set(conn.active.get() + 1);
        conn.started.set(conn.started.get() + 1);
        self.active.set(self.active.get() + 1);
        if ctx.cfg.max_requests_per_connection.is_some_and(|m| conn.started.get() >= m.get()) {
            // Closed by us once its streams finish, as the h1 pool counts its recycling.
            ctx.state.borrow_mut().counters.inc(Counter::CxDestroyLocal);
            self.retire(conn);
        }
        match &mut *conn.state.borrow_mut() {
            Connecting(waiting) => waiting.push(ticket),
            Ready(sender) => {
                tokio::task::spawn_local(stream_task(
                    ctx.clone(),
                    conn.clone(),
                    sender.clone(),
                    ticket,
                ));
            }
            // Invariant: closed connections are retired first, and retired ones are not
            // in `conns`, so `try_start` never picks one.
            Closed => unreachable!("stream assigned to a closed h2 connection"),
        }
    }

    /// Takes the connection out of rotation; it closes once its last stream ends.
    fn retire(&self, conn: &Rc<H2Conn>) {
        if !conn.retired.replace(true) {
            self.conns.borrow_mut().retain(|c| !Rc::ptr_eq(c, conn));
        }
        if conn.active.get() == 0 {
            let mut state = conn.state.borrow_mut();
            if matches!(*state, Ready(_)) {
                *state = Closed;
            }
        }
    }

    pub fn close(&self) {
        self.closing.set(true);
        for c in self.conns.take() {
            c.retired.set(true);
            *c.state.borrow_mut() = Closed;
        }
    }

    pub fn flush_counters(&self, counters: &mut Counters) {
        counters.add(Counter::CxRxBytesTotal, self.io.rx.take());
        counters.add(Counter::CxTxBytesTotal, self.io.tx.take());
    }
}

fn pool<'a>(ctx: &'a WorkerCtx, conn: &H2Conn) -> &'a H2Pool {
    match &ctx.pools[conn.pool] {
        Pool::H2(p) => p,
        // Invariant: h2 tasks are only spawned by an h2 pool.
        _ => unreachable!("h2 task in another protocol's pool"),
    }
}

/// A connection's life: connect (TCP, TLS with ALPN h2, or h2c prior knowledge), start the
/// streams that waited for it, then drive the connection until it closes.
async fn connection_task(ctx: Rc<WorkerCtx>, conn: Rc<H2Conn>, io_bytes: Rc<IoBytes>) {
    let p = pool(&ctx, &conn);
    let Some((sender, connection)) = handshake(&ctx, &conn, io_bytes).await else {
        // Everything that waited for this connection fails as a connection failure, as on
        // the h1 path.
        let waiting = match conn.state.replace(Closed) {
            Connecting(w) => w,
            _ => Vec::new(),
        };
        p.retire(&conn);
        for _ in waiting {
            conn.active.set(conn.active.get() - 1);
            p.active.set(p.active.get() - 1);
            record_connection_failure(&ctx);
            request_finished(&ctx);
        }
        capacity_freed(&ctx);
        return;
    };
    ctx.state.borrow_mut().counters.inc(Counter::CxHttp2Total);
    let waiting = match conn.state.replace(Ready(sender.clone())) {
        Connecting(w) => w,
        _ => Vec::new(),
    };
    for t in waiting {
        tokio::task::spawn_local(stream_task(ctx.clone(), conn.clone(), sender.clone(), t));
    }
    drop(sender);
    if conn.retired.get() && conn.active.get() == 0 {
        conn.state.replace(Closed);
    }
    let result = connection.await;
    // Out of rotation before anything below awaits: a closed connection must never be
    // picked for a new stream (`assign` relies on it).
    let state = conn.state.replace(Closed);
    p.retire(&conn);
    connection_ended(&ctx, &conn, state, result).await;
    // A connection slot is free again.
    capacity_freed(&ctx);
}

type Handshaken = (SendRequest<Bytes>, h2::client::Connection<Counted<Transport>, Bytes>);

/// Connects (TCP, then TLS with ALPN h2, or h2c with prior knowledge) and starts HTTP/2.
async fn handshake(ctx: &WorkerCtx, conn: &H2Conn, io_bytes: Rc<IoBytes>) -> Option<Handshaken> {
    let endpoint = &ctx.cfg.endpoints[conn.pool];
    let io = transport::connect(ctx, endpoint).await?;
    let io = Counted { io, bytes: io_bytes };
    let res = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .initial_max_send_streams(PRE_SETTINGS_STREAMS)
        .handshake::<_, Bytes>(io)
        .await;
    match res {
        Ok(pair) => Some(pair),
        Err(e) => {
            let mut st = ctx.state.borrow_mut();
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
    ctx: &WorkerCtx,
    conn: &Rc<H2Conn>,
    state: ConnState,
    result: Result<(), h2::Error>,
) {
    let url = || ctx.cfg.endpoints[conn.pool].target.url();
    match (state, result) {
        // We still held the sender, so the server ended the connection. A graceful GOAWAY
        // (NO_ERROR) ends the driver with Ok just like our own close; the sender tells them
        // apart, since h2 keeps the GOAWAY as the connection's error for new requests.
        (Ready(sender), Ok(())) => {
            if let Err(e) = sender.ready().await {
                if e.is_go_away() && e.is_remote() {
                    note_goaway(ctx, conn);
                } else {
                    ctx.state.borrow_mut().counters.inc(Counter::CxDestroyRemote);
                }
            }
        }
        (_, Ok(())) => {}
        (_, Err(e)) if e.is_go_away() && e.is_remote() => {
            note_goaway(ctx, conn);
            // A GOAWAY carrying an error code is the server declaring a connection error.
            if let Some(reason) = e.reason().filter(|r| *r != Reason::NO_ERROR) {
                let mut st = ctx.state.borrow_mut();
                st.counters.inc(Counter::CxProtocolError);
                st.note_error(|| {
                    format!("HTTP/2 connection to {}: GOAWAY {reason:?} from the server", url())
                });
            }
        }
        (_, Err(e)) => {
            let mut st = ctx.state.borrow_mut();
            if e.is_io() {
                st.counters.inc(Counter::CxDestroyRemote);
            } else {
                st.counters.inc(Counter::CxProtocolError);
            }
            st.note_error(|| format!("HTTP/2 connection to {}: {e}", url()));
        }
    }
}

fn note_goaway(ctx: &WorkerCtx, conn: &Rc<H2Conn>) {
    if !conn.goaway.replace(true) {
        ctx.state.borrow_mut().counters.inc(Counter::CxCloseNotify);
    }
    pool(ctx, conn).retire(conn);
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

async fn stream_task(
    ctx: Rc<WorkerCtx>,
    conn: Rc<H2Conn>,
    sender: SendRequest<Bytes>,
    ticket: Ticket,
) {
    let p = pool(&ctx, &conn);
    let mut sent = Instant::now();
    let request = p.templates[ticket.request as usize].build(&ctx.requests);
    // Dropping the exchange on timeout resets the stream (CANCEL), freeing its slot.
    let exchange = exchange(sender, request, p.latency_header.as_ref(), &mut sent);
    let result = tokio::time::timeout(ctx.cfg.timeout, exchange).await;
    let done = Instant::now();
    conn.active.set(conn.active.get() - 1);
    p.active.set(p.active.get() - 1);
    if conn.retired.get() {
        p.retire(&conn);
    }
    match result {
        Err(_elapsed) => {
            record_timeout(&ctx);
            request_finished(&ctx);
        }
        Ok(Ok((status, header_bytes, body_bytes, origin))) => {
            let x = Exchange { ticket, sent, done, status, header_bytes, body_bytes, origin };
            record_response(&ctx, &x);
            request_finished(&ctx);
        }
        Ok(Err(StreamError { err, responded })) => {
            let goaway = err.is_go_away() && err.is_remote();
            if goaway {
                note_goaway(&ctx, &conn);
            }
            // A stream the server refused (REFUSED_STREAM, or cut off by GOAWAY before any
            // response) was not processed: retry it once elsewhere, as Envoy does, rather than
            // count a server that is shedding connections gracefully as failing.
            let refused = goaway || err.reason() == Some(Reason::REFUSED_STREAM);
            let unprocessed = refused && !responded;
            if unprocessed && ctx.stopping.get() {
                // The run is draining: nothing new is sent, and a refusal is no failure.
                ctx.state.borrow_mut().counters.inc(Counter::RqCancelled);
                request_finished(&ctx);
            } else if unprocessed && !ticket.retried {
                let t = Ticket { retried: true, ..ticket };
                if let Err(t) = p.try_start(&ctx, t) {
                    ctx.state.borrow_mut().queue.push_front(t);
                }
            } else {
                // Only errors our codec found in the server's frames count as connection
                // protocol errors here: a reset is stream-level, a GOAWAY with an error code is
                // counted once by the connection task, and I/O errors are neither.
                let protocol_error = !err.is_io() && !err.is_reset() && !goaway;
                record_failure(&ctx, protocol_error, || describe(&err));
                request_finished(&ctx);
            }
        }
    }
    capacity_freed(&ctx);
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
) -> Result<(u16, u64, u64, OriginLatency), StreamError> {
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
