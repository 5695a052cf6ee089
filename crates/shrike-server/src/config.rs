//! Server-wide defaults, validated once at construction.

use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use shrike_stats::duration::DurationError;

use crate::behaviour::{self, Behaviour, Body, Delay};
use crate::headers::{HeaderList, ResponseHeader};
use crate::limits::Limits;
use crate::tls::TlsConfig;

/// Nighthawk's test server answers with 10 bytes when nothing else is asked for.
pub const DEFAULT_RESPONSE_BODY_SIZE: u64 = 10;
/// Cap on request bodies and on configured response bodies.
pub const DEFAULT_MAX_BODY_SIZE: u64 = 4 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: NonZeroUsize = match NonZeroUsize::new(10_000) {
    Some(n) => n,
    None => unreachable!(),
};
/// HTTP/2 streams a client may have open on one connection. h2load users routinely ask for
/// 100+ per connection (`-m`); a lower cap would silently queue them client-side.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: NonZeroU32 = match NonZeroU32::new(1000) {
    Some(n) => n,
    None => unreachable!(),
};
/// How long a client may take to complete the TLS handshake before its connection is closed.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`run`](crate::run) waits for in-flight requests after shutdown before it closes
/// the remaining connections.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A configuration value the server cannot honour. Returned by [`ServerConfigBuilder::build`]
/// and, per request, in the body of the 500 answering a bad `x-nighthawk-test-server-config`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("response_body_size {size} exceeds the server's max body size of {max} bytes")]
    BodySizeTooLarge { size: u64, max: u64 },
    #[error(
        "response_status {0} is out of range: expected 200..=599 \
         (1xx are interim responses and cannot end a request)"
    )]
    InvalidStatus(u64),
    #[error("invalid header name {0:?}: expected an HTTP token such as \"x-foo\"")]
    InvalidHeaderName(String),
    #[error(
        "invalid value for header {name:?}: control characters such as CR and LF are not allowed"
    )]
    InvalidHeaderValue { name: String },
    #[error("header {0:?} is managed by the server (framing or connection control) and cannot be configured")]
    ManagedHeader(String),
    #[error("invalid {field}: {error}")]
    InvalidDuration { field: &'static str, error: DurationError },
    #[error(
        "static_delay, concurrency_based_linear_delay and delay_distribution are mutually \
         exclusive; set one"
    )]
    ConflictingDelays,
    #[error("invalid {field}: {why}")]
    InvalidFault { field: &'static str, why: String },
    #[error("invalid --config: {0}")]
    InvalidDefaults(String),
    #[error("stats path {0:?} must start with '/'")]
    InvalidStatsPath(String),
    #[error("max_connections must be at least 1")]
    ZeroMaxConnections,
    #[error("max_concurrent_streams must be at least 1")]
    ZeroMaxConcurrentStreams,
    #[error("{field}: {why}")]
    InvalidLimit { field: &'static str, why: String },
}

pub(crate) fn validate_status(status: u64) -> Result<u16, ConfigError> {
    match u16::try_from(status) {
        Ok(s @ 200..=599) => Ok(s),
        _ => Err(ConfigError::InvalidStatus(status)),
    }
}

pub(crate) fn validate_body_size(size: u64, max: u64) -> Result<u64, ConfigError> {
    if size > max {
        return Err(ConfigError::BodySizeTooLarge { size, max });
    }
    Ok(size)
}

/// Validated server-wide defaults. Each request may override them field by field with the
/// `x-nighthawk-test-server-config` header.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    response_body_size: u64,
    behaviour: Behaviour,
    stats_path: Option<String>,
    /// The server's own `server: shrike` plus the configured headers, with replace/append
    /// already applied, so requests without a config header reuse it as is.
    headers: HeaderList<'static>,
    echo_request_headers: bool,
    response_status: u16,
    max_body_size: u64,
    max_connections: NonZeroUsize,
    max_concurrent_streams: NonZeroU32,
    drain_timeout: Duration,
    tls: Option<TlsConfig>,
    tls_handshake_timeout: Duration,
    limits: Limits,
    proxy: Option<ProxyConfig>,
}

/// `CONNECT` tunnelling (`shrike serve --connect-proxy`): the destinations it may open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Networks a tunnel may reach (address, prefix length); a destination that resolves
    /// outside every one is refused with 403.
    pub allow: Vec<(std::net::IpAddr, u8)>,
    /// How long opening the connection to the destination may take before 504.
    pub connect_timeout: Duration,
}

impl ProxyConfig {
    /// Whether `ip` is inside one of the allowed networks.
    pub fn allows(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        self.allow.iter().any(|&(net, len)| match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        })
    }
}

impl ServerConfig {
    pub fn builder() -> ServerConfigBuilder {
        ServerConfigBuilder::default()
    }

