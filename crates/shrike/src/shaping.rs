//! Load-shaping flags of `shrike run`: the rate plan (constant, unpaced, ramp, stages), how a
//! worker idles between releases, warm-up, a scheduled start and the source address. They
//! become options of the run spec, which validates them.

use std::time::{Duration, SystemTime};

use clap::Args;

use crate::args::{flag_duration, usage};
use crate::load::Patch;

#[derive(Args, Debug, Clone, Default)]
pub struct ShapingArgs {
    /// Target requests per second, per worker (fractional and below 1 allowed; default 5), or
    /// 'max' for an unpaced closed loop: each connection sends its next request as soon as the
    /// previous one completes.
    #[arg(
        short = 'r',
        short_alias = 'q',
        long,
        value_name = "RATE|max",
        allow_negative_numbers = true
    )]
    pub rps: Option<String>,
    /// Ramp the rate linearly from 0 to --rps over this long, then hold it.
    #[arg(long, value_name = "DURATION", conflicts_with = "stages")]
    pub ramp_duration: Option<String>,
    /// Rate stages, per worker: DURATION:RATE,… Each stage moves the rate linearly from the
    /// previous stage's rate (0 at first) to RATE over DURATION (0s: a step). The run lasts
    /// the sum of the stages. Example: 10s:1000,30s:5000,10s:0.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["rps", "duration", "no_duration"])]
    pub stages: Option<String>,
    /// How a worker waits for its next release: spin (busy-wait: tightest timing, burns a core
    /// per worker), poll (timerfd in epoll armed early, then a short spin: ~10 µs late, no idle
    /// CPU; the default) or sleep (tokio's 1 ms timer: fewest wake-ups, coarse).
    #[arg(long, value_name = "spin|poll|sleep")]
    pub sequencer_idle_strategy: Option<String>,
    /// How connections do their I/O: epoll (a system call per read and write; the default)
    /// or io_uring (each loop turn's sends and receives, across connections, in one system
    /// call; Linux 5.19+). Applies to HTTP/1.1, HTTP/2 and raw TCP, plain or TLS. The JSON
    /// result's environment names the backend used; SHRIKE_IO_BACKEND sets the default.
    #[arg(long, value_name = "epoll|io_uring")]
    pub io_backend: Option<String>,
    /// Unpaced HTTP/1.1 and HTTP/2 only (--rps max): an idle worker waits this long (at most
    /// 1ms; 50us is a good start) before reading what has arrived, so one wake-up reads many
    /// responses and each costs less client CPU. On io_uring the wait ends early once every
    /// response in flight is in. Responses are still timed when they reached the socket, by
    /// the kernel's receive timestamps; a connection's next request leaves up to this much
    /// later.
    #[arg(long, value_name = "DURATION")]
    pub read_coalesce: Option<String>,
    /// Send one warm-up request per worker before the run starts (counted in counters, as in
    /// Nighthawk; not in latency statistics).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub simple_warmup: Option<bool>,
    /// Start at this wall-clock time, so several processes start together: RFC 3339
    /// (2026-11-21T10:00:00Z), @UNIX_SECONDS, or +DURATION from now. Connections (with
    /// --prefetch-connections) and warm-up happen before it.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Send shard i of N (0-based: 0/N … N-1/N) of this run: 1/N of the rate and of -n, with
    /// pacer phases that interleave with the other shards'. N processes (with a common
    /// --start-at) make the run; `shrike transform --merge` joins their results exactly.
    #[arg(long, value_name = "i/N")]
    pub shard: Option<String>,
    /// Source IP address for outgoing connections (the port is chosen by the kernel).
    #[arg(long, value_name = "IP", conflicts_with = "upstream_bind_config")]
    pub bind_address: Option<String>,
    /// Nighthawk's BindConfig JSON; its source_address.address is used as --bind-address, e.g.
    /// {source_address:{address:"127.0.0.1",port_value:0}}.
    #[arg(long, value_name = "JSON")]
    pub upstream_bind_config: Option<String>,
}

impl ShapingArgs {
    /// Writes the shaping flags given into the run's options. A rate replaces stages and
    /// stages replace a rate, a ramp and a duration: each is the whole plan.
    pub fn patch(&self, p: &mut Patch) -> anyhow::Result<()> {
        if let Some(r) = &self.rps {
            match r.trim().parse::<f64>() {
                Ok(n) if n.is_finite() => p.set("requests_per_second", n),
                _ => p.set("requests_per_second", r.trim()),
            }
            p.clear("stages");
        }
        if let Some(r) = &self.ramp_duration {
            p.set("ramp_duration", r.as_str());
        }
        if let Some(s) = &self.stages {
            p.set("stages", s.as_str());
            for f in ["requests_per_second", "ramp_duration", "duration", "no_duration"] {
                p.clear(f);
            }
        }
        p.opt("sequencer_idle_strategy", &self.sequencer_idle_strategy);
        p.opt("io_backend", &self.io_backend);
        p.opt("read_coalesce", &self.read_coalesce);
        p.opt("simple_warmup", &self.simple_warmup);
        if let Some(s) = &self.start_at {
            let t = parse_start_at(s)?;
            p.set("start_at", shrike_output::timestamp::format_rfc3339(t));
            p.clear("scheduled_start");
        }
        if let Some(sh) = &self.shard {
            let sh = shrike_spec::Shard::parse(sh).map_err(|e| usage(format!("--shard {e}")))?;
            p.set("shard", sh.to_string());
        }
        if let Some(a) = &self.bind_address {
            p.set("bind_address", a.as_str());
            p.clear("upstream_bind_config");
        }
        if let Some(c) = &self.upstream_bind_config {
            p.set("upstream_bind_config", c.as_str());
            p.clear("bind_address");
        }
        Ok(())
    }
}

/// `--start-at`: RFC 3339, `@UNIX_SECONDS[.fraction]`, or `+DURATION` from now, checked as
/// the engine will check it.
fn parse_start_at(s: &str) -> anyhow::Result<SystemTime> {
    let s = s.trim();
    let t = if let Some(rel) = s.strip_prefix('+') {
        SystemTime::now() + flag_duration("start-at", rel)?
    } else if let Some(unix) = s.strip_prefix('@') {
        let secs: f64 = unix
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| usage(format!("--start-at: {s:?} is not @UNIX_SECONDS")))?;
        SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs)
    } else {
        shrike_output::timestamp::parse_rfc3339(s).map_err(|e| {
            usage(format!(
                "--start-at: {e}; expected RFC 3339 (2026-11-21T10:00:00Z), @UNIX_SECONDS or +DURATION"
            ))
        })?
    };
    shrike_spec::spec::check_start_at(t, SystemTime::now())
        .map_err(|e| usage(e.renamed("--start-at").to_string()))?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_at_forms() {
        assert!(parse_start_at("+2s").is_ok());
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("clock");
        assert!(parse_start_at(&format!("@{}", now.as_secs() + 5)).is_ok());
        assert!(parse_start_at("@12").is_err(), "in the past");
        assert!(parse_start_at("+48h").is_err(), "too far");
        assert!(parse_start_at("tomorrow").is_err());
    }
}
