//! One way to make a trial, one way to run it, for every planner (capacity search, sweeps)
//! and every caller (the command line, the service, the coordinator).
//!
//! - [`trial_spec`]: the user's load at one level of one [`Dimension`], for one length.
//! - [`TrialRunner`]: runs a trial's spec and says what the client spent on it. The
//!   [`LocalRunner`] runs it on this machine's engine; the service crate has the fleet's
//!   (`--remote`) and a Nighthawk service's (`--nighthawk-service`).
//! - [`Stopper`]: who may stop a trial (a signal handler, a cancelled call), without the
//!   planners knowing which.

use std::time::{Duration, Instant};

use shrike_engine::{Ready, Run, RunError, StopHandle};
use shrike_spec::{Protocol, RunSpec, SpecError};
use shrike_stats::RunResult;

/// What a trial's level sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dimension {
    /// Requests per second, all workers together.
    Rate,
    /// Connections per worker, unpaced. Over HTTP/2 and HTTP/3 each carries `streams` streams
    /// (h2load's `-c N -m M`), so `streams × level` requests are in flight per worker; without
    /// a stream count the pool would put every request on one connection.
    Connections { streams: Option<u32> },
    /// Requests in flight per worker, unpaced (HTTP/2, HTTP/3: one connection carries many).
    ActiveRequests,
}

impl Dimension {
    /// A rate search, or concurrency in the protocol's own terms: over HTTP/2 and HTTP/3 the
    /// requests in flight, not the connections, are the concurrency (one connection carries
    /// them all unless the user limits its streams).
    pub fn of(rate: bool, protocol: Protocol) -> Dimension {
        match (rate, protocol) {
            (true, _) => Dimension::Rate,
            (false, Protocol::Http1) => Dimension::Connections { streams: None },
            (false, Protocol::Http2 | Protocol::Http3) => Dimension::ActiveRequests,
        }
    }

    /// What a level counts.
    pub fn unit(self) -> &'static str {
        match self {
            Dimension::Rate => "/s",
            Dimension::Connections { .. } => "connections",
            Dimension::ActiveRequests => "active requests",
        }
    }

    pub fn is_rate(self) -> bool {
        self == Dimension::Rate
    }
}

/// The user's load at `level` of `dimension` for `length`. A rate is for all workers together
/// and runs open loop unless `open_loop` is false: a closed loop at a rate above capacity
/// waits instead of offering the load, which hides the very limit being measured. Trials run
/// their full length: a count and stages give way to the length, and the default failure
/// predicates (which end a run at its first error) are off, as errors are what the planners
/// judge; the user's own predicates stay.
pub fn trial_spec(
    base: &RunSpec,
    dimension: Dimension,
    level: f64,
    length: Duration,
    open_loop: bool,
) -> Result<RunSpec, SpecError> {
    let workers = base.concurrency().workers().get();
    let e = base.edit().total_requests(None).ramp(None).no_default_failure_predicates(true);
    let e = match dimension {
        Dimension::Rate => e.rate(level / workers as f64).open_loop(open_loop),
        Dimension::Connections { streams } => {
            let e = e.unpaced().open_loop(false).connections(whole(level));
            match streams {
                Some(m) => e.max_concurrent_streams(m).max_active_requests(whole(level) * m),
                None => e,
            }
        }
        Dimension::ActiveRequests => e.unpaced().open_loop(false).max_active_requests(whole(level)),
    };
    e.duration(length).build()
}

/// A concurrency level as a count (levels of a concurrency search are whole numbers).
fn whole(level: f64) -> u32 {
    level.round().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// What the caller measured about the client during a trial.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientLoad {
    /// CPU time the client process used over the trial's wall time, in cores.
    pub cpu_cores: Option<f64>,
    /// The workers (threads) the client ran; what `cpu_cores` saturates at.
    pub workers: usize,
}

/// One trial as it ran.
#[derive(Debug)]
pub struct TrialRun {
    pub result: RunResult,
    pub client: ClientLoad,
}

/// Why a trial could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrialError {
    /// The trial's spec cannot run here (a host that does not resolve, an unreadable file).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Whoever runs it refused it (a service's limits or allowlist).
    #[error("{0}")]
    Refused(String),
    /// It could not run (the engine, a lost fleet).
    #[error("{0}")]
    Failed(String),
}

/// Runs trials. `Ok(None)`: a stop came before the trial started, so it did not run.
pub trait TrialRunner {
    fn run(&mut self, spec: &RunSpec) -> Result<Option<TrialRun>, TrialError>;
}

/// Who may stop a trial: a signal handler, a cancelled call.
pub trait Stopper {
    /// A stop was asked for: no further trial starts.
    fn stopped(&self) -> bool;

    /// A trial is being prepared (hosts resolved, files read) or no longer is: nothing is
    /// measured meanwhile, and a resolver that never answers cannot be cut short.
    fn preparing(&self, _now: bool) {}

    /// Runs `trial` with a stop handle this stopper requests when asked to stop (at once, if
    /// it already was).
    fn run(
        &self,
        trial: &mut dyn FnMut(&StopHandle) -> Result<RunResult, String>,
    ) -> Result<RunResult, String>;
}

/// A stop handle that stops every trial once requested (the service's per-call handle).
impl Stopper for StopHandle {
    fn stopped(&self) -> bool {
        self.is_stopped()
    }

