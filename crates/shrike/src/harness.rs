//! What a command that runs the engine once needs around the library call, set up one way for
//! `run` and `replay`: log format, telemetry (observers and the interval series), signals, and
//! the run's errors in the command line's words.

use std::time::Duration;

use shrike_engine::{Ready, RunError, RunSpec, Telemetry, TelemetryConfig};
use shrike_stats::RunResult;

use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::telemetry::Session;

pub(crate) struct Harness {
    session: Session,
    pub interrupts: Interrupts,
    /// Names the command in errors ("the replay could not start").
    what: &'static str,
}

impl Harness {
    /// Before preparing the run: telemetry's listeners and the signal handlers exist first, so
    /// a bad flag fails before any load and an early Ctrl-C is not lost.
    pub fn start(spec: &RunSpec, what: &'static str) -> anyhow::Result<Harness> {
        let format = spec.output_format();
        // Interval reports as JSON lines on stderr: log lines there must be JSON too, so the
        // stream parses as one format.
        crate::log::set_json(spec.telemetry().stats_interval.is_some() && !format.is_text());
        let session = crate::telemetry::start(spec.telemetry(), format, spec.duration())?;
        let interrupts = Interrupts::install(spec.timeout())
            .map_err(|e| anyhow::Error::new(e).context(format!("the {what} could not start")))?;
        Ok(Harness { session, interrupts, what })
    }

    /// Keeps the run's interval series (every `every`) even when no observer asked for one.
    pub fn keep_series(&mut self, every: Duration) {
        if self.session.telemetry.is_none() {
            self.session.telemetry = TelemetryConfig::new(every, None)
                .map(|config| Telemetry { config, observers: Vec::new() });
        }
    }

    /// Runs `spec` on `fleet` (`--remote`) with the observers watching the fleet and signals
    /// cancelling every generator. Generators that failed are reported here by name.
    pub fn coordinate(
        &mut self,
        spec: &RunSpec,
        work: &shrike_service::coordinator::Work,
        fleet: &shrike_service::coordinator::Fleet,
    ) -> anyhow::Result<shrike_service::coordinator::Coordinated> {
        let telemetry = self.session.telemetry.take();
        let done = self.interrupts.execute_with(|stop| {
            shrike_service::coordinator::coordinate_work(spec, work, fleet, stop, telemetry)
        });
        self.session.stop();
        let done = done.map_err(|e| {
            use shrike_service::coordinator::CoordinateError;
            let usage = matches!(
                e,
                CoordinateError::Spec(_) | CoordinateError::AllFailed { refused: true, .. }
            );
            let e = anyhow::Error::new(e);
            if usage {
                e.context(crate::UsageError(format!("the {} could not start", self.what)))
            } else {
                e
            }
        })?;
        for g in &done.generators {
            let count = g
                .result
                .as_ref()
                .map_or(0, |r| r.global.counters.get(shrike_stats::Counter::RqTotal));
            match &g.failure {
                None => crate::log::info!("generator {} ({}): {count} requests", g.name, g.address),
                Some(why) => crate::log::warning!(
                    "generator {} ({}) failed after {count} requests (its partial result is kept, \
                     marked \"(partial)\"): {why}",
                    g.name,
                    g.address
                ),
            }
        }
        for w in &done.warnings {
            crate::log::warning!("{w}");
        }
        if done.aborted {
            crate::log::line(
                crate::log::Tag::Error,
                "run failed: a generator failed and --remote-failure abort stopped the others",
            );
        }
        Ok(done)
    }

    /// Sends the run to a service speaking Nighthawk's API (`--nighthawk-service`), with
    /// Ctrl-C cancelling it there. Refusals (options, authentication, allowlist, limits) are
    /// usage errors.
    pub fn nighthawk(
        &mut self,
        spec: &RunSpec,
        address: &str,
        security: &shrike_service::coordinator::ClientSecurity,
    ) -> anyhow::Result<shrike_service::nighthawk::client::Answered> {
        use shrike_service::nighthawk::client::{execute, NighthawkError};
        let answered = self.interrupts.execute_with(|stop| execute(spec, address, security, stop));
        self.session.stop();
        answered.map_err(|e| {
            let usage =
                matches!(e, NighthawkError::Unsupported(_) | NighthawkError::Refused { .. });
            let e = anyhow::Error::new(e);
            if usage {
                e.context(crate::UsageError(format!("{address} did not run it")))
            } else {
                e.context(format!("the {} on {address} failed", self.what))
            }
        })
    }

    /// Runs `ready` with the observers attached and signals watched.
    pub fn execute(&mut self, load: &LoadSpec, ready: Ready) -> anyhow::Result<RunResult> {
        let ready = match self.session.telemetry.take() {
            Some(t) => ready.observed(t),
            None => ready,
        };
        let result = self.interrupts.execute(ready);
        self.session.stop();
        match result {
            Ok(r) => Ok(r),
            Err(RunError::Spec(e)) => Err(load.explain(e)),
            Err(e) => {
                Err(anyhow::Error::new(e).context(format!("the {} could not start", self.what)))
            }
        }
    }
}
