//! The search loop, for every caller (`shrike capacity`, the service's `Capacity`): each
//! trial is the user's load at the search's level and length ([`trial_spec`]), run by the
//! caller's [`TrialRunner`] (this machine, a fleet, a Nighthawk service), judged, and recorded
//! until the search is done.

use std::time::Duration;

use serde_json::Value;
use shrike_spec::{RunSpec, SpecError};
use shrike_stats::Termination;

use super::search::{Answer, Next, Search, SearchConfig};
use super::slo::{goals, Metric, Slo};
use super::trial::Trial;
use super::Report;
use crate::cause::CauseKind;
use crate::trial::{trial_spec, Dimension, TrialError, TrialRun, TrialRunner};

/// `shrike capacity`'s defaults, for every caller.
pub const DEFAULT_PRECISION: f64 = 0.02;
pub const DEFAULT_TRIAL_DURATION: Duration = Duration::from_secs(2);
pub const DEFAULT_FINAL_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_TRIAL_REPEATS: u32 = 1;
pub const DEFAULT_MAX_TRIALS: usize = 40;

/// Why a search cannot be made: which of its options (`start`, `precision`, …), and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct AskError {
    pub field: &'static str,
    pub reason: String,
}

/// A search as asked for: `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct CapacityAsk {
    pub slos: Vec<Slo>,
    /// Search the rate (the default) or the concurrency.
    pub rate: Option<bool>,
    pub start: Option<f64>,
    /// A share (0.02 for 2%).
    pub precision: Option<f64>,
    pub trial_duration: Option<Duration>,
    pub final_duration: Option<Duration>,
    pub cooldown: Option<Duration>,
    pub trial_repeats: Option<u32>,
    pub max_trials: Option<usize>,
    /// The highest level the search may try (`--max-rate`); none by default.
    pub max_level: Option<f64>,
    /// Rate trials run open loop unless this says otherwise.
    pub open_loop: Option<bool>,
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
    /// The search `ask` describes over the load `base`, with the defaults for what it leaves
    /// out; errors name the option (`start`, `precision`, …).
    pub fn new(ask: &CapacityAsk, base: &RunSpec) -> Result<CapacityOptions, AskError> {
        let err = |field, reason: &str| AskError { field, reason: reason.to_string() };
        if ask.slos.is_empty() {
            return Err(err("slos", "give at least one objective, e.g. p99<=20ms"));
        }
        if ask.max_trials == Some(0) {
            return Err(err("max_trials", "must be at least 1"));
        }
        // Every search judges errors: a trial whose answers were all 503 meets any latency
        // bound, and must not pass for it.
        let mut slos = ask.slos.clone();
        if !slos.iter().any(|s| s.metric == Metric::Errors) {
            slos.push(Slo::default_errors());
        }
        let rate = ask.rate.unwrap_or(true);
        let dimension = Dimension::of(rate, base.protocol());
        let workers = base.concurrency().workers().get() as f64;
        let start = match ask.start {
            Some(s) if s > 0.0 && s.is_finite() => s,
            Some(_) => return Err(err("start", "must be above 0")),
            None if rate => base.plan().peak().map(|r| r * workers).ok_or_else(|| {
                err(
                    "start",
                    "is needed: the load's rate is \"max\", which gives a rate search nowhere \
                     to start (or search the concurrency)",
                )
            })?,
            None => 1.0,
        };
        if let Some(max) = ask.max_level {
            if !(max.is_finite() && max >= start) {
                return Err(err("max_level", "must be at least the first level (--start)"));
            }
        }
        let precision = ask.precision.unwrap_or(DEFAULT_PRECISION);
        if !(precision > 0.0 && precision < 1.0) {
            return Err(err("precision", "must be a share between 0% and 100%, e.g. 2%"));
        }
        let trial_duration = ask.trial_duration.unwrap_or(DEFAULT_TRIAL_DURATION);
        let final_duration = ask.final_duration.unwrap_or(DEFAULT_FINAL_DURATION);
        if trial_duration.is_zero() || final_duration.is_zero() {
            let field = if trial_duration.is_zero() { "trial_duration" } else { "final_duration" };
            return Err(err(field, "must be longer than 0"));
        }
        Ok(CapacityOptions {
            slos,
            dimension,
            config: SearchConfig {
                start,
                precision,
                integer: !rate,
                repeats: ask.trial_repeats.unwrap_or(DEFAULT_TRIAL_REPEATS),
                trial_duration,
                final_duration,
                max_trials: ask.max_trials.unwrap_or(DEFAULT_MAX_TRIALS),
                max_level: ask.max_level,
            },
            cooldown: ask.cooldown.unwrap_or_default(),
            open_loop: ask.open_loop.unwrap_or(true),
        })
    }

    /// The search as JSON, every option with its value (what `--dry-run` shows).
    pub fn to_json(&self) -> Value {
        let c = &self.config;
        serde_json::json!({
            "slos": self.slos.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "search": if self.dimension.is_rate() { "rate" } else { "concurrency" },
            "levels": self.dimension.unit(),
            "start": c.start,
            "precision": c.precision,
            "trial_duration": shrike_stats::duration::format_proto(c.trial_duration),
            "final_duration": shrike_stats::duration::format_proto(c.final_duration),
            "cooldown": shrike_stats::duration::format_proto(self.cooldown),
            "trial_repeats": c.repeats,
            "max_trials": c.max_trials,
            "max_level": c.max_level,
            "open_loop": self.open_loop,
        })
    }

    /// Reads a search from JSON (the service's `Capacity`): `slos` (["p99<=20ms", …]),
    /// `search` ("rate" or "concurrency"), `start`, `precision` (0.02), `trial_duration`,
    /// `final_duration`, `cooldown` ("2s"), `trial_repeats`, `max_trials`, `open_loop`, each
    /// with `shrike capacity`'s default. `base` is the load the trials vary. Errors name the
    /// field.
    pub fn from_json(v: &Value, base: &RunSpec) -> Result<CapacityOptions, String> {
        let slos = match v.get("slos") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    let s = s.as_str().ok_or("search.slos: objectives are strings")?;
                    Slo::parse(s).map_err(|e| format!("search.slos: {e}"))
                })
                .collect::<Result<Vec<_>, String>>()?,
            Some(_) => return Err("search.slos: a list of objectives, e.g. [\"p99<=20ms\"]".into()),
        };
        let rate = match v.get("search").and_then(Value::as_str) {
            None => None,
            Some("rate") => Some(true),
            Some("concurrency") => Some(false),
            Some(other) => {
                return Err(format!("search.search: {other:?} is not rate or concurrency"))
            }
        };
        let num = |k: &str| v.get(k).and_then(Value::as_f64);
        let dur = |k: &str| -> Result<Option<Duration>, String> {
            match v.get(k).and_then(Value::as_str) {
                None => Ok(None),
                Some(t) => shrike_stats::duration::parse_duration(t)
                    .map(Some)
                    .map_err(|e| format!("search.{k}: {e}")),
            }
        };
        let whole = |k: &str| v.get(k).and_then(Value::as_u64);
        let ask = CapacityAsk {
            slos,
            rate,
            start: num("start"),
            precision: num("precision"),
            trial_duration: dur("trial_duration")?,
            final_duration: dur("final_duration")?,
            cooldown: dur("cooldown")?,
            trial_repeats: whole("trial_repeats").map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            max_trials: whole("max_trials").map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            max_level: num("max_level"),
            open_loop: v.get("open_loop").and_then(Value::as_bool),
        };
        CapacityOptions::new(&ask, base).map_err(|e| format!("search.{e}"))
    }
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
    /// Why the search ended before its answer: the server stopped accepting connections.
    pub stopped_by: Option<String>,
    /// What was searched: the load's options (its target among them), and the search's.
    pub options: Value,
    pub search: Value,
}

