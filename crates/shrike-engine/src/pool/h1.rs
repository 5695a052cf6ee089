//! The HTTP/1.1 pool: up to `connections` connections per worker, each carrying one request at
//! a time. Connections open lazily (or up front with prefetch) and idle ones are reused
//! most-recently-used first by default, so a lightly loaded run keeps few sockets hot, or
//! least-recently-used first to spread requests over every connection.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use shrike_stats::Counter;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use super::{
    record_connection_failure, record_failure, record_response, record_timeout, request_finished,
};
use super::{Exchange, Pool};
use crate::config::{EngineConfig, H1Reuse};
use crate::h1::{ReadError, ResponseReader};
use crate::requests::{H1Entry, H1Request};
use crate::transport::{self, Transport};
use crate::worker::{Ticket, WorkerCtx};

/// Where the pacer hands a request to one specific idle connection.
#[derive(Debug, Default)]
struct Slot {
    ticket: Cell<Option<Ticket>>,
    notify: Notify,
}

pub(crate) struct H1Pool {
    /// Which endpoint (`cfg.endpoints[index]`) this pool connects to.
    index: usize,
    /// The requests, one per request-source entry, encoded once.
    requests: Box<[H1Entry]>,
    slots: Box<[Slot]>,
    /// Idle connection slots; the most recently used is at the back.
    idle: RefCell<VecDeque<usize>>,
    reuse: H1Reuse,
    /// Idle connections exit once set.
    closing: Cell<bool>,
}

/// An open connection and its reusable read buffer.
#[derive(Debug)]
struct Conn {
    stream: Transport,
    reader: ResponseReader,
    requests: u64,
    /// Templated requests render here (the request, and scratch for its body); reused.
    out: Vec<u8>,
    body: Vec<u8>,
}

impl H1Pool {
    pub fn new(cfg: &EngineConfig, index: usize, requests: Box<[H1Entry]>) -> H1Pool {
        let connections = cfg.connections.get() as usize;
        let reuse = cfg.h1_reuse;
        // Either way, slot 0 is the first connection used.
        let idle = match reuse {
            H1Reuse::Mru => (0..connections).rev().collect(),
            H1Reuse::Lru => (0..connections).collect(),
        };
        H1Pool {
            index,
            requests,
            slots: (0..connections).map(|_| Slot::default()).collect(),
            idle: RefCell::new(idle),
            reuse,
            closing: Cell::new(false),
        }
    }

    /// Gives the ticket to an idle connection, if there is one.
    #[inline]
    pub fn try_start(&self, ticket: Ticket) -> Result<(), Ticket> {
        let mut idle = self.idle.borrow_mut();
        let next = match self.reuse {
            H1Reuse::Mru => idle.pop_back(),
            H1Reuse::Lru => idle.pop_front(),
        };
        drop(idle);
        let Some(id) = next else { return Err(ticket) };
        self.slots[id].ticket.set(Some(ticket));
        self.slots[id].notify.notify_one();
        Ok(())
    }

    pub fn close(&self) {
        self.closing.set(true);
        for s in self.slots.iter() {
            s.notify.notify_one();
        }
    }
}

fn pool(ctx: &WorkerCtx, index: usize) -> &H1Pool {
    match &ctx.pools[index] {
        Pool::H1(p) => p,
        // Invariant: h1 connection tasks are only spawned by `start` for an h1 pool.
        _ => unreachable!("h1 connection task in another protocol's pool"),
    }
}

/// Opens every connection first if `--prefetch-connections`, then starts one task per slot.
pub(crate) async fn start(ctx: &Rc<WorkerCtx>, index: usize) {
    let n = pool(ctx, index).slots.len();
    let initial: Vec<Option<Conn>> = if ctx.cfg.prefetch_connections {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let ctx = ctx.clone();
                tokio::task::spawn_local(async move { connect(&ctx, index).await })
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
        tokio::task::spawn_local(connection_task(ctx.clone(), index, id, conn));
    }
}

/// One connection's life: wait for a ticket, serve it, take the next queued one or go idle.
async fn connection_task(ctx: Rc<WorkerCtx>, index: usize, id: usize, mut conn: Option<Conn>) {
    let p = pool(&ctx, index);
    loop {
        let mut ticket = loop {
            if let Some(t) = p.slots[id].ticket.take() {
                break t;
            }
            if p.closing.get() {
                return;
            }
            p.slots[id].notify.notified().await;
        };
        loop {
            serve(&ctx, p, &mut conn, ticket).await;
            request_finished(&ctx);
            // Taking the next queued request here, on this connection, is the hot path under
            // load: no wake-up of another task, no pool search.
            if let Some(next) = ctx.state.borrow_mut().queue.pop_front() {
                ticket = next;
                continue;
            }
            p.idle.borrow_mut().push_back(id);
            if ctx.pacer_blocked.get() {
                ctx.capacity.notify_one();
            }
            break;
        }
    }
}

