//! Flags a subcommand shares with others (`capacity` and `sweep` take all of `run`'s through
//! `RunArgs`) but has no use for: hidden from its `--help`, and refused by name when given,
//! saying why and where they belong. A flag a subcommand ignores in one mode only (capacity's
//! `--rps` in a concurrency search) stays listed, and the subcommand refuses it in that mode.

use clap::parser::ValueSource;
use clap::{ArgMatches, Command, CommandFactory};

/// One flag one subcommand refuses.
struct Refused {
    sub: &'static str,
    /// clap's id of the argument (the field's name).
    id: &'static str,
    flag: &'static str,
    why: &'static str,
}

const TRIAL_LENGTH: &str = "a capacity search runs each trial for --trial-duration and confirms \
    each answer for --final-duration";
const TRIAL_RATE: &str = "a capacity search sets each trial's rate itself, constant (the first \
    is --start; --rps × workers without it)";
const RUN_LENGTH: &str = "each run of a sweep lasts --duration";
const RUN_RATE: &str = "the grid sets each run's load (--rates sweeps the rate; a connections \
    sweep runs unpaced)";
const NO_DEFAULTS: &str = "trials never use the default failure predicates: errors are what the \
    planners judge (your own --failure-predicate still applies)";
const WHOLE_LOAD: &str = "each trial runs the whole load when the planner gets to it (for several \
    machines, give --remote)";
const OWN_REQUESTS: &str = "trials send the load's own requests: a request source's stream would \
    be spent by the first trial";
const NO_TELEMETRY: &str = "live telemetry (progress, intervals, metrics, statsd) is run's and \
    replay's; this command reports each trial as it ends";

macro_rules! refused {
    ($($sub:literal: $($id:literal $flag:literal $why:expr),+;)*) => {
        &[$($(Refused { sub: $sub, id: $id, flag: $flag, why: $why }),+),*]
    };
}

const REFUSED: &[Refused] = refused! {
    "capacity":
        "duration" "--duration" TRIAL_LENGTH,
        "total_requests" "--requests" TRIAL_LENGTH,
        "no_duration" "--no-duration" TRIAL_LENGTH,
        "ramp_duration" "--ramp-duration" TRIAL_RATE,
        "rate_limiter_plugin_config" "--rate-limiter-plugin-config" TRIAL_RATE,
        "stages" "--stages" TRIAL_RATE;
    "sweep":
        "total_requests" "--requests" RUN_LENGTH,
        "no_duration" "--no-duration" RUN_LENGTH,
        "rps" "--rps" RUN_RATE,
        "ramp_duration" "--ramp-duration" RUN_RATE,
        "rate_limiter_plugin_config" "--rate-limiter-plugin-config" RUN_RATE,
        "stages" "--stages" RUN_RATE;
    "capacity":
        "no_default_failure_predicates" "--no-default-failure-predicates" NO_DEFAULTS,
        "start_at" "--start-at" WHOLE_LOAD,
        "shard" "--shard" WHOLE_LOAD,
        "request_source" "--request-source" OWN_REQUESTS,
        "no_progress" "--no-progress" NO_TELEMETRY,
        "stats_interval" "--stats-interval" NO_TELEMETRY,
        "metrics_listen" "--metrics-listen" NO_TELEMETRY,
        "statsd" "--statsd" NO_TELEMETRY,
        "stats_sinks" "--stats-sinks" NO_TELEMETRY,
        "stats_flush_interval" "--stats-flush-interval" NO_TELEMETRY,
        "stats_flush_interval_duration" "--stats-flush-interval-duration" NO_TELEMETRY;
    "sweep":
        "no_default_failure_predicates" "--no-default-failure-predicates" NO_DEFAULTS,
        "start_at" "--start-at" WHOLE_LOAD,
        "shard" "--shard" WHOLE_LOAD,
        "request_source" "--request-source" OWN_REQUESTS,
        "no_progress" "--no-progress" NO_TELEMETRY,
        "stats_interval" "--stats-interval" NO_TELEMETRY,
        "metrics_listen" "--metrics-listen" NO_TELEMETRY,
        "statsd" "--statsd" NO_TELEMETRY,
        "stats_sinks" "--stats-sinks" NO_TELEMETRY,
        "stats_flush_interval" "--stats-flush-interval" NO_TELEMETRY,
        "stats_flush_interval_duration" "--stats-flush-interval-duration" NO_TELEMETRY;
};

/// The command line with every refused flag hidden from its subcommand's help.
pub(crate) fn command() -> Command {
    let mut cmd = crate::Cli::command();
    for r in REFUSED {
        cmd = cmd.mut_subcommand(r.sub, |s| s.mut_arg(r.id, |a| a.hide(true)));
    }
    cmd
}

/// The first refused flag given on the command line, as its usage error.
pub(crate) fn check(matches: &ArgMatches) -> Result<(), String> {
    let Some((sub, m)) = matches.subcommand() else { return Ok(()) };
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    match REFUSED.iter().find(|r| r.sub == sub && given(r.id)) {
        Some(r) => Err(format!("{sub} does not take {}: {}", r.flag, r.why)),
        None => Ok(()),
    }
}

/// A flag the subcommand refuses in the mode the other flags put it in.
pub(crate) fn in_mode(sub: &str, flag: &str, why: &str) -> anyhow::Error {
    crate::args::usage(format!("{sub} does not take {flag} here: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refused_flag_exists_and_is_hidden() {
        let cmd = command();
        for r in REFUSED {
            let sub = cmd.find_subcommand(r.sub).unwrap_or_else(|| panic!("{}", r.sub));
            let arg = sub.get_arguments().find(|a| a.get_id() == r.id);
            let arg = arg.unwrap_or_else(|| panic!("{} has no {}", r.sub, r.id));
            assert!(arg.is_hide_set(), "{} {}", r.sub, r.flag);
            assert_eq!(arg.get_long().map(|l| format!("--{l}")).as_deref(), Some(r.flag));
        }
    }
}
