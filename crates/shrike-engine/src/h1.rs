//! HTTP/1.1 client codec.
//!
//! Written by hand rather than with hyper because this is the hot path the benchmark measures:
//! the request is encoded once per worker and written with a single `write`, and responses are
//! parsed in place (httparse for the head) with bodies counted, never stored or copied. A generic
//! client would allocate per request (header maps, body buffers) and that shows up directly in
//! client CPU per request.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use crate::config::RequestSpec;
use crate::requests::template::{RenderCx, Rng};
use crate::requests::{H1Template, OriginLatency};
use crate::target::Target;

/// A connection's read buffer starts at this size, on its first read (an idle connection has
/// none): a typical small response (a ~200-byte head and a short body) arrives in one read,
/// and four connections' buffers share a page. With 9,000 busy connections a 4 KiB first
/// buffer cost a page each: 7.6 KB per connection against wrk's 4.9.
const FIRST_BUF: usize = 1024;
/// It doubles up to this size when a read fills it or a head does not fit: large bodies are
/// then skipped 32 KiB per read, as before the buffer started small. A fixed 32 KiB buffer
/// per connection cost 15 KB resident per idle connection and 38 KB per busy one (9,000
/// connections, bench/conn_memory.py).
const READ_BUF: usize = 32 * 1024;
/// A response head larger than this is a protocol error (it would not fit the buffer).
const MAX_HEAD: usize = READ_BUF;
const MAX_HEADERS: usize = 96;

/// Encodes the request once: request line, headers, and the body (for `body_size`, that many
/// 'a' bytes, as Nighthawk sends). Placeholders, if any, are rendered with sequence number 0;
/// the engine renders templated requests per request instead ([`crate::requests`]).
pub fn encode_request(target: &Target, spec: &RequestSpec) -> Vec<u8> {
    let t = H1Template::new(target, spec);
    let rng = Rng::new(1);
    let mut cx = RenderCx { seq: 0, worker: 0, random_id: None, rng: &rng };
    let (mut out, mut body) = (Vec::with_capacity(256 + spec.body().len()), Vec::new());
    t.render(&mut out, &mut body, &mut cx);
    out
}

/// What the engine records about one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseInfo {
    pub status: u16,
    /// Bytes of the status line and headers, including the blank line.
    pub header_bytes: u64,
    pub body_bytes: u64,
    /// The server will close (or has closed) the connection after this response.
    pub close: bool,
    /// The origin-latency header, when the reader looks for one.
    pub origin: OriginLatency,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The peer closed the connection. `received` says whether any byte of this response
    /// arrived (if none did on a reused connection, the server closed an idle keep-alive
    /// connection and the request may safely be retried on a new one).
    #[error("connection closed by the server{}", if *received { " mid-response" } else { " before responding" })]
    Closed { received: bool },
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("invalid HTTP/1.1 response: {0}")]
    Protocol(Malformed),
}

/// What is wrong with a response. `Copy` and without text of its own: a server answering
/// garbage at full rate costs no allocation per response; the message is built only when the
/// run's error summary first sees the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    #[error("{0}")]
    Head(httparse::Error),
    /// A TLS record (handshake or alert) where a status line should be: http:// to a port that
    /// speaks TLS. Said in plain words, as the TLS client says the converse.
    #[error("the server answered in TLS (is it an https:// port?)")]
    Tls,
    #[error("bad content-length")]
    ContentLength,
    #[error("conflicting content-length headers")]
    ConflictingLength,
    /// A head past the buffer: it cannot be parsed without growing memory for the server.
    #[error("response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
    #[error("more than {MAX_HEADERS} header fields in a response head")]
    TooManyHeaders,
    #[error("chunk-size or trailer line larger than {MAX_HEAD} bytes")]
    LineTooLarge,
    #[error("missing CRLF after chunk data")]
    ChunkCrlf,
    #[error("bad chunk size")]
    ChunkSize,
}

impl Malformed {
    /// The head broke the client's size limits (counted as `upstream_cx_header_overflow`),
    /// rather than being malformed.
    pub fn is_header_overflow(self) -> bool {
        matches!(self, Malformed::HeadTooLarge | Malformed::TooManyHeaders)
    }
}

