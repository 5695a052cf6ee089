//! `--dry-run`: every flag read and checked (the spec built, files read, the options combined),
//! and what the command would do printed as one JSON object on stdout, without sending a
//! request, binding a port or starting a server. What a user checks before a long run, and
//! what the tests read to see that each flag takes effect.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};
use shrike_output::OutputFormat;

/// The target a dry run names where the built-in server would start (it starts no server).
pub const BUILT_IN: &str = "http://built-in-server/";

/// Prints `plan` and ends the command.
pub fn print(plan: Value) -> anyhow::Result<ExitCode> {
    crate::out::print(&(serde_json::to_string_pretty(&plan)? + "\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// Where a result would be written: stdout's format, and the file's.
pub fn output(stdout: OutputFormat, file: Option<&(PathBuf, OutputFormat)>) -> Value {
    json!({
        "format": stdout.name(),
        "file": file.map(|(p, _)| p.display().to_string()),
        "file_format": file.map(|(_, f)| f.name()),
    })
}
