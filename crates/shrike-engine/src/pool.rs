//! The HTTP/1.1 connection pool: up to `connections` connections per worker, each carrying one
//! request at a time. Connections open lazily (or up front with prefetch) and idle ones are
//! reused most-recently-used first, so a lightly loaded run keeps few sockets hot.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use shrike_stats::{Counter, StatId};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::h1::{ReadError, ResponseReader};
use crate::worker::{nanos, Ticket, WorkerCtx};

/// Where the pacer hands a request to one specific idle connection.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub ticket: Cell<Option<Ticket>>,
    pub notify: Notify,
}

/// An open connection and its reusable read buffer.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: TcpStream,
    reader: ResponseReader,
    requests: u64,
}

/// Gives the ticket to an idle connection, or queues it if the pending budget allows, or (open
/// loop) drops it as overflow. `Err` hands the ticket back: closed loop must wait.
pub(crate) fn try_dispatch(ctx: &WorkerCtx, ticket: Ticket) -> Result<(), Ticket> {
    let mut st = ctx.state.borrow_mut();
    if let Some(id) = st.idle.pop() {
        st.outstanding += 1;
        drop(st);
        ctx.slots[id].ticket.set(Some(ticket));
        ctx.slots[id].notify.notify_one();
        return Ok(());
    }
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

/// Opens every connection before the run starts (`--prefetch-connections`).
pub(crate) async fn prefetch(ctx: &Rc<WorkerCtx>) -> Vec<Option<Conn>> {
    let handles: Vec<_> = (0..ctx.slots.len())
        .map(|_| {
            let ctx = ctx.clone();
            tokio::task::spawn_local(async move { connect(&ctx).await })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.ok().flatten());
    }
    out
}

/// One connection's life: wait for a ticket, serve it, take the next queued one or go idle.
pub(crate) async fn connection_task(ctx: Rc<WorkerCtx>, id: usize, mut conn: Option<Conn>) {
    loop {
        let mut ticket = loop {
            if let Some(t) = ctx.slots[id].ticket.take() {
                break t;
            }
            if ctx.closing.get() {
                return;
            }
            ctx.slots[id].notify.notified().await;
        };
        loop {
            serve(&ctx, &mut conn, ticket).await;
            let mut st = ctx.state.borrow_mut();
            st.outstanding -= 1;
            if let Some(next) = st.queue.pop_front() {
                ticket = next;
                continue;
            }
            if st.outstanding == 0 {
                ctx.drained.notify_one();
            }
            st.idle.push(id);
            if ctx.pacer_blocked.get() {
                ctx.capacity.notify_one();
            }
            break;
        }
    }
}

async fn connect(ctx: &WorkerCtx) -> Option<Conn> {
    let target = &ctx.cfg.target;
    let mut last_err = String::new();
    let mut timed_out = false;
    for addr in &target.addrs {
        match tokio::time::timeout(ctx.cfg.timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // Requests are written whole; Nagle would only delay them.
                let _ = stream.set_nodelay(true);
                let mut st = ctx.state.borrow_mut();
                st.counters.inc(Counter::CxTotal);
                st.counters.inc(Counter::CxHttp1Total);
                return Some(Conn { stream, reader: ResponseReader::new(), requests: 0 });
            }
            Ok(Err(e)) => last_err = format!("connect to {addr}: {e}"),
            Err(_) => {
                timed_out = true;
                last_err = format!(
                    "connect to {addr}: timed out after {}s",
                    ctx.cfg.timeout.as_secs_f64()
                );
            }
        }
    }
    let mut st = ctx.state.borrow_mut();
    st.counters.inc(Counter::CxConnectFail);
    if timed_out {
        st.counters.inc(Counter::CxConnectTimeout);
    }
    st.note_error(|| last_err);
    None
}

/// Serves one request on this connection (connecting first if needed) and records it.
async fn serve(ctx: &WorkerCtx, conn: &mut Option<Conn>, ticket: Ticket) {
    let mut retried = false;
    loop {
        let reused = conn.is_some();
        if conn.is_none() {
            *conn = connect(ctx).await;
        }
        let Some(c) = conn.as_mut() else {
            let mut st = ctx.state.borrow_mut();
            st.counters.inc(Counter::PoolConnectionFailure);
            let st = &mut *st;
            ctx.check_predicates(&mut st.counters);
            return;
        };
        let t_send = Instant::now();
        let mut rx = 0u64;
        let mut tx = 0u64;
        let outcome = match c.stream.write_all(&ctx.request).await {
            Ok(()) => {
                tx = ctx.request.len() as u64;
                c.reader.read_response(&mut c.stream, ctx.head_request, &mut rx).await
            }
            Err(e) => Err(ReadError::Io(e)),
        };
        let t_end = Instant::now();
        let mut st = ctx.state.borrow_mut();
        st.counters.add(Counter::CxRxBytesTotal, rx);
        st.counters.add(Counter::CxTxBytesTotal, tx);
        match outcome {
            Ok(info) => {
                st.counters.inc(Counter::RqTotal);
                c.requests += 1;
                let s = &mut st.stats;
                s.record(StatId::QueueToConnect, nanos(t_send - ticket.released));
                s.record(
                    StatId::SendLateness,
                    nanos(t_send.saturating_duration_since(ticket.scheduled)),
                );
                let service = nanos(t_end - t_send);
                s.record(StatId::RequestToResponse, service);
                s.record(StatId::latency_for_status(info.status), service);
                s.record(StatId::ScheduledToResponse, nanos(t_end - ticket.scheduled));
                s.record(StatId::SequencerCallback, nanos(t_end - ticket.released));
                s.record(StatId::ResponseHeaderSize, info.header_bytes);
                s.record(StatId::ResponseBodySize, info.body_bytes);
                st.counters.inc(Counter::for_status(info.status));
                let limit_hit =
                    ctx.cfg.max_requests_per_connection.is_some_and(|m| c.requests >= m.get());
                if info.close || c.reader.buffered() > 0 {
                    // Bytes beyond the response mean the server sent something we did not
                    // ask for; the connection's framing can no longer be trusted.
                    if c.reader.buffered() > 0 {
                        st.counters.inc(Counter::CxProtocolError);
                        st.note_error(|| "server sent bytes beyond the response".into());
                    }
                    st.counters.inc(Counter::CxDestroyRemote);
                    *conn = None;
                } else if limit_hit {
                    st.counters.inc(Counter::CxDestroyLocal);
                    *conn = None;
                }
                let st = &mut *st;
                ctx.check_predicates(&mut st.counters);
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
                st.counters.inc(Counter::RqTotal);
                if matches!(e, ReadError::Protocol(_)) {
                    st.counters.inc(Counter::CxProtocolError);
                }
                st.counters.inc(Counter::StreamResets);
                st.counters.inc(Counter::CxDestroyRemote);
                st.note_error(|| e.to_string());
                *conn = None;
                let st = &mut *st;
                ctx.check_predicates(&mut st.counters);
                return;
            }
        }
    }
}
