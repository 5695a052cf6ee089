//! `shrike`: the command-line front end. Only this crate knows about flags, terminals, signals
//! and exit codes; it parses flags into the library crates' validated configs and dispatches.
//!
//! Exit codes: 0 ok, 1 the run failed (a failure predicate fired, or the engine could not run),
//! 2 usage or configuration error.

mod args;
mod atomic;
mod capacity;
mod dry_run;
mod embedded;
mod harness;
mod interrupts;
mod jobs;
mod load;
mod log;
mod nighthawk_args;
mod out;
mod refuse;
mod remote;
mod replay;
mod report;
mod request_args;
mod run;
mod serve;
mod service;
mod shaping;
mod suggest;
mod sweep;
mod telemetry;
mod transform;
mod trials;

use std::process::ExitCode;

use clap::{FromArgMatches as _, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "shrike",
    version,
    about = "L7 performance characterization: load generator and test server with coordinated-omission-free latency",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load-test a URL (Nighthawk's client flags). With no URL, benchmarks the built-in server.
    Run(Box<run::RunArgs>),
    /// The highest rate (or concurrency) that meets every SLO: an exponential ramp, bisection,
    /// and a full-length confirmation trial.
    Capacity(Box<capacity::CapacityArgs>),
    /// Saturation sweep over connections (or rate) with iterations, server resource samples,
    /// the throughput peak, a USL fit, and baseline vs candidate.
    Sweep(Box<sweep::SweepArgs>),
    /// Replay jobs: import captures and HAR files, inspect and filter jobs files.
    Jobs(jobs::JobsArgs),
    /// Replay a jobs file's sessions with their captured timing (scaled, sharded), over HTTP
    /// or raw TCP.
    Replay(Box<replay::ReplayArgs>),
    /// Run the test server; per-request behaviour comes from x-nighthawk-test-server-config.
    Serve(serve::ServeArgs),
    /// Run tests for remote clients over gRPC (shrike.v1): `shrike run --remote` and any
    /// gRPC client; health and reflection included.
    Service(service::ServiceArgs),
    /// Render JSON results (one, or several overlaid) as a self-contained HTML report.
    Report(report::ReportArgs),
    /// Stored JSON result on stdin -> any output format on stdout; --merge combines results.
    Transform(transform::TransformArgs),
}

/// A usage or configuration error: printed as `error: …` and mapped to exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

fn main() -> ExitCode {
    // Nighthawk's (tclap's) `--ignore_rest` is the `--` that ends the flags.
    let args_os: Vec<std::ffi::OsString> =
        std::env::args_os().map(|a| if a == "--ignore_rest" { "--".into() } else { a }).collect();
    let args: Vec<String> = args_os.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let parsed = refuse::command()
        .try_get_matches_from(&args_os)
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (m, cli)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => match suggest::rewrite(&e, &args) {
            Some(msg) => {
                out::eprintln(&msg);
                return ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    if let Err(msg) = refuse::check(&matches) {
        log::line(log::Tag::Error, &msg);
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Capacity(args) => capacity::run(*args),
        Command::Serve(args) => serve::run(args),
        Command::Service(args) => service::run(args),
        Command::Sweep(args) => sweep::run(*args),
        Command::Report(args) => report::run(args),
        Command::Jobs(args) => jobs::run(args),
        Command::Replay(args) => replay::run(*args),
        Command::Transform(args) => transform::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<out::ClosedPipe>().is_some() => {
            ExitCode::from(out::CLOSED_PIPE_STATUS)
        }
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            log::line(log::Tag::Error, &format!("{e:#}"));
            ExitCode::from(2)
        }
        Err(e) => {
            log::line(log::Tag::Error, &format!("{e:#}"));
            ExitCode::from(1)
        }
    }
}
