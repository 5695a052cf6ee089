//! `shrike jobs filter FILE -o OUT`: part of a jobs file (see `shrike_jobs::filter`), written
//! as it is read, with what was kept on standard error.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;
use shrike_jobs::filter::{Filter, Shard};
use shrike_jobs::{JobProtocol, JobReader, JobWriter};
use shrike_stats::duration::parse_duration;

use crate::args::usage;
use crate::log::{info, warning};

#[derive(clap::Args, Debug)]
pub struct FilterArgs {
    /// The jobs file (`-` reads standard input).
    pub file: PathBuf,
    /// Where to write (`.zst` compresses; `-` is standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Keep jobs starting at or after this offset from the first job's start.
    #[arg(long, value_name = "DURATION")]
    pub from: Option<String>,
    /// Keep jobs starting before this offset.
    #[arg(long, value_name = "DURATION")]
    pub to: Option<String>,
    /// Keep these jobs (an id, or a range 10-20; repeatable).
    #[arg(long = "job", value_name = "ID|A-B")]
    pub jobs: Vec<String>,
    /// Keep jobs with a request matching this glob (* and ?) on a label `jobs stats` prints
    /// ("GET /index.html", "query SELECT"), or the same with the query or statement text
    /// ("GET /index.html?v=3", "query SELECT * FROM t"); a pattern starting with / is the path
    /// alone ("/api/*"); the payload for TCP.
    #[arg(long = "match", value_name = "GLOB")]
    pub pattern: Option<String>,
    /// With --match: keep only the matching requests, not whole jobs.
    #[arg(long, requires = "pattern")]
    pub match_requests: bool,
    /// Keep this share of jobs (e.g. 10%), the same ones every time for the same --seed.
    #[arg(long, value_name = "PERCENT")]
    pub sample: Option<String>,
    /// With --sample: which sample (the same seed keeps the same jobs) [default: 0].
    #[arg(long, value_name = "N", requires = "sample")]
    pub seed: Option<u64>,
    /// Keep every N-th job from the i-th (0-based, 0/N … N-1/N): N shards partition the file.
    #[arg(long, value_name = "i/N")]
    pub shard: Option<String>,
}

pub fn run(args: FilterArgs) -> anyhow::Result<ExitCode> {
    let filter = filter(&args)?;
    let reader = JobReader::open(&args.file).map_err(|e| usage(e.to_string()))?;
    let header = reader.header().clone();
    let protocol = header
        .get("protocol")
        .and_then(|p| p.as_str())
        .and_then(JobProtocol::parse)
        .unwrap_or(JobProtocol::Http);
    let mut info = header;
    info.remove("shrike_jobs");
    info.remove("protocol");
    info.insert("filtered".into(), json!(describe(&args)));
    crate::atomic::ready(&args.output, "--output")?;
    let mut writer =
        JobWriter::create(&args.output, protocol, info).map_err(|e| usage(e.to_string()))?;
    let (mut read, mut kept, mut requests) = (0u64, 0u64, 0u64);
    let mut origin = None;
    for (position, job) in reader.enumerate() {
        let job = job.map_err(|e| usage(e.to_string()))?;
        read += 1;
        let o = *origin.get_or_insert(job.start);
        if let Some(job) = filter.apply(job, position as u64, o) {
            kept += 1;
            requests += job.requests.len() as u64;
            writer.write(&job).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    writer.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    info!("kept {kept} of {read} job(s), with {requests} request(s)");
    if kept == 0 && read > 0 {
        // An empty file is rarely what was meant: say which condition to look at.
        let hint = match &args.pattern {
            Some(p) => format!(
                "--match {p:?} matched no request: `shrike jobs stats {}` lists the labels it \
                 matches (a pattern starting with / matches the path alone)",
                args.file.display()
            ),
            None => "check the window, job ids, sample or shard".to_string(),
        };
        warning!("the filter kept nothing: {hint}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The selection as flags, for the output's header.
fn describe(args: &FilterArgs) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut flag = |name: &str, v: &Option<String>| {
        if let Some(v) = v {
            parts.push(format!("--{name} {v}"));
        }
    };
    flag("from", &args.from);
    flag("to", &args.to);
    flag("match", &args.pattern);
    flag("sample", &args.sample);
    flag("shard", &args.shard);
    parts.extend(args.jobs.iter().map(|j| format!("--job {j}")));
    if args.match_requests {
        parts.push("--match-requests".into());
    }
    if args.sample.is_some() {
        parts.push(format!("--seed {}", args.seed.unwrap_or(0)));
    }
    parts.join(" ")
}

fn filter(args: &FilterArgs) -> anyhow::Result<Filter> {
    let dur = |v: &Option<String>, flag: &str| {
        v.as_deref()
            .map(|d| parse_duration(d).map_err(|e| usage(format!("{flag}: {e}"))))
            .transpose()
    };
    let jobs = args
        .jobs
        .iter()
        .map(|j| {
            let bad = || usage(format!("--job {j:?}: expected an id or a range such as 10-20"));
            match j.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (
                        a.trim().parse().map_err(|_| bad())?,
                        b.trim().parse().map_err(|_| bad())?,
                    );
                    if a > b {
                        return Err(bad());
                    }
                    Ok((a, b))
                }
                None => j.trim().parse().map(|n| (n, n)).map_err(|_| bad()),
            }
        })
        .collect::<anyhow::Result<_>>()?;
    let sample = match &args.sample {
        None => None,
        Some(s) => {
            let v: f64 =
                s.trim().trim_end_matches('%').parse().map_err(|_| {
                    usage(format!("--sample {s:?}: expected a percentage such as 10%"))
                })?;
            if !(0.0..=100.0).contains(&v) {
                return Err(usage(format!("--sample {s:?}: a share lies between 0% and 100%")));
            }
            Some(v / 100.0)
        }
    };
    let shard = args
        .shard
        .as_deref()
        .map(|s| Shard::parse(s).map_err(|e| usage(format!("--shard {e}"))))
        .transpose()?;
    Ok(Filter {
        from: dur(&args.from, "--from")?,
        to: dur(&args.to, "--to")?,
        jobs,
        pattern: args.pattern.clone(),
        match_requests: args.match_requests,
        sample,
        seed: args.seed.unwrap_or(0),
        shard,
    })
}
