//! The search loop, for every caller (`shrike capacity`, the service's `Capacity`): each
//! trial is the user's load with the level and duration patched in, run by the caller (on
//! this machine, on a fleet, on a service), judged, and recorded until the search is done.

use std::time::Duration;

use serde_json::{json, Value};
use shrike_spec::{Protocol, RunSpec, SpecError};
use shrike_stats::{RunResult, Termination};

use super::search::{Answer, Next, Search, SearchConfig, Status};
use super::slo::{goals, Slo};
use super::trial::{ClientLoad, Trial};
use super::Report;

/// What a trial's level sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dimension {
    /// Requests per second, all workers together.
    Rate,
    /// Connections per worker (HTTP/1.1: one request in flight each).
    Connections,
    /// Requests in flight per worker (HTTP/2, HTTP/3).
    ActiveRequests,
}

impl Dimension {
    /// A rate search, or concurrency in the protocol's own terms: over HTTP/2 and HTTP/3 the
    /// requests in flight, not the connections, are the concurrency (one connection carries
    /// them all unless the user limits its streams).
    pub fn of(rate: bool, protocol: Protocol) -> Dimension {
        match (rate, protocol) {
            (true, _) => Dimension::Rate,
            (false, Protocol::Http1) => Dimension::Connections,
            (false, Protocol::Http2 | Protocol::Http3) => Dimension::ActiveRequests,
        }
    }

    /// What a level counts.
    pub fn unit(self) -> &'static str {
        match self {
            Dimension::Rate => "/s",
            Dimension::Connections => "connections",
            Dimension::ActiveRequests => "active requests",
        }
    }
}

/// A search, apart from the load it varies.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    pub slos: Vec<Slo>,
    pub dimension: Dimension,
    pub config: SearchConfig,
    /// Pause between trials, so one trial's backlog does not bleed into the next.
    pub cooldown: Duration,
    /// Rate trials run open loop unless the user chose a closed loop.
    pub open_loop: bool,
}

