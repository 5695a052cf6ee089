//! One HTTP/2 client connection, written by hand for the load generator's hot path.
//!
//! Why not the `h2` crate here: its client showed up as a fixed cost per request (HPACK
//! decoding into an owned header map, header-map clones to build each request, a stream store
//! behind a mutex, buffer moves), about a third of the client's user time against nginx. A
//! load generator needs little of HTTP/2: it sends pre-built requests and counts what comes
//! back. So this codec keeps one buffer of frames to write, decodes response heads in place
//! (only `:status`, the origin-latency header and the head's size are kept) and counts bodies
//! without storing them. The frames, HPACK and Huffman are `shrike-h2`'s, which the test
//! server's HTTP/2 state machine is built on too.
//!
//! One driver task per connection ([`drive`]) owns the socket: it writes what the streams
//! queued and reads and dispatches frames. Streams ([`exchange`]) queue their frames, wake the
//! driver and wait for their outcome, all through one `RefCell` on the worker's thread.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use http::HeaderName;

use super::frame;
use super::hpack::Decoder;
use crate::requests::OriginLatency;

/// Receive windows. Bodies are consumed as they arrive, so the window only bounds how much a
/// server may send ahead of the reader; large windows keep flow control out of the
/// measurement for big responses (Envoy defaults to 256 MiB for both).
const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;
/// The window every connection starts with (RFC 9113 §6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;

/// Streams opened before the server's SETTINGS tell the real limit: RFC 9113 §6.5.2
/// recommends servers allow at least 100 (hyper's default too).
const PRE_SETTINGS_STREAMS: u32 = 100;

/// The largest response head (HPACK-sized, RFC 7541 §4.1) a stream accepts, announced as
/// SETTINGS_MAX_HEADER_LIST_SIZE; about Envoy's default (60 KiB), and twice what the HTTP/1.1
/// reader takes. The encoded block is bounded by the same figure while it is reassembled, so
/// endless CONTINUATION frames cost a bounded buffer, not memory without end.
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// HPACK's per-entry overhead (RFC 7541 §4.1), used to size response headers.
const HPACK_ENTRY_OVERHEAD: u64 = 32;

/// Request body bytes queued for writing at most; more waits until the socket takes these.
const OUT_HIGH_WATER: usize = 256 * 1024;

/// The most the read buffer grows to: two of the largest frames we accept, so after
/// compaction a whole frame always fits with room to read more.
const READ_BUFFER: usize = 2 * (frame::HEADER_LEN + frame::DEFAULT_MAX_FRAME);

/// Read-and-dispatch rounds a driver runs before yielding to the worker's other tasks.
const DRIVER_BUDGET: u32 = 16;

/// How a connection ended.
#[derive(Clone, Debug)]
pub(crate) enum Ended {
    /// We closed it: no handle was left and no stream open (retired, or the run is over).
    Local,
    /// The server's GOAWAY, with its error code, then its close or the last stream's end.
    GoAway(u32),
    /// The socket failed, or the server closed it without a GOAWAY.
    Io(String),
    /// The server broke the protocol: we sent GOAWAY with this code and closed.
    Protocol(u32, String),
}

/// Why a stream got no complete response.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    /// The server reset it (RST_STREAM) with this code.
    Reset(u32),
    /// The server's frames on this stream broke the protocol; we reset it (PROTOCOL_ERROR).
    Malformed(&'static str),
    /// The server's GOAWAY left it unprocessed (or closed the connection under it).
    GoAway(u32),
    /// The connection ended under it.
    Conn(Ended),
    /// This connection has no stream id left; it closes once its streams end.
    Exhausted,
    /// REFUSED_STREAM for a stream opened before the server's SETTINGS had arrived: beyond
    /// a limit the client could not know yet.
    RefusedBeforeSettings,
}

/// What a finished response carried: status, head size (HPACK-sized), body bytes, the
/// origin-latency header, and when its end reached the socket if the kernel stamped it.
pub(crate) type Response = (u16, u64, u64, OriginLatency, Option<Instant>);

/// A stream's failure, and whether its response head had arrived (the request was certainly
/// processed).
pub(crate) type StreamError = (Failure, bool);

/// The connection's state, shared by its driver and its streams.
pub(crate) struct Conn {
    inner: RefCell<Inner>,
}

