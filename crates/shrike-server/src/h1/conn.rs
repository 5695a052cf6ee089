//! One HTTP/1.1 connection: read, parse every complete request in the buffer, answer them in
//! order with one write, repeat.
//!
//! Request bodies are counted and dropped as they stream past; the read buffer only ever holds
//! one request head plus whatever arrived with it.

use std::io;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::request::{self, BodyFraming, Reject, MAX_HEAD, MAX_HEADERS};
use super::response::{self, ConnectionHeader, Exchange, CONTINUE};
use crate::behaviour::{Delay, Plan, CONFIG_HEADER, FILLER};
use crate::server::Shared;

/// Initial read buffer; most request heads fit, larger ones grow it up to [`MAX_HEAD`].
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
pub(crate) async fn serve<S>(
    stream: S,
    rbuf: Vec<u8>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<()>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut conn =
        Connection { stream, shared: &shared, shutdown, rbuf, start: 0, wbuf: Vec::new(), held: 0 };
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
}

/// What the buffered bytes amount to.
enum Step {
    Incomplete,
    Request(Pending),
    Reject(Reject),
}

/// A request whose head has been answered (the response sits in `wbuf`) but whose body,
/// delay or large filler body still have to be dealt with.
struct Pending {
    head_len: usize,
    body: BodyFraming,
    held: usize,
    delay: Delay,
    /// The connection header the held response carries, and its offset after `held`.
    connection: ConnectionHeader,
    connection_at: usize,
    deferred_body: u64,
    close: bool,
    /// The close is ours (shutdown), so the peer may still be sending.
    linger: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<'_, S> {
    async fn run(&mut self) -> io::Result<()> {
        loop {
            match self.step() {
                Step::Request(pending) => {
                    self.start += pending.head_len;
                    self.held = pending.held;
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
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(buf, &mut headers) {
            Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => {
                Step::Reject(Reject::HeadTooLarge)
            }
            Ok(httparse::Status::Complete(len)) => {
                let closing = self.shutdown.has_changed().is_err();
                prepare(&req, len, buf.len() - len, self.shared, &mut self.wbuf, closing)
            }
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                Step::Reject(Reject::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) => Step::Incomplete,
            Err(httparse::Error::TooManyHeaders) => Step::Reject(Reject::TooManyHeaders),
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
        let suspends = !p.delay.is_none() || p.body != BodyFraming::None;
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
        if !p.delay.is_none() {
            let delay = p.delay.now(state);
            if !delay.is_zero() {
                self.flush_held().await?;
                tokio::time::sleep(delay).await;
            }
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

    async fn discard_length(&mut self, length: u64) -> io::Result<()> {
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

    /// Waits for the next request. Returns false on end of stream or, since no request is in
    /// flight, on shutdown.
    async fn read_idle(&mut self) -> io::Result<bool> {
        self.make_room();
        tokio::select! {
            biased;
            read = self.stream.read_buf(&mut self.rbuf) => Ok(read? > 0),
            _ = self.shutdown.changed() => Ok(false),
        }
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

/// Interprets a complete head and appends its response to `wbuf`.
fn prepare(
    req: &httparse::Request<'_, '_>,
    head_len: usize,
    buffered_body: usize,
    shared: &Shared,
    wbuf: &mut Vec<u8>,
    closing: bool,
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
    let close = !framing.keep_alive || closing;
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
    let values = req.headers.iter().filter(|h| h.name.eq_ignore_ascii_case(CONFIG_HEADER));
    let values = framing.has_config.then(|| values.map(|h| h.value));
    let (delay, encoded) = match Plan::for_request(config, &shared.state, values) {
        Ok((plan, delta_ns)) => {
            let exchange = Exchange {
                request_headers: req.headers,
                head_only: framing.head,
                connection,
                delta_ns,
            };
            (plan.delay, response::encode(wbuf, &shared.h1, &plan, &exchange))
        }
        Err(e) => {
            let message = e.to_string();
            let encoded = response::encode_text(wbuf, 500, &message, framing.head, connection);
            (Delay::None, encoded)
        }
    };
    Step::Request(Pending {
        head_len,
        body: framing.body,
        held,
        delay,
        connection,
        connection_at: encoded.connection_at - held,
        deferred_body: encoded.deferred_body,
        close,
        linger: close && framing.keep_alive,
    })
}
