//! `shrike serve`'s per-connection limits: timeouts for slow and idle clients, header caps and
//! the request cap. The server library validates them; this names the flag in its errors.

use clap::Args;
use shrike_server::{
    ConfigError, ServerConfigBuilder, DEFAULT_MAX_REQUEST_HEADERS, DEFAULT_MAX_REQUEST_HEADER_BYTES,
};

use crate::args::{flag_duration, usage};

/// Per-connection limits against abusive or forgetful clients.
#[derive(Args, Debug)]
pub struct LimitArgs {
    /// Time a client has to send a complete request head, from its first byte (a new
    /// connection that sends nothing is idle: --idle-timeout). Past it HTTP/1.1 answers 408 and
    /// closes, HTTP/2 sends GOAWAY (before its first request). Counted as
    /// limits.header_timeouts.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub request_header_timeout: String,
    /// How long a connection may wait for its first or next request (HTTP/2: with no stream
    /// open) before it is closed (HTTP/2: GOAWAY); HTTP/3 uses it as QUIC's idle timeout.
    /// Counted as limits.idle_timeouts.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub idle_timeout: String,
    /// Most header fields in one request (1-1024); more get 431 Request Header Fields Too
    /// Large (HTTP/1.1 then closes). Counted as limits.too_many_headers.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_HEADERS, value_name = "N")]
    pub max_request_headers: usize,
    /// Largest request head in bytes (1024-1048576): HTTP/1.1's request and header lines,
    /// HTTP/2's and HTTP/3's header list size (each field plus 32). Larger get 431. Counted as
    /// limits.headers_too_large.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_HEADER_BYTES, value_name = "BYTES")]
    pub max_request_header_bytes: usize,
    /// Close each connection after N requests, as nginx's keepalive_requests: HTTP/1.1's Nth
    /// response says 'connection: close', HTTP/2 and HTTP/3 send GOAWAY after the Nth. Counted
    /// as limits.max_requests_reached [default: no cap].
    #[arg(long, value_name = "N")]
    pub max_requests_per_connection: Option<u64>,
}

impl LimitArgs {
    pub(super) fn apply(
        &self,
        builder: ServerConfigBuilder,
    ) -> anyhow::Result<ServerConfigBuilder> {
        let header_timeout = flag_duration("request-header-timeout", &self.request_header_timeout)?;
        Ok(builder
            .request_header_timeout(header_timeout)
            .idle_timeout(flag_duration("idle-timeout", &self.idle_timeout)?)
            .max_request_headers(self.max_request_headers)
            .max_request_header_bytes(self.max_request_header_bytes)
            .max_requests_per_connection(self.max_requests_per_connection))
    }
}

/// A refused limit as a usage error naming its flag: the library's field names are the flags'
/// in snake case.
pub(super) fn explain(e: &ConfigError) -> anyhow::Error {
    match e {
        ConfigError::InvalidLimit { field, why } => {
            usage(format!("--{}: {why}", field.replace('_', "-")))
        }
        other => usage(format!("invalid server configuration: {other}")),
    }
}
