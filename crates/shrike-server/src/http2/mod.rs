//! The HTTP/2 front end, on Shrike's own codec (the `shrike-h2` crate the load generator's
//! client uses too): one task per connection, driving the connection state machine of
//! [`conn`] with the bytes it reads, the timers that come due and a graceful shutdown, and
//! writing what it queued once per wake-up. Responses to requests read in one wake-up leave in
//! one write.
//!
//! Shutdown is HTTP/2's graceful one: GOAWAY(2^31-1) and a PING, then the final GOAWAY naming
//! the last stream the round trip let in; the connection keeps serving the streams it accepted
//! and closes once they are done. The accept loop's drain timeout bounds all of it.
//!
//! Limits: until the first request arrives the header timeout runs, then the idle timeout
//! whenever no stream is being served; either ends the connection with GOAWAY(NO_ERROR). After
//! the request cap's Nth stream the connection shuts down gracefully; streams the client opened
//! before it saw the GOAWAY are refused with REFUSED_STREAM, which clients retry on a new
//! connection.

mod conn;
mod encode;
mod request;
mod tunnel;
// HTTP/3 builds its responses with the same code.
pub(crate) mod response;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use shrike_timer::PreciseTimer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::watch;

pub(crate) use encode::FixedBlock;
pub(crate) use response::FixedParts;

use crate::server::Shared;
use crate::stats::LimitKind;
use conn::{Conn, OUT_HIGH};
use tunnel::Tunnels;

/// How long a closing connection may take to send its last frames (GOAWAY) to the peer, and to
/// read what the peer still sends so the close is a FIN, not a reset that could lose them.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// The read buffer: two frames of the largest size we accept (a frame is parsed only whole).
/// Per connection, so it is kept small: a reader of a long body gets 32 KiB per read.
const READ_BUF: usize = 32 * 1024;

type Alarm = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves HTTP/2 on `io`; the preface and first request must have arrived by `head_deadline`.
pub(crate) async fn serve<S>(
    io: S,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
    head_deadline: tokio::time::Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let idle_timeout = shared.config.limits().idle_timeout;
    let mut driver = Driver {
        io,
        conn: Conn::new(shared.clone(), Instant::now()),
        shared,
        tunnels: Tunnels::default(),
        inbuf: vec![0; READ_BUF].into_boxed_slice(),
        filled: 0,
        written: 0,
        unflushed: false,
        shutdown: Box::pin(async move {
            // `changed` fails once the accept loop drops the sender: that is the signal too.
            let _ = shutdown.changed().await;
        }),
        shutdown_seen: false,
        head_deadline: head_deadline.into_std(),
        idle_timeout,
        quiet: Box::pin(tokio::time::sleep_until(head_deadline)),
        quiet_armed: head_deadline.into_std(),
        timer: None,
        alarm: None,
    };
    if poll_fn(|cx| driver.poll(cx)).await {
        driver.close().await;
    }
}

/// For the fuzz target (`fuzz/fuzz_targets/h2_request.rs`): a connection fed `data` the way
/// the driver feeds it, with a config that exercises request bodies and the stats endpoint.
pub(crate) fn fuzz_client_bytes(data: &[u8]) {
    let Some((&chunk, data)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1) * 7;
    // A proxy too: its tunnels' destinations are played below, alternately opened (echoing
    // what the client sends, and then closing) and refused.
    let proxy = crate::ProxyConfig { allow: Vec::new(), connect_timeout: Duration::from_secs(1) };
    let config = crate::ServerConfig::builder()
        .max_body_size(4096)
        .stats_path("/stats")
        .connect_proxy(proxy)
        .build();
    let Ok(config) = config else { return };
    let mut open = Vec::new();
    let mut conn = Conn::new(Arc::new(Shared::new(Arc::new(config))), Instant::now());
    let mut input = shrike_h2::frame::PREFACE.to_vec();
    shrike_h2::frame::put_settings(&mut input, &[]);
    input.extend_from_slice(data);
    let mut buf = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        let used = conn.receive(&buf, Instant::now());
        buf.drain(..used);
        // Every timer due: delays, pauses and lingers all run to their end.
        conn.fire(Instant::now() + Duration::from_secs(3600));
        for (id, _) in conn.take_opens() {
            if id % 4 == 1 {
                conn.tunnel_opened(id);
                open.push(id);
            } else {
                conn.tunnel_refused(id, 502, "fuzzed");
            }
        }
        for &id in &open {
            let up = conn.tunnel_view(id).map(|v| v.up.to_vec()).unwrap_or_default();
            conn.tunnel_wrote(id, up.len());
            conn.tunnel_received(id, &[&up]);
            if up.len() % 3 == 2 {
                conn.tunnel_eof(id);
            }
        }
        open.retain(|&id| conn.tunnel_alive(id));
        conn.pump();
        conn.out.clear();
        if conn.ending().is_some() {
            return;
        }
    }
}

