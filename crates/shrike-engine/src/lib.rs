//! Shrike's load engine, as a library: [`run`] takes a [`RunSpec`] (and a stop handle and
//! optional observers) and returns a `RunResult`. The CLI calls it once; capacity search,
//! sweeps, replay and the service call it as often as they need ([`Run`] adds timed sessions).
//!
//! A run is N workers. Each worker is one OS thread with its own single-threaded tokio runtime
//! and owns everything it touches on the hot path: connections, schedule, statistics, counters.
//! Nothing is shared between workers but a stop signal; results merge exactly at the end.
//!
//! Where things live, by file:
//! - `run.rs`: the library entry point; `prepare.rs`: a spec resolved (hosts, TLS, request
//!   files) before anything is sent; `runner.rs`: the worker threads and their start gate.
//! - `worker.rs`: the one worker loop, composed from policies rather than written per mode.
//! - [`schedule`]: what is due next, as (due time, session, request): the rate plan's
//!   [`schedule::rate`] (over the [`pacer`]) or timed sessions ([`schedule::sessions`]), a
//!   session optionally holding a connection of its own.
//! - [`protocol`]: the seam for one-request-at-a-time protocols (connect, one exchange,
//!   close, with a protocol-neutral outcome). HTTP/1.1 is the engine's own ([`h1`] is its
//!   hand-written codec); raw TCP and MySQL replay implement it in shrike-replay, fed through
//!   [`feed`].
//! - [`pool`]: which connection carries each request, and what happens when none can (closed
//!   loop waits and records `sequencer.blocking`; open loop counts overflow). `pool/cx.rs` is
//!   the narrow context pools and protocols get; `pool/serial.rs` serves any one-at-a-time
//!   protocol; `pool/mux.rs` multiplexes HTTP/2 (`pool/h2`, a client connection on
//!   `shrike-h2`'s codec: the `h2` crate cost measurably more per request) and HTTP/3 (`h3`
//!   over `quinn`).
//! - [`requests`]: what each request sends (one request or a list, templates rendered only
//!   where they appear); [`target`]: a URL parsed once; [`tls`], `transport.rs` and
//!   `stamped.rs`: TCP and TLS (rustls) connections, reads stamped by the kernel; [`tunnel`]:
//!   `CONNECT` tunnels through a proxy over HTTP/1.1, HTTP/2 and HTTP/3.
//! - [`pacer`]: when each request is due; `idle.rs`: how a worker waits for it.
//! - [`stop`]: the stop signal; [`telemetry`]: observers of a run, which never change it;
//!   [`trace`]: Zipkin spans of sampled requests.
//!
//! The workspace's map, the path of a flag to the socket and the invariants are in
//! docs/ARCHITECTURE.md.
//!
//! Every request carries its scheduled time, so the engine records both service time
//! (`request_to_response`) and coordinated-omission-free latency (`scheduled_to_response`).

pub mod config;
pub mod feed;
pub mod h1;
mod idle;
pub mod pacer;
pub mod pool;
mod prepare;
pub mod protocol;
pub mod requests;
mod run;
pub mod runner;
pub mod schedule;
mod stamped;
pub mod stop;
pub mod target;
pub mod telemetry;

pub mod tls;
pub mod trace;
pub(crate) mod transport;
pub mod tunnel;
pub mod worker;

pub use config::{Body, ConfigError, Endpoint, RequestSpec};
pub use pacer::RateHandle;
pub use requests::remote::{RemoteItem, RemoteRequest, RemoteStream};
pub use requests::RequestSource;
pub use run::{run, Ready, Run, RunError};
pub use runner::EngineError;
pub use schedule::sessions::SessionPlan;
pub use shrike_spec::{
    AddressFamily, Concurrency, H1Reuse, IdleStrategy, Predicate, PredicateKind, Protocol, RunSpec,
    SpecEdit, SpecError, StreamLimits, TlsOptions, TlsVersion,
};
pub use stop::StopHandle;
pub use target::Target;
pub use telemetry::{Observer, Sample, Telemetry, TelemetryConfig};
pub use tls::{TlsClient, TlsError};