/// The mux pool's `Sender`: a stream's way onto the connection. Once the last handle is gone
/// and no stream is open, the driver closes the connection (GOAWAY NO_ERROR).
pub(crate) struct Handle(Rc<Conn>);

impl Clone for Handle {
    fn clone(&self) -> Self {
        Handle(self.0.clone())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Two left: this one and the driver's. Wake the driver to close if it is idle.
        if Rc::strong_count(&self.0) == 2 {
            if let Ok(i) = self.0.inner.try_borrow() {
                if let Some(w) = &i.driver {
                    w.wake_by_ref();
                }
            }
        }
    }
}

impl Handle {
    /// Whether another stream may open now (the server's limit, and no GOAWAY or end yet).
    pub fn has_room(&self, active: u32) -> bool {
        let i = self.0.inner.borrow();
        active < i.max_send_streams && i.refusal().is_none()
    }
}

/// Stream ids hash to themselves times a large odd constant: they are distinct small integers,
/// and SipHash would cost more than the rest of a lookup.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n);
    }
}

struct Stream {
    waker: Option<Waker>,
    /// The final status, 0 until the response head arrived.
    status: u16,
    header_bytes: u64,
    body_bytes: u64,
    origin: OriginLatency,
    /// Request body not yet queued, and the stream's send window.
    body: Bytes,
    send_window: i64,
    /// Response bytes received and not yet given back by WINDOW_UPDATE.
    recv_unacked: u32,
    /// Set once the stream is over; the stream's exchange takes it and removes the stream.
    outcome: Option<Result<(), Failure>>,
    /// When the frame that completed it reached the socket (`--read-coalesce`).
    arrived: Option<Instant>,
}

/// A response head block still arriving in CONTINUATION frames.
struct Partial {
    stream: u32,
    end_stream: bool,
}

struct Inner {
    /// Frames queued for the socket.
    out: Vec<u8>,
    driver: Option<Waker>,
    streams: HashMap<u32, Stream, BuildHasherDefault<IdHasher>>,
    /// Streams without an outcome yet.
    open: u32,
    next_id: u32,
    max_send_streams: u32,
    /// Streams waiting for the server's stream limit.
    room_waiters: Vec<Waker>,
    /// Streams with request body left to queue, in order.
    sending: VecDeque<u32>,
    send_window: i64,
    initial_send_window: i64,
    /// The largest frame we may send.
    max_frame: usize,
    /// Connection-level response bytes not yet given back.
    conn_unacked: u32,
    settings_seen: bool,
    goaway: Option<(u32, u32)>,
    exhausted: bool,
    ended: Option<Ended>,
    decoder: Decoder,
    partial: Option<Partial>,
    /// The head block being reassembled.
    block: Vec<u8>,
    latency_header: Option<HeaderName>,
    /// When the bytes being dispatched reached the socket, by the kernel's stamp
    /// (`--read-coalesce`); `None` elsewhere.
    rx_at: Option<Instant>,
}

/// A connection-level protocol error: the GOAWAY code and what the server did.
type ConnError = (u32, String);

fn conn_error<T>(code: u32, msg: impl Into<String>) -> Result<T, ConnError> {
    Err((code, msg.into()))
}

impl Conn {
    /// A connection with the client preface, our SETTINGS and the connection window queued.
    pub fn new(latency_header: Option<HeaderName>) -> Rc<Conn> {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
            ],
        );
        frame::put_window_update(&mut out, 0, CONNECTION_WINDOW - DEFAULT_WINDOW);
        Rc::new(Conn {
            inner: RefCell::new(Inner {
                out,
                driver: None,
                streams: HashMap::default(),
                open: 0,
                next_id: 1,
                max_send_streams: PRE_SETTINGS_STREAMS,
                room_waiters: Vec::new(),
                sending: VecDeque::new(),
                send_window: i64::from(DEFAULT_WINDOW),
                initial_send_window: i64::from(DEFAULT_WINDOW),
                max_frame: frame::DEFAULT_MAX_FRAME,
                conn_unacked: 0,
                settings_seen: false,
                goaway: None,
                exhausted: false,
                ended: None,
                decoder: Decoder::new(4096),
                partial: None,
                block: Vec::new(),
                latency_header,
                rx_at: None,
            }),
        })
    }

    pub fn handle(self: &Rc<Self>) -> Handle {
        Handle(self.clone())
    }
}

