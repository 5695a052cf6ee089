//! Protocols: what a connection speaks. A [`Protocol`] connects, runs one exchange at a time on
//! a connection, and says what became of it in protocol-neutral terms ([`Answer`] or
//! [`Failure`], bytes each way, and an HTTP status only where there is one). The serial pool
//! owns everything else: which connection, queueing, recycling, retries, timeouts and
//! recording. HTTP/1.1 is [`http1::Http1`]; a protocol of the caller's (replay's raw TCP and
//! MySQL, in shrike-replay) plugs in the same way through [`crate::feed::SerialProtocol`],
//! working in the narrow context a pool gives it ([`PoolCx`]: counters, errors, the connect
//! timeout, the fed payloads). The multiplexed protocols (h2, h3) run many exchanges per
//! connection and have their own seam (`pool::mux`).

pub mod http1;

use std::fmt;
use std::time::Instant;

pub use crate::config::Endpoint;
pub use crate::pool::cx::PoolCx;
pub use crate::requests::OriginLatency;
pub use crate::transport::Transport;

/// One protocol, as the serial pool drives it. Implementations are cheap to share: a pool
/// holds one, and its connection tasks borrow it.
// A worker's runtime is single-threaded: the futures are never sent, so the `Send` bound the
// lint asks about would cost every implementation for nothing.
#[allow(async_fn_in_trait)]
pub trait Protocol: 'static {
    /// An open connection.
    type Conn: 'static;
    /// Why an exchange failed; shown only when the run's error summary first sees it.
    type Error: fmt::Display;
    /// The `upstream_cx_*_total` counter a new connection of this protocol counts in.
    const CONNECTION_COUNTER: shrike_stats::Counter;

    /// Opens a connection (TCP or TLS, and any handshake of the protocol) for request-source
    /// entry `first` (`None` when opened ahead of any request): a protocol whose login belongs
    /// to the session, as a replayed MySQL session's does, reads it from that payload. A
    /// failure is counted and described in `cx` and gives `None`.
    async fn connect(
        &self,
        cx: &PoolCx,
        endpoint: &Endpoint,
        first: Option<u32>,
    ) -> Option<Self::Conn>;

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

    /// Whether request-source entry `request`, whose send on a reused connection got no answer
    /// ([`FailureClass::Unanswered`]), may be sent again on a fresh one: only if the server
    /// acting on it twice means the same as once. The default is never: a protocol that cannot
    /// tell sends each request once.
    fn resendable(&self, _cx: &PoolCx, _request: u32) -> bool {
        false
    }
}

/// Opens a TCP connection to `endpoint` (and TLS, for an `https://` target) on the run's I/O
/// backend, counting it as every connection of the run is counted; a failure is counted and
/// described in `cx` and gives `None`.
pub async fn connect(cx: &PoolCx, endpoint: &Endpoint) -> Option<Transport> {
    crate::transport::connect(cx, endpoint).await
}

/// What moved in one exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct Io {
    /// When the request went out; `None` until it did (no clock read before: the hot path
    /// reads the clock once per send).
    pub sent: Option<Instant>,
    pub tx: u64,
    pub rx: u64,
    /// When the answer's last bytes reached the socket, by the kernel's receive stamp
    /// (`--read-coalesce`); `None` where the caller's clock read after the exchange is it.
    pub arrived: Option<Instant>,
    /// A traced request: the protocol adds its B3 headers (HTTP/1.1; others have none).
    pub(crate) trace: Option<crate::trace::TraceIds>,
}

/// A complete answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
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
pub struct MoreAnswer {
    pub status: u16,
    pub header_bytes: u64,
    pub body_bytes: u64,
    /// When it was read whole.
    pub done: Instant,
}

/// The connection after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Ready for the next exchange.
    Keep,
    /// The server announced it closes the connection (`connection: close`).
    Closed,
    /// The server sent bytes nobody asked for: the framing can no longer be trusted.
    Desync,
    /// The client ended the connection as its protocol says to (MySQL's COM_QUIT, as the
    /// captured client did): closed by us, and no error.
    Ended,
}

/// A failed exchange, classed for counting; `error` says what happened.
#[derive(Debug)]
pub struct Failure<E> {
    pub class: FailureClass,
    pub error: E,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
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
