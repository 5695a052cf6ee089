//! The serial pool: connections that carry one exchange at a time, for any [`Protocol`]
//! (HTTP/1.1, and the caller's own: replay's raw TCP and MySQL). Up to `connections` shared connections
//! per worker open lazily (or up front with prefetch); idle ones are reused most recently used
//! first by default, so a lightly loaded run keeps few sockets hot, or least recently used first
//! to spread requests over every connection.
//!
//! A session that wants a connection of its own (replay's captured TCP connection) gets one
//! outside the shared set: opened for its first request, used for each of its requests in
//! turn, closed after its last. A session has one request in flight at a time, so its
//! connection is always free when its next request comes.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use shrike_stats::Counter;

use super::timer::{Deadlines, Watch};
use super::{record_answer_error, record_connection_failure, record_failure};
use super::{record_response, record_timeout};
use super::{Exchange, Pools};
use crate::config::{EngineConfig, H1Reuse};
use crate::protocol::{After, FailureClass, Io, Protocol};
use crate::schedule::Ticket;

/// Where the pacer hands a request to one specific connection: the ticket, and the waker of
/// the connection's task while it waits for one. Everything here runs on the worker's one
/// thread, so a cell does what `tokio::sync::Notify` would with a lock and a waiter list;
/// every saturating request passes through here (bench/results/hot-path-costs.md).
#[derive(Default)]
struct Slot {
    ticket: Cell<Option<Ticket>>,
    waiter: Cell<Option<Waker>>,
}

impl Slot {
    /// Wakes the connection's task: waiting, it then finds the ticket or the pool closing. The
    /// waker is kept between waits (re-registering the same task clones nothing), so a task
    /// that is mid-exchange, which only `close` can catch, gets one spurious poll.
    fn wake(&self) {
        let waiter = self.waiter.take();
        if let Some(w) = &waiter {
            w.wake_by_ref();
        }
        self.waiter.set(waiter);
    }

    fn hand(&self, ticket: Ticket) {
        self.ticket.set(Some(ticket));
        self.wake();
    }

    /// The next ticket, or None once `closing` is set and no ticket is left.
    async fn next(&self, closing: &Cell<bool>) -> Option<Ticket> {
        std::future::poll_fn(|cx| {
            if let Some(t) = self.ticket.take() {
                return Poll::Ready(Some(t));
            }
            if closing.get() {
                return Poll::Ready(None);
            }
            super::wait_here(&self.waiter, cx)
        })
        .await
    }
}

pub(crate) struct SerialPool<P: Protocol> {
    /// Which endpoint (`cfg.endpoints[index]`) this pool connects to.
    index: usize,
    protocol: P,
    slots: Box<[Rc<Slot>]>,
    /// Idle shared slots; the most recently used is at the back.
    idle: RefCell<VecDeque<usize>>,
    reuse: H1Reuse,
    max_requests_per_connection: Option<NonZeroU64>,
    prefetch: bool,
    /// Connections owned by sessions, by session id.
    sessions: RefCell<HashMap<u32, Rc<Slot>>>,
    /// Connections exit once set.
    closing: Cell<bool>,
    /// The `--timeout` bound on every connection's exchange.
    deadlines: Rc<Deadlines>,
}

/// A serial pool of a caller's protocol, behind a pointer: the engine does not know its type,
/// so it reaches it through this. HTTP/1.1's pool is called directly (no dynamic dispatch on
/// the h1 hot path).
pub(crate) trait DynSerial {
    fn try_start(self: Rc<Self>, pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket>;
    fn start(self: Rc<Self>, pools: Rc<Pools>) -> Pin<Box<dyn Future<Output = ()>>>;
    fn open_ahead(self: Rc<Self>, pools: &Rc<Pools>, session: u32, first: u32);
    fn close(&self);
}

impl<P: Protocol> DynSerial for SerialPool<P> {
    fn try_start(self: Rc<Self>, pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket> {
        SerialPool::try_start(&self, pools, ticket)
    }

    fn start(self: Rc<Self>, pools: Rc<Pools>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move { SerialPool::start(&self, &pools).await })
    }

    fn open_ahead(self: Rc<Self>, pools: &Rc<Pools>, session: u32, first: u32) {
        SerialPool::open_ahead(&self, pools, session, first);
    }

