//! Protocols: what a connection speaks. A [`Protocol`] connects, runs one exchange at a time on
//! a connection, and says what became of it in protocol-neutral terms ([`Answer`] or
//! [`Failure`], bytes each way, and an HTTP status only where there is one). The serial pool
//! ([`crate::pool::serial`]) owns everything else: which connection, queueing, recycling,
//! retries, timeouts and recording. HTTP/1.1 is [`http1::Http1`]; replay's raw TCP and MySQL
//! plug in the same way. The multiplexed protocols (h2, h3) run many exchanges per connection
//! and have their own seam ([`crate::pool::mux::Mux`]).

pub mod http1;
pub mod mysql;
pub mod tcp;

use std::fmt;
use std::time::Instant;

use crate::config::Endpoint;
use crate::pool::cx::PoolCx;
use crate::replay::Payload;
use crate::requests::OriginLatency;

/// One protocol, as the serial pool drives it. Implementations are cheap to share: a pool
/// holds one, and its connection tasks borrow it.
pub(crate) trait Protocol: 'static {
    /// An open connection.
    type Conn: 'static;
    /// Why an exchange failed; shown only when the run's error summary first sees it.
    type Error: fmt::Display;
    /// The `upstream_cx_*_total` counter a new connection of this protocol counts in.
    const CONNECTION_COUNTER: shrike_stats::Counter;

    /// Opens a connection (TCP or TLS, and any handshake of the protocol). A failure is
    /// counted and described in `cx` and gives `None`.
    async fn connect(&self, cx: &PoolCx, endpoint: &Endpoint) -> Option<Self::Conn>;

    /// Sends request-source entry `request` and reads its answer to the end, noting in `io`
    /// when the request went out and the bytes each way as they move (so a timed-out exchange
    /// still counts them). The caller bounds it with the request timeout; a dropped exchange
    /// leaves the connection unusable.
    async fn exchange(
        &self,
        cx: &PoolCx,
        conn: &mut Self::Conn,
        request: u32,
        io: &mut Io,
    ) -> Result<Answer, Failure<Self::Error>>;
}

/// The fed payload of replayed request `request`, or a protocol failure made of `missing()`.
/// A payload lives until its request finished, so only a bug could make it missing.
pub(crate) fn fed<E>(
    cx: &PoolCx,
    request: u32,
    missing: impl FnOnce() -> E,
) -> Result<Payload, Failure<E>> {
    cx.payloads
        .get(request)
        .ok_or_else(|| Failure { class: FailureClass::Protocol, error: missing() })
}

/// What moved in one exchange.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Io {
    /// When the request went out; `None` until it did (no clock read before: the hot path
    /// reads the clock once per send).
    pub sent: Option<Instant>,
    pub tx: u64,
    pub rx: u64,
    /// When the answer's last bytes reached the socket, by the kernel's receive stamp
    /// (`--read-coalesce`); `None` where the caller's clock read after the exchange is it.
    pub arrived: Option<Instant>,
    /// A traced request: the protocol adds its B3 headers (HTTP/1.1; others have none).
    pub trace: Option<crate::trace::TraceIds>,
}

/// A complete answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The HTTP status, for protocols that have one.
    pub status: Option<u16>,
    pub header_bytes: u64,
    pub body_bytes: u64,
    pub origin: OriginLatency,
    /// What the connection is good for afterwards.
    pub then: After,
    /// The server answered with an error of its protocol (a MySQL error packet), tallied by
    /// this key (its code and class), the connection intact. HTTP statuses say it otherwise.
    pub error: Option<String>,
    /// Further answers read in the same exchange, in order: replayed HTTP/1.1 requests that
    /// were pipelined behind this one.
    pub more: Vec<MoreAnswer>,
}

/// One more answer of a pipelined exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MoreAnswer {
    pub status: u16,
    pub header_bytes: u64,
    pub body_bytes: u64,
    /// When it was read whole.
    pub done: Instant,
}

/// The connection after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Ready for the next exchange.
    Keep,
    /// The server announced it closes the connection (`connection: close`).
    Closed,
    /// The server sent bytes nobody asked for: the framing can no longer be trusted.
    Desync,
}

/// A failed exchange, classed for counting; `error` says what happened.
#[derive(Debug)]
pub(crate) struct Failure<E> {
    pub class: FailureClass,
    pub error: E,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// The connection closed before any byte of the answer: nothing was processed, so the
    /// request may be retried once on a new connection (a keep-alive connection the server
    /// closed while idle).
    Unanswered,
    /// The answer broke the protocol.
    Protocol,
    /// The answer's head broke the client's size limits (a protocol error of its own kind:
    /// `upstream_cx_header_overflow`), so reading it would grow memory without bound.
    HeaderOverflow,
    /// The connection failed mid-exchange (closed, reset, I/O error).
    Broken,
}
