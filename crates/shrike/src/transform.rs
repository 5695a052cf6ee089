//! `shrike transform`: a stored JSON result on stdin → any output format on stdout, or several
//! stored results merged exactly (`--merge a.json b.json …`).
//!
//! Without `--merge`, `json` and `yaml` output is the input document itself (after checking it
//! reads as a result), so the recording machine's environment and version survive untouched;
//! other formats render the result read back. Nighthawk's JSON reads too; it cannot be merged,
//! as its statistics carry printed percentiles rather than histograms (exit 2 naming the
//! statistic). Bad input is a usage error (exit 2) naming the file and the field at fault.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use shrike_output::merge::{self, Input};
use shrike_output::{from_json, OutputFormat};
use shrike_stats::RunResult;

use crate::args::usage;
use crate::log::warning;

#[derive(Args, Debug, Clone)]
pub struct TransformArgs {
    /// Output format: human, json, yaml, dotted, fortio (alias experimental_fortio_pedantic),
    /// csv or prometheus.
    #[arg(long, default_value = "json", value_parser = parse_output_format)]
    pub output_format: OutputFormat,
    /// Merge these stored JSON results exactly (workers kept, global re-merged) instead of
    /// reading one from stdin.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub merge: Vec<PathBuf>,
}

fn parse_output_format(s: &str) -> Result<OutputFormat, String> {
    s.parse::<OutputFormat>().map_err(|e| e.to_string())
}

/// A stored result and the document it was read from.
fn read_result(source: &str, text: &str) -> anyhow::Result<(RunResult, Value)> {
    let result = from_json(text).map_err(|e| usage(format!("{source}: {e}")))?;
    // from_json just parsed the same text, so this cannot fail; map it anyway.
    let doc = serde_json::from_str(text).map_err(|e| usage(format!("{source}: {e}")))?;
    Ok((result, doc))
}

pub fn run(args: TransformArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.merge.is_empty() {
        let mut stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Err(usage(
                "transform reads a JSON result on stdin: shrike transform --output-format FORMAT \
                 < result.json (or merge files with --merge a.json b.json)",
            ));
        }
        let mut text = String::new();
        stdin.read_to_string(&mut text).map_err(|e| usage(format!("stdin: cannot read: {e}")))?;
        let (result, doc) = read_result("stdin", &text)?;
        match args.output_format {
            OutputFormat::Json => shrike_output::json::write_value(&doc, &mut out),
            OutputFormat::Yaml => shrike_output::yaml::write_value(&doc, &mut out),
            f => shrike_output::write(f, &result, &mut out),
        }
    } else {
        let mut inputs = Vec::new();
        for path in &args.merge {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{name}: cannot read: {e}")))?;
            let (result, _) = read_result(&name, &text)?;
            inputs.push(Input { name, result });
        }
        let merged = merge::merge(inputs).map_err(|e| usage(e.to_string()))?;
        for w in &merged.warnings {
            warning!("{w}");
        }
        shrike_output::write(args.output_format, &merged.result, &mut out)
    }
    .and_then(|()| out.flush())
    .context("cannot write the result to stdout")?;
    Ok(ExitCode::SUCCESS)
}
