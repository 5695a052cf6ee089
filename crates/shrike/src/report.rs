//! `shrike report`: stored JSON results to one self-contained HTML page with plots.
//!
//! `shrike report base.json cand=candidate.json -o report.html`. Each file may be labelled
//! `NAME=PATH`; otherwise its label is the file stem. The first file is the baseline the
//! summary's ratios compare against. Capacity searches or sweeps (their JSON) may come several
//! too, side by side: each goal's answers and their change, or the sweeps' points on one set of
//! charts with the second compared with the first at the first's peak. A file that cannot be
//! read or is not a Shrike result is a usage error (exit 2) naming the file and, for bad JSON,
//! the field.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use shrike_output::html::{self, Input};
use shrike_plan::sweep::Sweep;
use shrike_stats::RunResult;

use crate::args::usage;
use crate::log::info;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// JSON results written by `shrike run --output-format json` (or several capacity
    /// searches, or several sweeps), each optionally labelled NAME=FILE (default label: the
    /// file stem). The first is the baseline.
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

/// What the files are: run results, or capacity searches or sweeps (their
/// `--output-format json`), several of which come side by side.
enum Planned {
    Runs,
    Capacity(Vec<serde_json::Value>),
    Sweep(Vec<serde_json::Value>),
}

/// Reads the planners' documents when the first file is one; every other file must then be
/// of the same kind.
fn planned(sources: &[Source]) -> anyhow::Result<Planned> {
    let doc = |s: &Source| -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(&s.path).ok()?;
        serde_json::from_str(&text).ok()
    };
    let kind = |d: &serde_json::Value| {
        if html::is_capacity(d) {
            "a capacity search"
        } else if html::is_sweep(d) {
            "a sweep"
        } else {
            "a run result"
        }
    };
    let Some(first) = sources.first().and_then(doc) else { return Ok(Planned::Runs) };
    let first_kind = kind(&first);
    if first_kind == "a run result" {
        return Ok(Planned::Runs);
    }
    let mut docs = vec![first];
    for s in &sources[1..] {
        let d = doc(s).unwrap_or(serde_json::Value::Null);
        if kind(&d) != first_kind {
            return Err(usage(format!(
                "{} is {first_kind} and {} is {}: only results of one kind are compared",
                sources[0].path.display(),
                s.path.display(),
                if d.is_null() { "not readable JSON" } else { kind(&d) }
            )));
        }
        docs.push(d);
    }
    Ok(if first_kind == "a capacity search" {
        Planned::Capacity(docs)
    } else {
        Planned::Sweep(docs)
    })
}

/// Several sweeps as one whose instances are theirs, each named by its file's label.
fn sweeps_side_by_side(
    sources: &[Source],
    docs: &[serde_json::Value],
) -> anyhow::Result<serde_json::Value> {
    let read = |s: &Source, d: &serde_json::Value| {
        Sweep::from_json(d).map_err(|e| usage(format!("{}: {e}", s.path.display())))
    };
    let mut all = read(&sources[0], &docs[0])?;
    let mut label = sources[0].label.clone();
    for (s, d) in sources.iter().zip(docs).skip(1) {
        all = all.beside(&label, read(s, d)?, &s.label).map_err(|e| usage(e.to_string()))?;
        // After the first pair, the instances already carry their labels.
        label = String::new();
    }
    Ok(all.json())
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
    let planned = planned(&sources)?;
    if args.log_axes && !matches!(planned, Planned::Sweep(_)) {
        return Err(usage("--log-axes is for a sweep's report (its grid and latency axes)"));
    }
    let page = match planned {
        Planned::Capacity(docs) if docs.len() == 1 => {
            let title = args.title.unwrap_or_else(|| html::capacity_title(&docs[0]));
            html::render_capacity(&title, &docs[0])
        }
        Planned::Capacity(docs) => {
            let title = args.title.unwrap_or_else(|| default_title(&sources));
            let labelled: Vec<(&str, &serde_json::Value)> =
                sources.iter().map(|s| s.label.as_str()).zip(&docs).collect();
            html::render_capacities(&title, &labelled)
        }
        Planned::Sweep(docs) => {
            let (title, doc) = if docs.len() == 1 {
                (args.title.unwrap_or_else(|| html::sweep_title(&docs[0])), docs[0].clone())
            } else {
                let doc = sweeps_side_by_side(&sources, &docs)?;
                (args.title.unwrap_or_else(|| default_title(&sources)), doc)
            };
            html::render_sweep(&title, &doc, args.log_axes)
        }
        Planned::Runs => {
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
