//! HTTP/1.1 as a [`Protocol`]: requests encoded once (or rendered per request into the
//! connection's own buffer when templated), responses read in place by the hand-written codec
//! ([`crate::h1`]), one exchange at a time per connection.

use std::rc::Rc;
use std::time::Instant;

use shrike_stats::Counter;
use tokio::io::AsyncWriteExt;

use super::{After, Answer, Failure, FailureClass, Io, MoreAnswer, Protocol};
use crate::config::Endpoint;
use crate::feed::HttpMeta;
use crate::h1::{ReadError, ResponseReader};
use crate::pool::cx::PoolCx;
use crate::requests::{H1Entry, H1Request};
use crate::transport::{self, Transport};

/// HTTP/1.1 to one endpoint, with its pre-encoded requests (one per request-source entry),
/// or replaying: each request's bytes are its fed payload.
pub(crate) struct Http1 {
    requests: Box<[H1Entry]>,
    replayed: bool,
    latency_header: Option<Rc<[u8]>>,
}

impl Http1 {
    pub fn new(requests: Box<[H1Entry]>, latency_header: Option<&str>) -> Http1 {
        let latency_header = latency_header.map(|h| Rc::from(h.as_bytes()));
        Http1 { requests, replayed: false, latency_header }
    }

    /// Requests as replay feeds them: a ticket's request number keys its payload.
    pub fn replayed() -> Http1 {
        Http1 { requests: Box::new([]), replayed: true, latency_header: None }
    }
}

/// `request` with `headers` added at the end of its (first) head. Only sampled requests pay
/// for the copy.
fn with_headers(request: &[u8], headers: &[(&str, String)]) -> Vec<u8> {
    let end = request.windows(4).position(|w| w == b"\r\n\r\n").map_or(request.len(), |i| i + 2);
    let mut out = Vec::with_capacity(request.len() + 96);
    out.extend_from_slice(&request[..end]);
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&request[end..]);
    out
}

/// An open HTTP/1.1 connection and its reusable buffers.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: Transport,
    reader: ResponseReader,
    /// Templated requests render here (the request, and scratch for its body); reused.
    out: Vec<u8>,
    body: Vec<u8>,
}

impl Protocol for Http1 {
    type Conn = Conn;
    type Error = ReadError;
    const CONNECTION_COUNTER: Counter = Counter::CxHttp1Total;

    async fn connect(&self, cx: &PoolCx, endpoint: &Endpoint, _: Option<u32>) -> Option<Conn> {
        let stream = transport::connect(cx, endpoint).await?;
        let reader = ResponseReader::new().with_latency_header(self.latency_header.clone());
        Some(Conn { stream, reader, out: Vec::new(), body: Vec::new() })
    }

