//! One HTTP/1.1 connection: read, parse every complete request in the buffer, answer them in
//! order with one write, repeat.
//!
//! Request bodies are counted and dropped as they stream past; the read buffer only ever holds
//! one request head plus whatever arrived with it.

use std::io;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Duration;

use shrike_timer::PreciseTimer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::request::{self, BodyFraming, Reject};
use super::response::{self, ConnectionHeader, Exchange, CONTINUE};
use crate::behaviour::{self, Pacing, ResponsePlan, CONFIG_HEADER, FILLER};
use crate::conn::Abort;
use crate::http2::response::Payload;
use crate::limits::MAX_REQUEST_HEADERS_LIMIT;
use crate::server::Shared;
use crate::stats::{LimitKind, ProxyEvent};

/// Initial read buffer; most request heads fit, larger ones grow it up to the configured cap.
pub(crate) const READ_BUF: usize = 8 * 1024;
/// Below this much spare room a read would return too little to be worth a syscall.
const MIN_READ: usize = 1024;
/// Pipelined responses are batched up to about this size before a write is forced.
const WRITE_BATCH: usize = 64 * 1024;
/// After refusing a request the peer may still be sending; reading a little of it before
/// closing keeps the kernel from answering with a reset that would destroy our response.
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 256 * 1024;

/// Serves HTTP/1.1 on `stream` (plain TCP or TLS). `rbuf` holds the bytes already read while
/// the protocol was being detected; they are parsed first, so detection costs no extra read.
/// The first request head must be complete by `head_deadline`.
pub(crate) async fn serve<S>(
    stream: S,
    rbuf: Vec<u8>,
    head_deadline: Instant,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<()>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Abort,
{
    let mut conn = Connection {
        stream,
        shared: &shared,
        shutdown,
        rbuf,
        start: 0,
        wbuf: Vec::new(),
        held: 0,
        timer: None,
        head_deadline: Some(head_deadline),
        served: 0,
    };
    // An error here means the peer went away mid-exchange: there is nobody left to answer.
    let _ = conn.run().await;
}

struct Connection<'s, S> {
    stream: S,
    shared: &'s Shared,
    shutdown: watch::Receiver<()>,
    rbuf: Vec<u8>,
    /// Start of the unparsed bytes in `rbuf`.
    start: usize,
    wbuf: Vec<u8>,
    /// Start, in `wbuf`, of the response to the request still being completed. Everything
    /// before it may be sent; it may not, because the request could still turn out bad.
    held: usize,
    /// Created on the first delay: one timerfd per connection that ever waits, none otherwise.
    timer: Option<PreciseTimer>,
    /// When the request head being read must be complete; `None` while the connection is idle
    /// between requests (the idle timeout applies then).
    head_deadline: Option<Instant>,
    /// Requests answered (or being answered) on this connection, for the request cap.
    served: u64,
}

/// What the buffered bytes amount to. Returned by value and consumed at once, never stored:
/// boxing the large variant would cost an allocation per request to save a few stack bytes.
#[allow(clippy::large_enum_variant)]
enum Step {
    Incomplete,
    Request(Pending),
    Reject(Reject),
    /// A `CONNECT` of this head length to this authority: the connection becomes a tunnel.
    Connect(usize, String),
}

/// A request whose head has been answered (the response sits in `wbuf`) but whose body,
/// delay or large filler body still have to be dealt with.
struct Pending {
    head_len: usize,
    body: BodyFraming,
    held: usize,
    pacing: Pacing,
    /// A body sent step by step, and whether it is chunk-encoded.
    paced: Option<(Payload, bool)>,
    /// Offset after `held` of the service-time placeholder.
    service_time_at: Option<usize>,
    /// The connection header the held response carries, and its offset after `held`.
    connection: ConnectionHeader,
    connection_at: usize,
    deferred_body: u64,
    close: bool,
    /// The close is ours (shutdown), so the peer may still be sending.
    linger: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Abort> Connection<'_, S> {
    async fn run(&mut self) -> io::Result<()> {
        loop {
            match self.step() {
                Step::Request(pending) => {
                    self.start += pending.head_len;
                    self.held = pending.held;
                    self.served += 1;
                    self.head_deadline = None;
                    if !self.complete(pending).await? {
                        return Ok(());
                    }
                }
                Step::Incomplete => {
                    self.flush().await?;
                    if !self.read_idle().await? {
                        return Ok(());
                    }
                }
                Step::Reject(reject) => return self.reject(reject).await,
                Step::Connect(head_len, authority) => {
                    self.flush().await?;
                    self.start += head_len;
                    let early = self.rbuf.split_off(self.start);
                    let (stream, shared) = (&mut self.stream, self.shared);
                    return super::proxy::tunnel(
                        stream,
                        &early,
                        &authority,
                        shared,
                        &mut self.shutdown,
                    )
                    .await;
                }
            }
        }
    }

