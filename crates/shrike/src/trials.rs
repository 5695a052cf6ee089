//! Where `run` runs its run and `capacity` and `sweep` their trials: here, on a fleet of
//! `shrike service` generators (`--remote`), or on a service speaking Nighthawk's API
//! (`--nighthawk-service`), decided once, here, for all three. Each is a [`TrialRunner`] of the planners' library, so the
//! search or sweep itself is the same wherever its trials run.

use shrike_plan::trial::{LocalRunner, TrialError, TrialRunner};
use shrike_service::coordinator::{ClientSecurity, Fleet};
use shrike_service::runners::{FleetRunner, NighthawkRunner};

use crate::args::usage;
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::warning;
use crate::run::RunArgs;

/// A trial that could not run, for the command line: one its runner refused (a service's
/// allowlist or limits, a spec it cannot take) is a usage error, as `run`'s would be.
pub(crate) fn explain(e: TrialError) -> anyhow::Error {
    match e {
        TrialError::Refused(why) => usage(format!("a trial was refused: {why}")),
        e => anyhow::Error::new(e).context("a trial could not run"),
    }
}

/// Where the trials run, with what reaching it takes.
pub(crate) enum Trials {
    Local,
    Fleet(Fleet),
    Nighthawk { address: String, security: ClientSecurity },
}

impl Trials {
    /// Where `args` say the trials run. A fleet or a service must be able to reach the
    /// target: the built-in server runs here.
    pub fn of(args: &RunArgs, load: &LoadSpec) -> anyhow::Result<Trials> {
        let service = args.nighthawk.service()?;
        let remote = args.remote.is_remote();
        if remote && service.is_some() {
            return Err(usage("--nighthawk-service cannot be used with --remote"));
        }
        if (remote || service.is_some()) && load.server.is_some() {
            let flag = if remote { "--remote" } else { "--nighthawk-service" };
            return Err(usage(format!(
                "{flag} needs a target URL it can reach (the built-in server runs here)"
            )));
        }
        // A request source on a gRPC service is reached with the same security flags.
        let streams = load.spec.requests().remote_source.is_some();
        args.remote.check_used(
            remote || service.is_some() || streams,
            "--remote, --nighthawk-service or --request-source",
        )?;
        if remote && args.dry_run {
            // Checked, not looked up: a dry run resolves no generator.
            let fleet = Fleet {
                generators: args.remote.remote.clone(),
                security: args.remote.security()?,
                on_failure: shrike_service::coordinator::OnFailure::Continue,
                start_delay: std::time::Duration::ZERO,
            };
            return Ok(Trials::Fleet(fleet));
        }
        if remote {
            return Ok(Trials::Fleet(args.remote.fleet()?));
        }
        Ok(match service {
            Some(address) => Trials::Nighthawk { address, security: args.remote.security()? },
            None => Trials::Local,
        })
    }

    /// Where the trials would run, as `--dry-run` shows it.
    pub fn plan(&self, args: &RunArgs) -> anyhow::Result<serde_json::Value> {
        Ok(match self {
            Trials::Local => serde_json::json!({"on": "here"}),
            Trials::Fleet(_) => serde_json::json!({"on": "fleet", "fleet": args.remote.plan()?}),
            Trials::Nighthawk { address, .. } => {
                serde_json::json!({"on": "nighthawk_service", "address": address})
            }
        })
    }

    /// Runs `f` with the runner, its trials stopped by `interrupts`.
    pub fn with_runner<T>(
        &self,
        interrupts: &Interrupts,
        f: impl FnOnce(&mut dyn TrialRunner) -> T,
    ) -> T {
        let note = |w: &str| warning!("{w}");
        match self {
            Trials::Local => f(&mut LocalRunner::new(interrupts)),
            Trials::Fleet(fleet) => f(&mut FleetRunner::new(fleet, interrupts, &note)),
            Trials::Nighthawk { address, security } => {
                f(&mut NighthawkRunner::new(address, security, interrupts))
            }
        }
    }
}
