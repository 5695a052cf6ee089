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
use crate::schedule::sessions::SessionPlan;
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
    let mut run = Run::new(spec);
    if let Some(t) = telemetry {
        run = run.observed(t);
    }
    run.execute(stop)
}

/// A run being set up: the spec, and what else drives it. [`run`] is the common case.
#[derive(Debug)]
pub struct Run<'a> {
    spec: &'a RunSpec,
    telemetry: Option<Telemetry>,
    sessions: Option<Vec<SessionPlan>>,
}

impl<'a> Run<'a> {
    pub fn new(spec: &'a RunSpec) -> Run<'a> {
        Run { spec, telemetry: None, sessions: None }
    }

    /// Live observers of the run.
    pub fn observed(mut self, telemetry: Telemetry) -> Run<'a> {
        self.telemetry = Some(telemetry);
        self
    }

    /// Plays these timed sessions instead of the spec's rate plan: session `k` on worker
    /// `k mod N`, each request sending the request-source entry it names. The spec's duration
    /// still bounds the run; with `no_duration` it ends when every session is done.
    pub fn sessions(mut self, plans: Vec<SessionPlan>) -> Run<'a> {
        self.sessions = Some(plans);
        self
    }

    /// Prepares and runs, blocking the calling thread until the run ends.
    pub fn execute(self, stop: &StopHandle) -> Result<RunResult, RunError> {
        let cfg = crate::prepare::prepare(self.spec)?;
        // What only encoding finds (e.g. a host header that is no valid HTTP/2 :authority) is
        // a problem of the requests the spec describes.
        let requests =
            runner::encode(&cfg).map_err(|e| SpecError::invalid("request_options", e))?;
        if let Some(bad) = self
            .sessions
            .iter()
            .flatten()
            .flat_map(|s| &s.requests)
            .find(|r| r.1 as usize >= cfg.requests.entries().len())
        {
            return Err(RunError::Spec(SpecError::must(
                "sessions",
                format!(
                    "name request {} of a request source with {}",
                    bad.1,
                    cfg.requests.entries().len()
                ),
            )));
        }
        let out = runner::execute(cfg, requests, self.sessions, stop.clone(), self.telemetry)?;
        let mut result = RunResult::new(self.spec.to_json(), out.workers, out.termination);
        result.intervals = out.intervals;
        result.errors = out.errors;
        Ok(result)
    }
}

/// Checks that `spec` can run here (resolves hosts, reads files, builds TLS, encodes
/// requests) without sending anything.
pub fn check(spec: &RunSpec) -> Result<(), SpecError> {
    let cfg = crate::prepare::prepare(spec)?;
    runner::encode(&cfg).map(|_| ()).map_err(|e| SpecError::invalid("request_options", e))
}
