//! Shrike's test server: a Nighthawk-compatible origin for load tests, over HTTP/1.1 and HTTP/2,
//! in plaintext or TLS, and HTTP/3 over QUIC.
//!
//! Every response is shaped by server-wide defaults ([`ServerConfig`]) that each request may
//! override with an `x-nighthawk-test-server-config` header, using Nighthawk's field names:
//! `response_body_size`, `response_headers`, `echo_request_headers`, `static_delay`,
//! `concurrency_based_linear_delay` and `emit_previous_request_delta_in_response_header`, plus
//! Shrike's `response_status`, random delays, paced (chunked) bodies, fault injection (resets,
//! truncation, stalls, injected statuses) and server-side stats headers; the full table is in
//! the `behaviour` module and the README. The same JSON sets the server's defaults
//! ([`ServerConfigBuilder::defaults_json`]), which each header overrides field by field. A bad
//! header gets a 500 that names the problem, and the connection stays usable. Delays sleep on a
//! timerfd with microsecond precision, and an optional endpoint
//! ([`ServerConfigBuilder::stats_path`]) serves the server's own counts as JSON.
//!
//! The crate has four parts: the protocol-neutral behaviour (configuration, header merging,
//! delays, server-wide counters); the HTTP/1.1 front end, a hand-written codec built for low
//! CPU per request (pipelined requests are parsed in place and answered with one write); the
//! HTTP/2 front end, a connection state machine on the codec the load generator's client uses
//! (`shrike-h2`: frames, HPACK, Huffman); and the HTTP/3 front end on `h3` and `quinn`. All serve bodies from one shared buffer of `a` bytes and count
//! request bodies without storing them. A plaintext port serves HTTP/1.1 and HTTP/2 (by prior
//! knowledge); with [`TlsConfig`] the protocol is negotiated by ALPN, and a UDP socket on the
//! same port adds HTTP/3.
//!
//! [`run`] takes a bound listener and a shutdown future, and [`run_with_udp`] a UDP socket as
//! well, so the library never binds ports or reads signals itself.

mod behaviour;
mod config;
mod conn;
mod date;
pub mod envoy;
mod h1;
mod headers;
mod http2;
mod http3;
mod limits;
mod proxy;
mod rewind;
mod server;
mod state;
mod stats;
mod status;
mod timer;
mod tls;

pub use config::{
    ConfigError, ProxyConfig, ServerConfig, ServerConfigBuilder, DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_RESPONSE_BODY_SIZE, DEFAULT_TLS_HANDSHAKE_TIMEOUT,
};
pub use headers::ResponseHeader;
pub use limits::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_REQUEST_HEADERS, DEFAULT_MAX_REQUEST_HEADER_BYTES,
    DEFAULT_REQUEST_HEADER_TIMEOUT, MAX_REQUEST_HEADERS_LIMIT, MAX_REQUEST_HEADER_BYTES_LIMIT,
    MIN_REQUEST_HEADER_BYTES,
};

/// Entry points for the fuzz targets in `fuzz/` (not an API: hidden, and free to change).
#[doc(hidden)]
pub mod fuzzing {
    /// An HTTP/1.1 request as the server reads it: head, framing, chunked body.
    pub fn request(data: &[u8]) {
        crate::h1::fuzz_request(data);
    }

    /// HTTP/2 frames as a client sends them, after the preface and an empty SETTINGS frame:
    /// read in chunks of the size the first byte picks, with the timers fired after each.
    pub fn h2_request(data: &[u8]) {
        crate::http2::fuzz_client_bytes(data);
    }
}
pub use server::{run, run_with_udp};
pub use state::ServerTotals;
pub use tls::{SelfSignedCert, TlsConfig, TlsError};

/// The request header that carries per-request configuration.
pub const CONFIG_HEADER: &str = behaviour::CONFIG_HEADER;