    async fn exchange(
        &self,
        cx: &PoolCx,
        conn: &mut Conn,
        request: u32,
        io: &mut Io,
    ) -> Result<Answer, Failure<ReadError>> {
        // Split borrows: a templated request renders into the connection's own buffer while
        // the exchange writes and reads on its stream.
        let Conn { stream, reader, out, body } = conn;
        let replayed;
        let (bytes, head, more_heads): (&[u8], bool, &[bool]) = if self.replayed {
            // A payload lives until its request finished, so only a bug could make it missing.
            replayed = cx.payload(request).ok_or_else(|| Failure {
                class: FailureClass::Protocol,
                error: ReadError::Io(std::io::Error::other("the replayed payload is missing")),
            })?;
            match replayed.extra::<HttpMeta>() {
                Some(m) => (&replayed.data, m.head, &m.pipelined_heads),
                None => (&replayed.data, false, &[]),
            }
        } else {
            let entry = &self.requests[request as usize];
            match &entry.request {
                H1Request::Fixed(bytes) => (bytes, entry.head, &[]),
                H1Request::Templated(t) => {
                    t.render(out, body, &mut cx.renderer.render_cx());
                    (out, entry.head, &[])
                }
            }
        };
        // A traced request gets its B3 headers before the blank line ending its head.
        let traced;
        let bytes = match io.trace {
            None => bytes,
            Some(ids) => {
                traced = with_headers(bytes, &ids.headers());
                &traced[..]
            }
        };
        let sent = Instant::now();
        io.sent = Some(sent);
        // The flush matters for TLS only (a no-op on TCP): tokio-rustls accepts plaintext into
        // rustls and may return before the socket took every record; nothing else would send
        // them while we wait to read.
        let written = match stream.try_send(bytes) {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(n) => {
                async {
                    stream.write_all(&bytes[n..]).await?;
                    stream.flush().await
                }
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let class = if reset(&e) { FailureClass::Unanswered } else { FailureClass::Broken };
            return Err(Failure { class, error: e.into() });
        }
        io.tx = bytes.len() as u64;
        let classify = |error: ReadError, rx: u64| {
            let class = match &error {
                ReadError::Closed { received: false } => FailureClass::Unanswered,
                // The keep-alive race's other face: a server that closes an idle connection
                // with unread bytes (or SO_LINGER 0) resets it instead of sending a FIN. A
                // server that read the request and then reset looks the same: whether it acted
                // on the request is unknown, so only an idempotent one is sent again.
                ReadError::Io(e) if rx == 0 && reset(e) => FailureClass::Unanswered,
                ReadError::Protocol(m) if m.is_header_overflow() => FailureClass::HeaderOverflow,
                ReadError::Protocol(_) => FailureClass::Protocol,
                _ => FailureClass::Broken,
            };
            Failure { class, error }
        };
        match reader.read_response(stream, head, &mut io.rx).await {
            Ok(info) => {
                // Stamped by the kernel, the end is when it arrived, never before the send.
                let arrived = |s: &Transport| s.arrival().map(|a| a.max(sent));
                io.arrived = arrived(stream);
                // Pipelined requests went out with this one: their answers follow, in order.
                let mut more = Vec::with_capacity(more_heads.len());
                let mut close = info.close;
                for &h in more_heads {
                    let next = reader.read_response(stream, h, &mut io.rx).await;
                    let next = next
                        .map_err(|e| Failure { class: FailureClass::Broken, ..classify(e, 1) })?;
                    close = next.close;
                    more.push(MoreAnswer {
                        status: next.status,
                        header_bytes: next.header_bytes,
                        body_bytes: next.body_bytes,
                        done: arrived(stream).unwrap_or_else(Instant::now),
                    });
                }
                Ok(Answer {
                    status: Some(info.status),
                    header_bytes: info.header_bytes,
                    body_bytes: info.body_bytes,
                    origin: info.origin,
                    // Bytes beyond the response mean the server sent something we did not ask
                    // for; the connection's framing can no longer be trusted.
                    then: if reader.buffered() > 0 {
                        After::Desync
                    } else if close {
                        After::Closed
                    } else {
                        After::Keep
                    },
                    error: None,
                    more,
                })
            }
            Err(error) => {
                // A transport that sends after accepting the bytes (io_uring) reports a send
                // the peer refused only now: those bytes never left, so they are not counted.
                if io.rx == 0 && stream.flush().await.is_err() {
                    io.tx = 0;
                }
                Err(classify(error, io.rx))
            }
        }
    }

    fn resendable(&self, cx: &PoolCx, request: u32) -> bool {
        if !self.replayed {
            return self.requests.get(request as usize).is_some_and(|e| e.idempotent);
        }
        // A replayed request's method is its first word; requests pipelined behind it went
        // out with it, and may have been acted on: never sent twice.
        cx.payload(request).is_some_and(|p| {
            let pipelined = p.extra::<HttpMeta>().is_some_and(|m| !m.pipelined_heads.is_empty());
            let method = p.data.split(|&b| b == b' ').next().unwrap_or_default();
            !pipelined && crate::requests::idempotent(method)
        })
    }
}

/// The peer reset the connection (or had, and this write or read is the first to hear it).
fn reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(e.kind(), ConnectionReset | BrokenPipe | ConnectionAborted)
}