    pub fn response_body_size(&self) -> u64 {
        self.response_body_size
    }

    pub fn static_delay(&self) -> Duration {
        match self.behaviour.delay {
            Delay::Static(d) => d,
            _ => Duration::ZERO,
        }
    }

    /// The path of the JSON statistics endpoint, when enabled.
    pub fn stats_path(&self) -> Option<&str> {
        self.stats_path.as_deref()
    }

    pub(crate) fn behaviour(&self) -> &Behaviour {
        &self.behaviour
    }

    /// Takes a resolved default plan (from `--config`) as the server's defaults.
    pub(crate) fn adopt(
        &mut self,
        status: u16,
        body: Body,
        headers: Option<HeaderList<'static>>,
        behaviour: Behaviour,
    ) {
        self.response_status = status;
        match body {
            Body::Echo => self.echo_request_headers = true,
            Body::Filler(n) => {
                self.echo_request_headers = false;
                self.response_body_size = n;
            }
        }
        if let Some(headers) = headers {
            self.headers = headers;
        }
        self.behaviour = behaviour;
    }

    /// The headers every response carries unless a request replaces them, in wire order,
    /// excluding the per-response `date`.
    pub fn response_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.entries.iter().map(|(n, v)| (&**n, &**v))
    }

    /// False when a configured `date` header replaced the server's clock-driven one.
    pub fn emits_date(&self) -> bool {
        self.headers.date
    }

    pub fn echo_request_headers(&self) -> bool {
        self.echo_request_headers
    }

    pub fn response_status(&self) -> u16 {
        self.response_status
    }

    pub fn max_body_size(&self) -> u64 {
        self.max_body_size
    }

    pub fn max_connections(&self) -> NonZeroUsize {
        self.max_connections
    }

    pub fn max_concurrent_streams(&self) -> NonZeroU32 {
        self.max_concurrent_streams
    }

    pub fn drain_timeout(&self) -> Duration {
        self.drain_timeout
    }

    /// `CONNECT` tunnelling, when the server is also a proxy.
    pub fn proxy(&self) -> Option<&ProxyConfig> {
        self.proxy.as_ref()
    }

    /// With TLS every connection is TLS; the protocol is chosen by ALPN.
    pub fn tls(&self) -> Option<&TlsConfig> {
        self.tls.as_ref()
    }

    pub fn tls_handshake_timeout(&self) -> Duration {
        self.tls_handshake_timeout
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Time allowed for a complete request head (see `ServerConfigBuilder::request_header_timeout`).
    pub fn request_header_timeout(&self) -> Duration {
        self.limits.header_timeout
    }

    pub fn idle_timeout(&self) -> Duration {
        self.limits.idle_timeout
    }

    pub fn max_request_headers(&self) -> usize {
        self.limits.max_headers
    }

    pub fn max_request_header_bytes(&self) -> usize {
        self.limits.max_header_bytes
    }

    /// Requests served on one connection before it is closed; `None` means no cap.
    pub fn max_requests_per_connection(&self) -> Option<std::num::NonZeroU64> {
        self.limits.max_requests
    }

    pub(crate) fn header_list(&self) -> &HeaderList<'static> {
        &self.headers
    }

    /// This configuration with an `alt-svc` header advertising HTTP/3 on `port` (RFC 7838),
    /// which is how browsers and curl learn to switch. A configured `alt-svc` is kept as is.
    pub(crate) fn with_alt_svc(&self, port: u16) -> ServerConfig {
        let mut config = self.clone();
        let configured =
            config.headers.entries.iter().any(|(n, _)| n.eq_ignore_ascii_case("alt-svc"));
        if !configured {
            let value = format!("h3=\":{port}\"; ma=86400");
            config.headers.apply("alt-svc".into(), value.into(), true);
        }
        config
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            response_body_size: DEFAULT_RESPONSE_BODY_SIZE,
            behaviour: Behaviour::default(),
            stats_path: None,
            headers: base_headers(),
            echo_request_headers: false,
            response_status: 200,
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            tls: None,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            limits: Limits::default(),
            proxy: None,
        }
    }
}

fn base_headers() -> HeaderList<'static> {
    HeaderList { entries: vec![("server".into(), "shrike".into())], date: true }
}

/// Collects settings; [`build`](Self::build) validates them together (the body size is only
/// meaningful against the cap).
#[derive(Debug, Clone)]
pub struct ServerConfigBuilder {
    response_body_size: u64,
    static_delay: Duration,
    defaults_json: Option<String>,
    stats_path: Option<String>,
    headers: Vec<(String, String, bool)>,
    echo_request_headers: bool,
    response_status: u64,
    max_body_size: u64,
    max_connections: usize,
    max_concurrent_streams: u32,
    drain_timeout: Duration,
    tls: Option<TlsConfig>,
    tls_handshake_timeout: Duration,
    limits: RawLimits,
    proxy: Option<ProxyConfig>,
}