struct Driver<S> {
    io: S,
    conn: Conn,
    shared: Arc<Shared>,
    /// The destinations of the connection's `CONNECT` streams, with `--connect-proxy`.
    tunnels: Tunnels,
    inbuf: Box<[u8]>,
    filled: usize,
    /// Bytes of `conn.out` already written.
    written: usize,
    unflushed: bool,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    shutdown_seen: bool,
    head_deadline: Instant,
    idle_timeout: Duration,
    /// The header or idle timeout; armed at or before the deadline, checked when it fires.
    quiet: Pin<Box<tokio::time::Sleep>>,
    quiet_armed: Instant,
    /// The streams' timers share one precise timer, made on first use.
    timer: Option<Arc<PreciseTimer>>,
    alarm: Option<(Instant, Alarm)>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Driver<S> {
    /// Runs until the connection ends: `true` when it should be closed with care (our GOAWAY
    /// is out), `false` when the peer is gone.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            let now = Instant::now();
            let mut progressed = false;
            // Whether the socket's read side has our waker: tokio registers it only when a read
            // finds nothing, and returning Pending without it could miss the client's next
            // frames.
            let mut read_armed = false;
            if !self.shutdown_seen && self.shutdown.as_mut().poll(cx).is_ready() {
                self.shutdown_seen = true;
                self.conn.shutdown(now);
                // Tunnels end with the server, as HTTP/1.1's do.
                self.tunnels.close_all(&mut self.conn);
            }
            if self.conn.ending().is_none() && self.conn.out.len() < OUT_HIGH {
                let mut buf = ReadBuf::new(&mut self.inbuf[self.filled..]);
                match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) => {
                        let n = buf.filled().len();
                        if n == 0 {
                            return Poll::Ready(false);
                        }
                        self.filled += n;
                        let used = self.conn.receive(&self.inbuf[..self.filled], now);
                        self.inbuf.copy_within(used..self.filled, 0);
                        self.filled -= used;
                        progressed = true;
                    }
                    Poll::Ready(Err(_)) => return Poll::Ready(false),
                    Poll::Pending => read_armed = true,
                }
            }
            if self.conn.next_deadline().is_some_and(|at| at <= now) {
                self.conn.fire(now);
                progressed = true;
            }
            self.conn.pump();
            // After `pump`: a tunnel that stopped reading its destination because its bytes
            // waited for room reads again here, now that they may have gone out; before it,
            // nothing would wake the task for the destination's next bytes.
            progressed |= self.tunnels.poll(&mut self.conn, &self.shared, self.shutdown_seen, cx);
            match self.write(cx) {
                Poll::Ready(Ok(true)) => progressed |= self.conn.wants_room(),
                Poll::Ready(Ok(false)) | Poll::Pending => {}
                Poll::Ready(Err(())) => return Poll::Ready(false),
            }
            let flushed = self.conn.out.is_empty() && !self.unflushed;
            if self.conn.ending().is_some() && flushed {
                return Poll::Ready(true);
            }
            let may_read = self.conn.ending().is_none() && self.conn.out.len() < OUT_HIGH;
            if progressed || (may_read && !read_armed) {
                continue;
            }
            if self.poll_quiet(cx, now) || self.poll_alarm(cx) {
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Writes what is queued; `Ok(true)` once all of it is written and flushed.
    fn write(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, ()>> {
        while self.written < self.conn.out.len() {
            match Pin::new(&mut self.io).poll_write(cx, &self.conn.out[self.written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.unflushed = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        self.conn.out.clear();
        self.written = 0;
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(true))
    }

    /// The header timeout until the first request, then the idle timeout while no stream is
    /// open. Returns whether it fired.
    fn poll_quiet(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let (deadline, kind) = if self.conn.accepted() == 0 {
            (self.head_deadline, LimitKind::HeaderTimeout)
        } else if !self.conn.is_busy() {
            (self.conn.quiet_since + self.idle_timeout, LimitKind::IdleTimeout)
        } else {
            return false;
        };
        if deadline <= now {
            self.conn.time_out(kind);
            return true;
        }
        // Re-arming on every request would cost a timer-wheel update each; instead the sleep
        // stays armed early and is moved on when it fires before the deadline.
        if self.quiet_armed > deadline || self.quiet_armed <= now {
            self.quiet_armed = deadline;
            self.quiet.as_mut().reset(deadline.into());
        }
        self.quiet.as_mut().poll(cx).is_ready()
    }

    /// The streams' earliest timer. Returns whether it fired.
    fn poll_alarm(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(at) = self.conn.next_deadline() else {
            self.alarm = None;
            return false;
        };
        if self.alarm.as_ref().is_none_or(|(armed, _)| *armed != at) {
            let timer = self.timer.get_or_insert_with(|| Arc::new(PreciseTimer::new())).clone();
            self.alarm = Some((at, Box::pin(async move { timer.sleep_until(at).await })));
        }
        match &mut self.alarm {
            Some((_, alarm)) => alarm.as_mut().poll(cx).is_ready(),
            None => false,
        }
    }

    /// Closes after our GOAWAY: shuts the write side, then reads and drops what the peer still
    /// sends until it closes, so the kernel ends with a FIN rather than a reset that could
    /// overtake the GOAWAY. Bounded by [`CLOSE_FLUSH`].
    async fn close(&mut self) {
        let finish = async {
            let _ = self.io.shutdown().await;
            while let Ok(n) = self.io.read(&mut self.inbuf).await {
                if n == 0 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_FLUSH, finish).await;
    }
}
