//! `shrike jobs filter` (being built in this session's branch; see mod.rs).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct FilterArgs {}

pub fn run(_args: FilterArgs) -> anyhow::Result<ExitCode> {
    Err(crate::args::usage("shrike jobs filter is not built yet"))
}
