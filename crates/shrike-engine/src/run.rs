//! The library entry point: a [`RunSpec`] in, a [`RunResult`] out.
//!
//! Everything that drives the engine calls [`run`]: the CLI once, capacity search and sweeps in
//! a loop, the service per request. Preparing (resolving, loading, encoding) happens first, so
//! a bad spec is an [`RunError::Spec`] naming the field before any load is sent; then the
//! workers run until the spec's end or `stop`, and the result carries the spec as its
//! `options`, the merged statistics, how the run ended and the errors it saw.

use shrike_spec::{RunSpec, SpecError};
use shrike_stats::{RunResult, Unanswered};

use crate::feed::{FedProtocol, Feed};
use crate::pacer::RateHandle;
use crate::runner::{self, EngineError, Sessions};
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
pub struct Run {
    spec: RunSpec,
    telemetry: Option<Telemetry>,
    sessions: Option<Sessions>,
}

impl Run {
    pub fn new(spec: &RunSpec) -> Run {
        Run { spec: spec.clone(), telemetry: None, sessions: None }
    }

    /// Live observers of the run.
    pub fn observed(mut self, telemetry: Telemetry) -> Run {
        self.telemetry = Some(telemetry);
        self
    }

    /// Plays these timed sessions instead of the spec's rate plan: session `k` on worker
    /// `k mod N`, each request sending the request-source entry it names. The spec's duration
    /// still bounds the run; with `no_duration` it ends when every session is done.
    pub fn sessions(mut self, plans: Vec<SessionPlan>) -> Run {
        self.sessions = Some(Sessions::Planned(plans));
        self
    }

    /// Plays sessions fed while the run goes on ([`crate::feed`]: replay), each request sending
    /// its own payload in `protocol` to the spec's target. Build the feed for the spec's
    /// worker count. The spec's duration still bounds the run; with `no_duration` it ends when
    /// the feed is spent and every session done.
    pub fn fed(mut self, feed: Feed, protocol: FedProtocol) -> Run {
        self.sessions = Some(Sessions::Fed(feed, protocol));
        self
    }

    /// Streams the requests from a request source (the spec's `request_source`): one stream
    /// per worker, each request merged over the spec's own. The caller connects to the
    /// source; the spec's rate plan paces the requests, and a worker whose stream ends stops.
    pub fn request_streams(mut self, streams: Vec<crate::requests::remote::RemoteStream>) -> Run {
        self.sessions = Some(Sessions::Streamed(streams));
        self
    }

    /// Resolves hosts, builds TLS, loads request files and encodes every request, without
    /// sending anything: what is wrong is reported as the spec field it comes from.
    pub fn prepare(self) -> Result<Ready, SpecError> {
        let cfg = crate::prepare::prepare(&self.spec)?;
        let streamed = matches!(self.sessions, Some(Sessions::Streamed(_)));
        if self.spec.requests().remote_source.is_some() != streamed {
            return Err(SpecError::must(
                "request_source",
                if streamed {
                    "is missing: request streams were given for a run without one"
                } else {
                    "needs its streams: this command does not connect to request sources \
                     (shrike run and the services do)"
                },
            ));
        }
        // What only encoding finds (e.g. a host header that is no valid HTTP/2 :authority) is
        // a problem of the requests the spec describes.
        let requests =
            runner::encode(&cfg).map_err(|e| SpecError::invalid("request_options", e))?;
        let entries = cfg.requests.entries().len();
        let plans = match &self.sessions {
            Some(Sessions::Planned(p)) => &p[..],
            _ => &[],
        };
        let plans = plans.iter();
        if let Some(bad) = plans.flat_map(|s| &s.requests).find(|r| r.1 as usize >= entries) {
            return Err(SpecError::must(
                "sessions",
                format!("name request-source entry {} of {entries}", bad.1),
            ));
        }
        Ok(Ready { run: self, cfg, requests })
    }

    /// Prepares and runs, blocking the calling thread until the run ends.
    pub fn execute(self, stop: &StopHandle) -> Result<RunResult, RunError> {
        self.prepare()?.execute(stop)
    }
}

/// A prepared run: nothing left to check, ready to send.
pub struct Ready {
    run: Run,
    cfg: crate::config::EngineConfig,
    requests: Vec<runner::EncodedRequests>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready").field("run", &self.run).finish_non_exhaustive()
    }
}

impl Ready {
    /// Live observers of the run (they may be set up after preparing succeeded).
    pub fn observed(mut self, telemetry: Telemetry) -> Ready {
        self.run.telemetry = Some(telemetry);
        self
    }

    /// Where the run will connect: every endpoint with the addresses its host resolved to
    /// (resolution happens once, here, so a caller that vets these addresses vets the run).
    pub fn targets(&self) -> impl Iterator<Item = &crate::Target> {
        self.cfg.endpoints.iter().map(|e| &e.target)
    }

    /// Lets `rate` change the run's rate while it goes on ([`RateHandle`]).
    pub fn rate_handle(mut self, rate: RateHandle) -> Ready {
        self.cfg.rate = Some(rate);
        self
    }

    /// Runs until the spec's end or `stop`, blocking the calling thread.
    pub fn execute(self, stop: &StopHandle) -> Result<RunResult, RunError> {
        let Ready { run, cfg, requests } = self;
        // A replay has no default failure predicates (errors are tallied and it goes on), but
        // one in which nothing completed still failed.
        let replay = matches!(run.sessions, Some(Sessions::Fed(..)));
        let unanswered = match run.spec.tolerates_failures() && !replay {
            true => Unanswered::Tolerated,
            false => Unanswered::Fails,
        };
        let out = runner::execute(cfg, requests, run.sessions, stop.clone(), run.telemetry)?;
        let mut result = RunResult::new(run.spec.recorded_options(), out.workers, out.termination);
        result.intervals = out.intervals;
        result.errors = out.errors;
        result.differences = out.differences;
        result.judge(unanswered);
        Ok(result)
    }
}
