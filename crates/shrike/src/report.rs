//! `shrike report`: stored JSON results to one self-contained HTML page with plots.
//!
//! `shrike report base.json cand=candidate.json -o report.html`. Each file may be labelled
//! `NAME=PATH`; otherwise its label is the file stem. The first file is the baseline the
//! summary's ratios compare against. A file that cannot be read or is not a Shrike result is a
//! usage error (exit 2) naming the file and, for bad JSON, the field.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use shrike_output::html::{self, Input};
use shrike_stats::RunResult;

use crate::args::usage;
use crate::log::info;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// JSON results written by `shrike run --output-format json`, each optionally labelled
    /// NAME=FILE (default label: the file stem). The first is the baseline.
    #[arg(required = true, value_name = "[NAME=]FILE")]
    pub files: Vec<String>,
    /// Write the HTML to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The report's title (default: the labels, "baseline vs candidate").
    #[arg(long)]
    pub title: Option<String>,
    /// A sweep's charts on log axes (a grid that spans 8× or more, and latency): linear by
    /// default, where linear scaling looks linear.
    #[arg(long)]
    pub log_axes: bool,
}

/// One input file and the label it is shown under.
#[derive(Debug, PartialEq, Eq)]
struct Source {
    label: String,
    path: PathBuf,
    /// Whether the user chose the label (a collision is then their mistake, not ours).
    explicit: bool,
}

/// Splits `NAME=PATH`. An argument naming an existing file is a path even if it holds `=`.
fn parse_source(arg: &str) -> anyhow::Result<Source> {
    if !Path::new(arg).exists() {
        if let Some((name, path)) = arg.split_once('=') {
            if name.trim().is_empty() || path.is_empty() {
                return Err(usage(format!("{arg:?}: expected NAME=FILE or FILE")));
            }
            let label = name.trim().to_string();
            return Ok(Source { label, path: PathBuf::from(path), explicit: true });
        }
    }
    let path = PathBuf::from(arg);
    let label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let label = if label.is_empty() { arg.to_string() } else { label };
    Ok(Source { label, path, explicit: false })
}

/// Labels must tell the results apart: default labels that collide (two `result.json` in
/// different directories) fall back to the path; chosen labels that collide are an error.
fn parse_sources(args: &[String]) -> anyhow::Result<Vec<Source>> {
    let mut sources: Vec<Source> =
        args.iter().map(|a| parse_source(a)).collect::<Result<_, _>>()?;
    let count = |sources: &[Source], l: &str| sources.iter().filter(|s| s.label == l).count();
    // Decide every rename before making any, or the last of a colliding pair would keep its stem.
    let collide: Vec<bool> =
        sources.iter().map(|s| !s.explicit && count(&sources, &s.label) > 1).collect();
    for (s, rename) in sources.iter_mut().zip(collide) {
        if rename {
            s.label = s.path.display().to_string();
        }
    }
    for s in &sources {
        if count(&sources, &s.label) > 1 {
            return Err(usage(format!("label {:?} is used for more than one file", s.label)));
        }
    }
    Ok(sources)
}

fn read(source: &Source) -> anyhow::Result<RunResult> {
    let path = source.path.display();
    let text = std::fs::read_to_string(&source.path)
        .map_err(|e| usage(format!("cannot read {path}: {e}")))?;
    shrike_output::from_json(&text).map_err(|e| usage(format!("{path}: {e}")))
}

/// The document of a capacity search or a sweep, when the first file is one (their
/// `--output-format json`); each is drawn on its own page, so it comes alone.
fn planner_doc(sources: &[Source]) -> anyhow::Result<Option<serde_json::Value>> {
    let Some(first) = sources.first() else { return Ok(None) };
    let Ok(text) = std::fs::read_to_string(&first.path) else { return Ok(None) };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(None) };
    if !html::is_capacity(&doc) && !html::is_sweep(&doc) {
        return Ok(None);
    }
    if sources.len() > 1 {
        return Err(usage(format!(
            "{}: a capacity search or sweep is reported on its own; give it as the only file",
            first.path.display()
        )));
    }
    Ok(Some(doc))
}

fn default_title(sources: &[Source]) -> String {
    let labels: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    format!("Shrike report: {}", labels.join(" vs "))
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    // A page of HTML and inline script is of no use on a terminal.
    if args.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(usage(
            "the report is an HTML page: write it to a file with -o report.html (or redirect stdout)",
        ));
    }
    if let Some(path) = &args.output {
        crate::atomic::ready(path, "--output")?;
    }
    let sources = parse_sources(&args.files)?;
    let planned = planner_doc(&sources)?;
    if args.log_axes && !planned.as_ref().is_some_and(html::is_sweep) {
        return Err(usage("--log-axes is for a sweep's report (its grid and latency axes)"));
    }
    let page = match planned {
        Some(doc) if html::is_capacity(&doc) => {
            let title = args.title.unwrap_or_else(|| html::capacity_title(&doc));
            html::render_capacity(&title, &doc)
        }
        Some(doc) => {
            let title = args.title.unwrap_or_else(|| html::sweep_title(&doc));
            html::render_sweep(&title, &doc, args.log_axes)
        }
        None => {
            let results: Vec<RunResult> = sources.iter().map(read).collect::<Result<_, _>>()?;
            let inputs: Vec<Input<'_>> = sources
                .iter()
                .zip(&results)
                .map(|(s, r)| Input { label: &s.label, result: r })
                .collect();
            let title = args.title.unwrap_or_else(|| default_title(&sources));
            html::render(&title, &inputs)
        }
    };
    let inputs = &sources;
    match &args.output {
        Some(path) => {
            crate::atomic::write(path, |out| out.write_all(page.as_bytes()))
                .with_context(|| format!("cannot write the report to {}", path.display()))?;
            info!("wrote {} ({} result(s))", path.display(), inputs.len());
        }
        None => crate::out::print(&page)?,
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn labels(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_sources(&args).unwrap().into_iter().map(|s| s.label).collect()
    }

    #[test]
    fn labels_come_from_names_or_stems() {
        assert_eq!(labels(&["base=/no/such/a.json", "/x/cand.json"]), ["base", "cand"]);
        assert_eq!(
            labels(&["/a/result.json", "/b/result.json"]),
            ["/a/result.json", "/b/result.json"]
        );
        assert_eq!(
            default_title(&parse_sources(&["a.json".into(), "b.json".into()]).unwrap()),
            "Shrike report: a vs b"
        );
    }

    #[test]
    fn bad_labels_are_usage_errors() {
        for args in [vec!["=x.json"], vec!["a=", "b.json"], vec!["x=a.json", "x=b.json"]] {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let err = parse_sources(&args).unwrap_err();
            assert!(err.downcast_ref::<crate::UsageError>().is_some(), "{err}");
        }
    }
}
