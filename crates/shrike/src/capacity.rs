//! `shrike capacity`: the highest rate (or concurrency) that meets every SLO. The planner in
//! shrike-plan picks each trial and makes its spec; the trials run here, on a fleet
//! (`--remote`) or on a Nighthawk service (`--nighthawk-service`), with the same signal
//! handling as `run`, and are judged with the client's own CPU where it is known.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use shrike_output::OutputFormat as F;
use shrike_plan::capacity::{
    goals, CapacityAsk, CapacityOptions, Dimension, SearchError, Slo, Trial,
};
use shrike_spec::Protocol;

use crate::args::{parse, usage};
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::{self, info, warning, Tag};
use crate::run::RunArgs;
use crate::trials::Trials;

#[derive(Args, Debug)]
pub struct CapacityArgs {
    /// An objective every answer must meet (repeatable): p99<=20ms, p99.9<=100ms, mean<=5ms,
    /// max<=1s (latency from the schedule, free of coordinated omission), service.p99<=5ms
    /// (service time), errors<=0.1%, achieved>=99%. Objectives on one metric with different
    /// bounds are separate goals, each answered in the same pass.
    /// With --spec naming a stored capacity search, its objectives (and its search options, for
    /// the flags not given) are searched again.
    #[arg(long = "slo", value_name = "SLO")]
    pub slos: Vec<String>,
    /// What to search: rate (open loop, requests per second for all workers together) or
    /// concurrency (closed loop, unpaced: connections per worker over HTTP/1.1, requests in
    /// flight per worker, --max-active-requests, over HTTP/2 and HTTP/3, where one connection
    /// carries many).
    /// [default: rate, or a stored search's (--spec)]
    #[arg(long, value_enum)]
    pub search: Option<SearchKind>,
    /// The first level tried [default: --rps × workers for rate, 1 for concurrency].
    #[arg(long, value_name = "LEVEL")]
    pub start: Option<f64>,
    /// Stop narrowing when the gap between the highest pass and the lowest fail is at most
    /// this share of the pass [default: 2%].
    #[arg(long, value_parser = parse_percent)]
    pub precision: Option<f64>,
    /// Length of each trial while searching [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub trial_duration: Option<Duration>,
    /// Length of the confirmation trial at each answer [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub final_duration: Option<Duration>,
    /// Pause between trials, so one trial's backlog does not bleed into the next [default: 0s].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub cooldown: Option<Duration>,
    /// How many failures beyond one, and more than its passes, fail a level: with 1 a failure
    /// is always tried again before it counts, and a tie is settled by more trials; 0 lets
    /// one failure decide (fast, but one stalled trial can then pull the answer down)
    /// [default: 1].
    #[arg(long)]
    pub trial_repeats: Option<u32>,
    /// Give up after this many trials [default: 40].
    #[arg(long)]
    pub max_trials: Option<usize>,
    /// The highest rate the search may offer (a rate search; all workers together): a goal
    /// every level up to it meets answers "at least" it, as Nighthawk's step controller's
    /// range ends. No bound by default.
    #[arg(long, value_name = "RPS")]
    pub max_rate: Option<f64>,
    /// The load: `shrike run`'s flags (target, protocol, workers, connections, headers, TLS…).
    #[command(flatten)]
    pub load: RunArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchKind {
    Rate,
    Concurrency,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?}: expected a percentage, e.g. 2%"))?;
    if v > 0.0 && v < 100.0 {
        Ok(v / 100.0)
    } else {
        Err(format!("{s:?}: a precision lies between 0% and 100%"))
    }
}

