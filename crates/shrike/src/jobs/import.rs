//! `shrike jobs import` (being built in this session's branch; see mod.rs).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ImportArgs {}

pub fn run(_args: ImportArgs) -> anyhow::Result<ExitCode> {
    Err(crate::args::usage("shrike jobs import is not built yet"))
}
