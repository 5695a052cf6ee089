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

/// clap value parsers for typed flags: each flag's value is read into the type the spec's
/// edit takes, so a malformed value is a usage error naming the flag (clap's), before any
/// spec is made.
pub mod parse {
    use std::time::Duration;

    use shrike_spec::{
        AddressFamily, Concurrency, H1Reuse, IdleStrategy, IoBackend, Predicate, PredicateKind,
        Protocol, RatePlan, Rps, Shard, Stage, TlsVersion,
    };

    /// `--rps`: a rate per worker, or `max` (the spec's own [`Rps`]).
    pub fn rps(s: &str) -> Result<Rps, String> {
        if s.trim().eq_ignore_ascii_case("max") {
            return Ok(Rps::Max);
        }
        match s.trim().parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => Ok(Rps::PerSecond(r)),
            _ => Err("must be a number greater than 0 or 'max'".into()),
        }
    }

    pub fn duration(s: &str) -> Result<Duration, String> {
        shrike_stats::duration::parse_duration(s).map_err(|e| e.to_string())
    }

    /// A duration whose unit must be given (0 aside): for flags whose scale is micro- or
    /// milliseconds, where a bare `10` read as seconds would be a mistake, not a shorthand.
    pub fn duration_with_unit(s: &str) -> Result<Duration, String> {
        let d = duration(s)?;
        let t = s.trim();
        if !d.is_zero() && t.parse::<f64>().is_ok() {
            return Err(format!(
                "{t} has no unit: give one, e.g. {t}ms or {t}us ({t}s for seconds)"
            ));
        }
        Ok(d)
    }

    pub fn concurrency(s: &str) -> Result<Concurrency, String> {
        Concurrency::parse(s).ok_or_else(|| "expected a positive number or 'auto'".into())
    }

    pub fn protocol(s: &str) -> Result<Protocol, String> {
        Protocol::parse(s).ok_or_else(|| "must be http1, http2 or http3".into())
    }

    pub fn idle_strategy(s: &str) -> Result<IdleStrategy, String> {
        IdleStrategy::parse(s).ok_or_else(|| "must be spin, poll or sleep".into())
    }

    pub fn io_backend(s: &str) -> Result<IoBackend, String> {
        IoBackend::parse(s).ok_or_else(|| "must be epoll or io_uring".into())
    }

    pub fn address_family(s: &str) -> Result<AddressFamily, String> {
        AddressFamily::parse(s).ok_or_else(|| "must be auto, v4 or v6".into())
    }

    pub fn h1_reuse(s: &str) -> Result<H1Reuse, String> {
        H1Reuse::parse(s).ok_or_else(|| "must be mru or lru".into())
    }

    pub fn tls_version(s: &str) -> Result<TlsVersion, String> {
        TlsVersion::parse(s).ok_or_else(|| "must be 1.2 or 1.3".into())
    }

    pub fn stages(s: &str) -> Result<Vec<Stage>, String> {
        RatePlan::parse_stages(s).map_err(|e| e.to_string())
    }

    pub fn shard(s: &str) -> Result<Shard, String> {
        Shard::parse(s)
    }

    pub fn failure_predicate(s: &str) -> Result<Predicate, String> {
        Predicate::parse(s, PredicateKind::Failure).map_err(|e| e.to_string())
    }

    pub fn termination_predicate(s: &str) -> Result<Predicate, String> {
        Predicate::parse(s, PredicateKind::Termination).map_err(|e| e.to_string())
    }

    pub fn ip(s: &str) -> Result<std::net::IpAddr, String> {
        let ip = s.trim().trim_start_matches('[').trim_end_matches(']');
        ip.parse().map_err(|_| "must be an IP address".into())
    }

    pub fn output_format(s: &str) -> Result<shrike_output::OutputFormat, String> {
        s.parse::<shrike_output::OutputFormat>().map_err(|e| e.to_string())
    }
}
