//! `shrike transform`: a stored JSON result on stdin → any output format on stdout, or several
//! stored results merged exactly (`--merge a.json b.json …`).
//!
//! Without `--merge`, `json` and `yaml` output is the input document itself (after checking it
//! reads as a result), so the recording machine's environment and version survive untouched;
//! other formats render the result read back. Nighthawk's JSON reads too; it cannot be merged,
//! as its statistics carry printed percentiles rather than histograms (exit 2 naming the
//! statistic). Bad input is a usage error (exit 2) naming the file and the field at fault.

use std::io::{IsTerminal as _, Read as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use shrike_output::merge::{self, Input, MergeError};
use shrike_output::{from_json, OutputFormat};
use shrike_stats::RunResult;

use crate::args::usage;
use crate::log::warning;

#[derive(Args, Debug, Clone)]
pub struct TransformArgs {
    /// Output format: human, json, yaml, dotted, fortio (alias experimental_fortio_pedantic),
    /// csv or prometheus.
    /// [default: by --output's extension, as `run -o` picks it; else json]
    #[arg(long, value_parser = parse_output_format)]
    pub output_format: Option<OutputFormat>,
    /// Merge these stored JSON results exactly (workers kept, global re-merged) instead of
    /// reading one from stdin. A directory stands for its *.json files, in name order (the
    /// shards an Indexed Job wrote to a shared volume).
    #[arg(long, num_args = 1.., value_name = "FILE|DIR")]
    pub merge: Vec<PathBuf>,
    /// Merge shards that are not one run whole (one missing, or given twice) instead of
    /// refusing them; the merge says what it lacks.
    #[arg(long, requires = "merge")]
    pub allow_partial: bool,
    /// Merge shards whose sending windows never overlapped (each ended before another
    /// started) instead of refusing them: their summed rate was never offered at once.
    #[arg(long, requires = "merge")]
    pub allow_disjoint: bool,
    /// Write to FILE instead of stdout (whole or not at all), for containers without a shell
    /// to redirect in.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The files `--merge` names: each file, and each directory's *.json files in name order
/// (but not `exclude`, the output being written there).
fn merge_inputs(
    given: &[PathBuf],
    exclude: Option<&std::path::Path>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in given {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p)
            .map_err(|e| usage(format!("{}: cannot list: {e}", p.display())))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.extension().is_some_and(|x| x == "json") && f.is_file())
            .filter(|f| exclude.is_none_or(|x| !same_file(f, x)))
            .collect();
        if found.is_empty() {
            return Err(usage(format!("{}: no *.json results to merge", p.display())));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
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
    // Rendered whole before anything is written: bad input writes nothing, to a file or stdout.
    if let Some(path) = &args.output {
        crate::atomic::ready(path, "--output")?;
    }
    // The format: given, else named by -o's extension (as `run -o` does), else JSON.
    let format = match (args.output_format, &args.output) {
        (Some(f), _) => f,
        (None, Some(path)) => crate::run::file_format(path, None).map_err(|_| {
            usage(format!(
                "--output {}: the extension does not name a format (.json, .yaml, .csv, .prom, \
                 .txt); give --output-format",
                path.display()
            ))
        })?,
        (None, None) => OutputFormat::Json,
    };
    let text = transform(&args, format)?;
    match &args.output {
        None => crate::out::stdout(|out| out.write_all(&text))?,
        Some(path) => crate::atomic::write(path, |out| out.write_all(&text))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn transform(args: &TransformArgs, format: OutputFormat) -> anyhow::Result<Vec<u8>> {
    let mut text = Vec::new();
    let out = &mut text;
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
        match format {
            OutputFormat::Json => shrike_output::json::write_value(&doc, out),
            OutputFormat::Yaml => shrike_output::yaml::write_value(&doc, out),
            f => shrike_output::write(f, &result, out),
        }
        .context("cannot write the result")?;
    } else {
        let mut inputs = Vec::new();
        let paths = merge_inputs(&args.merge, args.output.as_deref())?;
        for (k, path) in paths.iter().enumerate() {
            if let Some(before) = paths[..k].iter().find(|p| same_file(p, path)) {
                return Err(usage(format!(
                    "{} is given twice (also as {}): a result merged twice counts its requests \
                     twice",
                    path.display(),
                    before.display()
                )));
            }
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{name}: cannot read: {e}")))?;
            let (result, _) = read_result(&name, &text)?;
            inputs.push(Input { name, result });
        }
        let waive = merge::Waive { partial: args.allow_partial, disjoint: args.allow_disjoint };
        match merge::check_shards(&inputs, waive) {
            Ok(waived) => {
                for e in waived {
                    match e {
                        MergeError::Partial(_) => warning!("partial merge: {e}"),
                        _ => warning!("merging anyway: {e}"),
                    }
                }
            }
            Err(e @ MergeError::Partial(_)) => {
                return Err(usage(format!(
                    "{e}; merge every shard of the run, or pass --allow-partial"
                )))
            }
            Err(e @ MergeError::Disjoint(_)) => {
                return Err(usage(format!(
                    "{e}: their summed rate was never offered (pass --allow-disjoint to merge \
                     them anyway)"
                )))
            }
            Err(e) => return Err(usage(e.to_string())),
        }
        let merged = merge::merge(inputs).map_err(|e| usage(e.to_string()))?;
        for w in &merged.warnings {
            warning!("{w}");
        }
        shrike_output::write(format, &merged.result, out).context("cannot write the result")?;
    }
    Ok(text)
}
