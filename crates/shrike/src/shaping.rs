//! Load-shaping flags of `shrike run`: the rate plan (constant, unpaced, ramp, stages), how a
//! worker idles between releases, warm-up, a scheduled start and the source address.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use clap::Args;
use serde_json::json;
use shrike_engine::pacer::{Rate, RatePlan};
use shrike_engine::{EngineConfig, IdleStrategy};

use crate::args::{flag_duration, usage};

/// Nighthawk's default rate.
const DEFAULT_RPS: f64 = 5.0;

#[derive(Args, Debug, Clone, Default)]
pub struct ShapingArgs {
    /// Target requests per second, per worker (fractional and below 1 allowed; default 5), or
    /// 'max' for an unpaced closed loop: each connection sends its next request as soon as the
    /// previous one completes.
    #[arg(long, value_name = "RATE|max", allow_negative_numbers = true)]
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
    /// per worker), poll (timerfd in epoll: tens of µs, no idle CPU) or sleep (tokio's 1 ms
    /// timer: fewest wake-ups, coarse).
    #[arg(long, default_value = "poll", value_name = "spin|poll|sleep")]
    pub sequencer_idle_strategy: String,
    /// Send one warm-up request per worker before the run starts (counted in counters, as in
    /// Nighthawk; not in latency statistics).
    #[arg(long)]
    pub simple_warmup: bool,
    /// Start at this wall-clock time, so several processes start together: RFC 3339
    /// (2026-11-21T10:00:00Z), @UNIX_SECONDS, or +DURATION from now. Connections (with
    /// --prefetch-connections) and warm-up happen before it.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Source IP address for outgoing connections (the port is chosen by the kernel).
    #[arg(long, value_name = "IP", conflicts_with = "upstream_bind_config")]
    pub bind_address: Option<String>,
    /// Nighthawk's BindConfig JSON; its source_address.address is used as --bind-address, e.g.
    /// {source_address:{address:"127.0.0.1",port_value:0}}.
    #[arg(long, value_name = "JSON")]
    pub upstream_bind_config: Option<String>,
}

/// The validated shaping options.
#[derive(Debug, Clone)]
pub struct Shaping {
    pub plan: RatePlan,
    /// Set by --stages: the run's length.
    pub stages_duration: Option<Duration>,
    pub idle: IdleStrategy,
    pub start_at: Option<SystemTime>,
    pub bind_address: Option<IpAddr>,
}

impl ShapingArgs {
    pub fn validate(&self, open_loop: bool) -> anyhow::Result<Shaping> {
        let idle = IdleStrategy::parse(&self.sequencer_idle_strategy).ok_or_else(|| {
            usage(format!(
                "--sequencer-idle-strategy: expected spin, poll or sleep, got {:?}",
                self.sequencer_idle_strategy
            ))
        })?;
        let (plan, stages_duration) = self.plan()?;
        if open_loop && plan == RatePlan::Unpaced {
            return Err(usage(
                "--rps max is a closed loop (send when a connection frees up); --open-loop needs a rate",
            ));
        }
        Ok(Shaping {
            plan,
            stages_duration,
            idle,
            start_at: self.start_at.as_deref().map(parse_start_at).transpose()?,
            bind_address: self.bind_address()?,
        })
    }

