//! Live telemetry flags and sinks: a progress line on a terminal, periodic interval reports
//! (`--stats-interval`), a Prometheus scrape endpoint (`--metrics-listen`) and statsd export
//! (`--statsd`, Nighthawk's `--stats-sinks`). Each is an [`Observer`] of the engine's
//! collector thread; none of them touches a worker.

mod console;
mod prometheus;
mod statsd;

use std::io::IsTerminal as _;
use std::time::Duration;

use clap::Args;
use shrike_engine::{Observer, Telemetry, TelemetryConfig};
use shrike_output::OutputFormat;

use crate::args::usage;
use crate::log::info;
use shrike_spec::{SpecEdit, TelemetrySpec};

/// Stored intervals default to this period when telemetry is on without `--stats-interval`.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The progress line redraws at most this often.
const PROGRESS_PERIOD: Duration = Duration::from_millis(250);

#[derive(Args, Debug, Clone, Default)]
pub struct TelemetryArgs {
    /// Never draw the progress line (drawn by default when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Report every DURATION on stderr (text, or one JSON object per line with a machine
    /// output format) and store the series in the result.
    #[arg(long, value_name = "DURATION", value_parser = crate::args::parse::duration)]
    pub stats_interval: Option<Duration>,
    /// Serve Prometheus metrics (GET /metrics) on ADDR during the run, e.g. 127.0.0.1:9090
    /// (port 0 picks one; the bound address is logged).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Send metrics to a statsd server over UDP (repeatable).
    #[arg(long = "statsd", value_name = "HOST:PORT")]
    pub statsd: Vec<String>,
    /// Nighthawk's stats sink (repeatable): `statsd://HOST:PORT`, or an Envoy StatsdSink as
    /// JSON, {name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/
    /// envoy.config.metrics.v3.StatsdSink",address:{socket_address:{address:"127.0.0.1",
    /// port_value:8125}},prefix:"shrike"}}.
    #[arg(long = "stats-sinks", value_name = "SINK")]
    pub stats_sinks: Vec<String>,
    /// Time between flushes to the statsd sinks (seconds, or with a unit) [default: 5].
    #[arg(
        long,
        value_name = "DURATION",
        conflicts_with = "stats_flush_interval_duration",
        value_parser = crate::args::parse::duration
    )]
    pub stats_flush_interval: Option<Duration>,
    /// Nighthawk's spelling of the flush interval as a duration ('1s', '1.000000001s').
    #[arg(long, value_name = "DURATION", value_parser = crate::args::parse::duration)]
    pub stats_flush_interval_duration: Option<Duration>,
}

impl TelemetryArgs {
    /// The telemetry flags given, each as its typed edit of the run's spec.
    pub fn edit(&self, mut e: SpecEdit) -> SpecEdit {
        if self.no_progress {
            e = e.no_progress(true);
        }
        if let Some(d) = self.stats_interval {
            e = e.stats_interval(Some(d));
        }
        if let Some(a) = &self.metrics_listen {
            e = e.metrics_listen(Some(a.clone()));
        }
        if !self.statsd.is_empty() {
            e = e.statsd(self.statsd.clone());
        }
        if !self.stats_sinks.is_empty() {
            e = e.stats_sinks(self.stats_sinks.clone());
        }
        if let Some(d) = self.stats_flush_interval {
            e = e.stats_flush_interval(d);
        }
        if let Some(d) = self.stats_flush_interval_duration {
            e = e.stats_flush_interval_duration(d);
        }
        e
    }
}

/// What the run needs from telemetry: the engine's observers and, while the run lasts, the
/// metrics endpoint.
pub struct Session {
    pub telemetry: Option<Telemetry>,
    metrics: Option<prometheus::Server>,
}

impl Session {
    /// The run is over: stop serving metrics.
    pub fn stop(&mut self) {
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
    }
}

/// Validates the flags and starts what must exist before the run (the metrics listener).
/// Everything wrong is a usage error, reported before any load is sent.
pub fn start(
    spec: &TelemetrySpec,
    format: OutputFormat,
    run_duration: Option<Duration>,
) -> anyhow::Result<Session> {
    let interval = spec.stats_interval;
    let flush = spec.stats_flush_interval;
    let mut statsd_targets = Vec::new();
    for s in &spec.statsd {
        statsd_targets.push(
            statsd::Target::parse_addr(s, "shrike").map_err(|e| usage(format!("--statsd: {e}")))?,
        );
    }
    for s in &spec.stats_sinks {
        statsd_targets
            .push(statsd::Target::parse_sink(s).map_err(|e| usage(format!("--stats-sinks: {e}")))?);
    }
    let progress = !spec.no_progress && std::io::stderr().is_terminal();

    let mut observers: Vec<Box<dyn Observer>> = Vec::new();
    if progress || interval.is_some() {
        let mode = if format.is_text() { console::Mode::Text } else { console::Mode::Jsonl };
        observers.push(Box::new(console::Console::new(
            progress,
            interval.map(|_| mode),
            run_duration,
        )));
    }
    let statsd_targets_empty = statsd_targets.is_empty();
    if !statsd_targets_empty {
        observers.push(Box::new(
            statsd::Statsd::new(statsd_targets, flush)
                .map_err(|e| usage(format!("statsd: {e}")))?,
        ));
    }
    let metrics = match &spec.metrics_listen {
        None => None,
        Some(addr) => {
            let (server, observer) = prometheus::Server::start(addr, run_duration)
                .map_err(|e| usage(format!("--metrics-listen {addr}: {e}")))?;
            info!("serving Prometheus metrics at http://{}/metrics", server.addr);
            observers.push(Box::new(observer));
            Some(server)
        }
    };
    if observers.is_empty() && interval.is_none() {
        return Ok(Session { telemetry: None, metrics });
    }
    // Ticks are as fine as the most demanding observer needs: progress redraws and scrapes
    // want fresh numbers, statsd flushes on a tick boundary.
    let live = (progress || metrics.is_some()).then_some(PROGRESS_PERIOD);
    let flush_tick = (!statsd_targets_empty).then_some(flush);
    let max_tick = [live, flush_tick].into_iter().flatten().min();
    let config = TelemetryConfig::new(interval.unwrap_or(DEFAULT_INTERVAL), max_tick)
        .ok_or_else(|| usage("--stats-interval is out of range"))?;
    Ok(Session { telemetry: Some(Telemetry { config, observers }), metrics })
}

/// Counters that mean a request did not get a good answer: what progress and reports call
/// errors.
fn errors(c: &shrike_stats::Counters) -> u64 {
    use shrike_stats::Counter::*;
    [Http4xx, Http5xx, HttpXxx, StreamResets, PoolConnectionFailure, PoolOverflow]
        .iter()
        .map(|&k| c.get(k))
        .sum()
}
