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
//! - `h1`: one request at a time per connection, up to `connections` per worker.
//! - [`mux`]: multiplexed streams over up to `connections` per worker, bounded by
//!   `max_concurrent_streams` per connection and `max_active_requests` per worker; one policy
//!   for both protocols that multiplex: [`h2`] (the `h2` crate) and [`h3`] (quinn + h3).

pub(crate) mod h1;
pub mod h2;
pub(crate) mod h3;
pub(crate) mod mux;

use std::rc::Rc;
use std::time::Instant;

use shrike_stats::{Counter, Counters, StatId};

use crate::config::{EngineConfig, Protocol};
use crate::requests::{H1Entry, OriginLatency};
use crate::worker::{nanos, Ticket, WorkerCtx};

/// What one completed exchange looked like, for [`record_response`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange {
    pub ticket: Ticket,
    pub sent: Instant,
    pub done: Instant,
    pub status: u16,
    pub header_bytes: u64,
    pub body_bytes: u64,
    pub origin: OriginLatency,
}

/// Enum dispatch rather than `dyn`: the h1 hot path stays a direct, inlinable call. The h2
/// and h3 pools are boxed because they are several times larger and only their pointer is
/// touched per call.
pub(crate) enum Pool {
    H1(h1::H1Pool),
    H2(Box<mux::MuxPool<h2::H2>>),
    H3(Box<mux::MuxPool<h3::H3>>),
}

impl Pool {
    /// The pool for endpoint `index`, with its pre-encoded requests (one per request-source
    /// entry). The runner builds request templates exactly when `cfg.protocol` is HTTP/2 or
    /// HTTP/3.
    pub fn new(cfg: &EngineConfig, index: usize, requests: PoolRequests) -> Pool {
        match (cfg.protocol, requests) {
            (Protocol::Http3, PoolRequests::H2(t)) => {
                Pool::H3(Box::new(mux::MuxPool::new(cfg, index, t)))
            }
            (_, PoolRequests::H2(t)) => Pool::H2(Box::new(mux::MuxPool::new(cfg, index, t))),
            (_, PoolRequests::H1(r)) => Pool::H1(h1::H1Pool::new(cfg, index, r)),
        }
    }

    /// Opens connections up front if asked (HTTP/1 only, as in Nighthawk: an h2 pool opens
    /// connections as streams need them) and starts the pools' background tasks.
    pub async fn start(ctx: &Rc<WorkerCtx>) {
        for (i, p) in ctx.pools.iter().enumerate() {
            if let Pool::H1(_) = p {
                h1::start(ctx, i).await;
            }
        }
    }

    /// Starts the request now if a connection can carry it; otherwise hands it back.
    #[inline]
    fn try_start(&self, ctx: &Rc<WorkerCtx>, ticket: Ticket) -> Result<(), Ticket> {
        match self {
            Pool::H1(p) => p.try_start(ticket),
            Pool::H2(p) => p.try_start(ctx, ticket),
            Pool::H3(p) => p.try_start(ctx, ticket),
        }
    }

    /// The run is over: let idle connections close.
    pub fn close(&self) {
        match self {
            Pool::H1(p) => p.close(),
            Pool::H2(p) => p.close(),
            Pool::H3(p) => p.close(),
        }
    }

    /// Adds what the pool counted outside the worker's counters (h2 socket bytes, h3 UDP
    /// bytes of connections still open).
    pub fn flush_counters(&self, counters: &mut Counters) {
        match self {
            Pool::H1(_) => {}
            Pool::H2(p) => p.flush_counters(counters),
            Pool::H3(p) => p.flush_counters(counters),
        }
    }
}

/// A pool's requests, one per request-source entry, encoded for its protocol.
pub(crate) enum PoolRequests {
    H1(Box<[H1Entry]>),
    H2(Box<[h2::RequestTemplate]>),
}

/// Starts the request on the next endpoint in round-robin order that has capacity (or on its
/// own endpoint, for a request bound to one).
#[inline]
fn try_start_any(ctx: &Rc<WorkerCtx>, mut ticket: Ticket) -> Result<(), Ticket> {
    let n = ctx.pools.len();
    if n == 1 {
        return ctx.pools[0].try_start(ctx, ticket);
    }
    if let Some(ep) = ctx.cfg.requests.entries()[ticket.request as usize].endpoint() {
        return ctx.pools[ep].try_start(ctx, ticket);
    }
    let first = ctx.next_pool.get();
    for k in 0..n {
        let i = (first + k) % n;
        match ctx.pools[i].try_start(ctx, ticket) {
            Ok(()) => {
                ctx.next_pool.set((i + 1) % n);
                return Ok(());
            }
            Err(t) => ticket = t,
        }
    }
    Err(ticket)
}

