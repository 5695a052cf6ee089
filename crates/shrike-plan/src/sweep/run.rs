//! The sweep loop, for every caller (`shrike sweep`, the service's `Sweep`): a grid of levels,
//! `iterations` runs of each level on each instance, every run the user's load at that level
//! ([`trial_spec`]) run by the caller's [`TrialRunner`], with the instance's server sampled
//! over exactly the run's window. Two instances (a baseline and a candidate) alternate who
//! goes first (AB, BA, AB…), so drift within an iteration, or an advantage of going first or
//! second, falls on both alike.

use std::time::Duration;

use shrike_spec::{Protocol, RunSpec, SpecError};
use shrike_stats::Termination;

use super::grid;
use super::report::{Iteration, Point, Sweep};
use super::resources::{self, Sampler, Source, Window};
use crate::capacity::AskError;
use crate::trial::{trial_spec, Dimension, TrialError, TrialRun, TrialRunner};

/// Which server statistics a sweep keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collect {
    pub cpu: bool,
    pub rss: bool,
    pub vms: bool,
    pub fds: bool,
    pub ctx_switches: bool,
}

impl Collect {
    pub const ALL: Collect =
        Collect { cpu: true, rss: true, vms: true, fds: true, ctx_switches: true };
    /// The names `--collect-stats` takes, in order.
    pub const NAMES: [&'static str; 5] = ["cpu", "rss", "vms", "fds", "ctx-switches"];

    /// The statistics `names` choose (all when none); an unknown name is returned as the error.
    pub fn parse(names: &[String]) -> Result<Collect, String> {
        if names.is_empty() {
            return Ok(Collect::ALL);
        }
        let mut c = Collect { cpu: false, rss: false, vms: false, fds: false, ctx_switches: false };
        for n in names {
            match n.trim() {
                "cpu" => c.cpu = true,
                "rss" => c.rss = true,
                "vms" => c.vms = true,
                "fds" => c.fds = true,
                "ctx-switches" => c.ctx_switches = true,
                other => return Err(other.to_string()),
            }
        }
        Ok(c)
    }

    /// The window with only the chosen statistics.
    fn keep(self, mut w: Window) -> Window {
        if !self.cpu {
            w.cpu_cores = None;
        }
        if !self.rss {
            w.rss_max_bytes = None;
            w.rss_mean_bytes = None;
        }
        if !self.vms {
            w.vms_max_bytes = None;
        }
        if !self.fds {
            w.fds_max = None;
        }
        if !self.ctx_switches {
            w.ctx_switches_per_sec = None;
            w.voluntary_ctx_switches_per_sec = None;
            w.involuntary_ctx_switches_per_sec = None;
        }
        w
    }
}

/// `shrike sweep`'s defaults, for every caller.
pub const DEFAULT_ITERATIONS: usize = 3;
pub const DEFAULT_WAIT: Duration = Duration::from_secs(1);
pub const DEFAULT_SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// A run's length when the load has none (it runs until stopped).
pub const DEFAULT_LENGTH: Duration = Duration::from_secs(5);

/// A sweep as asked for: `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct SweepAsk {
    /// A grid of connections per worker (`1,4,16:256:16`), or of rates (requests per second
    /// of all workers together): one of the two.
    pub connections: Option<String>,
    pub rates: Option<String>,
    pub iterations: Option<usize>,
    pub wait: Option<Duration>,
    pub open_loop: Option<bool>,
    /// Streams per connection over HTTP/2 and HTTP/3 (h2load's `-m`; default 1).
    pub streams: Option<u32>,
    pub collect: Option<Vec<String>>,
    pub sample_every: Option<Duration>,
}

impl SweepOptions {
    /// The sweep `ask` describes over the load `base`, with the defaults for what it leaves
    /// out; errors name the option (`connections`, `iterations`, …).
    pub fn new(ask: &SweepAsk, base: &RunSpec) -> Result<SweepOptions, AskError> {
        let err = |field, reason: String| AskError { field, reason };
        let (rate, levels) = match (&ask.rates, &ask.connections) {
            (Some(_), Some(_)) => {
                return Err(err("rates", "cannot be used with a connections grid".into()))
            }
            (Some(r), None) => (true, grid::parse(r).map_err(|e| err("rates", e.to_string()))?),
            (None, Some(c)) => {
                (false, grid::parse(c).map_err(|e| err("connections", e.to_string()))?)
            }
            (None, None) => {
                return Err(err(
                    "connections",
                    "or rates: give the grid, e.g. 1,4,16:64:16 (connections) or 100,200,400 \
                     (rates)"
                        .into(),
                ))
            }
        };
        let iterations = ask.iterations.unwrap_or(DEFAULT_ITERATIONS);
        if iterations == 0 {
            return Err(err("iterations", "must be at least 1".into()));
        }
        let dimension = match (rate, base.protocol()) {
            (true, _) => Dimension::Rate,
            (false, Protocol::Http1) => Dimension::Connections { streams: None },
            // As h2load's -m: each connection carries this many streams.
            (false, Protocol::Http2 | Protocol::Http3) => {
                Dimension::Connections { streams: Some(ask.streams.unwrap_or(1).max(1)) }
            }
        };
        let collect = Collect::parse(ask.collect.as_deref().unwrap_or_default()).map_err(|s| {
            err("collect_stats", format!("{s:?}: expected any of {}", Collect::NAMES.join(", ")))
        })?;
        Ok(SweepOptions {
            dimension,
            levels,
            iterations,
            length: base.duration().unwrap_or(DEFAULT_LENGTH),
            wait: ask.wait.unwrap_or(DEFAULT_WAIT),
            open_loop: ask.open_loop.unwrap_or(true),
            collect,
            sample_every: ask.sample_every.unwrap_or(DEFAULT_SAMPLE_EVERY),
        })
    }