/// Sends one request (its HPACK head block and body) and waits for the whole response.
/// `sent` is set when the stream opens: waiting for the server's stream limit is queueing.
/// Dropping the future (the request timed out) resets the stream (CANCEL).
pub(crate) async fn exchange(
    handle: Handle,
    block: &[u8],
    body: Bytes,
    sent: &mut Instant,
) -> Result<Response, StreamError> {
    let conn = &*handle.0;
    poll_fn(|cx| {
        let mut i = conn.inner.borrow_mut();
        if let Some(f) = i.refusal() {
            return Poll::Ready(Err((f, false)));
        }
        if i.open < i.max_send_streams {
            return Poll::Ready(Ok(()));
        }
        i.room_waiters.push(cx.waker().clone());
        Poll::Pending
    })
    .await?;
    *sent = Instant::now();
    let (id, early) = {
        let mut i = conn.inner.borrow_mut();
        (i.open_stream(block, body), !i.settings_seen)
    };
    let mut guard = Open { conn, id, done: false };
    let outcome = poll_fn(|cx| {
        let mut i = conn.inner.borrow_mut();
        let Some(s) = i.streams.get_mut(&id) else {
            // Invariant: only this exchange removes its stream.
            return Poll::Ready(Err(Failure::Conn(Ended::Local)));
        };
        match s.outcome.take() {
            Some(Ok(())) => {
                Poll::Ready(Ok((s.status, s.header_bytes, s.body_bytes, s.origin, s.arrived)))
            }
            Some(Err(f)) => Poll::Ready(Err(f)),
            None => {
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    })
    .await;
    guard.done = true;
    let mut i = conn.inner.borrow_mut();
    let responded = i.streams.remove(&id).is_some_and(|s| s.status != 0);
    outcome.map_err(|f| match f {
        Failure::Reset(frame::REFUSED_STREAM) if early => (Failure::RefusedBeforeSettings, false),
        f => (f, responded),
    })
}

/// A stream whose exchange may be dropped before its outcome: the drop resets it.
struct Open<'a> {
    conn: &'a Conn,
    id: u32,
    done: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Ok(mut i) = self.conn.inner.try_borrow_mut() else { return };
        if let Some(s) = i.streams.remove(&self.id) {
            if s.outcome.is_none() && i.ended.is_none() {
                frame::put_rst(&mut i.out, self.id, frame::CANCEL);
                i.stream_closed();
                i.wake_driver();
            }
        }
    }
}

impl Inner {
    /// Why no new stream may open here, if none may.
    fn refusal(&self) -> Option<Failure> {
        if let Some(e) = &self.ended {
            return Some(match e {
                Ended::GoAway(code) => Failure::GoAway(*code),
                e => Failure::Conn(e.clone()),
            });
        }
        if let Some((_, code)) = self.goaway {
            return Some(Failure::GoAway(code));
        }
        self.exhausted.then_some(Failure::Exhausted)
    }

