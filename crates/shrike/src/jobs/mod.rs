//! `shrike jobs`: make and inspect replay jobs files. `import` turns a capture (pcap, pcapng)
//! or a browser recording (HAR) into jobs; `stats` says what a jobs file holds; `filter`
//! selects part of one. `shrike replay` plays them.

mod filter;
mod har;
mod import;
mod stats;

use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct JobsArgs {
    #[command(subcommand)]
    command: JobsCommand,
}

#[derive(Subcommand, Debug)]
enum JobsCommand {
    /// A capture (pcap, pcapng: HTTP, raw TCP or MySQL) or a HAR recording -> a jobs file.
    Import(Box<import::ImportArgs>),
    /// What a jobs file holds: duration, jobs, requests, peak concurrency, rate over time, and
    /// requests per method and path (HTTP) or per command (MySQL).
    Stats(stats::StatsArgs),
    /// Part of a jobs file: a time window, some jobs, a path or command pattern, a sample.
    Filter(filter::FilterArgs),
}

pub fn run(args: JobsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        JobsCommand::Import(a) => import::run(*a),
        JobsCommand::Stats(a) => stats::run(a),
        JobsCommand::Filter(a) => filter::run(a),
    }
}