impl CapacityOptions {
    /// Reads a search from JSON (the service's `Capacity`): `slos` (["p99<=20ms", …]),
    /// `search` ("rate" or "concurrency"), `start`, `precision` (0.02), `trial_duration`,
    /// `final_duration`, `cooldown` ("2s"), `trial_repeats`, `max_trials`, `open_loop`. The
    /// defaults are `shrike capacity`'s; `base` is the load the trials vary. Errors name the
    /// field.
    pub fn from_json(v: &Value, base: &RunSpec) -> Result<CapacityOptions, String> {
        let slos = v
            .get("slos")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .ok_or("search.slos: give at least one objective, e.g. [\"p99<=20ms\"]")?
            .iter()
            .map(|s| {
                let s = s.as_str().ok_or("search.slos: objectives are strings")?;
                Slo::parse(s).map_err(|e| format!("search.slos: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let rate = match v.get("search").and_then(Value::as_str).unwrap_or("rate") {
            "rate" => true,
            "concurrency" => false,
            other => return Err(format!("search.search: {other:?} is not rate or concurrency")),
        };
        let dimension = Dimension::of(rate, base.protocol());
        let workers = base.concurrency().workers().get() as f64;
        let num = |k: &str| v.get(k).and_then(Value::as_f64);
        let start = match num("start") {
            Some(s) if s > 0.0 => s,
            Some(_) => return Err("search.start: must be above 0".into()),
            None if rate => base.plan().peak().map(|r| r * workers).ok_or(
                "search.start: the load's rate is \"max\"; give a start for a rate search",
            )?,
            None => 1.0,
        };
        let precision = num("precision").unwrap_or(0.02);
        if !(precision > 0.0 && precision < 1.0) {
            return Err("search.precision: a share between 0 and 1, e.g. 0.02".into());
        }
        let dur = |k: &str, d: Duration| -> Result<Duration, String> {
            match v.get(k).and_then(Value::as_str) {
                None => Ok(d),
                Some(t) => shrike_stats::duration::parse_duration(t)
                    .map_err(|e| format!("search.{k}: {e}")),
            }
        };
        let trial_duration = dur("trial_duration", Duration::from_secs(2))?;
        let final_duration = dur("final_duration", Duration::from_secs(10))?;
        if trial_duration.is_zero() || final_duration.is_zero() {
            return Err("search.trial_duration and final_duration must be longer than 0".into());
        }
        let whole = |k: &str, d: u64| v.get(k).and_then(Value::as_u64).unwrap_or(d);
        Ok(CapacityOptions {
            slos,
            dimension,
            config: SearchConfig {
                start,
                precision,
                integer: !rate,
                repeats: u32::try_from(whole("trial_repeats", 1)).unwrap_or(u32::MAX),
                trial_duration,
                final_duration,
                max_trials: usize::try_from(whole("max_trials", 40)).unwrap_or(usize::MAX),
            },
            cooldown: dur("cooldown", Duration::ZERO)?,
            open_loop: v.get("open_loop").and_then(Value::as_bool).unwrap_or(true),
        })
    }
}

/// One trial as the caller ran it; `None` from the caller means it was interrupted.
#[derive(Debug)]
pub struct TrialRun {
    pub result: RunResult,
    pub client: ClientLoad,
}

/// A finished (or interrupted) search.
#[derive(Debug)]
pub struct Outcome {
    pub slos: Vec<Slo>,
    pub goals: Vec<Vec<Slo>>,
    pub dimension: Dimension,
    pub trials: Vec<Trial>,
    pub answers: Vec<Answer>,
    /// Every counted trial's full result (JSON), in order.
    pub results: Vec<Value>,
    /// False when interrupted.
    pub complete: bool,
}

impl Outcome {
    pub fn report(&self) -> Report<'_> {
        Report {
            search: if self.dimension == Dimension::Rate { "rate" } else { "concurrency" },
            unit: self.dimension.unit(),
            slos: &self.slos,
            goals: &self.goals,
            trials: &self.trials,
            answers: &self.answers,
            complete: self.complete,
        }
    }

    /// The report as JSON (answers, goals, every trial with its result).
    pub fn json(&self) -> Value {
        self.report().json(self.results.clone())
    }

    /// Whether a goal has no usable answer (the CLI's exit code 1).
    pub fn failed(&self) -> bool {
        self.answers.iter().any(|a| match a.status {
            Status::Found => false,
            Status::GeneratorBound { .. } => a.max.is_none(),
            _ => true,
        })
    }
}

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// A trial's spec is invalid (the base load with a level patched in).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The caller could not run a trial.
    #[error("a trial could not run: {0}")]
    Trial(String),
}

/// Runs the search: `run` runs each trial's spec (returning `None` when interrupted, which
/// ends the search with what it has), `seen` hears of each judged trial as it comes.
pub fn search(
    base: &RunSpec,
    options: &CapacityOptions,
    run: &mut dyn FnMut(&RunSpec) -> Result<Option<TrialRun>, String>,
    seen: &mut dyn FnMut(usize, &Trial),
) -> Result<Outcome, SearchError> {
    let goals = goals(&options.slos);
    let workers = base.concurrency().workers().get();
    let mut search = Search::new(options.config.clone(), goals.len());
    let mut results = Vec::new();
    let mut complete = true;
    while let Next::Trial { level, duration, confirmation } = search.next() {
        let spec = base.patched(&trial_patch(options, level, duration, workers))?;
        let Some(TrialRun { result, client }) = run(&spec).map_err(SearchError::Trial)? else {
            complete = false;
            break;
        };
        let rate = options.dimension == Dimension::Rate;
        let trial = Trial::judge(level, rate, confirmation, &result, client, &goals);
        seen(search.trials().len() + 1, &trial);
        if result.termination == Termination::Interrupted {
            // Cut short: its figures describe part of a trial, so it does not count.
            complete = false;
            break;
        }
        results.push(shrike_output::to_json_value(&result));
        search.record(trial);
        if !options.cooldown.is_zero() && search.next() != Next::Done {
            std::thread::sleep(options.cooldown);
        }
    }
    Ok(Outcome {
        slos: options.slos.clone(),
        answers: search.answers(),
        trials: search.trials().to_vec(),
        goals,
        dimension: options.dimension,
        results,
        complete,
    })
}

/// The user's load at `level` for `duration`: trials run their full length (no default
/// failure predicates end them at the first error: errors are what the objectives judge).
pub fn trial_patch(
    options: &CapacityOptions,
    level: f64,
    duration: Duration,
    workers: usize,
) -> Value {
    let mut p = json!({
        "duration": format!("{}s", duration.as_secs_f64()),
        "no_duration": false,
        "total_requests": null,
        "no_default_failure_predicates": true,
        "stages": null,
        "ramp_duration": null,
    });
    match options.dimension {
        Dimension::Rate => {
            p["requests_per_second"] = json!(level / workers as f64);
            // Open loop unless the user chose otherwise: a closed loop at a rate above
            // capacity waits instead of offering the load, which hides the very limit being
            // searched.
            p["open_loop"] = json!(options.open_loop);
        }
        Dimension::Connections => {
            p["requests_per_second"] = json!("max");
            p["connections"] = json!(level as u64);
        }
        Dimension::ActiveRequests => {
            p["requests_per_second"] = json!("max");
            p["max_active_requests"] = json!(level as u64);
        }
    }
    p
}
