//! Shrike's output formats, as sinks over [`std::io::Write`].
//!
//! Each format is a module with a `write(result, out)` function that renders a
//! [`RunResult`] into any sink: stdout in the binary, a `Vec<u8>` in tests, a file for
//! `shrike transform`. [`OutputFormat`] names them for the command line and [`write()`]
//! dispatches, so a new format is one module plus one enum variant.
//!
//! - [`human`]: the global result as text for people: the compact summary (`summary`) or the
//!   full report (`human`).
//! - [`json`]: the proto3-JSON shape of Nighthawk's `Output`, with Shrike's extensions
//!   (serialized histograms, termination, environment). [`from_json`] reads it back exactly,
//!   which is what `transform`, `report` and result merging build on.
//! - [`yaml`]: the JSON document as YAML (hand-written emitter, key order kept).
//! - [`csv`]: tidy rows (statistics, percentiles, counters, status codes), RFC 4180.
//! - [`dotted`]: Nighthawk's `dotted` lines (`global.<stat>.permilles-990.microseconds: 123`).
//! - [`prometheus`]: the text exposition format 0.0.4 (summaries, counters, labels).
//! - [`fortio`]: the JSON fortio's report UI loads (`fhttp.HTTPRunnerResults`).
//! - [`merge`]: exact merge of stored results (`shrike transform --merge`).
//! - [`html`]: self-contained report pages (`shrike report`): runs overlaid, capacity searches
//!   and sweeps, side by side.
//! - [`fleet`]: a coordinated run's generators, one row each, for every view; [`options`]:
//!   what a run asked for, read back through the spec's own types.
//!
//! The library writes data only; where the data goes and how errors are shown is the caller's
//! business.

use std::io;

use shrike_stats::RunResult;

pub mod csv;
pub mod dotted;
pub mod fleet;
pub mod fortio;
pub mod html;
pub mod human;
pub mod json;
pub mod merge;
pub mod options;
pub mod prometheus;
mod spectrum;
mod table;
/// RFC 3339 timestamps (kept here too for existing callers).
pub use shrike_stats::timestamp;
pub mod yaml;

pub use json::{from_json, to_json_value, ReadError};
/// The format names live with the run spec (a run records its `output_format`).
pub use shrike_spec::{OutputFormat, UnknownFormat};

/// Writes `result` in `format` to `out`.
pub fn write(format: OutputFormat, result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    match format {
        OutputFormat::Summary => human::write_summary(result, out),
        OutputFormat::Human => human::write(result, out),
        OutputFormat::Json => json::write(result, out),
        OutputFormat::Yaml => yaml::write(result, out),
        OutputFormat::Dotted => dotted::write(result, out),
        OutputFormat::Fortio => fortio::write(result, out),
        OutputFormat::Csv => csv::write(result, out),
        OutputFormat::Prometheus => prometheus::write(result, out),
    }
}