impl Outcome {
    pub fn report(&self) -> Report<'_> {
        Report {
            search: if self.dimension.is_rate() { "rate" } else { "concurrency" },
            unit: self.dimension.unit(),
            slos: &self.slos,
            goals: &self.goals,
            trials: &self.trials,
            answers: &self.answers,
            complete: self.complete,
            stopped_by: self.stopped_by.as_deref(),
            target: self.options.get("uri").and_then(Value::as_str).filter(|u| !u.is_empty()),
        }
    }

    /// The report as JSON (answers, goals, every trial with its result), with what was
    /// searched: `options` (the load, as a run's result records them: `--spec` runs it
    /// again) and `search`.
    pub fn json(&self) -> Value {
        let mut doc = self.report().json(self.results.clone());
        doc["options"] = self.options.clone();
        doc["search"] = self.search.clone();
        doc
    }

    /// Whether a goal has no usable answer (the CLI's exit code 1).
    pub fn failed(&self) -> bool {
        self.stopped_by.is_some() || self.answers.iter().any(|a| !a.usable())
    }
}

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// A trial's spec is invalid (the base load at a level).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The runner could not run a trial.
    #[error("a trial could not run: {0}")]
    Trial(TrialError),
}

/// Runs the search: `runner` runs each trial (a trial it did not start, because a stop came,
/// ends the search with what it has), `seen` hears of each judged trial as it comes.
pub fn run(
    base: &RunSpec,
    options: &CapacityOptions,
    runner: &mut dyn TrialRunner,
    seen: &mut dyn FnMut(usize, &Trial),
) -> Result<Outcome, SearchError> {
    let goals = goals(&options.slos);
    let mut search = Search::new(options.config.clone(), goals.len());
    let mut results = Vec::new();
    let mut complete = true;
    let mut stopped_by = None;
    let rate = options.dimension.is_rate();
    while let Next::Trial { level, duration, confirmation } = search.next() {
        let spec = trial_spec(base, options.dimension, level, duration, options.open_loop)?;
        let run = match runner.run(&spec) {
            Ok(r) => r,
            Err(TrialError::Spec(e)) => return Err(SearchError::Spec(e)),
            Err(e) => return Err(SearchError::Trial(e)),
        };
        let Some(TrialRun { result, client }) = run else {
            complete = false;
            break;
        };
        let trial = Trial::judge(level, rate, confirmation, &result, client, &goals);
        seen(search.trials().len() + 1, &trial);
        if result.termination == Termination::Interrupted {
            // Cut short: its figures describe part of a trial, so it does not count.
            complete = false;
            break;
        }
        results.push(shrike_output::to_json_value(&result));
        // A server that no longer accepts connections has no capacity left to search: more
        // trials would only fail the levels that passed. The first trial's answer says it.
        let gone = trial.cause.as_ref().filter(|c| {
            matches!(c.kind, CauseKind::Connect | CauseKind::ConnectTimeout)
                && !search.trials().is_empty()
        });
        if let Some(cause) = gone {
            stopped_by = Some(format!(
                "the server stopped accepting connections at trial {} ({}): {}",
                search.trials().len() + 1,
                match rate {
                    true => format!("{level:.1}/s"),
                    false => format!("{level} {}", options.dimension.unit()),
                },
                cause.detail
            ));
        }
        search.record(trial);
        if stopped_by.is_some() {
            break;
        }
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
        stopped_by,
        options: base.to_json(),
        search: options.to_json(),
    })
}
