//! Shrike's test server: a Nighthawk-compatible origin for load tests.
//!
//! Every response is shaped by server-wide defaults ([`ServerConfig`]) that each request may
//! override with an `x-nighthawk-test-server-config` header, using Nighthawk's field names:
//! `response_body_size`, `response_headers`, `echo_request_headers`, `static_delay`,
//! `concurrency_based_linear_delay` and `emit_previous_request_delta_in_response_header`, plus
//! Shrike's `response_status`. A bad header gets a 500 that names the problem, and the
//! connection stays usable.
//!
//! The crate has two halves: the protocol-neutral behaviour (configuration, header merging,
//! delays, server-wide counters) and the HTTP/1.1 front end, a hand-written codec built for low
//! CPU per request: pipelined requests are parsed in place and answered with one write, bodies
//! are served from one shared buffer of `a` bytes and request bodies are counted, never stored.
//!
//! [`run`] takes a bound listener and a shutdown future, so the library never binds ports or
//! reads signals itself.

mod behaviour;
mod config;
mod date;
mod h1;
mod headers;
mod relaxed;
mod server;
mod state;
mod status;

pub use config::{
    ConfigError, ServerConfig, ServerConfigBuilder, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_RESPONSE_BODY_SIZE,
};
pub use headers::ResponseHeader;
pub use server::run;

/// The request header that carries per-request configuration.
pub const CONFIG_HEADER: &str = behaviour::CONFIG_HEADER;
