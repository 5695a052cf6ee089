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

/// A bearer token from `--{prefix}token-file` or `--{prefix}token-env` (trimmed; an empty one
/// is an error, so a blank file cannot silently turn authentication off).
pub fn token(
    prefix: &str,
    file: Option<&std::path::Path>,
    env: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let token = match (file, env) {
        (Some(p), _) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| usage(format!("--{prefix}token-file {}: {e}", p.display())))?,
        ),
        (None, Some(v)) => Some(std::env::var(v).map_err(|_| {
            usage(format!("--{prefix}token-env {v}: the variable is not set (or not UTF-8)"))
        })?),
        (None, None) => None,
    };
    match token.map(|t| t.trim().to_string()) {
        Some(t) if t.is_empty() => Err(usage(format!("--{prefix}token-*: the token is empty"))),
        t => Ok(t),
    }
}

/// The bytes of the file a flag names (a PEM certificate or key), if it names one.
pub fn flag_file(flag: &str, path: Option<&std::path::Path>) -> anyhow::Result<Option<Vec<u8>>> {
    path.map(|p| std::fs::read(p).map_err(|e| usage(format!("--{flag} {}: {e}", p.display()))))
        .transpose()
}
