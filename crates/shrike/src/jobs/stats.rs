//! `shrike jobs stats` (being built in this session's branch; see mod.rs).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct StatsArgs {}

pub fn run(_args: StatsArgs) -> anyhow::Result<ExitCode> {
    Err(crate::args::usage("shrike jobs stats is not built yet"))
}