    /// Parses the next request head, if complete, and encodes its response. Synchronous: the
    /// parsed headers borrow the read buffer, so everything that needs them happens here.
    fn step(&mut self) -> Step {
        let buf = &self.rbuf[self.start..];
        if buf.is_empty() {
            return Step::Incomplete;
        }
        let limits = self.shared.config.limits();
        let (max_head, max_headers) = (limits.max_header_bytes, limits.max_headers);
        // Uninitialised slots cost nothing to set up, so the array is sized for the largest
        // cap and sliced to the configured one (httparse fails with TooManyHeaders past it).
        let mut headers =
            [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_REQUEST_HEADERS_LIMIT];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(buf, &mut headers[..max_headers]) {
            Ok(httparse::Status::Complete(len)) if len > max_head => {
                Step::Reject(Reject::HeadTooLarge(max_head))
            }
            Ok(httparse::Status::Complete(len)) if req.method == Some("CONNECT") => {
                Step::Connect(len, req.path.unwrap_or_default().to_string())
            }
            // A server that is not a proxy serves absolute-form as any origin server must
            // (RFC 9112 §3.2.2); a proxy that only tunnels refuses to pretend it forwarded.
            Ok(httparse::Status::Complete(_))
                if self.shared.config.proxy().is_some()
                    && req.path.is_some_and(|p| !p.starts_with('/') && p != "*") =>
            {
                Step::Reject(Reject::NotForwarded)
            }
            Ok(httparse::Status::Complete(len)) => {
                let closing = self.shutdown.has_changed().is_err();
                let last = limits.is_last(self.served + 1);
                let at = Exit { closing, last };
                prepare(&req, len, buf.len() - len, self.shared, &mut self.wbuf, at)
            }
            Ok(httparse::Status::Partial) if buf.len() > max_head => {
                Step::Reject(Reject::HeadTooLarge(max_head))
            }
            Ok(httparse::Status::Partial) => Step::Incomplete,
            Err(httparse::Error::TooManyHeaders) => {
                Step::Reject(Reject::TooManyHeaders(max_headers))
            }
            Err(_) => Step::Reject(Reject::BadRequest("malformed request head")),
        }
    }

