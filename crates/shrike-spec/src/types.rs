//! The small value types a run spec is made of: protocol, pool and pacing policies, address
//! family, TLS options, worker count and verbosity. Each parses the names users type (and the
//! upper-case enum names Nighthawk's proto3 JSON writes) and names itself back.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;

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
    /// Block in epoll on a timerfd armed shortly before the due time (by the wake-up delay the
    /// worker has learnt), then spin the last few µs: about 10 µs of lateness and no CPU while
    /// idle. The default (Nighthawk's is spin, which on a small machine steals the core
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

/// How a worker's TCP connections (HTTP/1.1, HTTP/2, raw TCP; plain or TLS) do their I/O.
/// QUIC and MySQL keep their libraries' own sockets either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoBackend {
    /// Readiness through tokio's epoll, a system call per read and per write.
    #[default]
    Epoll,
    /// One io_uring per worker: each loop turn's sends and receives, for every connection,
    /// go to the kernel in one system call (Linux 5.19+; 6.1+ for the cheaper task-run mode).
    IoUring,
}

impl IoBackend {
    pub fn parse(s: &str) -> Option<IoBackend> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "epoll" => Some(IoBackend::Epoll),
            "io_uring" | "iouring" | "uring" => Some(IoBackend::IoUring),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Epoll => "epoll",
            IoBackend::IoUring => "io_uring",
        }
    }
}

/// Which resolved addresses a run may connect to (Nighthawk's `--address-family`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddressFamily {
    /// Every address, IPv4 first.
    #[default]
    Auto,
    V4,
    V6,
}

impl AddressFamily {
    pub fn parse(s: &str) -> Option<AddressFamily> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(AddressFamily::Auto),
            "v4" => Some(AddressFamily::V4),
            "v6" => Some(AddressFamily::V6),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AddressFamily::Auto => "auto",
            AddressFamily::V4 => "v4",
            AddressFamily::V6 => "v6",
        }
    }
}

/// A TLS protocol version a user can pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// Parses `1.2` / `1.3` (also `tls1.2`, `TLSv1.3`).
    pub fn parse(s: &str) -> Option<TlsVersion> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("tlsv").or_else(|| t.strip_prefix("tls")).unwrap_or(&t);
        match t {
            "1.2" => Some(TlsVersion::Tls12),
            "1.3" => Some(TlsVersion::Tls13),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

/// What the user asked for; [`TlsClient::build`] turns it into a validated rustls config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Extra trust roots (PEM), added to the system's.
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate (handshake signatures are still verified).
    pub insecure: bool,
    /// Server name sent as SNI and checked against the certificate. Default: the URL host.
    pub sni: Option<String>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// rustls cipher suite names (e.g. `TLS13_AES_128_GCM_SHA256`); empty: the defaults.
    pub cipher_suites: Vec<String>,
    pub no_session_resumption: bool,
}

impl Protocol {
    /// Parses `http1`, `http2`, `http3` (Nighthawk's JSON writes `HTTP1` …).
    pub fn parse(s: &str) -> Option<Protocol> {
        match s.trim().to_ascii_lowercase().as_str() {
            "http1" => Some(Protocol::Http1),
            "http2" => Some(Protocol::Http2),
            "http3" => Some(Protocol::Http3),
            _ => None,
        }
    }
}

impl H1Reuse {
    /// Parses `mru` or `lru` (any case: Nighthawk's JSON writes `MRU`).
    pub fn parse(s: &str) -> Option<H1Reuse> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mru" => Some(H1Reuse::Mru),
            "lru" => Some(H1Reuse::Lru),
            _ => None,
        }
    }
}

/// How many workers a run has (Nighthawk's `--concurrency`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concurrency {
    /// One per usable CPU of the machine that runs it (affinity and cgroup quota honoured).
    Auto,
    Workers(NonZeroUsize),
}

impl Concurrency {
    pub fn parse(s: &str) -> Option<Concurrency> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Some(Concurrency::Auto);
        }
        s.parse::<usize>().ok().and_then(NonZeroUsize::new).map(Concurrency::Workers)
    }

    /// The worker count on this machine.
    pub fn workers(self) -> NonZeroUsize {
        match self {
            Concurrency::Auto => std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            Concurrency::Workers(n) => n,
        }
    }

    /// As Nighthawk writes it: `"auto"` or the number, as a string.
    pub fn name(self) -> String {
        match self {
            Concurrency::Auto => "auto".into(),
            Concurrency::Workers(n) => n.to_string(),
        }
    }
}

/// Log verbosity (Nighthawk's `--verbosity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
    Critical,
}

impl Verbosity {
    pub const ALL: [Verbosity; 6] = [
        Verbosity::Trace,
        Verbosity::Debug,
        Verbosity::Info,
        Verbosity::Warn,
        Verbosity::Error,
        Verbosity::Critical,
    ];

    pub fn parse(s: &str) -> Option<Verbosity> {
        let s = s.trim();
        Self::ALL.into_iter().find(|v| v.name().eq_ignore_ascii_case(s))
    }

    pub fn name(self) -> &'static str {
        match self {
            Verbosity::Trace => "trace",
            Verbosity::Debug => "debug",
            Verbosity::Info => "info",
            Verbosity::Warn => "warn",
            Verbosity::Error => "error",
            Verbosity::Critical => "critical",
        }
    }
}

/// QUIC flow-control windows for HTTP/3 (Nighthawk's `http3_protocol_options`); `None`: the
/// engine's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Http3Options {
    /// Bytes a server may send ahead on one stream (`initial_stream_window_size`).
    pub stream_window: Option<u32>,
    /// Bytes a server may send ahead on the connection (`initial_connection_window_size`).
    pub connection_window: Option<u32>,
}

/// Zipkin tracing (Nighthawk's `--trace`): a span per sampled request.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpec {
    /// As given: `zipkin://HOST:PORT/api/v2/spans`.
    pub uri: String,
    /// `HOST:PORT` of the collector.
    pub collector: String,
    /// The collector's span endpoint (`/api/v2/spans`).
    pub path: String,
    /// The fraction of requests traced, in (0, 1].
    pub sample_rate: f64,
}
