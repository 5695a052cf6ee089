//! Shrike's run spec: everything a run is, as one typed, validated value ([`RunSpec`]).
//!
//! The CLI's flags, a spec file, a stored result's `options`, and the code of the commands
//! built on the engine (capacity search, sweeps, replay, the service) all describe a run the
//! same way. Code changes a spec through typed edits ([`RunSpec::edit`], [`SpecEdit`]: the
//! command line maps each flag to one); JSON is only for files and the wire ([`json`]). Both
//! end in one resolver and one validator ([`given`]) whose errors name the option, by the
//! names of one table ([`names`]). The JSON form ([`RunSpec::to_json`]) is Nighthawk's
//! `CommandLineOptions` in proto3 JSON plus Shrike's own options, and it is what a result
//! stores as `options`, so any result can be re-run exactly and read back as typed data.
//!
//! - [`spec`]: [`RunSpec`] and its parts; [`edit`]: typed changes; [`json`]: reading (proto
//!   field names or lowerCamelCase) and writing (proto field names).
//! - [`plan`]: rate plans (constant, ramp, stages) and their planned-count integral.
//! - [`types`]: protocol, pool and pacing policies, TLS options, worker count, verbosity.
//! - [`predicate`]: failure and termination predicates.
//! - [`shard`]: one share of a run split over N processes.
//! - [`url`]: target URL syntax; [`format`]: output format names.
//!
//! This crate does no I/O: resolving hosts and reading files happen when the engine prepares
//! a run.

// The canonical JSON form is one `json!` literal with every option in it.
#![recursion_limit = "256"]

pub mod edit;
pub mod error;
pub mod format;
pub mod given;
pub mod json;
pub mod names;
mod nighthawk;
pub mod plan;
pub mod predicate;
pub mod shard;
pub mod spec;
pub mod tunnel;
pub mod types;
pub mod url;

pub use edit::SpecEdit;
pub use error::SpecError;
pub use format::{OutputFormat, UnknownFormat};
pub use given::{is_token_byte, parse_header, Rps, IO_BACKEND_ENV};
pub use names::Opt;
pub use nighthawk::{grpc_authority, openssl_name, TLS13_SUITES};
pub use plan::{Rate, RatePlan, Stage, StagesError};
pub use predicate::{Predicate, PredicateError, PredicateKind};
pub use shard::Shard;
pub use spec::{RateSpec, RequestsSpec, RunSpec, TargetSpec, TelemetrySpec};
pub use tunnel::TunnelSpec;
pub use types::{
    AddressFamily, Concurrency, H1Reuse, Http3Options, IdleStrategy, IoBackend, Protocol,
    StreamLimits, TlsOptions, TlsVersion, TraceSpec, Verbosity,
};
pub use url::{Scheme, Url, UrlError};

#[cfg(test)]
mod tests;
