//! `shrike capacity`: the highest rate (or concurrency) that meets every SLO. The planner in
//! shrike-plan picks each trial; this drives it: the trial's spec is the user's load with the
//! level and duration varied (`LoadSpec::vary`), run through the engine's library call with
//! the same signal handling as `run`, and judged with the client's own CPU.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use shrike_plan::capacity::{
    goals, CapacityOptions, ClientLoad, Dimension, SearchConfig, SearchError, Slo, Status, Trial,
    TrialRun,
};
use shrike_stats::duration::{format_human_ns, parse_duration};

use crate::args::usage;
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::{self, info, warning, Tag};
use crate::run::RunArgs;

#[derive(Args, Debug)]
pub struct CapacityArgs {
    /// An objective every answer must meet (repeatable): p99<=20ms, p99.9<=100ms, mean<=5ms,
    /// max<=1s (latency from the schedule, free of coordinated omission), service.p99<=5ms
    /// (service time), errors<=0.1%, achieved>=99%. Objectives on one metric with different
    /// bounds are separate goals, each answered in the same pass.
    #[arg(long = "slo", required = true, value_name = "SLO")]
    pub slos: Vec<String>,
    /// What to search: rate (open loop, requests per second for all workers together) or
    /// concurrency (closed loop, unpaced: connections per worker over HTTP/1.1, requests in
    /// flight per worker, --max-active-requests, over HTTP/2 and HTTP/3, where one connection
    /// carries many).
    #[arg(long, value_enum, default_value = "rate")]
    pub search: SearchKind,
    /// The first level tried [default: --rps × workers for rate, 1 for concurrency].
    #[arg(long, value_name = "LEVEL")]
    pub start: Option<f64>,
    /// Stop narrowing when the gap between the highest pass and the lowest fail is at most
    /// this share of the pass.
    #[arg(long, default_value = "2%", value_parser = parse_percent)]
    pub precision: f64,
    /// Length of each trial while searching.
    #[arg(long, default_value = "2s", value_parser = parse_duration_arg)]
    pub trial_duration: Duration,
    /// Length of the confirmation trial at each answer.
    #[arg(long, default_value = "10s", value_parser = parse_duration_arg)]
    pub final_duration: Duration,
    /// Pause between trials, so one trial's backlog does not bleed into the next.
    #[arg(long, default_value = "0s", value_parser = parse_duration_arg)]
    pub cooldown: Duration,
    /// Extra trials for a level that failed narrowly (within 10% of a bound).
    #[arg(long, default_value_t = 1)]
    pub trial_repeats: u32,
    /// Give up after this many trials.
    #[arg(long, default_value_t = 40)]
    pub max_trials: usize,
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

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

pub fn run(args: CapacityArgs) -> anyhow::Result<ExitCode> {
    let slos: Vec<Slo> = args
        .slos
        .iter()
        .map(|s| Slo::parse(s).map_err(|e| usage(e.to_string())))
        .collect::<anyhow::Result<_>>()?;
    let goals = goals(&slos);
    if args.trial_duration.is_zero() || args.final_duration.is_zero() {
        return Err(usage("--trial-duration and --final-duration must be longer than 0"));
    }
    let format = match args.load.output_format {
        None => shrike_output::OutputFormat::Summary,
        Some(f) if f.is_text() || f == shrike_output::OutputFormat::Json => f,
        Some(f) => {
            return Err(usage(format!(
                "--output-format {f}: capacity writes summary, human or json"
            )))
        }
    };
    let file = args.load.output_file.clone();
    let load = LoadSpec::from_args(&args.load)?;
    let workers = load.spec.concurrency().workers().get();
    let rate = args.search == SearchKind::Rate;
    let dimension = Dimension::of(rate, load.spec.protocol());
    let start = match args.start {
        Some(s) if s > 0.0 => s,
        Some(_) => return Err(usage("--start must be above 0")),
        None if rate => match load.spec.plan().peak() {
            Some(r) => r * workers as f64,
            None => return Err(usage("--rps max has no rate to start a rate search from; give --start or --search concurrency")),
        },
        None => 1.0,
    };
    let options = CapacityOptions {
        slos: slos.clone(),
        dimension,
        config: SearchConfig {
            start,
            precision: args.precision,
            integer: !rate,
            repeats: args.trial_repeats,
            trial_duration: args.trial_duration,
            final_duration: args.final_duration,
            max_trials: args.max_trials,
        },
        cooldown: args.cooldown,
        open_loop: args.load.open_loop.unwrap_or(true),
    };
    // --remote: every trial runs on the whole fleet, the level is the fleet's (its rate, or
    // its connections: unpaced shards share them).
    let fleet = match args.load.remote.is_remote() {
        false => None,
        true if load.server.is_some() => {
            return Err(usage("--remote needs a target URL the generators can reach"))
        }
        true => Some(args.load.remote.fleet()?),
    };
    let interrupts = Interrupts::install(load.spec.timeout())
        .map_err(|e| anyhow::Error::new(e).context("the search could not start"))?;
    let mut run_trial = |spec: &shrike_spec::RunSpec| -> Result<Option<TrialRun>, String> {
        if interrupts.interrupted() {
            return Ok(None);
        }
        let (cpu0, t0) = (process_cpu_seconds(), Instant::now());
        let result = match &fleet {
            None => {
                let ready = interrupts
                    .preparing(|| shrike_engine::Run::new(spec).prepare())
                    .map_err(|e| format!("{:#}", load.explain(e)))?;
                interrupts.execute(ready).map_err(|e| e.to_string())?
            }
            Some(fleet) => {
                let done = interrupts
                    .execute_with(|stop| {
                        shrike_service::coordinator::coordinate(spec, fleet, stop, None)
                    })
                    .map_err(|e| e.to_string())?;
                for g in done.generators.iter().filter(|g| g.failure.is_some()) {
                    warning!(
                        "generator {} ({}): {}",
                        g.name,
                        g.address,
                        g.failure.as_deref().unwrap_or("")
                    );
                }
                done.result
            }
        };
        // A fleet's CPU is on the generators: this process's says nothing of them.
        let cpu = process_cpu_seconds()
            .zip(cpu0)
            .map(|(b, a)| (b - a) / t0.elapsed().as_secs_f64())
            .filter(|_| fleet.is_none());
        Ok(Some(TrialRun { result, client: ClientLoad { cpu_cores: cpu, workers } }))
    };
    let outcome =
        shrike_plan::capacity::run_search(&load.spec, &options, &mut run_trial, &mut |n, t| {
            log_trial(n, t, dimension)
        })
        .map_err(|e| match e {
            SearchError::Spec(e) => load.explain(e),
            e => anyhow::Error::new(e),
        })?;
    let mut outcome = outcome;
    outcome.complete = outcome.complete && !interrupts.interrupted();
    let complete = outcome.complete;
    let report = outcome.report();
    let answers = &outcome.answers;
    let doc = outcome.json();
    let json_text = || -> anyhow::Result<String> { Ok(serde_json::to_string_pretty(&doc)? + "\n") };
    let stdout_text = match format {
        shrike_output::OutputFormat::Json => json_text()?,
        _ => report.human(),
    };
    // -o FILE: JSON when its extension says so, else the text report, written whole or not
    // at all, and before stdout, so a closed pipe loses nothing.
    if let Some(path) = file {
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let text = if is_json { json_text()? } else { report.human() };
        crate::atomic::write(&path, |w| w.write_all(text.as_bytes()))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    crate::out::print(&stdout_text)?;
    drop(load);
    if !complete {
        return Ok(ExitCode::from(130));
    }
    let mut failed = false;
    for (goal, a) in goals.iter().zip(answers.iter()) {
        match a.status {
            Status::Found => {}
            Status::GeneratorBound { .. } if a.max.is_some() => {}
            _ => {
                log::line(Tag::Error, &report.answer_line(goal, a));
                failed = true;
            }
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn log_trial(n: usize, t: &Trial, dimension: Dimension) {
    let level = match dimension {
        Dimension::Rate => format!("{:.1}/s", t.level),
        d => format!("{} {}", t.level, d.unit()),
    };
    let p99 = match t.scheduled.count() {
        0 => "-".to_string(),
        _ => format_human_ns(t.scheduled.clamped_quantile(0.99) as f64),
    };
    let verdicts: Vec<&str> = t.verdicts.iter().map(|v| v.name()).collect();
    let line = format!(
        "trial {n}{}: {level} for {}: achieved {:.1}/s, p99 {}, errors {:.2}%: {}",
        if t.confirmation { " (confirmation)" } else { "" },
        format_human_ns(t.duration.as_nanos() as f64),
        t.achieved_rps,
        p99,
        100.0 * t.error_ratio,
        verdicts.join(", ")
    );
    info!("{line}");
    if let Some(why) = &t.invalid {
        warning!("trial {n} is invalid: {why}");
    }
}

/// This process's CPU time (user + system) in seconds.
pub(crate) fn process_cpu_seconds() -> Option<f64> {
    shrike_plan::sweep::resources::cpu_seconds(std::process::id())
}