/// The builder's unchecked limits; `Limits::try_new` checks them in `build`.
#[derive(Debug, Clone)]
struct RawLimits {
    header_timeout: Duration,
    idle_timeout: Duration,
    max_headers: usize,
    max_header_bytes: usize,
    max_requests: Option<u64>,
}

impl Default for RawLimits {
    fn default() -> Self {
        let d = Limits::default();
        Self {
            header_timeout: d.header_timeout,
            idle_timeout: d.idle_timeout,
            max_headers: d.max_headers,
            max_header_bytes: d.max_header_bytes,
            max_requests: None,
        }
    }
}

impl Default for ServerConfigBuilder {
    fn default() -> Self {
        Self {
            response_body_size: DEFAULT_RESPONSE_BODY_SIZE,
            static_delay: Duration::ZERO,
            defaults_json: None,
            stats_path: None,
            headers: Vec::new(),
            echo_request_headers: false,
            response_status: 200,
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            max_connections: DEFAULT_MAX_CONNECTIONS.get(),
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS.get(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            tls: None,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            limits: RawLimits::default(),
            proxy: None,
        }
    }
}

impl ServerConfigBuilder {
    pub fn response_body_size(mut self, bytes: u64) -> Self {
        self.response_body_size = bytes;
        self
    }

    pub fn static_delay(mut self, delay: Duration) -> Self {
        self.static_delay = delay;
        self
    }

    /// Server-wide defaults as JSON in the config header's shape (every field of
    /// `x-nighthawk-test-server-config`). Applied over the other settings; each request's
    /// header then overrides it field by field.
    pub fn defaults_json(mut self, json: impl Into<String>) -> Self {
        self.defaults_json = Some(json.into());
        self
    }

    /// Serves the statistics JSON at this path (e.g. `/.shrike/stats`); off by default so it
    /// never shadows a path a test uses.
    pub fn stats_path(mut self, path: impl Into<String>) -> Self {
        self.stats_path = Some(path.into());
        self
    }

