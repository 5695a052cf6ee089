//! Shrike's load engine.
//!
//! A run is N workers. Each worker is one OS thread with its own single-threaded tokio runtime
//! and owns everything it touches on the hot path: connections, pacer, statistics, counters.
//! Nothing is shared between workers but a stop signal; results merge exactly at the end.
//!
//! One worker loop ([`worker`]) is composed from policies rather than written once per mode:
//! - **pacer** ([`pacer`]): when each request is *scheduled* to start;
//! - **pool** ([`pool`]): which connection carries it, and what happens when none is free
//!   (closed loop waits and records `sequencer.blocking`; open loop counts overflow);
//! - **protocol**: the pool is the protocol policy (h1: one request per connection at a time;
//!   h2 and h3: multiplexed streams); [`h1`] is the hand-written HTTP/1.1 codec, h2 uses the
//!   `h2` crate, and both run over one transport (TCP or TLS via rustls, see [`tls`]); h3 uses
//!   the `h3` crate over QUIC (`quinn`, with the same rustls configuration);
//! - **request source** ([`requests`]): one request or a list (a request file) walked round
//!   robin, with templates rendered per request only where they appear;
//! - **stop condition** ([`stop`]): duration, predicates, a request count, or a signal.
//!
//! Observers ([`telemetry`]) watch a run live without changing it: workers ship per-tick
//! histograms and counter deltas to a collector thread, which merges them exactly.
//!
//! Every request carries its scheduled time, so the engine records both service time
//! (`request_to_response`) and coordinated-omission-free latency (`scheduled_to_response`).

pub mod config;
pub mod h1;
mod idle;
pub mod pacer;
pub mod pool;
mod prepare;
pub mod requests;
mod run;
pub mod runner;
pub mod stop;
pub mod target;
pub mod telemetry;

pub mod tls;
pub(crate) mod transport;
pub mod worker;

pub use config::{Body, ConfigError, Endpoint, RequestSpec};
pub use requests::RequestSource;
pub use run::{check, run, RunError};
pub use runner::EngineError;
pub use shrike_spec::{
    AddressFamily, H1Reuse, IdleStrategy, Predicate, PredicateKind, Protocol, RunSpec, SpecError,
    StreamLimits, TlsOptions, TlsVersion,
};
pub use stop::StopHandle;
pub use target::Target;
pub use telemetry::{Observer, Sample, Telemetry, TelemetryConfig};
pub use tls::{TlsClient, TlsError};