    /// Finishes a request after its head: drains the body, waits out the delay, writes a large
    /// body. Returns false when the connection is done.
    async fn complete(&mut self, mut p: Pending) -> io::Result<bool> {
        let shared = self.shared;
        let state = &shared.state;
        // Only requests that may suspend are counted as active: one answered without awaiting
        // overlaps others for microseconds at most, and skipping the shared counter keeps the
        // common path free of cross-core cache-line traffic.
        let suspends = p.pacing.is_eventful() || p.body != BodyFraming::None;
        let _active = suspends.then(|| state.begin_active());
        let body = match p.body {
            BodyFraming::None => Ok(()),
            BodyFraming::Length(n) => self.discard_length(n).await.map(Ok)?,
            BodyFraming::Chunked => self.discard_chunked().await?,
        };
        if let Err(e) = body {
            self.wbuf.truncate(self.held);
            self.reject(match e {
                ChunkedError::Malformed(why) => Reject::BadRequest(why),
                ChunkedError::TooLarge => Reject::BodyTooLarge(None),
            })
            .await?;
            return Ok(false);
        }
        if !p.pacing.delay.is_none() {
            let delay = p.pacing.delay.now(state);
            self.pause(delay).await?;
        }
        if p.pacing.rolled.reset.is_some() {
            // HTTP/1.1 has no streams: either scope aborts the connection with a TCP RST, after
            // the responses to earlier pipelined requests.
            self.wbuf.truncate(self.held);
            self.flush().await?;
            self.stream.abort();
            return Ok(false);
        }
        self.pause(p.pacing.stall_before_head()).await?;
        if let (Some(at), Some(stats)) = (p.service_time_at, p.pacing.stats) {
            response::fill_service_time(&mut self.wbuf, self.held + at, stats.service_time_us());
        }
        // A request that never suspended was checked for shutdown microseconds ago, in `step`.
        if suspends && !p.close && self.shutdown.has_changed().is_err() {
            // Shutdown began while this response was held: say we are closing, so the peer
            // does not send another request into a connection that is going away.
            let at = self.held + p.connection_at;
            let old = response::connection_header(p.connection).len();
            let close = response::connection_header(ConnectionHeader::Close);
            self.wbuf.splice(at..at + old, close.iter().copied());
            p.close = true;
            p.linger = true;
        }
        self.held = self.wbuf.len();
        if let Some((payload, chunked)) = p.paced.take() {
            self.flush().await?;
            if !self.write_paced(payload, chunked, p.pacing).await? {
                // Truncated: the peer must see the response end early.
                self.stream.shutdown().await?;
                return Ok(false);
            }
        }
        if p.deferred_body > 0 {
            self.flush().await?;
            self.write_filler(p.deferred_body).await?;
        }
        if p.close {
            self.flush().await?;
            if p.linger || self.start < self.rbuf.len() {
                self.linger().await?;
            } else {
                self.stream.shutdown().await?;
            }
            return Ok(false);
        }
        if self.wbuf.len() >= WRITE_BATCH {
            self.flush().await?;
        }
        Ok(true)
    }

    /// Sends what is ready, then waits `delay` with microsecond precision.
    async fn pause(&mut self, delay: Duration) -> io::Result<()> {
        if delay.is_zero() {
            return Ok(());
        }
        self.flush_held().await?;
        let deadline = std::time::Instant::now() + delay;
        self.timer.get_or_insert_with(PreciseTimer::new).sleep_until(deadline).await;
        Ok(())
    }

    /// Sends a body step by step, each step written out before the next. Returns false when
    /// the schedule truncated it.
    async fn write_paced(
        &mut self,
        mut payload: Payload,
        chunked: bool,
        pacing: Pacing,
    ) -> io::Result<bool> {
        let mut schedule = pacing.schedule(payload.len());
        loop {
            match schedule.next_step() {
                behaviour::Step::Send(n) => {
                    if chunked {
                        self.stream.write_all(format!("{n:x}\r\n").as_bytes()).await?;
                    }
                    let mut left = n;
                    while left > 0 {
                        let piece = payload.split_to(usize::try_from(left).unwrap_or(usize::MAX));
                        left -= piece.len() as u64;
                        self.stream.write_all(&piece).await?;
                    }
                    if chunked {
                        self.stream.write_all(b"\r\n").await?;
                    }
                    self.stream.flush().await?;
                }
                behaviour::Step::Wait(d) => self.pause(d).await?,
                behaviour::Step::Abort => return Ok(false),
                behaviour::Step::Done => {
                    if chunked {
                        self.stream.write_all(b"0\r\n\r\n").await?;
                        self.stream.flush().await?;
                    }
                    return Ok(true);
                }
            }
        }
    }

    async fn discard_length(&mut self, length: u64) -> io::Result<()> {
        self.shared.state.stats().request_body(length);
        let mut remaining = length;
        loop {
            let available = (self.rbuf.len() - self.start) as u64;
            let take = remaining.min(available);
            self.start += take as usize;
            remaining -= take;
            if remaining == 0 {
                return Ok(());
            }
            self.flush_held().await?;
            self.read_body().await?;
        }
    }