/// Whether `bytes` start like a TLS record: content type handshake (22) or alert (21), then
/// major version 3. No HTTP/1.x status line starts with those bytes.
fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [21 | 22, 3, ..])
}

/// What a response head says; [`Fields::framing`] adds what the request's method decides.
#[derive(Clone, Copy, Debug)]
struct Fields {
    status: u16,
    /// Bytes of the head, through its blank line.
    len: usize,
    close: bool,
    length: Option<u64>,
    chunked: bool,
    origin: OriginLatency,
}

/// Heads longer than this are parsed every time rather than remembered.
const MAX_REMEMBERED: usize = 1024;

/// The last response head this thread parsed, byte for byte, and what it said.
///
/// Why: under load a server sends the same head again and again (nginx's changes only when its
/// `Date` ticks, once a second), and comparing bytes costs a small fraction of parsing them.
/// Saturating HTTP/1.1 against nginx, httparse and the header walk were a third of the
/// client's instructions, and remembering removed most of that. A hand-written parser was
/// tried first and cost what httparse does: httparse is not slow, parsing is (figures in
/// bench/results/hot-path-costs.md).
///
/// The answer is exact, not a guess: a head's fields depend on its own bytes alone, up to its
/// blank line, so a head that starts with the remembered bytes says what they said. Per thread
/// rather than per connection: the connections of a worker all see the same server, and a
/// connection's memory is what a 100k-connection run pays for.
struct LastHead {
    /// Empty until a head is remembered.
    bytes: Vec<u8>,
    fields: Option<Fields>,
}

impl Fields {
    /// How the body is delimited, for a response to a HEAD request or not.
    fn framing(&self, head_request: bool) -> Framing {
        let status = self.status;
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::Length(0)
        } else if self.chunked {
            Framing::Chunked
        } else if let Some(l) = self.length {
            Framing::Length(l)
        } else {
            Framing::UntilClose
        }
    }
}

impl LastHead {
    fn fields_of(&self, head: &[u8]) -> Option<Fields> {
        self.fields.filter(|_| head.starts_with(&self.bytes))
    }

    fn keep(&mut self, head: &[u8], fields: Fields) {
        self.bytes.clear();
        self.fields = None;
        if head.len() <= MAX_REMEMBERED {
            self.bytes.extend_from_slice(head);
            self.fields = Some(fields);
        }
    }
}

