//! The multiplexing pool policy, shared by HTTP/2 and HTTP/3: which connection carries the next
//! stream, when a connection opens or retires, and what a finished stream means for the run.
//! The protocols ([`super::h2`], [`super::h3`]) supply only what differs through [`Mux`]:
//! connecting and driving a connection, one request's exchange, and how their errors read.
//!
//! - A request goes to the first open connection with a free stream (so load concentrates on
//!   few connections, as Envoy's pool does). A connection's stream limit is
//!   `max_concurrent_streams`, further bounded by what the server allows ([`Mux::server_room`]).
//! - When every connection is full, a new one opens, up to `connections`.
//! - The worker's in-flight budget is `max_active_requests`; beyond it the shared dispatch
//!   logic queues, overflows or blocks the pacer, exactly as for HTTP/1.1.
//! - `max_requests_per_connection` retires a connection after that many streams; the server's
//!   GOAWAY retires it too (`upstream_cx_close_notify`). A retired connection finishes its
//!   streams and then closes; new streams go elsewhere, and it no longer counts against
//!   `connections` (so recycling never stalls the pool while old streams drain).
//! - A stream the server refused unprocessed (GOAWAY, REFUSED_STREAM, H3_REQUEST_REJECTED) is
//!   retried once elsewhere, as Envoy does; one refused beyond a limit the server had not yet
//!   announced (its SETTINGS came after the stream opened) is retried apart from that. These
//!   are not resends in `upstream_rq_retry`'s sense: the server processed the request once at
//!   most, so requests plus resends is still what the server counts.
//!
//! Each stream runs as its own local task.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderName, Request};
use shrike_stats::{Counter, Counters};

use super::{capacity_freed, record_connection_failure, record_failure, record_response};
use super::{record_timeout, Exchange, Pool, Pools};
use crate::config::EngineConfig;
use crate::requests::h2::{latency_header_name, RequestTemplate};
use crate::requests::{OriginLatency, Renderer};
use crate::schedule::Ticket;
use crate::trace::TraceIds;

/// How often a request is retried after refusals on streams opened before their server
/// announced its limit: each is a new connection's first round trip, and a pool opening
/// connections in a burst may give a request several; a server refusing beyond that is
/// counted as failing it.
const MAX_EARLY_REFUSALS: u8 = 4;

/// An answered request: status, header bytes, body bytes and the origin-latency header.
/// Status, head and body sizes, the origin-latency header, and when the response's end
/// reached the socket where the kernel stamped it (`--read-coalesce`).
pub(crate) type Answer = (u16, u64, u64, OriginLatency, Option<Instant>);

/// What one protocol brings to the shared pool.
pub(crate) trait Mux: Sized + 'static {
    /// Opens streams on a ready connection.
    type Sender: Clone + 'static;
    /// Per-connection protocol state.
    type ConnData: Default + 'static;
    /// Per-pool protocol state.
    type PoolData: Default + 'static;
    /// For invariant messages.
    const NAME: &'static str;

    /// This protocol's pool, if `pool` is one.
    fn pool(pool: &Pool) -> Option<&MuxPool<Self>>;

    /// Whether the server lets a connection with `active` streams take another (beyond our own
    /// limit, which is checked first).
    fn server_room(_sender: &Self::Sender, _active: u32) -> bool {
        true
    }

    /// A connection's life: connect, then [`MuxPool::connected`] or
    /// [`MuxPool::connect_failed`], drive it until it ends, then [`MuxPool::disconnected`].
    async fn connection_task(pools: Rc<Pools>, conn: Rc<MuxConn<Self>>);

    /// A request as this protocol sends it.
    type Outgoing;

    /// The request a stream sends: its template rendered, with the trace's headers if traced.
    fn outgoing(
        template: &RequestTemplate,
        renderer: &Renderer,
        trace: Option<TraceIds>,
    ) -> Self::Outgoing;

    /// A replayed request, already converted from its captured HTTP/1.1 form.
    fn replayed(request: (Request<()>, Bytes)) -> Self::Outgoing;

    /// Sends one request and reads its response to the end. `sent` is set when the stream
    /// actually opens: waiting for the connection's stream credit is queueing, not service.
    async fn exchange(
        sender: Self::Sender,
        request: Self::Outgoing,
        latency_header: Option<&HeaderName>,
        sent: &mut Instant,
    ) -> Result<Answer, StreamFailure>;

    /// Adds what the pool counted outside the worker's counters.
    fn flush_counters(pool: &MuxPool<Self>, counters: &mut Counters);
}

