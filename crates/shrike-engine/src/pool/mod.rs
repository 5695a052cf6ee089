//! Connection pools: the protocol policy of the worker loop.
//!
//! A pool answers one question for the pacer: can this request start now? (`Pool::try_start`).
//! What happens when it cannot is the same for every protocol and lives here
//! (`try_dispatch`): queue it if the pending budget allows, count it as overflow in open loop,
//! or hand it back so the closed-loop pacer blocks until a pool reports capacity
//! (`capacity_freed`).
//!
//! There is one pool per endpoint; with several (multi-target runs) requests rotate over them
//! round robin, skipping an endpoint that has no capacity left.
//!
//! Pools receive a narrow context ([`cx::PoolCx`]: the recorder, capacity and drain notifiers,
//! timeouts), never the worker; what a serial connection speaks is a
//! [`crate::protocol::Protocol`].
//!
//! - [`serial`]: one exchange at a time per connection, up to `connections` per worker, for
//!   any serial protocol (HTTP/1.1, or a caller's), plus connections owned by sessions.
//! - [`mux`]: multiplexed streams over up to `connections` per worker, bounded by
//!   `max_concurrent_streams` per connection and `max_active_requests` per worker; one policy
//!   for both protocols that multiplex: [`h2`] (a hand-written HTTP/2 codec) and [`h3`]
//!   (quinn + h3).

pub(crate) mod cx;
pub mod h2;
pub(crate) mod h3;
pub(crate) mod mux;
pub(crate) mod serial;
pub(crate) mod timer;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use shrike_stats::{Counter, Counters, RecordingStats, StatId};

use crate::config::{EngineConfig, Protocol};
use crate::feed::FedProtocol;
use crate::protocol::http1::Http1;
use crate::requests::{H1Entry, OriginLatency};
use crate::schedule::{Due, Ticket};
use crate::trace::TraceIds;
use crate::worker::nanos;
use cx::PoolCx;
use serial::{DynSerial, SerialPool};

/// What one completed exchange looked like, for [`record_response`]. The ticket by
/// reference: it is ~90 bytes, and each copy on the hot path costs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange<'a> {
    pub ticket: &'a Ticket,
    pub sent: Instant,
    pub done: Instant,
    /// The HTTP status, for protocols that have one.
    pub status: Option<u16>,
    pub header_bytes: u64,
    pub body_bytes: u64,
    pub origin: OriginLatency,
    /// The answer was an error of its protocol (see [`record_answer_error`]).
    pub failed: bool,
}

/// A worker's pools, one per endpoint, and the narrow context they share. Connection and
/// stream tasks hold this, never the worker: the pools know nothing of how requests are timed.
pub(crate) struct Pools {
    pub cx: PoolCx,
    /// The run's resolved configuration (endpoints, limits), read only.
    pub cfg: Arc<EngineConfig>,
    pub list: Box<[Pool]>,
    /// The endpoint the next request tries first (round robin).
    next: Cell<usize>,
    /// The worker's QUIC sockets (HTTP/3 runs), shared by all its pools' connections.
    pub quic: h3::QuicEndpoints,
    /// Whether any request-source entry has expectations (skips the lookup otherwise).
    expectations: bool,
    /// How many unpaced requests the worker loop may take ahead of a free connection (see
    /// [`take_ahead`]); 0 where no connection takes them itself.
    pub ahead_limit: usize,
}

impl Pools {
    pub fn new(cx: PoolCx, cfg: Arc<EngineConfig>, requests: Vec<PoolRequests>) -> Pools {
        let list: Box<[Pool]> =
            requests.into_iter().enumerate().map(|(i, r)| Pool::new(&cfg, i, r)).collect();
        let expectations = cfg.requests.entries().iter().any(|e| e.expect().is_some());
        // Serial connections take requests ahead themselves; multiplexed pools, several
        // endpoints' round robin and payload-keyed requests go through `try_dispatch` each.
        let serial = matches!(&list[..], [Pool::Http1(_) | Pool::Serial(_)]);
        let ahead_limit = if serial && !cx.payload_requests {
            (2 * cfg.connections.get() as usize).clamp(16, 1024)
        } else {
            0
        };
        Pools {
            cx,
            cfg,
            list,
            next: Cell::new(0),
            quic: h3::QuicEndpoints::default(),
            expectations,
            ahead_limit,
        }
    }

    /// Opens connections up front if asked (serial pools only, as in Nighthawk: an h2 pool
    /// opens connections as streams need them) and starts the pools' connection tasks.
    pub async fn start(self: &Rc<Self>) {
        for p in self.list.iter() {
            match p {
                Pool::Http1(p) => p.start(self).await,
                Pool::Serial(p) => p.clone().start(self.clone()).await,
                Pool::H2(_) | Pool::H3(_) => {}
            }
        }
    }