thread_local! {
    static LAST_HEAD: std::cell::RefCell<LastHead> =
        const { std::cell::RefCell::new(LastHead { bytes: Vec::new(), fields: None }) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

/// Reads responses from one connection, reusing one buffer for its lifetime.
#[derive(Debug)]
pub struct ResponseReader {
    /// Empty until the first read, then `FIRST_BUF` bytes, doubling up to `READ_BUF`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Lower-case name of the origin-latency header to read, if any.
    latency_header: Option<Rc<[u8]>>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    pub fn new() -> Self {
        ResponseReader { buf: Vec::new(), start: 0, end: 0, latency_header: None }
    }

    /// Also reads this header (lower-case name) of every final response as an origin latency.
    pub fn with_latency_header(mut self, name: Option<Rc<[u8]>>) -> Self {
        self.latency_header = name;
        self
    }

    /// Bytes received beyond the last complete response (should be 0 without pipelining).
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Reads one complete response. `head_request` suppresses the body (HEAD). Adds every byte
    /// read from the socket to `rx_bytes`.
    pub async fn read_response<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        head_request: bool,
        rx_bytes: &mut u64,
    ) -> Result<ResponseInfo, ReadError> {
        let mut received = self.buffered() > 0;
        let mut header_bytes = 0u64;
        loop {
            let fields = loop {
                if self.end > self.start {
                    if let Some(h) = self.parse_head()? {
                        break h;
                    }
                }
                // Every response waits here: `poll_fill` directly, not through `fill`'s future.
                let full = Malformed::HeadTooLarge;
                std::future::poll_fn(|cx| self.poll_fill(cx, io, rx_bytes, received, full)).await?;
                received = true;
            };
            let framing = fields.framing(head_request);
            let Fields { status, len, close, origin, .. } = fields;
            self.start += len;
            header_bytes += len as u64;
            // 1xx interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100..200).contains(&status) && status != 101 {
                continue;
            }
            let body_bytes = match framing {
                // The whole body is here (a small response usually is): no future for it.
                Framing::Length(n) if n <= self.buffered() as u64 => {
                    self.start += n as usize;
                    n
                }
                Framing::Length(n) => self.skip_exact(io, n, rx_bytes).await?,
                Framing::Chunked => self.skip_chunked(io, rx_bytes).await?,
                Framing::UntilClose => self.skip_to_eof(io, rx_bytes).await?,
            };
            let close = close || framing == Framing::UntilClose;
            return Ok(ResponseInfo { status, header_bytes, body_bytes, close, origin });
        }
    }

    /// Parses a head at `start`, or answers it from the thread's remembered head. Ok(None)
    /// means more bytes are needed.
    fn parse_head(&self) -> Result<Option<Fields>, ReadError> {
        let head = &self.buf[self.start..self.end];
        // The origin latency is read by name, per reader: such runs parse every head.
        let cache = self.latency_header.is_none();
        let remembered =
            if cache { LAST_HEAD.with_borrow(|last| last.fields_of(head)) } else { None };
        if remembered.is_some() {
            return Ok(remembered);
        }
        let fields = self.parse_fields(head)?;
        if let (true, Some(f)) = (cache, fields) {
            LAST_HEAD.with_borrow_mut(|last| last.keep(&head[..f.len], f));
        }
        Ok(fields)
    }

    /// What the head at the start of `head` says; Ok(None) means more bytes are needed.
    fn parse_fields(&self, head: &[u8]) -> Result<Option<Fields>, ReadError> {
        // Uninitialised slots: filling 96 empty headers (3 KiB of stack) for every response
        // cost more instructions than parsing a small head (bench/results/hot-path-costs.md).
        let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            head,
            &mut headers,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) if looks_like_tls(head) => return Err(ReadError::Protocol(Malformed::Tls)),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ReadError::Protocol(Malformed::TooManyHeaders))
            }
            Err(e) => return Err(ReadError::Protocol(Malformed::Head(e))),
        };
        let status = resp.code.unwrap_or(0);
        let mut close = resp.version == Some(0);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let v = parse_content_length(h.value)
                    .ok_or(ReadError::Protocol(Malformed::ContentLength))?;
                if length.is_some_and(|l| l != v) {
                    return Err(ReadError::Protocol(Malformed::ConflictingLength));
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                // Chunked must be the final coding; anything else means read-until-close.
                chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
                if !chunked {
                    length = None;
                }
            } else if name.eq_ignore_ascii_case(b"connection") {
                for tok in h.value.split(|&b| b == b',') {
                    let tok = trim(tok);
                    if tok.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
            }
        }
        // A separate pass, only when asked: a plain run's header loop stays as it was.
        let origin = match &self.latency_header {
            None => OriginLatency::Absent,
            Some(name) => resp
                .headers
                .iter()
                .find(|h| h.name.as_bytes().eq_ignore_ascii_case(name))
                .map_or(OriginLatency::Absent, |h| OriginLatency::parse(h.value)),
        };
        Ok(Some(Fields { status, len, close, length, chunked, origin }))
    }

    /// Reads more bytes after `end`, compacting or growing the buffer, or failing with `full`
    /// if it is `READ_BUF` long and full of one unfinished item (a head or a line).
    ///
    /// A poll function under `poll_fn` rather than an `async fn` around `read`: every response
    /// waits here once, and each layer of future it passes through costs on both polls.
    async fn fill<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        rx_bytes: &mut u64,
        received: bool,
        full: Malformed,
    ) -> Result<(), ReadError> {
        std::future::poll_fn(|cx| self.poll_fill(cx, io, rx_bytes, received, full)).await
    }

    fn poll_fill<R: AsyncRead + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut R,
        rx_bytes: &mut u64,
        received: bool,
        full: Malformed,
    ) -> Poll<Result<(), ReadError>> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < READ_BUF {
                self.grow();
            } else {
                return Poll::Ready(Err(ReadError::Protocol(full)));
            }
        }
        let free = self.buf.len() - self.end;
        let mut room = ReadBuf::new(&mut self.buf[self.end..]);
        if let Err(e) = ready!(Pin::new(io).poll_read(cx, &mut room)) {
            return Poll::Ready(Err(e.into()));
        }
        let n = room.filled().len();
        if n == 0 {
            let received = received || self.end > self.start;
            return Poll::Ready(Err(ReadError::Closed { received }));
        }
        self.end += n;
        *rx_bytes += n as u64;
        // A read that filled all the room there was: more is likely coming (a large body), so
        // the next reads get a larger buffer.
        if n == free && self.buf.len() < READ_BUF {
            self.grow();
        }
        Poll::Ready(Ok(()))
    }

    fn grow(&mut self) {
        let size = (self.buf.len() * 2).clamp(FIRST_BUF, READ_BUF);
        self.buf.resize(size, 0);
    }

    async fn skip_exact<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        n: u64,
        rx_bytes: &mut u64,
    ) -> Result<u64, ReadError> {
        let mut remaining = n;
        loop {
            let take = remaining.min((self.end - self.start) as u64);
            self.start += take as usize;
            remaining -= take;
            if remaining == 0 {
                return Ok(n);
            }
            // Everything buffered was consumed, so the buffer cannot be full.
            self.fill(io, rx_bytes, true, Malformed::LineTooLarge).await?;
        }
    }

    async fn skip_to_eof<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        rx_bytes: &mut u64,
    ) -> Result<u64, ReadError> {
        let mut total = 0u64;
        loop {
            total += (self.end - self.start) as u64;
            self.start = self.end;
            // Bodies are discarded as they arrive: the buffer is empty before every read.
            match self.fill(io, rx_bytes, true, Malformed::LineTooLarge).await {
                Ok(()) => {}
                Err(ReadError::Closed { .. }) => return Ok(total),
                Err(e) => return Err(e),
            }
        }
    }

    async fn skip_chunked<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        rx_bytes: &mut u64,
    ) -> Result<u64, ReadError> {
        let mut body = 0u64;
        loop {
            // Chunk-size line.
            let line = self.line(io, rx_bytes).await?;
            let size = parse_chunk_size(&self.buf[line.0..line.1])?;
            if size == 0 {
                // Trailers until the empty line.
                loop {
                    let (a, b) = self.line(io, rx_bytes).await?;
                    if a == b {
                        return Ok(body);
                    }
                }
            }
            body += self.skip_exact(io, size, rx_bytes).await?;
            let (a, b) = self.line(io, rx_bytes).await?;
            if a != b {
                return Err(ReadError::Protocol(Malformed::ChunkCrlf));
            }
        }
    }

    /// Returns the next line (without its CRLF or LF) as a range into `buf`, consuming it.
    async fn line<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        rx_bytes: &mut u64,
    ) -> Result<(usize, usize), ReadError> {
        loop {
            if let Some(i) = self.buf[self.start..self.end].iter().position(|&b| b == b'\n') {
                let a = self.start;
                let mut b = a + i;
                self.start = b + 1;
                if b > a && self.buf[b - 1] == b'\r' {
                    b -= 1;
                }
                return Ok((a, b));
            }
            self.fill(io, rx_bytes, true, Malformed::LineTooLarge).await?;
        }
    }
}