/// A failed stream, as the shared policy needs to judge it.
#[derive(Debug)]
pub(crate) struct StreamFailure {
    /// The response head had arrived: the server certainly processed the request.
    pub responded: bool,
    /// The server's GOAWAY ended the stream: the connection is draining.
    pub goaway: bool,
    /// The server refused the stream without processing it.
    pub refused: bool,
    /// Refused before the server had announced its stream limit: the protocol's opening race
    /// (HTTP/2's SETTINGS come after a client's first streams), not a server shedding load, so
    /// it does not use up the stream's one retry. A retry that found a fresh connection could
    /// otherwise be refused again by the same race and fail (seen with nginx at 2 streams per
    /// connection on a loaded machine).
    pub before_limit: bool,
    /// Our codec found the server's frames malformed (not a reset, not I/O).
    pub protocol_error: bool,
    /// Names the protocol's error code, so distinct failures stay distinct in the summary.
    pub message: String,
}

pub(crate) enum ConnState<S> {
    /// Connecting or in the protocol handshake; requests assigned meanwhile wait here.
    Connecting(Vec<Ticket>),
    Ready(S),
    /// No sender is held: once its streams end, the protocol closes the connection gracefully.
    Closed,
}

use ConnState::{Closed, Connecting, Ready};

pub(crate) struct MuxConn<M: Mux> {
    /// The endpoint's pool (`pools.list[pool]`) this connection belongs to.
    pub pool: usize,
    pub state: RefCell<ConnState<M::Sender>>,
    /// Streams assigned and not finished.
    pub active: Cell<u32>,
    /// Streams ever assigned (for `max_requests_per_connection`).
    started: Cell<u64>,
    /// Takes no new streams (limit reached, GOAWAY, closed); no longer in the pool's list.
    pub retired: Cell<bool>,
    pub goaway: Cell<bool>,
    pub data: M::ConnData,
}

impl<M: Mux> MuxConn<M> {
    /// Whether another stream fits: under our limit first (a plain integer compare), then
    /// under the server's.
    fn has_room(&self, configured: u32) -> bool {
        let active = self.active.get();
        if active >= configured {
            return false;
        }
        match &*self.state.borrow() {
            Ready(s) => M::server_room(s, active),
            _ => true,
        }
    }
}

pub(crate) struct MuxPool<M: Mux> {
    index: usize,
    /// Connections that take new streams, in opening order.
    conns: RefCell<Vec<Rc<MuxConn<M>>>>,
    /// Streams in flight in this worker.
    active: Cell<u32>,
    max_active: u32,
    max_streams: u32,
    max_conns: usize,
    /// Connections owned by sessions, by session id.
    sessions: RefCell<HashMap<u32, Rc<MuxConn<M>>>>,
    /// One per request-source entry.
    templates: Box<[RequestTemplate]>,
    /// Replaying: each ticket's request is its fed HTTP/1.1 payload, sent to this scheme and
    /// (without a Host header of its own) authority.
    replay: Option<(&'static str, String)>,
    /// The origin-latency header name, parsed once.
    pub(crate) latency_header: Option<HeaderName>,
    closing: Cell<bool>,
    pub data: M::PoolData,
}

impl<M: Mux> MuxPool<M> {
    pub fn new(cfg: &EngineConfig, index: usize, templates: Box<[RequestTemplate]>) -> Self {
        MuxPool {
            index,
            conns: RefCell::new(Vec::new()),
            active: Cell::new(0),
            max_active: cfg.streams.max_active_requests.get(),
            max_streams: cfg.streams.max_concurrent_streams.get(),
            max_conns: cfg.connections.get() as usize,
            sessions: RefCell::new(HashMap::new()),
            templates,
            replay: None,
            latency_header: latency_header_name(cfg),
            closing: Cell::new(false),
            data: M::PoolData::default(),
        }
    }