    /// The sweep as JSON, every option with its value (what `--dry-run` shows).
    pub fn to_json(&self) -> serde_json::Value {
        let fmt = shrike_stats::duration::format_proto;
        let c = self.collect;
        let collected: Vec<&str> = Collect::NAMES
            .iter()
            .zip([c.cpu, c.rss, c.vms, c.fds, c.ctx_switches])
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect();
        serde_json::json!({
            "axis": if self.dimension.is_rate() { "rate" } else { "connections" },
            "streams_per_connection": match self.dimension {
                Dimension::Connections { streams } => streams,
                _ => None,
            },
            "levels": self.levels,
            "iterations": self.iterations,
            "length": fmt(self.length),
            "wait": fmt(self.wait),
            "open_loop": self.open_loop,
            "collect_stats": collected,
            "collect_stats_interval": fmt(self.sample_every),
        })
    }

    /// Reads a sweep from JSON (the service's `Sweep`): `connections` or `rates` (a grid such
    /// as "1,4,16:64:16"), `iterations`, `wait` ("1s"), `open_loop`, `streams`,
    /// `collect_stats` (["cpu", …]), `collect_stats_interval` ("250ms"), each with `shrike
    /// sweep`'s default. Errors name the field.
    pub fn from_json(v: &serde_json::Value, base: &RunSpec) -> Result<SweepOptions, String> {
        use serde_json::Value;
        let text = |k: &str| -> Result<Option<String>, String> {
            match v.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Number(n)) => Ok(Some(n.to_string())),
                Some(_) => Err(format!("sweep.{k}: a grid such as \"1,4,16:64:16\"")),
            }
        };
        let dur = |k: &str| -> Result<Option<Duration>, String> {
            match v.get(k).and_then(Value::as_str) {
                None => Ok(None),
                Some(t) => shrike_stats::duration::parse_duration(t)
                    .map(Some)
                    .map_err(|e| format!("sweep.{k}: {e}")),
            }
        };
        let collect = match v.get("collect_stats") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|s| s.as_str().map(String::from).ok_or("sweep.collect_stats: names"))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => return Err("sweep.collect_stats: a list of names".into()),
        };
        let ask = SweepAsk {
            connections: text("connections")?,
            rates: text("rates")?,
            iterations: v.get("iterations").and_then(Value::as_u64).map(|n| n as usize),
            wait: dur("wait")?,
            open_loop: v.get("open_loop").and_then(Value::as_bool),
            streams: v
                .get("streams")
                .and_then(Value::as_u64)
                .map(|n| n.min(u64::from(u32::MAX)) as u32),
            collect,
            sample_every: dur("collect_stats_interval")?,
        };
        SweepOptions::new(&ask, base).map_err(|e| format!("sweep.{e}"))
    }
}

/// A sweep, apart from the load it varies and the instances it runs on.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// What a level sets: connections per worker (unpaced) or the rate of all workers.
    pub dimension: Dimension,
    pub levels: Vec<u64>,
    /// Measured runs per point (their spread gives the error bars and intervals).
    pub iterations: usize,
    /// Each run's length.
    pub length: Duration,
    /// Pause after each run, so one run's connections and backlog do not bleed into the next.
    pub wait: Duration,
    /// Rate points run open loop unless this is false.
    pub open_loop: bool,
    pub collect: Collect,
    /// Time between resource samples.
    pub sample_every: Duration,
}

/// Where one run of an instance goes, and which server it samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The target URL (`None`: the load's own).
    pub url: Option<String>,
    /// The server sampled (`None`: only the machine's CPU).
    pub server: Option<Source>,
}

/// The instances a sweep runs on: one, or a baseline and a candidate.
pub trait Instances {
    fn names(&self) -> Vec<String>;
    /// Instance `k` is about to run: where to, and what to sample (a server may be restarted
    /// here). `Ok(None)`: a stop came while it was readied; the sweep ends with what it has.
    /// `Err`: it cannot run (its server exited): the sweep ends with what it has, failed.
    fn place(&mut self, k: usize) -> Result<Option<Placement>, String>;

    /// Instance `k` has just run: `Err` when it can run no more (its server exited during
    /// the run), which ends the sweep as `place`'s error does.
    fn ran(&mut self, _k: usize) -> Result<(), String> {
        Ok(())
    }
}

