//! Shrike's output formats, as sinks over [`std::io::Write`].
//!
//! Each format is a module with a `write(result, out)` function that renders a
//! [`RunResult`] into any sink: stdout in the binary, a `Vec<u8>` in tests, a file for
//! `shrike transform`. [`OutputFormat`] names them for the command line and [`write()`]
//! dispatches, so a new format is one module plus one enum variant.
//!
//! - [`human`]: the global result as aligned plain text.
//! - [`json`]: the proto3-JSON shape of Nighthawk's `Output`, with Shrike's extensions
//!   (serialized histograms, termination, environment). [`from_json`] reads it back exactly,
//!   which is what `transform`, `report` and result merging build on.
//! - [`yaml`]: the JSON document as YAML (hand-written emitter, key order kept).
//! - [`csv`]: tidy rows (statistics, percentiles, counters, status codes), RFC 4180.
//! - [`dotted`]: Nighthawk's `dotted` lines (`global.<stat>.permilles-990.microseconds: 123`).
//! - [`prometheus`]: the text exposition format 0.0.4 (summaries, counters, labels).
//! - [`fortio`]: the JSON fortio's report UI loads (`fhttp.HTTPRunnerResults`).
//! - [`merge`]: exact merge of stored results (`shrike transform --merge`).
//! - [`timestamp`]: RFC 3339 timestamps as proto3 JSON writes them.
//!
//! The library writes data only; where the data goes and how errors are shown is the caller's
//! business.

use std::fmt;
use std::io;
use std::str::FromStr;

use shrike_stats::RunResult;

pub mod csv;
pub mod dotted;
pub mod fortio;
pub mod html;
pub mod human;
pub mod json;
pub mod merge;
pub mod options;
pub mod prometheus;
mod spectrum;
mod table;
pub mod timestamp;
pub mod yaml;

pub use json::{from_json, to_json_value, ReadError};

/// An output format users can pick with `--output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputFormat {
    Human,
    Json,
    Yaml,
    Dotted,
    Fortio,
    Csv,
    Prometheus,
}

impl OutputFormat {
    /// Every format, in the order help texts list them (Nighthawk's order, then Shrike's).
    pub const ALL: &'static [OutputFormat] = &[
        OutputFormat::Human,
        OutputFormat::Json,
        OutputFormat::Yaml,
        OutputFormat::Dotted,
        OutputFormat::Fortio,
        OutputFormat::Csv,
        OutputFormat::Prometheus,
    ];

    /// Other names accepted for a format. Nighthawk's `experimental_fortio_pedantic` exists
    /// because its `fortio` output was not byte-compatible with fortio's Go types; ours is, so
    /// both names mean the same output.
    const ALIASES: &'static [(&'static str, OutputFormat)] =
        &[("experimental_fortio_pedantic", OutputFormat::Fortio)];

    /// The name users type (`human`, `json`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Human => "human",
            OutputFormat::Json => "json",
            OutputFormat::Yaml => "yaml",
            OutputFormat::Dotted => "dotted",
            OutputFormat::Fortio => "fortio",
            OutputFormat::Csv => "csv",
            OutputFormat::Prometheus => "prometheus",
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown output format {given:?} (expected one of: {})", expected_formats())]
pub struct UnknownFormat {
    pub given: String,
}

fn expected_formats() -> String {
    let names: Vec<&str> = OutputFormat::ALL.iter().map(|f| f.name()).collect();
    names.join(", ")
}

impl FromStr for OutputFormat {
    type Err = UnknownFormat;

    /// Case-insensitive, as Nighthawk accepts `JSON` and `json` alike.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let given = s.trim();
        OutputFormat::ALL
            .iter()
            .map(|&f| (f.name(), f))
            .chain(OutputFormat::ALIASES.iter().copied())
            .find(|(name, _)| name.eq_ignore_ascii_case(given))
            .map(|(_, f)| f)
            .ok_or_else(|| UnknownFormat { given: s.to_string() })
    }
}

/// Writes `result` in `format` to `out`.
pub fn write(format: OutputFormat, result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    match format {
        OutputFormat::Human => human::write(result, out),
        OutputFormat::Json => json::write(result, out),
        OutputFormat::Yaml => yaml::write(result, out),
        OutputFormat::Dotted => dotted::write(result, out),
        OutputFormat::Fortio => fortio::write(result, out),
        OutputFormat::Csv => csv::write(result, out),
        OutputFormat::Prometheus => prometheus::write(result, out),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_by_name() {
        for &f in OutputFormat::ALL {
            assert_eq!(f.name().parse::<OutputFormat>(), Ok(f));
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!("JSON".parse::<OutputFormat>(), Ok(OutputFormat::Json));
        assert_eq!(
            "experimental_fortio_pedantic".parse::<OutputFormat>(),
            Ok(OutputFormat::Fortio)
        );
        let err = "yamlish".parse::<OutputFormat>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown output format \"yamlish\" (expected one of: human, json, yaml, dotted, \
             fortio, csv, prometheus)"
        );
    }
}