    /// A pool replaying captured HTTP/1.1 requests over this protocol.
    pub fn replayed(cfg: &EngineConfig, index: usize) -> Self {
        let target = &cfg.endpoints[index].target;
        let scheme = if target.scheme == crate::target::Scheme::Https { "https" } else { "http" };
        MuxPool {
            replay: Some((scheme, target.authority.clone())),
            ..Self::new(cfg, index, Box::new([]))
        }
    }

    /// The pool a connection task of this protocol belongs to.
    pub fn of(pools: &Pools, index: usize) -> &Self {
        match M::pool(&pools.list[index]) {
            Some(p) => p,
            // Invariant: a protocol's tasks are only spawned by that protocol's pool.
            None => unreachable!("{} task in another protocol's pool", M::NAME),
        }
    }

    /// Starts a stream on a connection with room, opening a connection if all are full. A
    /// session with a connection of its own uses that one (opened for its first request),
    /// outside the shared connections and the in-flight budget: it has one request in flight.
    pub fn try_start(&self, pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket> {
        if self.closing.get() {
            return Err(ticket);
        }
        if let Some(s) = ticket.session.filter(|s| s.own_connection) {
            let kept = self.sessions.borrow().get(&s.id).filter(|c| !c.retired.get()).cloned();
            let conn = kept.unwrap_or_else(|| {
                let c = self.open(pools, false);
                self.sessions.borrow_mut().insert(s.id, c.clone());
                c
            });
            self.assign(pools, &conn, ticket);
            return Ok(());
        }
        if self.active.get() >= self.max_active {
            return Err(ticket);
        }
        let pick = self.conns.borrow().iter().find(|c| c.has_room(self.max_streams)).cloned();
        let conn = match pick {
            Some(c) => c,
            None if self.conns.borrow().len() < self.max_conns => self.open(pools, true),
            None => return Err(ticket),
        };
        self.assign(pools, &conn, ticket);
        Ok(())
    }

    /// Opens `session`'s own connection now, ahead of its first request.
    pub fn open_ahead(&self, pools: &Rc<Pools>, session: u32) {
        if self.closing.get() || self.sessions.borrow().contains_key(&session) {
            return;
        }
        let c = self.open(pools, false);
        self.sessions.borrow_mut().insert(session, c);
    }

    /// A new connection; `shared` ones take any stream, the others belong to one session.
    fn open(&self, pools: &Rc<Pools>, shared: bool) -> Rc<MuxConn<M>> {
        let conn = Rc::new(MuxConn {
            pool: self.index,
            state: RefCell::new(Connecting(Vec::new())),
            active: Cell::new(0),
            started: Cell::new(0),
            retired: Cell::new(false),
            goaway: Cell::new(false),
            data: M::ConnData::default(),
        });
        if shared {
            self.conns.borrow_mut().push(conn.clone());
        }
        tokio::task::spawn_local(M::connection_task(pools.clone(), conn.clone()));
        conn
    }

    fn assign(&self, pools: &Rc<Pools>, conn: &Rc<MuxConn<M>>, ticket: Ticket) {
        conn.active.set(conn.active.get() + 1);
        conn.started.set(conn.started.get() + 1);
        self.active.set(self.active.get() + 1);
        let shared = ticket.session.is_none_or(|s| !s.own_connection);
        if shared
            && pools.cfg.max_requests_per_connection.is_some_and(|m| conn.started.get() >= m.get())
        {
            // Closed by us once its streams finish, as the h1 pool counts its recycling.
            pools.cx.state.borrow_mut().counters.inc(Counter::CxDestroyLocal);
            self.retire(conn);
        }
        match &mut *conn.state.borrow_mut() {
            Connecting(waiting) => waiting.push(ticket),
            Ready(sender) => {
                tokio::task::spawn_local(stream_task(
                    pools.clone(),
                    conn.clone(),
                    sender.clone(),
                    ticket,
                ));
            }
            // Invariant: closed connections are retired first, and retired ones are not
            // in `conns`, so `try_start` never picks one.
            Closed => unreachable!("stream assigned to a closed {} connection", M::NAME),
        }
    }

    /// Takes the connection out of rotation; it closes once its last stream ends.
    fn retire(&self, conn: &Rc<MuxConn<M>>) {
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

    /// The run is over: no new streams, and every connection closes once its streams end.
    /// The connections stay listed so [`Mux::flush_counters`] can still reach them.
    pub fn close(&self) {
        self.closing.set(true);
        for c in self.conns.borrow().iter().chain(self.sessions.borrow().values()) {
            c.retired.set(true);
            *c.state.borrow_mut() = Closed;
        }
    }

    pub fn flush_counters(&self, counters: &mut Counters) {
        M::flush_counters(self, counters);
    }

    /// Takes the connections still listed (the end of the run).
    pub fn take_conns(&self) -> Vec<Rc<MuxConn<M>>> {
        let mut conns = self.conns.take();
        conns.extend(self.sessions.take().into_values());
        conns
    }

    /// The handshake failed: every request that waited for this connection fails as a
    /// connection failure, as on the h1 path.
    pub fn connect_failed(&self, pools: &Rc<Pools>, conn: &Rc<MuxConn<M>>) {
        let waiting = match conn.state.replace(Closed) {
            Connecting(w) => w,
            _ => Vec::new(),
        };
        self.retire(conn);
        for t in waiting {
            conn.active.set(conn.active.get() - 1);
            self.active.set(self.active.get() - 1);
            record_connection_failure(pools);
            pools.cx.request_finished(&t);
        }
        capacity_freed(pools);
    }

    /// The connection is ready: start the streams that waited for it.
    pub fn connected(&self, pools: &Rc<Pools>, conn: &Rc<MuxConn<M>>, sender: M::Sender) {
        let waiting = match conn.state.replace(Ready(sender.clone())) {
            Connecting(w) => w,
            // The run closed the pool during the handshake: nothing waits any more.
            _ => Vec::new(),
        };
        for t in waiting {
            tokio::task::spawn_local(stream_task(pools.clone(), conn.clone(), sender.clone(), t));
        }
        if (conn.retired.get() && conn.active.get() == 0) || self.closing.get() {
            conn.state.replace(Closed);
        }
    }

    /// The connection's driver ended. Takes it out of rotation at once, before anything
    /// awaits (a closed connection must never be picked: `assign` relies on it), and returns
    /// the state it was in.
    pub fn disconnected(&self, conn: &Rc<MuxConn<M>>) -> ConnState<M::Sender> {
        let state = conn.state.replace(Closed);
        self.retire(conn);
        state
    }

    /// The server announced it is draining the connection (counted once per connection).
    pub fn note_goaway(&self, pools: &Pools, conn: &Rc<MuxConn<M>>) {
        if !conn.goaway.replace(true) {
            pools.cx.state.borrow_mut().counters.inc(Counter::CxCloseNotify);
        }
        self.retire(conn);
    }
}

/// One request on one stream: the exchange (bounded by `--timeout`), then what it means for
/// the run.
async fn stream_task<M: Mux>(
    pools: Rc<Pools>,
    conn: Rc<MuxConn<M>>,
    sender: M::Sender,
    ticket: Ticket,
) {
    let p = MuxPool::<M>::of(&pools, conn.pool);
    let started = Instant::now();
    let mut sent = started;
    let request = match &p.replay {
        None => {
            let template = &p.templates[ticket.request as usize];
            Ok(M::outgoing(template, &pools.cx.renderer, ticket.trace))
        }
        Some((scheme, authority)) => match pools.cx.payloads.get(ticket.request) {
            Some(payload) => crate::requests::h2::from_h1(&payload.data, scheme, authority)
                .map(|r| M::replayed(with_trace(r, ticket.trace))),
            None => Err("the replayed payload is missing".into()),
        },
    };
    let result = match request {
        // Dropping the exchange on timeout resets the stream (CANCEL), freeing its slot.
        Ok(request) => {
            let exchange = M::exchange(sender, request, p.latency_header.as_ref(), &mut sent);
            tokio::time::timeout(pools.cfg.timeout, exchange).await
        }
        // Nothing was sent: a captured request that cannot go over this protocol.
        Err(why) => Ok(Err(StreamFailure {
            responded: false,
            goaway: false,
            refused: false,
            before_limit: false,
            protocol_error: false,
            message: format!("replay: {why}"),
        })),
    };
    let done = Instant::now();
    conn.active.set(conn.active.get() - 1);
    p.active.set(p.active.get() - 1);
    if let Some(s) = ticket.session.filter(|s| s.own_connection && (s.last || s.fresh)) {
        // The session is over (or opens a connection per request): its connection closes
        // once its streams end.
        p.sessions.borrow_mut().remove(&s.id);
        p.retire(&conn);
    } else if conn.retired.get() {
        p.retire(&conn);
    }
    match result {
        Err(_elapsed) => {
            // `sent` moved past the task's start only if the stream opened.
            record_timeout(&pools, &ticket, (sent > started).then_some(sent));
            pools.cx.request_finished(&ticket);
        }
        Ok(Ok((status, header_bytes, body_bytes, origin, arrived))) => {
            // Stamped by the kernel, the end is when it arrived, never before the send.
            let done = arrived.map_or(done, |a| a.max(sent));
            let status = Some(status);
            let failed = false;
            let x = Exchange {
                ticket: &ticket,
                sent,
                done,
                status,
                header_bytes,
                body_bytes,
                origin,
                failed,
            };
            record_response(&pools, &x);
            pools.cx.request_finished(&ticket);
        }
        Ok(Err(f)) => {
            if f.goaway {
                p.note_goaway(&pools, &conn);
            }
            // A stream the server refused was not processed: retry it once elsewhere rather
            // than count a server that is shedding connections gracefully as failing.
            let unprocessed = f.refused && !f.responded;
            let early = f.before_limit && ticket.early_refusals < MAX_EARLY_REFUSALS;
            if unprocessed && pools.cx.stopping.get() {
                // The run is draining: nothing new is sent, and a refusal is no failure.
                pools.cx.state.borrow_mut().counters.inc(Counter::RqCancelled);
                pools.cx.request_finished(&ticket);
            } else if unprocessed && (early || !ticket.retried) && pools.cfg.retry_unanswered {
                // Not counted as a resend (upstream_rq_retry): the server acted on it at most
                // once, and a stream refused as its connection closed may never have left.
                let t = match early {
                    true => Ticket { early_refusals: ticket.early_refusals + 1, ..ticket },
                    false => Ticket { retried: true, ..ticket },
                };
                if let Err(t) = p.try_start(&pools, t) {
                    pools.cx.state.borrow_mut().queue.push_front(t);
                }
            } else {
                let sent = (sent > started).then_some(sent);
                record_failure(&pools, &ticket, sent, f.protocol_error, || f.message);
                pools.cx.request_finished(&ticket);
            }
        }
    }
    capacity_freed(&pools);
}

/// The request with a traced request's B3 headers added.
pub(crate) fn with_trace(
    mut request: (Request<()>, Bytes),
    trace: Option<TraceIds>,
) -> (Request<()>, Bytes) {
    if let Some(ids) = trace {
        for (k, v) in ids.headers() {
            if let Ok(v) = http::HeaderValue::from_str(&v) {
                request.0.headers_mut().insert(k, v);
            }
        }
    }
    request
}
