//! Load-shaping flags of `shrike run`: the rate plan (constant, unpaced, ramp, stages), how a
//! worker idles between releases, warm-up, a scheduled start and the source address. Each is
//! a typed edit of the run spec, which validates the whole.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use clap::Args;
use shrike_spec::{IdleStrategy, IoBackend, Shard, SpecEdit};

use crate::args::{flag_duration, parse, usage};

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
        allow_negative_numbers = true,
        value_parser = parse::rps
    )]
    pub rps: Option<shrike_spec::Rps>,
    /// Ramp the rate linearly from 0 to --rps over this long, then hold it.
    #[arg(long, value_name = "DURATION", conflicts_with = "stages", value_parser = parse::duration)]
    pub ramp_duration: Option<Duration>,
    /// Rate stages, per worker: DURATION:RATE,… Each stage moves the rate linearly from the
    /// previous stage's rate (0 at first) to RATE over DURATION (0s: a step). The run lasts
    /// the sum of the stages. Example: 10s:1000,30s:5000,10s:0.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["rps", "duration", "no_duration"])]
    pub stages: Option<String>,
    /// Nighthawk's rate limiter plugin config (JSON): its linear-ramping plugin, the rate rising
    /// from 0 to --rps over ramp_time (shorter than --duration), then held, e.g.
    /// {name:"nighthawk.linear-ramping-rate-limiter-plugin",typed_config:{"@type":"type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig",ramp_time:"10s"}}.
    /// Not with --burst-size, --jitter-uniform, --ramp-duration or --stages.
    #[arg(long, value_name = "JSON")]
    pub rate_limiter_plugin_config: Option<String>,
    /// How a worker waits for its next release: spin (busy-wait: tightest timing, burns a core
    /// per worker), poll (timerfd in epoll armed early, then a short spin: ~10 µs late, no idle
    /// CPU; the default) or sleep (tokio's 1 ms timer: fewest wake-ups, coarse).
    #[arg(long, value_name = "spin|poll|sleep", value_parser = parse::idle_strategy)]
    pub sequencer_idle_strategy: Option<IdleStrategy>,
    /// How connections do their I/O: epoll (a system call per read and write; the default)
    /// or io_uring (each loop turn's sends and receives, across connections, in one system
    /// call; Linux 5.19+). Applies to HTTP/1.1, HTTP/2 and raw TCP, plain or TLS. The JSON
    /// result's environment names the backend used; SHRIKE_IO_BACKEND sets the default.
    #[arg(long, value_name = "epoll|io_uring", value_parser = parse::io_backend)]
    pub io_backend: Option<IoBackend>,
    /// Unpaced HTTP/1.1 and HTTP/2 only (--rps max): an idle worker waits this long (at most
    /// 1ms; 50us is a good start) before reading what has arrived, so one wake-up reads many
    /// responses and each costs less client CPU. On io_uring the wait ends early once every
    /// response in flight is in. Responses are still timed when they reached the socket, by
    /// the kernel's receive timestamps; a connection's next request leaves up to this much
    /// later.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration_with_unit)]
    pub read_coalesce: Option<Duration>,
    /// How late a release may be (paced runs; at most 1s): a worker sleeps past a release's
    /// time until the last release due within this much falls due and sends them all in one
    /// wake-up, so it wakes about once per budget rather than per request and costs less CPU. Every request is still
    /// timed from its own scheduled time (sequencer.send_lateness shows what the budget
    /// allowed). Replaces --sequencer-idle-strategy; without it, releases are precise.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration_with_unit)]
    pub max_lateness: Option<Duration>,
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
    #[arg(long, value_name = "i/N", value_parser = parse::shard)]
    pub shard: Option<Shard>,
    /// The run's id, recorded in its result (`execution_id`, as Nighthawk names it). Shards of
    /// one run share one: given here, or derived alike from their options (so shards of runs
    /// with the same options need one given); `transform --merge` refuses shards of different
    /// runs. By default a new one per run.
    #[arg(long, value_name = "ID", visible_alias = "run-id")]
    pub execution_id: Option<String>,
    /// Source IP address for outgoing connections (the port is chosen by the kernel).
    #[arg(long, value_name = "IP", conflicts_with = "upstream_bind_config", value_parser = parse::ip)]
    pub bind_address: Option<IpAddr>,
    /// Nighthawk's BindConfig JSON; its source_address.address is used as --bind-address, e.g.
    /// {source_address:{address:"127.0.0.1",port_value:0}}.
    #[arg(long, value_name = "JSON")]
    pub upstream_bind_config: Option<String>,
}

impl ShapingArgs {
    /// The shaping flags given, each as its typed edit. A rate replaces stages and stages
    /// replace a rate, a ramp and a duration: each is the whole plan.
    pub fn edit(&self, mut e: SpecEdit) -> anyhow::Result<SpecEdit> {
        match self.rps {
            Some(shrike_spec::Rps::PerSecond(r)) => e = e.rate(r),
            Some(shrike_spec::Rps::Max) => e = e.unpaced(),
            None => {}
        }
        if let Some(d) = self.ramp_duration {
            e = e.ramp(Some(d));
        }
        if let Some(list) = &self.stages {
            let stages = parse::stages(list).map_err(|why| usage(format!("--stages: {why}")))?;
            e = e.stages(stages);
        }
        if let Some(json) = &self.rate_limiter_plugin_config {
            e = e.rate_limiter_plugin_config(json);
        }
        if let Some(s) = self.sequencer_idle_strategy {
            e = e.idle_strategy(s);
        }
        if let Some(b) = self.io_backend {
            e = e.io_backend(b);
        }
        if let Some(d) = self.read_coalesce {
            e = e.read_coalesce(Some(d));
        }
        if let Some(d) = self.max_lateness {
            e = e.max_lateness(Some(d));
        }
        if let Some(on) = self.simple_warmup {
            e = e.simple_warmup(on);
        }
        if let Some(s) = &self.start_at {
            e = e.start_at(Some(parse_start_at(s)?));
        }
        if let Some(s) = self.shard {
            e = e.shard(Some(s));
        }
        if let Some(id) = &self.execution_id {
            e = e.execution_id(Some(id));
        }
        if let Some(ip) = self.bind_address {
            e = e.bind_address(Some(ip));
        }
        if let Some(c) = &self.upstream_bind_config {
            e = e.upstream_bind_config(c);
        }
        Ok(e)
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
