//! The library entry point: a [`RunSpec`] in, a [`RunResult`] out.
//!
//! Everything that drives the engine calls [`run`]: the CLI once, capacity search and sweeps in
//! a loop, the service per request. Preparing (resolving, loading, encoding) happens first, so
//! a bad spec is an [`RunError::Spec`] naming the field before any load is sent; then the
//! workers run until the spec's end or `stop`, and the result carries the spec as its
//! `options`, the merged statistics, how the run ended and the errors it saw.

use shrike_spec::{RunSpec, SpecError};
use shrike_stats::RunResult;

use crate::runner::{self, EngineError};
use crate::stop::StopHandle;
use crate::telemetry::Telemetry;

/// Why a run produced no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The spec cannot run here (a host that does not resolve, an unreadable file, …).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The engine could not start or lost every worker.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs `spec` to completion (or until `stop`), blocking the calling thread. Signals are the
/// caller's business: it requests stops through `stop`. `telemetry`'s observers watch the run
/// live without changing it.
pub fn run(
    spec: &RunSpec,
    stop: &StopHandle,
    telemetry: Option<Telemetry>,
) -> Result<RunResult, RunError> {
    let cfg = crate::prepare::prepare(spec)?;
    // What only encoding finds (e.g. a host header that is no valid HTTP/2 :authority) is a
    // problem of the requests the spec describes.
    let requests = runner::encode(&cfg).map_err(|e| SpecError::invalid("request_options", e))?;
    let out = runner::execute(cfg, requests, stop.clone(), telemetry)?;
    let mut result = RunResult::new(spec.to_json(), out.workers, out.termination);
    result.intervals = out.intervals;
    result.errors = out.errors;
    Ok(result)
}

/// Checks that `spec` can run here (resolves hosts, reads files, builds TLS, encodes
/// requests) without sending anything.
pub fn check(spec: &RunSpec) -> Result<(), SpecError> {
    let cfg = crate::prepare::prepare(spec)?;
    runner::encode(&cfg).map(|_| ()).map_err(|e| SpecError::invalid("request_options", e))
}