async fn connect(ctx: &WorkerCtx, index: usize) -> Option<Conn> {
    let stream = transport::connect(ctx, &ctx.cfg.endpoints[index]).await?;
    ctx.state.borrow_mut().counters.inc(Counter::CxHttp1Total);
    let latency = ctx.cfg.requests.latency_header().map(|h| Rc::from(h.as_bytes()));
    let reader = ResponseReader::new().with_latency_header(latency);
    Some(Conn { stream, reader, requests: 0, out: Vec::new(), body: Vec::new() })
}

/// Serves one request on this connection (connecting first if needed) and records it.
async fn serve(ctx: &WorkerCtx, p: &H1Pool, conn: &mut Option<Conn>, ticket: Ticket) {
    let mut retried = false;
    loop {
        let reused = conn.is_some();
        if conn.is_none() {
            *conn = connect(ctx, p.index).await;
        }
        let Some(c) = conn.as_mut() else {
            record_connection_failure(ctx);
            return;
        };
        let entry = &p.requests[ticket.request as usize];
        // Split borrows: a templated request renders into the connection's own buffer while
        // the exchange below writes and reads on its stream.
        let Conn { stream, reader, out, body, .. } = c;
        let request: &[u8] = match &entry.request {
            H1Request::Fixed(bytes) => bytes,
            H1Request::Templated(t) => {
                t.render(out, body, &mut ctx.requests.render_cx());
                out
            }
        };
        let t_send = Instant::now();
        let mut rx = 0u64;
        let mut tx = 0u64;
        // The flush matters for TLS only (a no-op on TCP): tokio-rustls accepts plaintext into
        // rustls and may return before the socket took every record; nothing else would send
        // them while we wait to read.
        let exchange = async {
            stream.write_all(request).await?;
            stream.flush().await?;
            tx = request.len() as u64;
            reader.read_response(stream, entry.head, &mut rx).await
        };
        let outcome = tokio::time::timeout(ctx.cfg.timeout, exchange).await;
        let t_end = Instant::now();
        let mut st = ctx.state.borrow_mut();
        st.counters.add(Counter::CxRxBytesTotal, rx);
        st.counters.add(Counter::CxTxBytesTotal, tx);
        let Ok(outcome) = outcome else {
            // Mid-response, the connection's framing is lost: close it.
            st.counters.inc(Counter::CxDestroyLocal);
            drop(st);
            *conn = None;
            record_timeout(ctx);
            return;
        };
        match outcome {
            Ok(info) => {
                c.requests += 1;
                let limit_hit =
                    ctx.cfg.max_requests_per_connection.is_some_and(|m| c.requests >= m.get());
                if info.close || c.reader.buffered() > 0 {
                    // Bytes beyond the response mean the server sent something we did not
                    // ask for; the connection's framing can no longer be trusted.
                    if c.reader.buffered() > 0 {
                        st.counters.inc(Counter::CxProtocolError);
                        st.note_error(|| "server sent bytes beyond the response".into());
                    } else {
                        // The server announced the close (`connection: close`), as Envoy
                        // counts it; the h2 pool counts GOAWAY here too.
                        st.counters.inc(Counter::CxCloseNotify);
                    }
                    st.counters.inc(Counter::CxDestroyRemote);
                    *conn = None;
                } else if limit_hit {
                    st.counters.inc(Counter::CxDestroyLocal);
                    *conn = None;
                }
                drop(st);
                record_response(
                    ctx,
                    &Exchange {
                        ticket,
                        sent: t_send,
                        done: t_end,
                        status: info.status,
                        header_bytes: info.header_bytes,
                        body_bytes: info.body_bytes,
                        origin: info.origin,
                    },
                );
                return;
            }
            // The server closed an idle keep-alive connection just as we reused it: nothing of
            // the request was processed, so retry once on a fresh connection, as browsers and
            // Envoy do. Not a failure of the server under test.
            Err(ReadError::Closed { received: false }) if reused && !retried => {
                st.counters.inc(Counter::CxDestroyRemote);
                *conn = None;
                retried = true;
            }
            Err(e) => {
                st.counters.inc(Counter::CxDestroyRemote);
                drop(st);
                *conn = None;
                record_failure(ctx, matches!(e, ReadError::Protocol(_)), || e.to_string());
                return;
            }
        }
    }
}