    fn close(&self) {
        SerialPool::close(self);
    }
}

/// An open connection and how many exchanges it carried.
struct Open<C> {
    conn: C,
    served: u64,
}

/// Whose connection a task serves.
#[derive(Clone, Copy)]
enum Owner {
    /// Shared slot `id`.
    Shared(usize),
    /// The connection of session `id`.
    Session(u32),
}

impl<P: Protocol> SerialPool<P> {
    pub fn new(cfg: &EngineConfig, index: usize, protocol: P) -> SerialPool<P> {
        let connections = cfg.connections.get() as usize;
        let reuse = cfg.h1_reuse;
        // Either way, slot 0 is the first connection used.
        let idle = match reuse {
            H1Reuse::Mru => (0..connections).rev().collect(),
            H1Reuse::Lru => (0..connections).collect(),
        };
        SerialPool {
            index,
            protocol,
            slots: (0..connections).map(|_| Rc::new(Slot::default())).collect(),
            idle: RefCell::new(idle),
            reuse,
            max_requests_per_connection: cfg.max_requests_per_connection,
            prefetch: cfg.prefetch_connections,
            sessions: RefCell::new(HashMap::new()),
            closing: Cell::new(false),
            deadlines: Rc::default(),
        }
    }

    /// Gives the ticket to an idle connection (or its session's own), if there is one.
    #[inline]
    pub fn try_start(self: &Rc<Self>, pools: &Rc<Pools>, ticket: Ticket) -> Result<(), Ticket> {
        if let Some(s) = ticket.session.filter(|s| s.own_connection) {
            let slot = self.sessions.borrow().get(&s.id).cloned();
            slot.unwrap_or_else(|| self.session_slot(pools, s.id, None)).hand(ticket);
            return Ok(());
        }
        let mut idle = self.idle.borrow_mut();
        let next = match self.reuse {
            H1Reuse::Mru => idle.pop_back(),
            H1Reuse::Lru => idle.pop_front(),
        };
        drop(idle);
        let Some(id) = next else { return Err(ticket) };
        self.slots[id].hand(ticket);
        Ok(())
    }

    /// Opens `session`'s own connection now, ahead of its first request (`first`).
    pub fn open_ahead(self: &Rc<Self>, pools: &Rc<Pools>, session: u32, first: u32) {
        if !self.closing.get() && !self.sessions.borrow().contains_key(&session) {
            self.session_slot(pools, session, Some(first));
        }
    }

    /// A session's own connection: its slot, served by a task of its own that connects at
    /// once when opened `ahead` of its first request, else for that request.
    fn session_slot(self: &Rc<Self>, pools: &Rc<Pools>, id: u32, ahead: Option<u32>) -> Rc<Slot> {
        let slot = Rc::new(Slot::default());
        self.sessions.borrow_mut().insert(id, slot.clone());
        let (pools, pool, owner) = (pools.clone(), self.clone(), Owner::Session(id));
        let task_slot = slot.clone();
        match ahead {
            None => {
                tokio::task::spawn_local(connection_task(pools, pool, task_slot, None, owner));
            }
            Some(first) => {
                tokio::task::spawn_local(async move {
                    // Boxed as in `serve`. If it fails, the first request tries again.
                    let conn = Box::pin(pool.connect(&pools, Some(first))).await;
                    connection_task(pools, pool, task_slot, conn, owner).await
                });
            }
        }
        slot
    }

    pub fn close(&self) {
        self.closing.set(true);
        self.deadlines.close();
        for s in self.slots.iter().chain(self.sessions.borrow().values()) {
            s.wake();
        }
    }

    /// Opens every shared connection first if `--prefetch-connections`, then starts one task
    /// per shared slot.
    pub async fn start(self: &Rc<Self>, pools: &Rc<Pools>) {
        tokio::task::spawn_local(self.deadlines.clone().sweep());
        let n = self.slots.len();
        let initial: Vec<Option<Open<P::Conn>>> = if self.prefetch {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let (pools, pool) = (pools.clone(), self.clone());
                    tokio::task::spawn_local(async move { pool.connect(&pools, None).await })
                })
                .collect();
            let mut out = Vec::with_capacity(n);
            for h in handles {
                out.push(h.await.ok().flatten());
            }
            out
        } else {
            (0..n).map(|_| None).collect()
        };
        for (id, conn) in initial.into_iter().enumerate() {
            let slot = self.slots[id].clone();
            let task = connection_task(pools.clone(), self.clone(), slot, conn, Owner::Shared(id));
            tokio::task::spawn_local(task);
        }
    }

    async fn connect(&self, pools: &Pools, first: Option<u32>) -> Option<Open<P::Conn>> {
        let endpoint = &pools.cfg.endpoints[self.index];
        let conn = self.protocol.connect(&pools.cx, endpoint, first).await?;
        pools.cx.state.borrow_mut().counters.inc(P::CONNECTION_COUNTER);
        Some(Open { conn, served: 0 })
    }
}