    /// Sets a header, replacing any earlier header of the same name (the server's own `server`
    /// and `date` included).
    pub fn response_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into(), false));
        self
    }

    /// Adds a header alongside any existing header of the same name.
    pub fn append_response_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.headers.push((name.into(), value.into(), true));
        self
    }

    pub fn echo_request_headers(mut self, echo: bool) -> Self {
        self.echo_request_headers = echo;
        self
    }

    pub fn response_status(mut self, status: u16) -> Self {
        self.response_status = u64::from(status);
        self
    }

    /// Largest accepted request body, and largest response body a configuration may ask for.
    pub fn max_body_size(mut self, bytes: u64) -> Self {
        self.max_body_size = bytes;
        self
    }

    /// Connections served at once, over TCP and (with HTTP/3) over QUIC, each counted apart.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub fn max_concurrent_streams(mut self, streams: u32) -> Self {
        self.max_concurrent_streams = streams;
        self
    }

    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Also a `CONNECT` proxy (HTTP/1.1, HTTP/2 and HTTP/3, and CONNECT-UDP over HTTP/2 and
    /// HTTP/3) to the destinations `proxy` allows.
    pub fn connect_proxy(mut self, proxy: ProxyConfig) -> Self {
        self.proxy = Some(proxy);
        self
    }

    /// Serves TLS on every connection instead of plaintext.
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }

    /// Time a client has to send a complete request head: from accept (after the TLS
    /// handshake) for a connection's first request, from the first byte of each later one.
    /// Past it HTTP/1.1 answers 408 (if part of a head arrived) and closes; HTTP/2 sends GOAWAY
    /// and closes if no request arrived yet. Must be more than zero.
    pub fn request_header_timeout(mut self, timeout: Duration) -> Self {
        self.limits.header_timeout = timeout;
        self
    }

    /// How long a connection may wait between requests (HTTP/2: with no stream open) before
    /// the server closes it; HTTP/3 uses it as QUIC's idle timeout. Must be more than zero.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.limits.idle_timeout = timeout;
        self
    }

    /// Most header fields in one request (1..=1024); more get 431.
    pub fn max_request_headers(mut self, count: usize) -> Self {
        self.limits.max_headers = count;
        self
    }

    /// Largest request head in bytes (1 KiB..=1 MiB): HTTP/1.1's request line and header
    /// lines, HTTP/2's and HTTP/3's header list size (each field plus 32 bytes). Larger get 431.
    pub fn max_request_header_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_header_bytes = bytes;
        self
    }

    /// Closes each connection after this many requests, as nginx's `keepalive_requests`:
    /// HTTP/1.1's Nth response says `connection: close`, HTTP/2 and HTTP/3 send GOAWAY after
    /// the Nth request. At least 1; unset means no cap.
    pub fn max_requests_per_connection(mut self, requests: Option<u64>) -> Self {
        self.limits.max_requests = requests;
        self
    }

    pub fn build(self) -> Result<ServerConfig, ConfigError> {
        let raw = &self.limits;
        let limits = Limits::try_new(
            raw.header_timeout,
            raw.idle_timeout,
            raw.max_headers,
            raw.max_header_bytes,
            raw.max_requests,
        )?;
        let response_body_size = validate_body_size(self.response_body_size, self.max_body_size)?;
        let response_status = validate_status(self.response_status)?;
        let max_connections =
            NonZeroUsize::new(self.max_connections).ok_or(ConfigError::ZeroMaxConnections)?;
        let max_concurrent_streams = NonZeroU32::new(self.max_concurrent_streams)
            .ok_or(ConfigError::ZeroMaxConcurrentStreams)?;
        let mut headers = base_headers();
        for (name, value, append) in self.headers {
            let (name, value) = ResponseHeader::try_new(name, value)?.into_parts();
            headers.apply(name.into(), value.into(), append);
        }
        if let Some(path) = &self.stats_path {
            if !path.starts_with('/') {
                return Err(ConfigError::InvalidStatsPath(path.clone()));
            }
        }
        let config = ServerConfig {
            response_body_size,
            behaviour: Behaviour {
                delay: Delay::from_static(self.static_delay),
                ..Behaviour::default()
            },
            stats_path: self.stats_path,
            headers,
            echo_request_headers: self.echo_request_headers,
            response_status,
            max_body_size: self.max_body_size,
            max_connections,
            max_concurrent_streams,
            drain_timeout: self.drain_timeout,
            tls: self.tls,
            tls_handshake_timeout: self.tls_handshake_timeout,
            limits,
            proxy: self.proxy,
        };
        match &self.defaults_json {
            None => Ok(config),
            Some(json) => behaviour::defaults_from_json(&config, json)
                .map_err(|e| ConfigError::InvalidDefaults(e.detail())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nighthawks() {
        let c = ServerConfig::builder().build().unwrap();
        assert_eq!(c.response_body_size(), 10);
        assert_eq!(c.response_status(), 200);
        assert_eq!(c.max_body_size(), 4_194_304);
        assert_eq!(c.max_connections().get(), 10_000);
        assert_eq!(c.response_headers().collect::<Vec<_>>(), [("server", "shrike")]);
        assert!(c.emits_date());
        let d = ServerConfig::default();
        assert_eq!(d.max_connections(), c.max_connections());
    }

    #[test]
    fn rejects_bad_values() {
        let too_big = ServerConfig::builder().max_body_size(100).response_body_size(101).build();
        assert_eq!(too_big.unwrap_err(), ConfigError::BodySizeTooLarge { size: 101, max: 100 });
        let status = ServerConfig::builder().response_status(42).build();
        assert_eq!(status.unwrap_err(), ConfigError::InvalidStatus(42));
        let conns = ServerConfig::builder().max_connections(0).build();
        assert_eq!(conns.unwrap_err(), ConfigError::ZeroMaxConnections);
        let streams = ServerConfig::builder().max_concurrent_streams(0).build();
        assert_eq!(streams.unwrap_err(), ConfigError::ZeroMaxConcurrentStreams);
        let header = ServerConfig::builder().response_header("connection", "close").build();
        assert!(matches!(header.unwrap_err(), ConfigError::ManagedHeader(_)));
    }

    #[test]
    fn alt_svc_is_added_unless_configured() {
        let c = ServerConfig::default().with_alt_svc(8443);
        let headers: Vec<_> = c.response_headers().collect();
        assert_eq!(headers, [("server", "shrike"), ("alt-svc", "h3=\":8443\"; ma=86400")]);
        let own = ServerConfig::builder().response_header("Alt-Svc", "clear").build().unwrap();
        let own = own.with_alt_svc(8443);
        let kept: Vec<_> = own.response_headers().map(|(_, v)| v).collect();
        assert_eq!(kept, ["shrike", "clear"]);
    }

    #[test]
    fn header_rules() {
        let c = ServerConfig::builder()
            .response_header("server", "nginx")
            .response_header("x-a", "1")
            .append_response_header("x-a", "2")
            .build()
            .unwrap();
        assert_eq!(
            c.response_headers().collect::<Vec<_>>(),
            [("server", "nginx"), ("x-a", "1"), ("x-a", "2")]
        );
    }
}