/// Gives the ticket to the pool, or queues it if the pending budget allows, or (open loop)
/// drops it as overflow. `Err` hands the ticket back: closed loop must wait.
pub(crate) fn try_dispatch(ctx: &Rc<WorkerCtx>, ticket: Ticket) -> Result<(), Ticket> {
    // Queued requests were released first; a new one must not overtake them.
    let ticket = if ctx.state.borrow().queue.is_empty() {
        match try_start_any(ctx, ticket) {
            Ok(()) => {
                ctx.state.borrow_mut().outstanding += 1;
                return Ok(());
            }
            Err(t) => t,
        }
    } else {
        ticket
    };
    let mut st = ctx.state.borrow_mut();
    if st.queue.len() < ctx.cfg.max_pending_requests as usize {
        st.outstanding += 1;
        st.queue.push_back(ticket);
        st.counters.inc(Counter::RqPendingTotal);
        return Ok(());
    }
    if ctx.cfg.open_loop {
        st.counters.inc(Counter::PoolOverflow);
        let st = &mut *st;
        ctx.check_predicates(&mut st.counters);
        return Ok(());
    }
    Err(ticket)
}

/// A pool gained capacity (a stream or connection finished): start queued requests while it
/// can, then wake a blocked closed-loop pacer.
pub(crate) fn capacity_freed(ctx: &Rc<WorkerCtx>) {
    loop {
        let Some(t) = ctx.state.borrow_mut().queue.pop_front() else { break };
        if let Err(t) = try_start_any(ctx, t) {
            ctx.state.borrow_mut().queue.push_front(t);
            return;
        }
    }
    if ctx.pacer_blocked.get() {
        ctx.capacity.notify_one();
    }
}

/// A request left the pool (answered, failed or abandoned).
#[inline]
pub(crate) fn request_finished(ctx: &WorkerCtx) {
    let mut st = ctx.state.borrow_mut();
    st.outstanding -= 1;
    if st.outstanding == 0 {
        ctx.drained.notify_one();
    }
}

/// Records one answered request, identically for every protocol.
#[inline]
pub(crate) fn record_response(ctx: &WorkerCtx, x: &Exchange) {
    let mut st = ctx.state.borrow_mut();
    crate::telemetry::record_response(&mut st, x);
    st.counters.inc(Counter::RqTotal);
    let s = &mut st.stats;
    s.record(StatId::QueueToConnect, nanos(x.sent - x.ticket.released));
    s.record(StatId::SendLateness, nanos(x.sent.saturating_duration_since(x.ticket.scheduled)));
    let service = nanos(x.done - x.sent);
    s.record(StatId::RequestToResponse, service);
    s.record(StatId::latency_for_status(x.status), service);
    s.record(StatId::ScheduledToResponse, nanos(x.done - x.ticket.scheduled));
    s.record(StatId::SequencerCallback, nanos(x.done - x.ticket.released));
    s.record(StatId::ResponseHeaderSize, x.header_bytes);
    s.record(StatId::ResponseBodySize, x.body_bytes);
    st.counters.inc(Counter::for_status(x.status));
    st.status_codes.inc(x.status);
    match x.origin {
        OriginLatency::Absent => {}
        OriginLatency::Ns(v) => st.stats.record(StatId::OriginLatency, v),
        // Counted in the run's error summary, never failing it (Nighthawk logs and skips).
        OriginLatency::Invalid => st.note_error(|| {
            format!(
                "response header {} is no integer of nanoseconds: not recorded",
                ctx.cfg.requests.latency_header().unwrap_or_default()
            )
        }),
    }
    if ctx.requests.expectations {
        let entry = &ctx.cfg.requests.entries()[x.ticket.request as usize];
        if entry.expect().is_some_and(|e| !e.contains(&x.status)) {
            st.counters.inc(Counter::ExpectationMismatch);
        }
    }
    let st = &mut *st;
    ctx.check_predicates(&mut st.counters);
}

/// Records a request that failed after it was sent (reset, protocol error, closed mid-way).
pub(crate) fn record_failure(ctx: &WorkerCtx, protocol_error: bool, msg: impl FnOnce() -> String) {
    let mut st = ctx.state.borrow_mut();
    crate::telemetry::record_failure(&mut st);
    st.counters.inc(Counter::RqTotal);
    if protocol_error {
        st.counters.inc(Counter::CxProtocolError);
    }
    st.counters.inc(Counter::StreamResets);
    st.note_error(msg);
    let st = &mut *st;
    ctx.check_predicates(&mut st.counters);
}

/// Records a request abandoned after `--timeout` without a complete response. Its stream is
/// reset (h2/h3) or its connection closed (HTTP/1.1, whose framing is lost mid-response).
pub(crate) fn record_timeout(ctx: &WorkerCtx) {
    let mut st = ctx.state.borrow_mut();
    st.counters.inc(Counter::RqTotal);
    st.counters.inc(Counter::RqTimeout);
    let secs = ctx.cfg.timeout.as_secs_f64();
    st.note_error(|| format!("request timed out: no complete response within {secs}s"));
    let st = &mut *st;
    ctx.check_predicates(&mut st.counters);
}

/// Records a request that never left because no connection could be opened.
pub(crate) fn record_connection_failure(ctx: &WorkerCtx) {
    let mut st = ctx.state.borrow_mut();
    st.counters.inc(Counter::PoolConnectionFailure);
    let st = &mut *st;
    ctx.check_predicates(&mut st.counters);
}
