//! A prepared run: a [`shrike_spec::RunSpec`] with its hosts resolved, TLS clients built and
//! request lists loaded ([`crate::prepare`]). Only the engine builds one; callers describe a
//! run with a `RunSpec`.

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shrike_spec::{is_token_byte, Predicate, RatePlan};
pub use shrike_spec::{H1Reuse, IdleStrategy, IoBackend, Protocol, StreamLimits};

use crate::requests::template::{Template, TemplateError};
use crate::requests::RequestSource;
use crate::target::Target;
use crate::tls::TlsClient;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("invalid request method {0:?}: must be an HTTP token such as GET or POST")]
    Method(String),
    #[error(
        "invalid request header {0:?}: expected 'name: value' with a token name and no line breaks"
    )]
    Header(String),
    #[error("invalid request path {0:?}: it must start with '/' and contain no whitespace or control characters")]
    Path(String),
    #[error("in {0:?}: {1}")]
    Template(String, TemplateError),
    #[error("expected status {0} is not an HTTP status code (100-999)")]
    Status(u16),
}

/// A request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// `n` bytes of 'a' (Nighthawk's `request_body_size`).
    Size(u32),
    /// Text that may hold placeholders (an inline or JSON body); rendered per request when it
    /// does.
    Text(Arc<str>),
    /// Bytes sent exactly as given (a body file): never templated, so binary bodies are safe.
    Bytes(Arc<[u8]>),
}

impl Body {
    /// The size when the body is fixed (no placeholders).
    pub fn len(&self) -> usize {
        match self {
            Body::Size(n) => *n as usize,
            Body::Text(t) => t.len(),
            Body::Bytes(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body as a template: literal unless it is text with placeholders.
    pub(crate) fn template(&self) -> Template {
        match self {
            Body::Size(n) => Template::literal(&vec![b'a'; *n as usize]),
            // Validated when the spec was built.
            Body::Text(t) => Template::parse(t).unwrap_or_else(|_| Template::literal(t.as_bytes())),
            Body::Bytes(b) => Template::literal(b),
        }
    }
}

/// One request, before encoding: the single request of a plain run, or one entry of a request
/// list. Paths, header values and text bodies may hold placeholders ([`crate::requests`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    method: String,
    headers: Vec<(String, String)>,
    body: Body,
    /// Replaces the endpoint's path.
    path: Option<String>,
    /// Sent only to this endpoint (`cfg.endpoints[i]`) rather than round robin over all.
    endpoint: Option<usize>,
    /// Statuses that count as expected; any other counts in `benchmark.expectation_mismatch`.
    expect: Option<Vec<u16>>,
    /// Where the request was defined (`file:line`), for messages.
    origin: Option<String>,
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
            let t =
                Template::parse(v).map_err(|e| ConfigError::Template(format!("{k}: {v}"), e))?;
            if t.choice_options().any(|o| o.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0)) {
                return Err(ConfigError::Header(format!("{k}: {v}")));
            }
        }
        Ok(RequestSpec {
            method: method.to_ascii_uppercase(),
            headers,
            body: Body::Size(body_size),
            path: None,
            endpoint: None,
            expect: None,
            origin: None,
        })
    }

    /// Replaces the body. Text bodies are checked for valid placeholders.
    pub fn with_body(mut self, body: Body) -> Result<RequestSpec, ConfigError> {
        if let Body::Text(t) = &body {
            Template::parse(t).map_err(|e| ConfigError::Template("the body".into(), e))?;
        }
        self.body = body;
        Ok(self)
    }

    /// Sends the request to `path` (path and query, may hold placeholders) instead of the
    /// endpoint's path.
    pub fn with_path(mut self, path: &str) -> Result<RequestSpec, ConfigError> {
        let bad_byte = |b: u8| b.is_ascii_whitespace() || b.is_ascii_control();
        let t = Template::parse(path).map_err(|e| ConfigError::Template(path.into(), e))?;
        if !path.starts_with('/')
            || path.bytes().any(bad_byte)
            || t.choice_options().any(|o| o.iter().any(|&b| bad_byte(b)))
        {
            return Err(ConfigError::Path(path.to_string()));
        }
        self.path = Some(path.to_string());
        Ok(self)
    }

    /// Binds the request to one endpoint (an index into the run's endpoints).
    pub fn with_endpoint(mut self, endpoint: usize) -> RequestSpec {
        self.endpoint = Some(endpoint);
        self
    }

    /// The statuses a response may have; others count as expectation mismatches.
    pub fn with_expect(mut self, statuses: Vec<u16>) -> Result<RequestSpec, ConfigError> {
        if let Some(&s) = statuses.iter().find(|s| !(100..=999).contains(*s)) {
            return Err(ConfigError::Status(s));
        }
        self.expect = Some(statuses);
        Ok(self)
    }

    /// Names where the request was defined (`file:line`).
    pub fn with_origin(mut self, origin: String) -> RequestSpec {
        self.origin = Some(origin);
        self
    }

    /// Adds a header unless the request already has one of that name (case-insensitive).
    pub fn with_default_header(mut self, k: &str, v: &str) -> Result<RequestSpec, ConfigError> {
        if !self.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)) {
            let mut h = RequestSpec::try_new("GET", vec![(k.to_string(), v.to_string())], 0)?;
            self.headers.append(&mut h.headers);
        }
        Ok(self)
    }

    /// Parses a raw `name: value` header as a user writes it (the run spec's parser).
    pub fn parse_header(raw: &str) -> Result<(String, String), ConfigError> {
        shrike_spec::parse_header(raw).ok_or_else(|| ConfigError::Header(raw.to_string()))
    }

    pub fn method(&self) -> &str {
        &self.method
    }
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
    /// The body's size when fixed; for a templated text body, the size of its source text.
    pub fn body_size(&self) -> u32 {
        u32::try_from(self.body.len()).unwrap_or(u32::MAX)
    }
    pub fn body(&self) -> &Body {
        &self.body
    }
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
    pub fn endpoint(&self) -> Option<usize> {
        self.endpoint
    }
    pub fn expect(&self) -> Option<&[u16]> {
        self.expect.as_deref()
    }
    pub fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }

    /// Whether any part differs from request to request.
    pub fn is_templated(&self) -> bool {
        let t = |s: &str| Template::parse(s).is_ok_and(|t| t.has_placeholders());
        self.path.as_deref().is_some_and(t)
            || self.headers.iter().any(|(_, v)| t(v))
            || matches!(&self.body, Body::Text(b) if t(b))
    }
}