/// One connection's life: wait for a ticket, serve it, then (shared connections) take the next
/// queued one or go idle, or (a session's) wait for the session's next request until its last.
async fn connection_task<P: Protocol>(
    pools: Rc<Pools>,
    pool: Rc<SerialPool<P>>,
    slot: Rc<Slot>,
    mut conn: Option<Open<P::Conn>>,
    owner: Owner,
) {
    let watch = pool.deadlines.watch();
    loop {
        let Some(mut ticket) = slot.next(&pool.closing).await else { return };
        // A clock reading of this moment, when one was just made.
        let mut now = None;
        loop {
            let shared = matches!(owner, Owner::Shared(_));
            let ended = serve(&pools, &pool, &mut conn, &ticket, shared, &watch, now).await;
            pools.cx.request_finished(&ticket);
            let id = match owner {
                Owner::Session(s) => {
                    if ticket.session.is_some_and(|s| s.last) {
                        pool.sessions.borrow_mut().remove(&s);
                        return;
                    }
                    // A client that opened a connection per request: so does its replay.
                    if ticket.session.is_some_and(|s| s.fresh) && conn.take().is_some() {
                        pools.cx.state.borrow_mut().counters.inc(Counter::CxDestroyLocal);
                    }
                    break;
                }
                Owner::Shared(id) => id,
            };
            // Taking the next queued (or, unpaced, the next due) request here, on this
            // connection, is the hot path under load: no wake-up of another task, no pool
            // search.
            if let Some(next) = pools.cx.state.borrow_mut().queue.pop_front() {
                (ticket, now) = (next, None);
                continue;
            }
            if let Some(next) = super::take_ahead(&pools, ended) {
                (ticket, now) = (next, Some(next.released));
                continue;
            }
            pool.idle.borrow_mut().push_back(id);
            if pools.cx.pacer_blocked.get() {
                pools.cx.capacity.notify_one();
            }
            break;
        }
    }
}

