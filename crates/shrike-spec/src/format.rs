//! The output formats a run can name (`--output-format`, the `output_format` option). The
//! formatters themselves live in `shrike-output`; a run spec only records which one it asked for.

use std::fmt;
use std::str::FromStr;

/// An output format users can pick with `--output-format`.
/// Not `#[non_exhaustive]`: the formatters match on it, and a new format must be handled by
/// each of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputFormat {
    /// The compact report `shrike run` prints by default: outcome, rates, latency side by
    /// side, notes. [`OutputFormat::Human`] adds every statistic's table and the counters.
    Summary,
    Human,
    Json,
    Yaml,
    Dotted,
    Fortio,
    Csv,
    Prometheus,
}

impl OutputFormat {
    /// Every format, in the order help texts list them (the default, then Nighthawk's order, then
    /// Shrike's).
    pub const ALL: &'static [OutputFormat] = &[
        OutputFormat::Summary,
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
            OutputFormat::Summary => "summary",
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

impl OutputFormat {
    /// Text for people (the summary or the full report), not a document for machines.
    pub fn is_text(self) -> bool {
        matches!(self, OutputFormat::Summary | OutputFormat::Human)
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
            "unknown output format \"yamlish\" (expected one of: summary, human, json, yaml, \
             dotted, fortio, csv, prometheus)"
        );
    }
}