/// One server requests go to: its URL and, for `https://`, its TLS client.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub target: Target,
    /// Required for `https://` targets.
    pub tls: Option<TlsClient>,
}

/// Everything a run needs, resolved. Rates and connection counts are per worker, as in
/// Nighthawk.
#[derive(Clone, Debug)]
pub(crate) struct EngineConfig {
    /// Where requests go: one endpoint for a URL, or several (Nighthawk's multi-target mode)
    /// that requests rotate over round robin. Each endpoint has its own connection pool with
    /// the limits below.
    pub endpoints: Vec<Endpoint>,
    /// What to send: one request, or a list used round robin ([`RequestSource`]).
    pub requests: RequestSource,
    pub protocol: Protocol,
    pub streams: StreamLimits,
    pub workers: NonZeroUsize,
    /// Per-worker request rate over time: constant, ramped, staged, or unpaced.
    pub plan: RatePlan,
    pub idle: IdleStrategy,
    pub io_backend: IoBackend,
    /// An idle worker sleeps this long before reading what arrived (`--read-coalesce`).
    pub read_coalesce: Option<Duration>,
    /// How late a release may be: the pacer's idle policy when set (`crate::idle::Budget`).
    pub max_lateness: Option<Duration>,
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
    /// Requests each worker sends at most (`total_requests` split over the workers).
    pub per_worker_requests: Option<Vec<u64>>,
    /// Open loop never waits for the pool: a request that finds no capacity is counted in
    /// `benchmark.pool_overflow` and dropped. Closed loop waits (`sequencer.blocking`).
    pub open_loop: bool,
    /// Connect every connection before the first request is scheduled.
    pub prefetch_connections: bool,
    /// Resend, once and counted (`upstream_rq_retry`), a request whose send got no answer and
    /// may safely be sent again.
    pub retry_unanswered: bool,
    /// Each worker sends one request before the run starts (Nighthawk's `--simple-warmup`):
    /// it opens a connection and warms caches. Its counters stay in the result, as in
    /// Nighthawk; its latency does not.
    pub warmup: bool,
    /// Wall-clock time at which the run starts, so several processes can start together.
    pub start_at: Option<SystemTime>,
    /// Source address for outgoing connections (port chosen by the kernel).
    pub bind_address: Option<IpAddr>,
    /// Every connection is a CONNECT tunnel through this proxy (`tunnel_options`).
    pub tunnel: Option<std::sync::Arc<crate::tunnel::Tunnel>>,
    /// This process's share of a run split over several ([`shrike_spec::Shard`]).
    pub shard: Option<shrike_spec::Shard>,
    pub predicates: Vec<Predicate>,
    /// Zipkin tracing of sampled requests.
    pub trace: Option<crate::trace::TraceConfig>,
    /// Changes to the rate while the run goes on (a fleet re-spreading a lost share).
    pub rate: Option<crate::pacer::RateHandle>,
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