pub fn run(mut args: CapacityArgs) -> anyhow::Result<ExitCode> {
    restore_search(&mut args);
    if args.slos.is_empty() {
        return Err(usage(
            "give at least one --slo (e.g. --slo 'p99<=20ms'), or --spec a stored capacity search",
        ));
    }
    let slos: Vec<Slo> = args
        .slos
        .iter()
        .map(|s| Slo::parse(s).map_err(|e| usage(e.to_string())))
        .collect::<anyhow::Result<_>>()?;
    let goals = goals(&slos);
    let format = match args.load.output_format {
        None => F::Summary,
        Some(f) if f.is_text() || f == F::Json => f,
        Some(f) => {
            return Err(usage(format!(
                "--output-format {f}: capacity writes summary, human or json"
            )))
        }
    };
    // -o FILE: JSON when --output-file-format or its extension says so, else the text report.
    let file = match (&args.load.output_file, args.load.output_file_format) {
        (None, _) => None,
        (Some(p), Some(F::Json)) => Some((p.clone(), F::Json)),
        (Some(p), Some(f)) if f.is_text() => Some((p.clone(), f)),
        (Some(_), Some(f)) => {
            return Err(usage(format!(
                "--output-file-format {f}: capacity writes summary, human or json"
            )))
        }
        (Some(p), None) => {
            let json = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
            Some((p.clone(), if json { F::Json } else { F::Human }))
        }
    };
    // A concurrency search's trials all run unpaced: so is the load they vary.
    let load = match args.search() {
        SearchKind::Rate => LoadSpec::from_args(&args.load)?,
        SearchKind::Concurrency => LoadSpec::with(&args.load, |e| e.unpaced())?,
    };
    log::set_level(crate::run::level(load.spec.verbosity()));
    refuse_in_mode(&args, &load)?;
    let ask = CapacityAsk {
        slos: slos.clone(),
        rate: Some(args.search() == SearchKind::Rate),
        start: args.start,
        precision: args.precision,
        trial_duration: args.trial_duration,
        final_duration: args.final_duration,
        cooldown: args.cooldown,
        trial_repeats: args.trial_repeats,
        max_trials: args.max_trials,
        max_level: args.max_rate,
        open_loop: args.load.open_loop,
    };
    let options = CapacityOptions::new(&ask, &load.spec).map_err(|e| match e.field {
        "max_level" => usage(format!("--max-rate {}", e.reason)),
        field => usage(format!("--{} {}", field.replace('_', "-"), e.reason)),
    })?;
    let dimension = options.dimension;
    let trials = Trials::of(&args.load, &load)?;
    if args.load.dry_run {
        return crate::dry_run::print(serde_json::json!({
            "command": "capacity",
            "spec": load.spec.to_json(),
            "search": options.to_json(),
            "trials": trials.plan(&args.load)?,
            "output": crate::dry_run::output(format, file.as_ref()),
        }));
    }
    if let Some((path, _)) = &file {
        crate::atomic::ready(path, "--output")?;
    }
    let interrupts = Interrupts::install(load.spec.timeout())
        .map_err(|e| anyhow::Error::new(e).context("the search could not start"))?;
    let outcome = trials.with_runner(&interrupts, |runner| {
        shrike_plan::capacity::run(&load.spec, &options, runner, &mut |n, t| {
            log_trial(n, t, dimension, &slos)
        })
    });
    let mut outcome = outcome.map_err(|e| match e {
        SearchError::Spec(e) => load.explain(e),
        SearchError::Trial(e) => crate::trials::explain(e),
        e => anyhow::Error::new(e),
    })?;
    outcome.complete = outcome.complete && !interrupts.interrupted();
    let complete = outcome.complete;
    let report = outcome.report();
    let answers = &outcome.answers;
    let doc = outcome.json();
    let json_text = || -> anyhow::Result<String> { Ok(serde_json::to_string_pretty(&doc)? + "\n") };
    let stdout_text = match format {
        F::Json => json_text()?,
        _ => report.human(),
    };
    // Written whole or not at all, and before stdout, so a closed pipe loses nothing.
    if let Some((path, f)) = file {
        let text = if f == F::Json { json_text()? } else { report.human() };
        crate::atomic::write(&path, |w| w.write_all(text.as_bytes()))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    crate::out::print(&stdout_text)?;
    drop(load);
    if !complete {
        return Ok(ExitCode::from(crate::interrupts::status()));
    }
    // Every goal without a usable answer says why, on stderr too, and fails the run.
    for (goal, a) in goals.iter().zip(answers.iter()) {
        if !a.usable() {
            log::line(Tag::Error, &report.answer_line(goal, a));
        }
    }
    Ok(if outcome.failed() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The load's flags a concurrency search sets itself: the rate (trials are unpaced), and the
/// concurrency it searches (connections over HTTP/1.1, requests in flight over HTTP/2 and 3).
fn refuse_in_mode(args: &CapacityArgs, load: &LoadSpec) -> anyhow::Result<()> {
    if args.search() == SearchKind::Rate {
        return Ok(());
    }
    let l = &args.load;
    let refused = |flag: &str, why: &str| Err(crate::refuse::in_mode("capacity", flag, why));
    if l.shaping.rps.is_some() {
        return refused("--rps", "a concurrency search runs every trial unpaced");
    }
    if l.open_loop.is_some() {
        return refused(
            "--open-loop",
            "a concurrency search runs every trial unpaced, closed loop",
        );
    }
    if args.max_rate.is_some() {
        return refused("--max-rate", "a concurrency search offers no rate to bound");
    }
    match load.spec.protocol() {
        Protocol::Http1 if l.connections.is_some() => {
            refused("--connections", "over HTTP/1.1 the connections are what it searches")
        }
        Protocol::Http2 | Protocol::Http3 if l.max_active_requests.is_some() => refused(
            "--max-active-requests",
            "over HTTP/2 and HTTP/3 the requests in flight are what it searches",
        ),
        _ => Ok(()),
    }
}

fn log_trial(n: usize, t: &Trial, dimension: Dimension, slos: &[Slo]) {
    info!("{}", shrike_plan::capacity::report::progress(n, t, dimension, slos));
    if let Some(why) = &t.invalid {
        warning!("trial {n} is invalid: {why}");
    }
}

impl CapacityArgs {
    fn search(&self) -> SearchKind {
        self.search.unwrap_or(SearchKind::Rate)
    }
}

/// A stored capacity search named by `--spec` is searched again as it was: its objectives
/// when no `--slo` is given (the default errors objective it stated is implied again, not
/// given), and its search options for the flags that are not. The load comes from the same
/// file's options, as for every `--spec`.
fn restore_search(args: &mut CapacityArgs) {
    let Some(doc) = crate::load::stored_plan(&args.load, "capacity") else { return };
    if args.slos.is_empty() {
        let given = doc["capacity"]["slos"].as_array().into_iter().flatten();
        let given = given.filter(|o| o["implied"] != true);
        args.slos = given.filter_map(|o| o["slo"].as_str().map(str::to_string)).collect();
    }
    let s = &doc["search"];
    let secs = |k: &str| s[k].as_str().and_then(|t| shrike_stats::duration::parse_duration(t).ok());
    args.search = args.search.or(match s["search"].as_str() {
        Some("concurrency") => Some(SearchKind::Concurrency),
        Some("rate") => Some(SearchKind::Rate),
        _ => None,
    });
    args.start = args.start.or(s["start"].as_f64());
    args.precision = args.precision.or(s["precision"].as_f64());
    args.trial_duration = args.trial_duration.or(secs("trial_duration"));
    args.final_duration = args.final_duration.or(secs("final_duration"));
    args.cooldown = args.cooldown.or(secs("cooldown"));
    args.trial_repeats =
        args.trial_repeats.or(s["trial_repeats"].as_u64().and_then(|n| u32::try_from(n).ok()));
    args.max_trials =
        args.max_trials.or(s["max_trials"].as_u64().and_then(|n| usize::try_from(n).ok()));
    args.max_rate = args.max_rate.or(s["max_level"].as_f64());
}