    /// The run is over: let idle connections close, and add what the pools counted outside
    /// the worker's counters (h2 socket bytes, h3 UDP bytes of connections still open).
    pub fn close(&self, counters: &mut Counters) {
        for p in self.list.iter() {
            p.close();
            p.flush_counters(counters);
        }
    }
}

/// Enum dispatch rather than `dyn`: the h1 hot path stays a direct, inlinable call. The h2
/// and h3 pools are boxed because they are several times larger and only their pointer is
/// touched per call. A caller's protocol (`Serial`) is the one reached through a pointer:
/// the engine does not know its type.
pub(crate) enum Pool {
    Http1(Rc<SerialPool<Http1>>),
    Serial(Rc<dyn DynSerial>),
    H2(Box<mux::MuxPool<h2::H2>>),
    H3(Box<mux::MuxPool<h3::H3>>),
}

impl Pool {
    /// The pool for endpoint `index`, with its pre-encoded requests (one per request-source
    /// entry). The runner builds request templates exactly when `cfg.protocol` is HTTP/2 or
    /// HTTP/3.
    fn new(cfg: &EngineConfig, index: usize, requests: PoolRequests) -> Pool {
        match (cfg.protocol, requests) {
            (Protocol::Http3, PoolRequests::H2(t)) => {
                Pool::H3(Box::new(mux::MuxPool::new(cfg, index, t)))
            }
            (_, PoolRequests::H2(t)) => Pool::H2(Box::new(mux::MuxPool::new(cfg, index, t))),
            (_, PoolRequests::H1(r)) => {
                let http1 = Http1::new(r, cfg.requests.latency_header());
                Pool::Http1(Rc::new(SerialPool::new(cfg, index, http1)))
            }
            (Protocol::Http1, PoolRequests::Fed(FedProtocol::Http)) => {
                Pool::Http1(Rc::new(SerialPool::new(cfg, index, Http1::replayed())))
            }
            // Captured HTTP/1.1 requests, sent as HTTP/2 or HTTP/3 when the run asks for it.
            (Protocol::Http2, PoolRequests::Fed(FedProtocol::Http)) => {
                Pool::H2(Box::new(mux::MuxPool::replayed(cfg, index)))
            }
            (Protocol::Http3, PoolRequests::Fed(FedProtocol::Http)) => {
                Pool::H3(Box::new(mux::MuxPool::replayed(cfg, index)))
            }
            (_, PoolRequests::Fed(FedProtocol::Serial(p))) => Pool::Serial(p.pool(cfg, index)),
        }
    }