    async fn discard_chunked(&mut self) -> io::Result<Result<(), ChunkedError>> {
        let mut decoder = ChunkedDecoder::new(self.shared.config.max_body_size());
        loop {
            match decoder.feed(&self.rbuf[self.start..]) {
                Ok((used, done)) => {
                    self.start += used;
                    self.shared.state.stats().request_body(used as u64);
                    if done {
                        return Ok(Ok(()));
                    }
                }
                Err(e) => return Ok(Err(e)),
            }
            self.flush_held().await?;
            self.read_body().await?;
        }
    }

    /// Answers a refused request and closes.
    async fn reject(&mut self, reject: Reject) -> io::Result<()> {
        let stats = self.shared.state.stats();
        match reject {
            Reject::HeadTooLarge(_) => stats.limit(LimitKind::HeadersTooLarge),
            Reject::TooManyHeaders(_) => stats.limit(LimitKind::TooManyHeaders),
            Reject::NotForwarded => stats.proxy(ProxyEvent::Refused, 1),
            Reject::BadRequest(_) | Reject::BodyTooLarge(_) => {}
        }
        stats.refused(reject.status());
        let message = reject.message(self.shared.config.max_body_size());
        response::encode_text(
            &mut self.wbuf,
            reject.status(),
            &message,
            false,
            ConnectionHeader::Close,
        );
        self.flush().await?;
        self.linger().await
    }

    /// Waits for (more of) the next request. Returns false on end of stream, on a timeout or,
    /// since no request is in flight, on shutdown.
    ///
    /// Between requests the idle timeout runs; from the first byte of a request (or from the
    /// end of the previous one when pipelined bytes are already here) the header timeout.
    async fn read_idle(&mut self) -> io::Result<bool> {
        let limits = self.shared.config.limits();
        let idle = self.head_deadline.is_none() && self.start == self.rbuf.len();
        let deadline = if idle {
            Instant::now() + limits.idle_timeout
        } else {
            *self.head_deadline.get_or_insert_with(|| Instant::now() + limits.header_timeout)
        };
        self.make_room();
        let read = tokio::select! {
            biased;
            read = self.stream.read_buf(&mut self.rbuf) => read?,
            _ = self.shutdown.changed() => return Ok(false),
            () = tokio::time::sleep_until(deadline) => {
                self.timed_out(idle).await?;
                return Ok(false);
            }
        };
        if idle && read > 0 {
            self.head_deadline = Some(Instant::now() + limits.header_timeout);
        }
        Ok(read > 0)
    }

    /// Ends a connection whose peer ran out of time: silently when it was idle (there is no
    /// request to answer), with 408 when part of a request head had arrived.
    async fn timed_out(&mut self, idle: bool) -> io::Result<()> {
        let stats = self.shared.state.stats();
        if idle {
            stats.limit(LimitKind::IdleTimeout);
            return self.stream.shutdown().await;
        }
        stats.limit(LimitKind::HeaderTimeout);
        if self.start == self.rbuf.len() {
            // Only a connection's first request gets here without a byte of it: nothing was
            // asked, so nothing is answered.
            return self.stream.shutdown().await;
        }
        let message = "request timeout: the request head was not complete in time";
        response::encode_text(&mut self.wbuf, 408, message, false, ConnectionHeader::Close);
        self.flush().await?;
        self.linger().await
    }

