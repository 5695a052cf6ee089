//! Shrike beyond one machine: the `shrike.v1` gRPC execution service and the coordinator
//! that runs one test on many services.
//!
//! - [`service`]: the service's RPCs (Run, Cancel, Replay, Capacity, Sweep) over the engine's
//!   and the planners' library calls; `plans.rs` runs Capacity and Sweep.
//! - [`jobs_stream`]: a Replay call's streamed jobs file, read as the replay goes.
//! - [`server`]: serving it on a listener with health, reflection and authentication.
//! - [`coordinator`]: one run on many services, merged exactly as it goes.
//! - [`runners`]: the planners' trials run on a fleet or on a Nighthawk service.
//! - [`policy`]: what a remote client may run: the target allowlist, per-run limits, options
//!   refused remotely.
//! - [`convert`]: between wire messages and Shrike's types (exact histograms both ways).
//! - [`nighthawk`]: Nighthawk's gRPC API (`ExecutionStream`, the request source), served and
//!   spoken.
//!
//! The proto is `proto/shrike/v1/shrike.proto` at the workspace root, compiled at build time.

pub mod convert;
pub mod coordinator;
pub mod jobs_stream;
pub mod nighthawk;
mod plans;
pub mod policy;
pub mod runners;
pub mod server;
pub mod service;

/// The generated `shrike.v1` messages, client and server.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("shrike.v1");
}