    /// Starts the request now if a connection can carry it; otherwise hands it back.
    #[inline]
    fn try_start(&self, pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket> {
        match self {
            Pool::Http1(p) => p.try_start(pools, ticket),
            Pool::Serial(p) => p.clone().try_start(pools, ticket),
            Pool::H2(p) => p.try_start(pools, ticket),
            Pool::H3(p) => p.try_start(pools, ticket),
        }
    }

    fn close(&self) {
        match self {
            Pool::Http1(p) => p.close(),
            Pool::Serial(p) => p.close(),
            Pool::H2(p) => p.close(),
            Pool::H3(p) => p.close(),
        }
    }

    /// Adds what the pool counted outside the worker's counters.
    pub fn flush_counters(&self, counters: &mut Counters) {
        match self {
            Pool::Http1(_) | Pool::Serial(_) => {}
            Pool::H2(p) => p.flush_counters(counters),
            Pool::H3(p) => p.flush_counters(counters),
        }
    }
}

/// A pool's requests, one per request-source entry, encoded for its protocol.
pub(crate) enum PoolRequests {
    H1(Box<[H1Entry]>),
    H2(Box<[h2::RequestTemplate]>),
    /// Fed sessions (replay) and streamed requests: every request brings its own payload, in
    /// this protocol.
    Fed(FedProtocol),
}

/// Starts the request on the next endpoint in round-robin order that has capacity (or on its
/// own endpoint, for a request bound to one).
#[inline]
fn try_start_any(pools: &Rc<Pools>, mut ticket: Ticket) -> Result<(), Ticket> {
    let n = pools.list.len();
    if n == 1 {
        return pools.list[0].try_start(pools, ticket);
    }
    if let Some(ep) = pools.cfg.requests.entries()[ticket.request as usize].endpoint() {
        return pools.list[ep].try_start(pools, ticket);
    }
    let first = pools.next.get();
    for k in 0..n {
        let i = (first + k) % n;
        match pools.list[i].try_start(pools, ticket) {
            Ok(()) => {
                pools.next.set((i + 1) % n);
                return Ok(());
            }
            Err(t) => ticket = t,
        }
    }
    Err(ticket)
}

/// Opens `session`'s own connection ahead of its first request (`first`, whose payload a
/// login may need): replay's captured SYN. Nothing is sent; the connection is counted as it
/// opens. A multi-target run deals requests over its endpoints as they come, so only a single
/// endpoint's pool is known ahead; there the first request opens it.
pub(crate) fn open_ahead(pools: &Rc<Pools>, session: u32, first: u32) {
    let [pool] = &pools.list[..] else { return };
    match pool {
        Pool::Http1(p) => p.open_ahead(pools, session, first),
        Pool::Serial(p) => p.clone().open_ahead(pools, session, first),
        Pool::H2(p) => p.open_ahead(pools, session),
        Pool::H3(p) => p.open_ahead(pools, session),
    }
}

/// Gives the ticket to the pool, or queues it if the pending budget allows, or (open loop)
/// drops it as overflow. `Err` hands the ticket back: closed loop must wait. A session's
/// request never makes the worker wait: it queues (a session has at most one request in
/// flight, so the queue stays bounded by the live sessions).
pub(crate) fn try_dispatch(pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket> {
    let cx = &pools.cx;
    // Queued requests were released first; a new one must not overtake them, unless it has
    // a connection of its own waiting for it.
    let own = ticket.session.is_some_and(|s| s.own_connection);
    let ticket = if own || cx.state.borrow().queue.is_empty() {
        match try_start_any(pools, ticket) {
            Ok(()) => {
                cx.state.borrow_mut().outstanding += 1;
                return Ok(());
            }
            Err(t) => t,
        }
    } else {
        ticket
    };
    let mut st = cx.state.borrow_mut();
    if st.queue.len() < pools.cfg.max_pending_requests as usize || ticket.session.is_some() {
        st.outstanding += 1;
        st.queue.push_back(ticket);
        st.counters.inc(Counter::RqPendingTotal);
        return Ok(());
    }
    if pools.cfg.open_loop {
        st.counters.inc(Counter::PoolOverflow);
        let st = &mut *st;
        cx.check_predicates(&mut st.counters);
        return Ok(());
    }
    Err(ticket)
}

/// An unpaced request (`due` the moment a connection can take it) that found no free
/// connection: it waits among the requests taken ahead, for the first connection to finish,
/// if there is room. False hands it back: the worker loop waits for capacity.
///
/// Why: at saturation the worker loop would otherwise be woken once per response to release
/// one request into the connection that just went idle, which then wakes to send it, two
/// task polls and a notification per request, a quarter of its instructions
/// (bench/results/hot-path-costs.md). A connection that takes its next request itself sends it in the same poll that
/// read the response, and the loop wakes once per half of [`Pools::ahead_limit`] to refill.
pub(crate) fn put_ahead(pools: &Pools, due: Due, trace: Option<TraceIds>) -> bool {
    let mut st = pools.cx.state.borrow_mut();
    if st.ahead.len() >= pools.ahead_limit || due.session.is_some() {
        return false;
    }
    st.ahead.push_back((due, trace));
    true
}

/// Whether requests taken ahead wait for a connection: then none is free, and an unpaced
/// request joins them without a clock read (the connection that takes it reads one).
pub(crate) fn waiting_ahead(pools: &Pools) -> bool {
    !pools.cx.state.borrow().ahead.is_empty()
}

/// The next request taken ahead (see [`put_ahead`]) for a connection that just finished one,
/// released `now` (the reading that timed the end of the connection's last response, if the
/// clock's: the moment it could take another, so its wait counts from there; else read
/// here). `None` when there is none, or the run is stopping or past its deadline (then none
/// will be: they were never released, so nothing is counted). Wakes a worker loop waiting to
/// refill once half are gone, and at the last.
pub(crate) fn take_ahead(pools: &Pools, now: Option<Instant>) -> Option<Ticket> {
    let cx = &pools.cx;
    let mut st = cx.state.borrow_mut();
    let (due, trace) = st.ahead.pop_front()?;
    let now = now.unwrap_or_else(Instant::now);
    if cx.stopping.get() || cx.release_until.get().is_some_and(|end| now >= end) {
        st.ahead.clear();
        return None;
    }
    st.outstanding += 1;
    let refill = st.ahead.len() <= pools.ahead_limit / 2;
    drop(st);
    // Once: the loop clears the flag when it runs, and every later take would pay Notify's lock.
    if refill && cx.pacer_blocked.replace(false) {
        cx.capacity.notify_one();
    }
    Some(Ticket::release(due, trace, None, now))
}

/// A pool gained capacity (a stream or connection finished): start queued requests while it
/// can, then wake a blocked closed-loop pacer.
pub(crate) fn capacity_freed(pools: &Rc<Pools>) {
    let cx = &pools.cx;
    loop {
        let Some(t) = cx.state.borrow_mut().queue.pop_front() else { break };
        if let Err(t) = try_start_any(pools, t) {
            cx.state.borrow_mut().queue.push_front(t);
            return;
        }
    }
    if cx.pacer_blocked.get() {
        cx.capacity.notify_one();
    }
}

/// Registers the polling task in `waiter` and returns `Pending`. The waker is kept while it is
/// the same task's (re-registering clones nothing): one task waits on such a cell for its whole
/// life, polled on every wake-up.
pub(crate) fn wait_here<T>(waiter: &Cell<Option<Waker>>, cx: &Context<'_>) -> Poll<T> {
    let w = match waiter.take() {
        Some(w) if w.will_wake(cx.waker()) => w,
        _ => cx.waker().clone(),
    };
    waiter.set(Some(w));
    Poll::Pending
}

/// Hands a traced request's span to the collector.
#[inline]
fn trace_span(
    cx: &PoolCx,
    ticket: &Ticket,
    sent: Option<Instant>,
    status: Option<u16>,
    error: Option<&'static str>,
) {
    // The tracer first: without one (almost every run) the ticket's ids are not even read.
    let Some(t) = &cx.tracing else { return };
    let Some(ids) = ticket.trace else { return };
    t.finish(crate::trace::SpanRecord {
        ids,
        // A streamed request's number keys its payload, not an entry with a name.
        request: if cx.payload_requests { u32::MAX } else { ticket.request },
        scheduled: ticket.scheduled,
        sent,
        done: Instant::now(),
        status,
        error,
    });
}

/// Records one answered request, identically for every protocol.
#[inline]
pub(crate) fn record_response(pools: &Pools, x: &Exchange<'_>) {
    let cx = &pools.cx;
    trace_span(cx, x.ticket, Some(x.sent), x.status, None);
    let mut st = cx.state.borrow_mut();
    crate::telemetry::record_response(&mut st, x);
    st.counters.inc(Counter::RqTotal);
    let s = &mut st.stats;
    // Three clock differences give all five spans: an `Instant` subtraction is ~25
    // instructions of checks, and an unpaced ticket (released when due) needs only two.
    let queued = nanos(x.sent - x.ticket.released);
    let service = nanos(x.done - x.sent);
    let lead = match x.ticket.released == x.ticket.scheduled {
        true => Some(Duration::ZERO),
        false => x.ticket.released.checked_duration_since(x.ticket.scheduled),
    };
    let (late, since_due) = match lead.map(nanos) {
        Some(lead) => {
            let late = lead.saturating_add(queued);
            (late, late.saturating_add(service))
        }
        // Released before it was due (a lateness budget's early release).
        None => (
            nanos(x.sent.saturating_duration_since(x.ticket.scheduled)),
            nanos(x.done - x.ticket.scheduled),
        ),
    };
    // Pairs equal value for value in an unpaced run of 2xx answers, recorded once then (see
    // `WorkerState::new`).
    s.record_pair(StatId::QueueToConnect, queued, StatId::SendLateness, Some(late));
    let callback = queued.saturating_add(service);
    s.record_pair(
        StatId::SequencerCallback,
        callback,
        StatId::ScheduledToResponse,
        Some(since_due),
    );
    // Errors' latency apart too (rare, so the common path records nothing more): what met a
    // latency goal is judged on the successful answers, every answer's less the errors'.
    if x.status.is_some_and(|s| s >= 400) {
        s.record(StatId::ScheduledToErrorResponse, since_due);
    }
    match x.status.map(StatId::latency_for_status) {
        Some(by_status) => {
            s.record_pair(StatId::RequestToResponse, service, by_status, Some(service))
        }
        None => s.record(StatId::RequestToResponse, service),
    }
    s.record_run(StatId::ResponseHeaderSize, x.header_bytes);
    s.record_run(StatId::ResponseBodySize, x.body_bytes);
    if x.status.is_none() && !x.failed {
        st.counters.inc(Counter::Answered);
    }
    if let Some(status) = x.status {
        st.counters.inc(Counter::for_status(status));
        st.status_codes.inc(status);
        if pools.expectations {
            let entry = &pools.cfg.requests.entries()[x.ticket.request as usize];
            if entry.expect().is_some_and(|e| !e.contains(&status)) {
                st.counters.inc(Counter::ExpectationMismatch);
            }
        }
    }
    // A replayed request (a fed session's: its number is a payload's) with its captured
    // answer: the canary diff.
    if x.ticket.session.is_some_and(|s| s.fed) {
        if let (Some(p), Some(status)) = (cx.payload(x.ticket.request), x.status) {
            if let Some(e) = p.extra::<crate::feed::HttpMeta>().and_then(|m| m.expect.as_ref()) {
                match e.difference(status, x.body_bytes) {
                    None => st.counters.inc(Counter::CanaryMatched),
                    Some(d) => {
                        st.counters.inc(Counter::CanaryDiffered);
                        st.note_difference(|| d);
                    }
                }
            }
        }
    }
    match x.origin {
        OriginLatency::Absent => {}
        OriginLatency::Ns(v) => st.stats.record(StatId::OriginLatency, v),
        // Counted in the run's error summary, never failing it (Nighthawk logs and skips).
        OriginLatency::Invalid => st.note_error(|| {
            format!(
                "response header {} is no integer of nanoseconds: not recorded",
                pools.cfg.requests.latency_header().unwrap_or_default()
            )
        }),
    }
    let st = &mut *st;
    cx.check_predicates(&mut st.counters);
}

/// Records that an answered request (already recorded by [`record_response`]) was an error of
/// its protocol: a MySQL error packet. The connection stays; the error is tallied by `key`.
pub(crate) fn record_answer_error(pools: &Pools, key: String) {
    let cx = &pools.cx;
    let mut st = cx.state.borrow_mut();
    st.counters.inc(Counter::AnswerErrors);
    st.note_error(|| key);
    let st = &mut *st;
    cx.check_predicates(&mut st.counters);
}

/// Records a request that failed after it was sent (reset, protocol error, closed mid-way),
/// with how long it queued and how late it left (see [`record_departure`]).
pub(crate) fn record_failure(
    pools: &Pools,
    ticket: &Ticket,
    sent: Option<Instant>,
    protocol_error: bool,
    msg: impl FnOnce() -> String,
) {
    let cx = &pools.cx;
    trace_span(cx, ticket, sent, None, Some("no response (reset, closed or a protocol error)"));
    let mut st = cx.state.borrow_mut();
    record_departure(&mut st.stats, ticket, sent);
    crate::telemetry::record_failure(&mut st);
    st.counters.inc(Counter::RqTotal);
    if protocol_error {
        st.counters.inc(Counter::CxProtocolError);
    }
    st.counters.inc(Counter::StreamResets);
    st.note_error(msg);
    let st = &mut *st;
    cx.check_predicates(&mut st.counters);
}

/// What is known of a request that got no answer: how long it queued and how late it left, if
/// it left (`sent`). A run in which every request failed or timed out still shows its
/// queueing and pacing.
fn record_departure(s: &mut RecordingStats, ticket: &Ticket, sent: Option<Instant>) {
    if let Some(sent) = sent {
        let queued = nanos(sent.saturating_duration_since(ticket.released));
        let late = nanos(sent.saturating_duration_since(ticket.scheduled));
        s.record_pair(StatId::QueueToConnect, queued, StatId::SendLateness, Some(late));
    }
}

/// Records a request abandoned after `--timeout` without a complete response. Its stream is
/// reset (h2/h3) or its connection closed (HTTP/1.1, whose framing is lost mid-response).
pub(crate) fn record_timeout(pools: &Pools, ticket: &Ticket, sent: Option<Instant>) {
    let cx = &pools.cx;
    trace_span(cx, ticket, sent, None, Some("timeout"));
    let mut st = cx.state.borrow_mut();
    record_departure(&mut st.stats, ticket, sent);
    st.counters.inc(Counter::RqTotal);
    st.counters.inc(Counter::RqTimeout);
    let secs = cx.request_timeout.as_secs_f64();
    st.note_error(|| format!("request timed out: no complete response within {secs}s"));
    let st = &mut *st;
    cx.check_predicates(&mut st.counters);
}

/// Records a request that never left because no connection could be opened, or, once the
/// run is stopped (which abandons connection attempts), one cancelled before it was sent.
pub(crate) fn record_connection_failure(pools: &Pools) {
    let cx = &pools.cx;
    let mut st = cx.state.borrow_mut();
    if cx.stop.is_stopped() {
        st.counters.inc(Counter::RqCancelled);
        return;
    }
    st.counters.inc(Counter::PoolConnectionFailure);
    let st = &mut *st;
    cx.check_predicates(&mut st.counters);
}