    fn plan(&self) -> anyhow::Result<(RatePlan, Option<Duration>)> {
        if let Some(list) = &self.stages {
            let stages =
                RatePlan::parse_stages(list).map_err(|e| usage(format!("--stages: {e}")))?;
            let total = RatePlan::stages_duration(&stages);
            if total.is_zero() {
                return Err(usage("--stages: the stages last 0s in total"));
            }
            return Ok((RatePlan::Stages(stages), Some(total)));
        }
        let rate = match self.rps.as_deref().map(str::trim) {
            None => Rate::try_new(DEFAULT_RPS),
            Some(m) if m.eq_ignore_ascii_case("max") => {
                if self.ramp_duration.is_some() {
                    return Err(usage("--ramp-duration needs a numeric --rps to ramp to"));
                }
                return Ok((RatePlan::Unpaced, None));
            }
            Some(r) => r.parse::<f64>().ok().and_then(Rate::try_new),
        }
        .ok_or_else(|| {
            usage(format!(
                "--rps must be a number greater than 0 or 'max', got {:?}",
                self.rps.as_deref().unwrap_or_default()
            ))
        })?;
        match &self.ramp_duration {
            None => Ok((RatePlan::Constant(rate), None)),
            Some(d) => {
                let d = flag_duration("ramp-duration", d)?;
                Ok((
                    if d.is_zero() { RatePlan::Constant(rate) } else { RatePlan::ramp(rate, d) },
                    None,
                ))
            }
        }
    }

    fn bind_address(&self) -> anyhow::Result<Option<IpAddr>> {
        if let Some(a) = &self.bind_address {
            let ip = a.trim().trim_start_matches('[').trim_end_matches(']');
            return ip
                .parse()
                .map(Some)
                .map_err(|_| usage(format!("--bind-address: {a:?} is not an IP address")));
        }
        let Some(raw) = &self.upstream_bind_config else { return Ok(None) };
        let bad = |why: &str| {
            usage(format!(
                "--upstream-bind-config: {why}; expected e.g. {{\"source_address\":{{\"address\":\"127.0.0.1\",\"port_value\":0}}}}"
            ))
        };
        // Nighthawk's example writes unquoted keys (proto text-ish JSON); accept both.
        let v = shrike_stats::relaxed::parse(raw).map_err(|e| bad(&format!("not JSON ({e})")))?;
        let sa = v.get("source_address").ok_or_else(|| bad("no source_address"))?;
        if sa.get("port_value").and_then(|p| p.as_u64()).is_some_and(|p| p != 0) {
            return Err(bad(
                "a fixed source port_value is not supported (connections would collide); use 0",
            ));
        }
        let addr = sa
            .get("address")
            .and_then(|a| a.as_str())
            .ok_or_else(|| bad("source_address.address is missing"))?;
        addr.parse().map(Some).map_err(|_| bad(&format!("{addr:?} is not an IP address")))
    }

    /// The shaping part of the result's `options`.
    pub fn options_json(&self, cfg: &EngineConfig) -> serde_json::Value {
        let (rps, stages) = match &cfg.plan {
            RatePlan::Constant(r) => (json!(r.per_second()), None),
            RatePlan::Unpaced => (json!("max"), None),
            RatePlan::Stages(_) if self.ramp_duration.is_some() => {
                (json!(cfg.plan.peak().unwrap_or_default()), None)
            }
            RatePlan::Stages(_) => (serde_json::Value::Null, self.stages.clone()),
        };
        json!({
            "requests_per_second": rps,
            "ramp_duration": self.ramp_duration,
            "stages": stages,
            "sequencer_idle_strategy": cfg.idle.name(),
            "simple_warmup": cfg.warmup,
            "start_at": cfg.start_at.map(shrike_output::timestamp::format_rfc3339),
            "bind_address": cfg.bind_address.map(|a| a.to_string()),
        })
    }
}

/// `--start-at`: RFC 3339, `@UNIX_SECONDS[.fraction]`, or `+DURATION` from now.
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
    let now = SystemTime::now();
    if let Ok(ahead) = t.duration_since(now) {
        if ahead > Duration::from_secs(24 * 3600) {
            return Err(usage(format!(
                "--start-at is {:.0}s away; more than a day ahead is surely a mistake",
                ahead.as_secs_f64()
            )));
        }
    } else if now.duration_since(t).unwrap_or_default() > Duration::from_secs(1) {
        // Several processes meant to start together: a late one must not run out of step.
        return Err(usage(format!(
            "--start-at {s} is in the past ({:.1}s ago)",
            now.duration_since(t).unwrap_or_default().as_secs_f64()
        )));
    }
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