    fn wake_driver(&self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    /// Queues a new stream's HEADERS (and what its body's windows allow) and returns its id.
    fn open_stream(&mut self, block: &[u8], body: Bytes) -> u32 {
        let id = self.next_id;
        // Stream ids are 31 bits; the last one closes the connection once its streams end.
        self.next_id += 2;
        self.exhausted |= self.next_id > 0x7fff_ffff;
        let was_empty = self.out.is_empty();
        frame::put_header_block(&mut self.out, id, block, body.is_empty(), self.max_frame);
        let has_body = !body.is_empty();
        self.streams.insert(
            id,
            Stream {
                waker: None,
                status: 0,
                header_bytes: 0,
                body_bytes: 0,
                origin: OriginLatency::Absent,
                body,
                send_window: self.initial_send_window,
                recv_unacked: 0,
                outcome: None,
                arrived: None,
            },
        );
        self.open += 1;
        if has_body {
            self.sending.push_back(id);
            self.queue_bodies();
        }
        if was_empty {
            self.wake_driver();
        }
        id
    }

    /// A stream got its outcome (or was cancelled): room for another.
    fn stream_closed(&mut self) {
        self.open -= 1;
        for w in self.room_waiters.drain(..) {
            w.wake();
        }
    }

    /// Ends a live stream with `outcome` and wakes its exchange.
    fn finish(&mut self, id: u32, outcome: Result<(), Failure>) {
        let rx_at = self.rx_at;
        let Some(s) = self.streams.get_mut(&id).filter(|s| s.outcome.is_none()) else { return };
        s.arrived = rx_at;
        // A server may answer before the request body is all sent (RFC 9113 §8.1); our side
        // of the stream is then still open, and would hold one of the server's stream slots
        // for good unless we close it.
        let answered_early = outcome.is_ok() && !std::mem::take(&mut s.body).is_empty();
        s.outcome = Some(outcome);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        if answered_early {
            frame::put_rst(&mut self.out, id, frame::NO_ERROR);
        }
        self.stream_closed();
    }

    /// A stream-level protocol error: reset the stream and fail it.
    fn malformed(&mut self, id: u32, why: &'static str) {
        frame::put_rst(&mut self.out, id, frame::PROTOCOL_ERROR);
        self.finish(id, Err(Failure::Malformed(why)));
    }

    fn live(&mut self, id: u32) -> Option<&mut Stream> {
        self.streams.get_mut(&id).filter(|s| s.outcome.is_none())
    }

    /// Queues request body DATA frames as far as the windows and the buffer allow.
    fn queue_bodies(&mut self) {
        let mut k = 0;
        while k < self.sending.len() && self.out.len() < OUT_HIGH_WATER && self.send_window > 0 {
            let id = self.sending[k];
            let Some(s) = self.streams.get_mut(&id).filter(|s| s.outcome.is_none()) else {
                self.sending.remove(k);
                continue;
            };
            let n = (s.body.len() as i64).min(s.send_window).min(self.send_window);
            let n = n.min(self.max_frame as i64);
            if n <= 0 {
                k += 1;
                continue;
            }
            let chunk = s.body.split_to(n as usize);
            s.send_window -= n;
            self.send_window -= n;
            let last = s.body.is_empty();
            let flags = if last { frame::END_STREAM } else { 0 };
            frame::put_head(&mut self.out, chunk.len(), frame::DATA, flags, id);
            self.out.extend_from_slice(&chunk);
            if last {
                self.sending.remove(k);
            }
        }
    }

    /// Fails every stream still open and every later request with how the connection ended.
    /// After a GOAWAY, the streams still open are those at or below its last stream id: the
    /// server may have acted on them (those above it were failed as refused when it came), so
    /// they fail with the connection, not as refused.
    fn end(&mut self, how: &Ended) {
        self.ended = Some(how.clone());
        let failure = Failure::Conn(how.clone());
        let open: Vec<u32> = self.streams.keys().copied().collect();
        for id in open {
            self.finish(id, Err(failure.clone()));
        }
        for w in self.room_waiters.drain(..) {
            w.wake();
        }
        self.out = Vec::new();
        self.sending.clear();
    }
}

mod driver;
mod recv;

/// Feeds a server's bytes to a client connection, as its driver would, for the fuzz target.
/// The first byte is how many streams are open (up to 7, every other one sending a body), the
/// second the size of each read; the rest is what the server sends, from its SETTINGS on.
/// Whatever the bytes, nothing panics and every stream ends up counted exactly once.
pub(crate) fn fuzz_server_bytes(data: &[u8]) {
    let [streams, chunk, rest @ ..] = data else { return };
    let conn = Conn::new(Some(HeaderName::from_static("x-origin")));
    let mut i = conn.inner.borrow_mut();
    let ids: Vec<u32> = (0..streams % 8)
        .map(|n| {
            let body = if n % 2 == 1 { Bytes::from(vec![b'b'; 70_000]) } else { Bytes::new() };
            i.open_stream(&[0x82, 0x86, 0x84], body)
        })
        .collect();
    let mut rd = driver::ReadBuffer::new();
    for piece in rest.chunks(usize::from(*chunk).max(1)) {
        let room = rd.spare();
        let n = piece.len().min(room.len());
        room[..n].copy_from_slice(&piece[..n]);
        rd.filled(n);
        if driver::dispatch(&mut i, &mut rd).is_err() {
            break;
        }
        i.out.clear();
        i.queue_bodies();
    }
    let open = ids.iter().filter(|id| i.streams[id].outcome.is_none()).count();
    assert_eq!(open, i.open as usize, "open streams miscounted");
    i.end(&Ended::Io("fuzzing".into()));
    assert!(i.streams.values().all(|s| s.outcome.is_some()) && i.open == 0);
}
#[cfg(test)]
mod tests;

pub(crate) use driver::{drive, Arrival};