/// Fixed targets: a name and URL each (`--compare`, the service's instances).
#[derive(Clone, Debug)]
pub struct Targets(pub Vec<(String, Option<String>)>);

impl Instances for Targets {
    fn names(&self) -> Vec<String> {
        self.0.iter().map(|(n, _)| n.clone()).collect()
    }

    fn place(&mut self, k: usize) -> Result<Option<Placement>, String> {
        let url = self.0.get(k).and_then(|(_, u)| u.clone());
        Ok(Some(Placement { url, server: None }))
    }
}

/// One measured run, as a sweep reports it while it goes.
#[derive(Debug)]
pub struct Measured<'a> {
    pub instance: &'a str,
    pub level: u64,
    /// Which of the point's iterations (0-based).
    pub iteration: usize,
    pub run: &'a Iteration,
    /// The run's full result.
    pub result: &'a shrike_stats::RunResult,
}

/// Why a sweep could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// A point's spec is invalid (the base load at a level).
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("a run could not start: {0}")]
    Trial(TrialError),
}

/// Runs the sweep: every level, `iterations` times on every instance, in alternating order.
/// A stop (the runner starts no more, or a run was interrupted) ends it with what it
/// measured, marked incomplete; an instance that can run no more ends it the same way, with
/// the reason in [`Sweep::stopped_by`].
pub fn run(
    base: &RunSpec,
    options: &SweepOptions,
    instances: &mut dyn Instances,
    runner: &mut dyn TrialRunner,
    seen: &mut dyn FnMut(Measured),
) -> Result<Sweep, SweepError> {
    let names = instances.names();
    let n = names.len();
    let mut sweep = Sweep {
        axis: if options.dimension.is_rate() { "rate" } else { "connections" }.into(),
        workers: base.concurrency().workers().get() as u64,
        instances: names.clone(),
        points: Vec::new(),
        server_cores: None,
        complete: true,
        stopped_by: None,
        options: base.to_json(),
        grid: options.to_json(),
        setup: serde_json::Value::Null,
    };
    'grid: for &level in &options.levels {
        let first = sweep.points.len();
        for name in &names {
            sweep.points.push(Point { instance: name.clone(), level, iterations: Vec::new() });
        }
        for i in 0..options.iterations {
            let order: Vec<usize> =
                if i % 2 == 1 { (0..n).rev().collect() } else { (0..n).collect() };
            for k in order {
                let place = match instances.place(k) {
                    Ok(Some(place)) => place,
                    Ok(None) => {
                        sweep.complete = false;
                        break 'grid;
                    }
                    Err(why) => {
                        sweep.stopped_by = Some(why);
                        sweep.complete = false;
                        break 'grid;
                    }
                };
                if sweep.server_cores.is_none() {
                    sweep.server_cores = place.server.as_ref().and_then(resources::source_cores);
                }
                let load = match &place.url {
                    Some(url) => base.edit().url(url).build()?,
                    None => base.clone(),
                };
                let spec = trial_spec(
                    &load,
                    options.dimension,
                    level as f64,
                    options.length,
                    options.open_loop,
                )?;
                let sampler = Sampler::start(place.server.clone(), options.sample_every);
                let ran = runner.run(&spec);
                // The server as the load saw it: over the generators' own sending window, not
                // their start-up (a fleet's start delay) or the drain.
                let window = match &ran {
                    Ok(Some(r)) => run_window(&r.result),
                    _ => None,
                };
                let window = options.collect.keep(sampler.finish_over(window));
                let Some(TrialRun { result, client }) = ran.map_err(|e| match e {
                    TrialError::Spec(e) => SweepError::Spec(e),
                    e => SweepError::Trial(e),
                })?
                else {
                    sweep.complete = false;
                    break 'grid;
                };
                if result.termination == Termination::Interrupted {
                    sweep.complete = false;
                    break 'grid;
                }
                let it = Iteration::of(&result, window, client.cpu_cores);
                seen(Measured {
                    instance: &names[k],
                    level,
                    iteration: i,
                    run: &it,
                    result: &result,
                });
                sweep.points[first + k].iterations.push(it);
                if let Err(why) = instances.ran(k) {
                    sweep.stopped_by = Some(why);
                    sweep.complete = false;
                    break 'grid;
                }
                if !options.wait.is_zero() {
                    std::thread::sleep(options.wait);
                }
            }
        }
    }
    sweep.points.retain(|p| !p.iterations.is_empty());
    Ok(sweep)
}

/// A result's sending window on the wall clock: from its earliest worker's (generator's)
/// start to its latest's end of sending.
fn run_window(
    result: &shrike_stats::RunResult,
) -> Option<(std::time::SystemTime, std::time::SystemTime)> {
    let workers = match result.workers.is_empty() {
        true => std::slice::from_ref(&result.global),
        false => &result.workers[..],
    };
    let from = workers.iter().map(|w| w.execution_start).min()?;
    let to = workers.iter().map(|w| w.execution_start + w.rate_window()).max()?;
    Some((from, to))
}
