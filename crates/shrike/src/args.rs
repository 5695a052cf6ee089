//! Flag parsing shared by the subcommands: usage errors, `N|auto` concurrency, durations.

use std::num::NonZeroUsize;
use std::time::Duration;

use shrike_stats::duration::parse_duration;

use crate::UsageError;

/// A usage error (exit code 2) with the given message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Parses `--concurrency N|auto`. `auto` honours the process's CPU affinity (taskset) and cgroup
/// quota, as Nighthawk's does.
pub fn parse_concurrency(s: &str) -> anyhow::Result<NonZeroUsize> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN));
    }
    s.trim().parse::<usize>().ok().and_then(NonZeroUsize::new).ok_or_else(|| {
        usage(format!("--concurrency: expected a positive number or 'auto', got {s:?}"))
    })
}

/// Parses a duration flag (`5`, `0.25s`, `250ms`), naming the flag in the error.
pub fn flag_duration(flag: &str, value: &str) -> anyhow::Result<Duration> {
    parse_duration(value).map_err(|e| usage(format!("--{flag}: {e}")))
}
