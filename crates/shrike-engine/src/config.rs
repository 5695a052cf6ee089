//! The engine's validated configuration. The CLI (and later the gRPC service and replay) build
//! this from their own inputs; the engine never sees flags.

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::time::{Duration, SystemTime};

use crate::pacer::RatePlan;
use crate::predicate::Predicate;
use crate::target::Target;
use crate::tls::TlsClient;

/// The HTTP version a run speaks. A protocol is a pool policy ([`crate::pool`]), not a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    /// `http://` targets use h2c with prior knowledge; `https://` targets negotiate `h2`
    /// with ALPN and fail the connection if the server picks anything else.
    Http2,
    /// HTTP/3 over QUIC: `https://` targets only (QUIC always runs TLS 1.3), ALPN `h3`.
    Http3,
}

impl Protocol {
    /// Nighthawk's name for it (the `protocol` option).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
            Protocol::Http3 => "http3",
        }
    }

    /// The ALPN id offered over TLS.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::Http1 => b"http/1.1",
            Protocol::Http2 => b"h2",
            Protocol::Http3 => b"h3",
        }
    }
}

/// Which idle HTTP/1.1 connection takes the next request (Nighthawk's
/// `--experimental-h1-connection-reuse-strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum H1Reuse {
    /// Most recently used: a lightly loaded run keeps few connections hot.
    #[default]
    Mru,
    /// Least recently used: requests rotate over every open connection.
    Lru,
}

impl H1Reuse {
    pub fn name(self) -> &'static str {
        match self {
            H1Reuse::Mru => "mru",
            H1Reuse::Lru => "lru",
        }
    }
}

/// Multiplexing limits for HTTP/2 and HTTP/3 (ignored by HTTP/1.1, which carries one request per
/// connection at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Streams per connection; the server's SETTINGS_MAX_CONCURRENT_STREAMS also bounds it.
    pub max_concurrent_streams: NonZeroU32,
    /// Requests in flight per worker across all its connections (Nighthawk's
    /// `--max-active-requests`).
    pub max_active_requests: NonZeroU32,
}

impl Default for StreamLimits {
    fn default() -> Self {
        // Nighthawk's defaults: streams limited only by the server; 100 active requests.
        StreamLimits {
            max_concurrent_streams: NonZeroU32::new(2_147_483_647).unwrap_or(NonZeroU32::MAX),
            max_active_requests: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// How a worker waits for the next release (Nighthawk's `--sequencer-idle-strategy`). The
/// trade-off shows in `sequencer.send_lateness`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdleStrategy {
    /// Busy-wait, yielding to the event loop on every turn: the tightest release timing, at the
    /// cost of a whole core per worker.
    Spin,
    /// Block in epoll on a timerfd armed for the due time: tens of µs of lateness and no CPU
    /// while idle. The default (Nighthawk's is spin, which on a small machine steals the core
    /// the server under test needs).
    #[default]
    Poll,
    /// Sleep on tokio's millisecond timer wheel: the fewest wake-ups, kind to shared machines,
    /// but releases are late by up to a millisecond and bunch at high rates.
    Sleep,
}

impl IdleStrategy {
    pub fn parse(s: &str) -> Option<IdleStrategy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "spin" => Some(IdleStrategy::Spin),
            "poll" => Some(IdleStrategy::Poll),
            "sleep" => Some(IdleStrategy::Sleep),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            IdleStrategy::Spin => "spin",
            IdleStrategy::Poll => "poll",
            IdleStrategy::Sleep => "sleep",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("invalid request method {0:?}: must be an HTTP token such as GET or POST")]
    Method(String),
    #[error(
        "invalid request header {0:?}: expected 'name: value' with a token name and no line breaks"
    )]
    Header(String),
}

/// The request every worker sends, before encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    method: String,
    headers: Vec<(String, String)>,
    body_size: u32,
}

impl RequestSpec {
    pub fn try_new(
        method: &str,
        headers: Vec<(String, String)>,
        body_size: u32,
    ) -> Result<RequestSpec, ConfigError> {
        if method.is_empty() || !method.bytes().all(is_token_byte) {
            return Err(ConfigError::Method(method.to_string()));
        }
        for (k, v) in &headers {
            if k.is_empty()
                || !k.bytes().all(is_token_byte)
                || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
            {
                return Err(ConfigError::Header(format!("{k}: {v}")));
            }
        }
        Ok(RequestSpec { method: method.to_ascii_uppercase(), headers, body_size })
    }