fn parse_content_length(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, ReadError> {
    let hex = trim(line.split(|&b| b == b';').next().unwrap_or_default());
    let bad = || ReadError::Protocol(Malformed::ChunkSize);
    if hex.is_empty() || hex.len() > 15 {
        return Err(bad());
    }
    hex.iter().try_fold(0u64, |acc, &c| {
        let d = (c as char).to_digit(16).ok_or_else(bad)?;
        Ok(acc * 16 + u64::from(d))
    })
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn last_token(v: &[u8]) -> &[u8] {
    trim(v.rsplit(|&b| b == b',').next().unwrap_or_default())
}

/// The answers in `bytes`, a server's whole side of a connection as a capture holds it, read
/// exactly as the client reads them (interim 1xx skipped; content-length, chunked or
/// to-the-close bodies), one per request in `heads` (`true`: a HEAD, whose answer has no body):
/// `(status, body bytes)` each, until the bytes end, break off or stop being HTTP/1.1 (a 101
/// switch), and how many bytes those answers took (where a switched protocol's bytes begin).
/// Replay's import records them, so a replay can be compared with what the captured server
/// said.
pub fn captured_answers(bytes: &[u8], heads: &[bool]) -> (Vec<(u16, u64)>, usize) {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let mut reader = ResponseReader::new();
    let mut input = bytes;
    let mut rx = 0u64;
    let mut out = Vec::with_capacity(heads.len());
    for &head in heads {
        let read = std::pin::pin!(reader.read_response(&mut input, head, &mut rx));
        // A slice never waits: one poll reads a whole answer, or fails at its end.
        match read.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(i)) => {
                out.push((i.status, i.body_bytes));
                if i.status == 101 {
                    break;
                }
            }
            _ => break,
        }
    }
    (out, bytes.len() - input.len() - reader.buffered())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], head: bool, chunk: usize) -> Vec<Result<ResponseInfo, String>> {
        // Feed the input in small pieces to exercise every partial-read path.
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let data = input.to_vec();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in data.chunks(chunk.max(1)) {
                let _ = server.write_all(piece).await;
                tokio::task::yield_now().await;
            }
        });
        let mut r = ResponseReader::new();
        let mut rx = 0;
        let mut out = Vec::new();
        loop {
            match r.read_response(&mut client, head, &mut rx).await {
                Ok(info) => {
                    out.push(Ok(info));
                    if info.close {
                        break;
                    }
                }
                Err(ReadError::Closed { received: false }) => break,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        let _ = writer.await;
        assert!(rx <= input.len() as u64);
        out
    }

    fn ok(
        status: u16,
        header_bytes: u64,
        body_bytes: u64,
        close: bool,
    ) -> Result<ResponseInfo, String> {
        Ok(ResponseInfo { status, header_bytes, body_bytes, close, origin: OriginLatency::Absent })
    }

    #[tokio::test]
    async fn content_length_keep_alive_any_split() {
        let one = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        let input = [&one[..], &one[..]].concat();
        for chunk in [1, 3, 7, 1000] {
            let got = read_all(&input, false, chunk).await;
            assert_eq!(got, vec![ok(200, 38, 5, false), ok(200, 38, 5, false)], "chunk {chunk}");
        }
    }

    #[tokio::test]
    async fn chunked_with_extensions_and_trailers() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        for chunk in [1, 2, 5, 4096] {
            let got = read_all(input, false, chunk).await;
            assert_eq!(got.len(), 2, "chunk {chunk}: {got:?}");
            assert_eq!(got[0].as_ref().map(|i| (i.status, i.body_bytes)), Ok((200, 15)));
            assert_eq!(got[1].as_ref().map(|i| (i.status, i.body_bytes)), Ok((204, 0)));
        }
    }

    #[tokio::test]
    async fn interim_head_close_and_eof_framing() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nabc";
        let got = read_all(input, false, 4).await;
        assert_eq!(got, vec![ok(200, 25 + 57, 3, true)]);
        let got = read_all(b"HTTP/1.0 200 OK\r\n\r\nuntil-close", false, 3).await;
        assert_eq!(got, vec![ok(200, 19, 11, true)]);
        let got = read_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n", true, 100).await;
        assert_eq!(got, vec![ok(200, 39, 0, false)]);
    }

    #[tokio::test]
    async fn malformed_responses_are_errors_not_panics() {
        let cases: &[&[u8]] = &[
            b"garbage\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXX",
            b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n",
        ];
        for c in cases {
            let got = read_all(c, false, 5).await;
            assert!(
                matches!(got.last(), Some(Err(_))),
                "{:?} -> {got:?}",
                String::from_utf8_lossy(c)
            );
        }
        // A TLS alert (what a TLS server answers to plaintext) is named as TLS.
        let got = read_all(&[21, 3, 3, 0, 2, 2, 10], false, 7).await;
        assert_eq!(
            got,
            vec![Err("invalid HTTP/1.1 response: the server answered in TLS (is it an https:// \
                      port?)"
                .to_string())]
        );
        // Truncated body: closed mid-response.
        let got = read_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", false, 5).await;
        assert!(matches!(got.last(), Some(Err(e)) if e.contains("mid-response")), "{got:?}");
        // Oversized heads, by size and by field count, are told apart from malformed ones.
        let mut big = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
        big.resize(MAX_HEAD + 100, b'a');
        big.extend_from_slice(b"\r\n\r\n");
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        while many.len() < MAX_HEAD + 100 {
            many.extend_from_slice(b"x-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        for (input, kind) in [(big, Malformed::HeadTooLarge), (many, Malformed::TooManyHeaders)] {
            let got = read_all(&input, false, 4096).await;
            assert!(kind.is_header_overflow());
            let want = ReadError::Protocol(kind).to_string();
            assert_eq!(got.last(), Some(&Err(want)), "{got:?}");
        }
        assert!(!Malformed::ContentLength.is_header_overflow());
        // A chunk-size line that never ends fails once it fills the buffer.
        let mut line = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        line.resize(line.len() + MAX_HEAD + 100, b'0');
        let got = read_all(&line, false, 4096).await;
        let want = ReadError::Protocol(Malformed::LineTooLarge).to_string();
        assert_eq!(got.last(), Some(&Err(want)), "{got:?}");
    }

    /// Hands out what it holds in reads no larger than the room offered, and notes that room.
    struct Offered<'a> {
        data: &'a [u8],
        offers: Vec<usize>,
    }

    impl AsyncRead for Offered<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            self.offers.push(buf.remaining());
            let n = buf.remaining().min(self.data.len());
            buf.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// Reads every response of `input` (one read) with a reader of its own, HEAD or not,
    /// optionally reading an origin-latency header.
    async fn read_each(input: &[u8], head: bool, latency: Option<&str>) -> Vec<ResponseInfo> {
        let name = latency.map(|n| Rc::from(n.as_bytes()));
        let mut r = ResponseReader::new().with_latency_header(name);
        let (mut src, mut rx, mut out) = (input, 0, Vec::new());
        while !src.is_empty() || r.buffered() > 0 {
            out.push(r.read_response(&mut src, head, &mut rx).await.expect("a valid response"));
        }
        out
    }

    /// The remembered head answers only for the same bytes: a head that differs anywhere (even
    /// only after the remembered one's length, or by one byte of a value) is parsed afresh, a
    /// HEAD request frames a remembered head as a HEAD, and a failed parse leaves nothing
    /// behind. Each case would read a wrong length or status if the cache matched loosely.
    #[tokio::test]
    async fn a_remembered_head_answers_only_for_the_same_bytes() {
        let a = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nab";
        let same = [&a[..], &a[..], &a[..]].concat();
        assert_eq!(read_each(&same, false, None).await, vec![ok(200, 38, 2, false).unwrap(); 3]);
        // One byte of a value differs; then a longer head with the same start; then a status.
        let b = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc";
        let c = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: keep-alive\r\n\r\nxyz";
        let d = b"HTTP/1.1 404 OK\r\ncontent-length: 3\r\nconnection: keep-alive\r\n\r\nxyz";
        let e = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nxyz";
        let mixed = [&a[..], b, b, c, d, c, a, e].concat();
        let want = [(200, 38, 2, false), (200, 38, 3, false), (200, 38, 3, false)]
            .into_iter()
            .chain([(200, 62, 3, false), (404, 62, 3, false), (200, 62, 3, false)])
            .chain([(200, 38, 2, false), (200, 57, 3, true)])
            .map(|(s, h, b, c)| ok(s, h, b, c).unwrap())
            .collect::<Vec<_>>();
        assert_eq!(read_each(&mixed, false, None).await, want);
        // The same head, remembered from a GET, read for a HEAD: no body.
        assert_eq!(read_each(b, false, None).await[0].body_bytes, 3);
        let got = read_each(&[&b[..38], &b[..38]].concat(), true, None).await;
        assert_eq!(got.iter().map(|i| i.body_bytes).collect::<Vec<_>>(), [0, 0]);
        let got = read_each(&[&b[..], &b[..]].concat(), false, None).await;
        assert_eq!(got.iter().map(|i| i.body_bytes).collect::<Vec<_>>(), [3, 3]);
        // A head that fails (a bad length after a good remembered start) fails every time.
        let bad = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabc";
        for _ in 0..2 {
            let got = read_all(bad, false, 1000).await;
            let want = ReadError::Protocol(Malformed::ConflictingLength).to_string();
            assert_eq!(got, vec![Err(want)]);
        }
        // With an origin-latency header the value differs per response and is read each time.
        let lat = |ns: u64| format!("HTTP/1.1 200 OK\r\nx-lat: {ns}\r\ncontent-length: 0\r\n\r\n");
        let two = [lat(17), lat(17), lat(99)].concat();
        let got = read_each(two.as_bytes(), false, Some("x-lat")).await;
        let origins = got.iter().map(|i| i.origin).collect::<Vec<_>>();
        let ns = OriginLatency::Ns;
        assert_eq!(origins, [ns(17), ns(17), ns(99)]);
    }

    /// The buffer starts small, not at its full size, and grows where a response needs it: a
    /// head past the first buffer still parses, and a large body is skipped in full-size reads
    /// once the first reads fill the room.
    #[tokio::test]
    async fn the_buffer_starts_small_and_grows_to_need() {
        let mut r = ResponseReader::new();
        assert_eq!(r.buf.capacity(), 0, "an unused connection holds no buffer");
        let small = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        let mut io = Offered { data: small, offers: Vec::new() };
        let mut rx = 0;
        let info = r.read_response(&mut io, false, &mut rx).await.unwrap();
        assert_eq!((info.status, info.body_bytes), (200, 5));
        assert_eq!(io.offers, vec![FIRST_BUF]);

        let mut head = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
        head.resize(3 * FIRST_BUF, b'a');
        head.extend_from_slice(b"\r\ncontent-length: 1000000\r\n\r\n");
        let body_start = head.len();
        head.resize(body_start + 1_000_000, b'b');
        let mut io = Offered { data: &head, offers: Vec::new() };
        let info = r.read_response(&mut io, false, &mut rx).await.unwrap();
        assert_eq!((info.header_bytes, info.body_bytes), (body_start as u64, 1_000_000));
        // Each full read doubles the buffer (the room offered is what is left of it), up to
        // 32 KiB reads: the million bytes take ~35 reads, not ~245.
        assert_eq!(io.offers[..3], [FIRST_BUF, FIRST_BUF, 2 * FIRST_BUF]);
        assert!(io.offers[3..].iter().all(|&o| o <= READ_BUF));
        assert!(io.offers.len() < 40, "{} reads", io.offers.len());
        assert_eq!(r.buf.len(), READ_BUF);
    }

    #[test]
    fn request_encoding() {
        let t = Target::parse_unresolved("http://127.0.0.1:8080/p?q=1").expect("url");
        let spec = RequestSpec::try_new("POST", vec![("x-a".into(), "1".into())], 3).expect("spec");
        let req = encode_request(&t, &spec);
        assert_eq!(
            String::from_utf8(req).expect("utf8"),
            format!(
                "POST /p?q=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: shrike/{}\r\nx-a: 1\r\ncontent-length: 3\r\n\r\naaa",
                env!("CARGO_PKG_VERSION")
            )
        );
        let spec =
            RequestSpec::try_new("GET", vec![("Host".into(), "example".into())], 0).expect("spec");
        let req = String::from_utf8(encode_request(&t, &spec)).expect("utf8");
        assert!(req.starts_with("GET /p?q=1 HTTP/1.1\r\nuser-agent:"));
        assert!(req.contains("Host: example\r\n") && !req.contains("content-length"));
    }
}