    /// Reads more of a request body; the peer closing mid-body is an error.
    async fn read_body(&mut self) -> io::Result<()> {
        self.make_room();
        if self.stream.read_buf(&mut self.rbuf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    fn make_room(&mut self) {
        if self.start == self.rbuf.len() {
            self.rbuf.clear();
            self.start = 0;
        } else if self.start > 0 {
            // Only the start of one request head is left: a short move.
            self.rbuf.drain(..self.start);
            self.start = 0;
        }
        if self.rbuf.capacity() - self.rbuf.len() < MIN_READ {
            self.rbuf.reserve(READ_BUF);
        }
    }

    async fn flush(&mut self) -> io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        self.held = 0;
        Ok(())
    }

    /// Sends the responses that precede the one being held, before the connection blocks.
    async fn flush_held(&mut self) -> io::Result<()> {
        if self.held > 0 {
            self.stream.write_all(&self.wbuf[..self.held]).await?;
            self.wbuf.drain(..self.held);
            self.held = 0;
        }
        Ok(())
    }

    async fn write_filler(&mut self, mut len: u64) -> io::Result<()> {
        while len > 0 {
            let chunk = len.min(FILLER.len() as u64);
            self.stream.write_all(&FILLER[..chunk as usize]).await?;
            len -= chunk;
        }
        Ok(())
    }

    /// Half-closes, then discards what the peer still sends for a bounded time and amount.
    async fn linger(&mut self) -> io::Result<()> {
        self.stream.shutdown().await?;
        let deadline = Instant::now() + LINGER_TIME;
        let mut drained = 0;
        while drained < LINGER_BYTES {
            self.rbuf.clear();
            self.start = 0;
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.rbuf)).await {
                Ok(Ok(0)) | Err(_) => break,
                Ok(Ok(n)) => drained += n,
                Ok(Err(e)) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Why the connection may end after the request being prepared.
#[derive(Debug, Clone, Copy)]
struct Exit {
    /// The server is shutting down.
    closing: bool,
    /// The request is the connection's last under the request cap.
    last: bool,
}

/// Interprets a complete head and appends its response to `wbuf`.
fn prepare(
    req: &httparse::Request<'_, '_>,
    head_len: usize,
    buffered_body: usize,
    shared: &Shared,
    wbuf: &mut Vec<u8>,
    exit: Exit,
) -> Step {
    let framing = match request::framing(req) {
        Ok(f) => f,
        Err(reject) => return Step::Reject(reject),
    };
    let config = &*shared.config;
    if let BodyFraming::Length(n) = framing.body {
        if n > config.max_body_size() {
            return Step::Reject(Reject::BodyTooLarge(Some(n)));
        }
    }
    let close = !framing.keep_alive || exit.closing || exit.last;
    if exit.last && framing.keep_alive && !exit.closing {
        // Only when the cap is what closes the connection.
        shared.state.stats().limit(LimitKind::MaxRequestsReached);
    }
    let connection = match (close, framing.http10) {
        (true, _) => ConnectionHeader::Close,
        (false, true) => ConnectionHeader::KeepAlive,
        (false, false) => ConnectionHeader::None,
    };
    // A client that waits for 100 Continue has sent nothing past the head; one that did not
    // wait does not need it.
    if framing.expect_continue && buffered_body == 0 {
        wbuf.extend_from_slice(CONTINUE);
    }
    let held = wbuf.len();
    if let Some(json) = req.path.and_then(|path| shared.stats_answer(path.as_bytes())) {
        let encoded =
            response::encode_typed(wbuf, 200, "application/json", &json, framing.head, connection);
        return Step::Request(Pending {
            head_len,
            body: framing.body,
            held,
            pacing: Pacing::default(),
            paced: None,
            service_time_at: None,
            connection,
            connection_at: encoded.connection_at - held,
            deferred_body: 0,
            close,
            linger: close && framing.keep_alive,
        });
    }
    let values = req.headers.iter().filter(|h| h.name.eq_ignore_ascii_case(CONFIG_HEADER));
    let values = framing.has_config.then(|| values.map(|h| h.value));
    let (pacing, encoded) =
        match ResponsePlan::for_request(config, &shared.state, values, framing.head) {
            Ok((plan, delta_ns)) => {
                let exchange = Exchange {
                    request_headers: req.headers,
                    head_only: framing.head,
                    connection,
                    delta_ns,
                    http10: framing.http10,
                };
                (plan.pacing(), response::encode(wbuf, &shared.h1, &plan, &exchange))
            }
            Err(e) => {
                let message = e.to_string();
                let encoded = response::encode_text(wbuf, 500, &message, framing.head, connection);
                (Pacing::default(), encoded)
            }
        };
    Step::Request(Pending {
        head_len,
        body: framing.body,
        held,
        pacing,
        paced: encoded.paced,
        service_time_at: encoded.service_time_at.map(|at| at - held),
        connection,
        connection_at: encoded.connection_at - held,
        deferred_body: encoded.deferred_body,
        close,
        linger: close && framing.keep_alive,
    })
}