    /// Parses a raw `name: value` header as given on the command line.
    pub fn parse_header(raw: &str) -> Result<(String, String), ConfigError> {
        let (k, v) = raw.split_once(':').ok_or_else(|| ConfigError::Header(raw.to_string()))?;
        let k = k.trim();
        if k.is_empty() || !k.bytes().all(is_token_byte) {
            return Err(ConfigError::Header(raw.to_string()));
        }
        Ok((k.to_string(), v.trim().to_string()))
    }

    pub fn method(&self) -> &str {
        &self.method
    }
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
    pub fn body_size(&self) -> u32 {
        self.body_size
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// One server requests go to: its URL and, for `https://`, its TLS client.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub target: Target,
    /// Required for `https://` targets.
    pub tls: Option<TlsClient>,
}

/// Everything a run needs. Rates and connection counts are per worker, as in Nighthawk.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Where requests go: one endpoint for a URL, or several (Nighthawk's multi-target mode)
    /// that requests rotate over round robin. Each endpoint has its own connection pool with
    /// the limits below.
    pub endpoints: Vec<Endpoint>,
    pub request: RequestSpec,
    pub protocol: Protocol,
    pub streams: StreamLimits,
    pub workers: NonZeroUsize,
    /// Per-worker request rate over time: constant, ramped, staged, or unpaced.
    pub plan: RatePlan,
    pub idle: IdleStrategy,
    /// Release requests in groups of this size (1 = no bursts).
    pub burst: NonZeroU32,
    /// Uniform release jitter added to each scheduled time.
    pub jitter: Duration,
    /// Per-worker connection limit.
    pub connections: NonZeroU32,
    pub h1_reuse: H1Reuse,
    /// `None` runs until stopped by a predicate or a signal.
    pub duration: Option<Duration>,
    /// Connect timeout, request timeout (a request unanswered this long is abandoned and
    /// counted in `upstream_rq_timeout`), and the grace period for in-flight requests when the
    /// run stops.
    pub timeout: Duration,
    /// Requests allowed to queue in the pool when every connection is busy.
    pub max_pending_requests: u32,
    pub max_requests_per_connection: Option<NonZeroU64>,
    /// Open loop never waits for the pool: a request that finds no capacity is counted in
    /// `benchmark.pool_overflow` and dropped. Closed loop waits (`sequencer.blocking`).
    pub open_loop: bool,
    /// Connect every connection before the first request is scheduled.
    pub prefetch_connections: bool,
    /// Each worker sends one request before the run starts (Nighthawk's `--simple-warmup`):
    /// it opens a connection and warms caches. Its counters stay in the result, as in
    /// Nighthawk; its latency does not.
    pub warmup: bool,
    /// Wall-clock time at which the run starts, so several processes can start together.
    pub start_at: Option<SystemTime>,
    /// Source address for outgoing connections (port chosen by the kernel).
    pub bind_address: Option<IpAddr>,
    pub predicates: Vec<Predicate>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_validation() {
        assert!(RequestSpec::try_new("get", vec![], 0).is_ok());
        assert_eq!(RequestSpec::try_new("get", vec![], 0).map(|r| r.method), Ok("GET".into()));
        assert!(RequestSpec::try_new("G ET", vec![], 0).is_err());
        assert!(RequestSpec::try_new("", vec![], 0).is_err());
        assert!(RequestSpec::try_new("GET", vec![("x".into(), "a\r\nb".into())], 0).is_err());
        assert!(RequestSpec::try_new("GET", vec![("a b".into(), "v".into())], 0).is_err());
    }

    #[test]
    fn header_parsing() {
        assert_eq!(RequestSpec::parse_header("x-a: 1"), Ok(("x-a".into(), "1".into())));
        assert_eq!(RequestSpec::parse_header("x-a:1:2"), Ok(("x-a".into(), "1:2".into())));
        assert!(RequestSpec::parse_header("novalue").is_err());
        assert!(RequestSpec::parse_header(": v").is_err());
    }
}