/// Serves one request on this connection (connecting first if needed) and records it.
/// `limit` applies `max_requests_per_connection` (shared connections only: a session keeps
/// its connection for its life). `now` is a clock reading of this moment, if the caller has
/// one. Returns the reading that timed the response's end, if the clock's (not the kernel's).
async fn serve<P: Protocol>(
    pools: &Pools,
    pool: &SerialPool<P>,
    conn: &mut Option<Open<P::Conn>>,
    ticket: &Ticket,
    limit: bool,
    watch: &Watch,
    now: Option<Instant>,
) -> Option<Instant> {
    let cx = &pools.cx;
    let mut retried = false;
    loop {
        let reused = conn.is_some();
        if conn.is_none() {
            // Boxed: connecting (TCP, TLS) is a ~3 KB future, and inline it would make every
            // connection task that large for its whole life, idle or not.
            *conn = Box::pin(pool.connect(pools, Some(ticket.request))).await;
        }
        let Some(open) = conn.as_mut() else {
            record_connection_failure(pools);
            return None;
        };
        let mut io = Io { trace: ticket.trace, ..Io::default() };
        // A connect or a retry since makes the caller's reading stale.
        let start = match reused && !retried {
            true => now.unwrap_or_else(Instant::now),
            false => Instant::now(),
        };
        pool.deadlines.arm(watch, start, cx.request_timeout);
        let exchange = pool.protocol.exchange(cx, &mut open.conn, ticket.request, &mut io);
        let result = watch.bound(std::pin::pin!(exchange)).await;
        watch.disarm();
        // A response the kernel stamped ended when it arrived; only an unstamped one is timed
        // here (a clock read is ~2 % of a saturating request's CPU).
        let clock = io.arrived.is_none().then(Instant::now);
        let done = io.arrived.or(clock).unwrap_or(start);
        let mut st = cx.state.borrow_mut();
        st.counters.add(Counter::CxRxBytesTotal, io.rx);
        st.counters.add(Counter::CxTxBytesTotal, io.tx);
        let Ok(result) = result else {
            // Mid-exchange, the connection's framing is lost: close it.
            st.counters.inc(Counter::CxDestroyLocal);
            st.counters.inc(Counter::CxDestroyLocalWithActiveRq);
            drop(st);
            *conn = None;
            record_timeout(pools, ticket, io.sent);
            return clock;
        };
        match result {
            Ok(answer) => {
                open.served += 1;
                let limit_hit = limit
                    && pool.max_requests_per_connection.is_some_and(|m| open.served >= m.get());
                match answer.then {
                    // We close it: the server's framing can no longer be trusted.
                    After::Desync => {
                        st.counters.inc(Counter::CxProtocolError);
                        st.note_error(|| "server sent bytes beyond the response".into());
                        st.counters.inc(Counter::CxDestroyLocal);
                        *conn = None;
                    }
                    // The server announced the close (`connection: close`), as Envoy counts
                    // it; the h2 pool counts GOAWAY here too.
                    After::Closed => {
                        st.counters.inc(Counter::CxCloseNotify);
                        st.counters.inc(Counter::CxDestroyRemote);
                        *conn = None;
                    }
                    // The client's goodbye (the protocol closed it).
                    After::Ended => {
                        st.counters.inc(Counter::CxDestroyLocal);
                        *conn = None;
                    }
                    After::Keep if limit_hit => {
                        st.counters.inc(Counter::CxDestroyLocal);
                        *conn = None;
                    }
                    After::Keep => {}
                }
                drop(st);
                let x = Exchange {
                    ticket,
                    sent: io.sent.unwrap_or(ticket.released),
                    done,
                    status: answer.status,
                    header_bytes: answer.header_bytes,
                    body_bytes: answer.body_bytes,
                    origin: answer.origin,
                    failed: answer.error.is_some(),
                };
                record_response(pools, &x);
                if let Some(e) = answer.error {
                    record_answer_error(pools, e);
                }
                // Answers to requests pipelined behind this one: each counts as its own.
                for m in answer.more {
                    let status = Some(m.status);
                    let (header_bytes, body_bytes) = (m.header_bytes, m.body_bytes);
                    let origin = crate::requests::OriginLatency::Absent;
                    let more =
                        Exchange { done: m.done, status, header_bytes, body_bytes, origin, ..x };
                    record_response(pools, &more);
                }
                return clock;
            }
            // A reused connection closed before any byte of the answer: most often the server
            // closed it idle just as we reused it (the keep-alive race), but it may have read
            // the request and acted on it first. An idempotent request is sent once more on a
            // fresh connection, as browsers and Envoy do, and counted (the server then saw it
            // twice); any other is failed, never sent twice unasked (RFC 9110 §9.2.2).
            Err(f)
                if f.class == FailureClass::Unanswered
                    && reused
                    && !retried
                    && pools.cfg.retry_unanswered
                    && pool.protocol.resendable(cx, ticket.request) =>
            {
                st.counters.inc(Counter::CxDestroyRemote);
                st.counters.inc(Counter::RqRetry);
                *conn = None;
                retried = true;
            }
            Err(f) => {
                // A broken answer is ours to close; a connection lost mid-exchange was the
                // server's doing. Envoy's `_with_active_rq` names say a request went with it.
                let protocol_error = match f.class {
                    FailureClass::Protocol | FailureClass::HeaderOverflow => {
                        st.counters.inc(Counter::CxDestroyLocal);
                        st.counters.inc(Counter::CxDestroyLocalWithActiveRq);
                        true
                    }
                    FailureClass::Unanswered | FailureClass::Broken => {
                        st.counters.inc(Counter::CxDestroyRemote);
                        st.counters.inc(Counter::CxDestroyRemoteWithActiveRq);
                        false
                    }
                };
                if f.class == FailureClass::HeaderOverflow {
                    st.counters.inc(Counter::CxHeaderOverflow);
                }
                drop(st);
                *conn = None;
                record_failure(pools, ticket, io.sent, protocol_error, || f.error.to_string());
                return clock;
            }
        }
    }
}
