//! Trials run elsewhere, for the planners (capacity search, sweeps): on a fleet of `shrike
//! service` generators as one coordinated run each (`--remote`), or on a service speaking
//! Nighthawk's API (`--nighthawk-service`). Either is a [`TrialRunner`], as the local engine
//! is, so a search or sweep runs the same whoever runs its trials. Neither can measure the
//! remote client's CPU: the generator self-check then rests on pacing and shortfall alone.

use shrike_engine::RunSpec;
use shrike_plan::trial::{ClientLoad, Stopper, TrialError, TrialRun, TrialRunner};

use crate::coordinator::{coordinate, ClientSecurity, CoordinateError, Fleet};
use crate::nighthawk::client::{execute, NighthawkError};

/// Each trial a coordinated run on a fleet: generator g of N sends shard g/N of it, and the
/// trial's result is the fleet's, merged exactly.
pub struct FleetRunner<'a> {
    fleet: &'a Fleet,
    stopper: &'a dyn Stopper,
    /// Hears what happened to generators that failed a trial (it goes on without them).
    note: &'a dyn Fn(&str),
}

impl<'a> FleetRunner<'a> {
    pub fn new(fleet: &'a Fleet, stopper: &'a dyn Stopper, note: &'a dyn Fn(&str)) -> Self {
        FleetRunner { fleet, stopper, note }
    }
}

impl TrialRunner for FleetRunner<'_> {
    fn run(&mut self, spec: &RunSpec) -> Result<Option<TrialRun>, TrialError> {
        if self.stopper.stopped() {
            return Ok(None);
        }
        let mut refused = false;
        let result = self.stopper.run(&mut |stop| {
            let done = coordinate(spec, self.fleet, stop, None).map_err(|e| {
                refused = matches!(e, CoordinateError::AllFailed { refused: true, .. });
                e.to_string()
            })?;
            for g in done.generators.iter() {
                if let Some(why) = &g.failure {
                    (self.note)(&format!("generator {} ({}): {why}", g.name, g.address));
                }
            }
            for w in &done.warnings {
                (self.note)(w);
            }
            if done.aborted {
                return Err(
                    "a generator failed and --remote-failure abort stopped the others".into()
                );
            }
            Ok(done.result)
        });
        let result = result.map_err(|e| match refused {
            true => TrialError::Refused(e),
            false => TrialError::Failed(e),
        })?;
        let workers = spec.concurrency().workers().get() * self.fleet.generators.len();
        Ok(Some(TrialRun { result, client: ClientLoad { cpu_cores: None, workers } }))
    }
}

/// Each trial a run on a service speaking Nighthawk's API (Shrike's own, or Nighthawk's
/// `nighthawk_service`).
pub struct NighthawkRunner<'a> {
    address: &'a str,
    security: &'a ClientSecurity,
    stopper: &'a dyn Stopper,
}

impl<'a> NighthawkRunner<'a> {
    pub fn new(address: &'a str, security: &'a ClientSecurity, stopper: &'a dyn Stopper) -> Self {
        NighthawkRunner { address, security, stopper }
    }
}

impl TrialRunner for NighthawkRunner<'_> {
    fn run(&mut self, spec: &RunSpec) -> Result<Option<TrialRun>, TrialError> {
        if self.stopper.stopped() {
            return Ok(None);
        }
        let mut refused = false;
        let result = self.stopper.run(&mut |stop| {
            let answered = execute(spec, self.address, self.security, stop).map_err(|e| {
                refused =
                    matches!(e, NighthawkError::Unsupported(_) | NighthawkError::Refused { .. });
                e.to_string()
            })?;
            let mut result = answered.result;
            if let Some(e) = answered.error {
                // Nighthawk's Output does not say how a run ended; its error does.
                result.errors.insert(format!("the service reports: {e}"), 1);
            }
            Ok(result)
        });
        let result = result.map_err(|e| match refused {
            true => TrialError::Refused(format!("{}: {e}", self.address)),
            false => TrialError::Failed(format!("{}: {e}", self.address)),
        })?;
        let workers = spec.concurrency().workers().get();
        Ok(Some(TrialRun { result, client: ClientLoad { cpu_cores: None, workers } }))
    }
}