    fn run(
        &self,
        trial: &mut dyn FnMut(&StopHandle) -> Result<RunResult, String>,
    ) -> Result<RunResult, String> {
        trial(self)
    }
}

/// What a runner checks of a prepared trial before sending anything (a service's allowlist
/// and per-run limits).
pub type Admit<'a> = dyn Fn(&RunSpec, &Ready) -> Result<(), String> + 'a;

/// Runs trials on this machine's engine, measuring the client's own CPU for the generator
/// self-check.
pub struct LocalRunner<'a> {
    stopper: &'a dyn Stopper,
    admit: Option<&'a Admit<'a>>,
}

impl<'a> LocalRunner<'a> {
    pub fn new(stopper: &'a dyn Stopper) -> LocalRunner<'a> {
        LocalRunner { stopper, admit: None }
    }

    /// Checks each prepared trial with `admit` before it runs.
    pub fn admitting(mut self, admit: &'a Admit<'a>) -> LocalRunner<'a> {
        self.admit = Some(admit);
        self
    }
}

impl TrialRunner for LocalRunner<'_> {
    fn run(&mut self, spec: &RunSpec) -> Result<Option<TrialRun>, TrialError> {
        if self.stopper.stopped() {
            return Ok(None);
        }
        self.stopper.preparing(true);
        let ready = Run::new(spec).prepare();
        self.stopper.preparing(false);
        let ready = ready?;
        if let Some(admit) = self.admit {
            admit(spec, &ready).map_err(TrialError::Refused)?;
        }
        let mut ready = Some(ready);
        let (cpu0, t0) = (process_cpu_seconds(), Instant::now());
        let result = self.stopper.run(&mut |stop| match ready.take() {
            Some(r) => r.execute(stop).map_err(|e| match e {
                RunError::Spec(e) => e.to_string(),
                e => e.to_string(),
            }),
            None => Err("the trial ran already".into()),
        });
        let result = result.map_err(TrialError::Failed)?;
        let cpu_cores =
            process_cpu_seconds().zip(cpu0).map(|(b, a)| (b - a) / t0.elapsed().as_secs_f64());
        let workers = spec.concurrency().workers().get();
        Ok(Some(TrialRun { result, client: ClientLoad { cpu_cores, workers } }))
    }
}

/// This process's CPU time (user + system) in seconds.
pub fn process_cpu_seconds() -> Option<f64> {
    crate::sweep::resources::cpu_seconds(std::process::id())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use shrike_spec::RateSpec;

    fn base() -> RunSpec {
        RunSpec::from_json(&serde_json::json!({"uri": "http://127.0.0.1/", "concurrency": "2",
            "stages": "1s:10,1s:20", "total_requests": "50",
            "failure_predicates": {"benchmark.http_5xx": "4"}}))
        .unwrap()
    }

    #[test]
    fn a_rate_trial_is_the_fleets_rate_open_loop_for_its_length_with_the_users_predicates() {
        let t = trial_spec(&base(), Dimension::Rate, 300.0, Duration::from_secs(2), true).unwrap();
        assert!(
            matches!(t.rate(), RateSpec::Rps { rate, ramp: None } if rate.per_second() == 150.0)
        );
        assert!(t.open_loop());
        assert_eq!(t.duration(), Some(Duration::from_secs(2)));
        assert_eq!(t.total_requests(), None);
        // The defaults are off (errors are judged, not fatal); the user's own predicate stays.
        assert_eq!(t.predicates().len(), 1, "{:?}", t.predicates());
        // A base ramping Nighthawk's way (the rate limiter plugin) does not ramp its trials.
        let plugin = RunSpec::from_json(&serde_json::json!({"uri": "http://127.0.0.1/",
            "requests_per_second": 10, "duration": "30s",
            "rate_limiter_plugin_config": {"name": "nighthawk.linear-ramping-rate-limiter-plugin",
                "typed_config": {"@type": "type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig",
                    "ramp_time": "10s"}}}))
        .unwrap();
        let t = trial_spec(&plugin, Dimension::Rate, 300.0, Duration::from_secs(2), true).unwrap();
        assert!(matches!(t.rate(), RateSpec::Rps { ramp: None, .. }), "{:?}", t.rate());
    }

    #[test]
    fn connection_trials_are_unpaced_and_h2_ones_keep_streams_per_connection() {
        let h1 = trial_spec(
            &base(),
            Dimension::Connections { streams: None },
            8.0,
            Duration::from_secs(1),
            true,
        )
        .unwrap();
        assert_eq!(*h1.rate(), RateSpec::Max);
        assert_eq!(h1.connections().get(), 8);
        assert!(!h1.open_loop());
        let h2 = trial_spec(
            &base(),
            Dimension::Connections { streams: Some(10) },
            4.0,
            Duration::from_secs(1),
            true,
        )
        .unwrap();
        assert_eq!(h2.streams().max_concurrent_streams.get(), 10);
        assert_eq!(h2.streams().max_active_requests.get(), 40);
        let active =
            trial_spec(&base(), Dimension::ActiveRequests, 16.0, Duration::from_secs(1), true)
                .unwrap();
        assert_eq!(active.streams().max_active_requests.get(), 16);
    }
}
