//! `shrike jobs stats FILE`: what a jobs file holds (see `shrike_jobs::stats`), for people
//! (a summary, a rate-over-time chart, the busiest paths or commands) or as JSON.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use shrike_jobs::stats::Stats;
use shrike_jobs::JobReader;
use shrike_stats::duration::{format_human_ns, parse_duration};

use crate::args::usage;

#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// The jobs file (`-` reads standard input).
    pub file: PathBuf,
    /// Width of the rate-over-time buckets [default: a round width giving 20 to 60 rows].
    #[arg(long, value_name = "DURATION")]
    pub bucket: Option<String>,
    /// Count HTTP requests by path with their query strings (by path alone otherwise).
    #[arg(long)]
    pub keep_query: bool,
    /// How many of the busiest paths, commands or servers to list.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// human (default) or json. JSON keys: jobs, requests, bytes, duration_s,
    /// jobs_by_protocol, jobs_by_connection, peak_concurrent_jobs, peak_at_s, bucket_s,
    /// rate (requests per bucket, from the first job's start), top ([{key, requests, bytes}]),
    /// other ({requests, bytes} beyond the keys kept).
    #[arg(long, default_value = "human", value_name = "human|json")]
    pub output_format: String,
}

pub fn run(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let bucket = args
        .bucket
        .as_deref()
        .map(|b| parse_duration(b).map_err(|e| usage(format!("--bucket: {e}"))))
        .transpose()?;
    if bucket.is_some_and(|b| b.is_zero()) {
        return Err(usage("--bucket must be longer than 0"));
    }
    let json_out = match args.output_format.as_str() {
        "human" => false,
        "json" => true,
        f => return Err(usage(format!("--output-format {f:?}: expected human or json"))),
    };
    let reader = JobReader::open(&args.file).map_err(|e| usage(e.to_string()))?;
    let protocol = shrike_replay::protocol_of(&reader);
    if args.keep_query && protocol != shrike_jobs::JobProtocol::Http {
        return Err(crate::refuse::in_mode(
            "jobs stats",
            "--keep-query",
            &format!("it counts HTTP paths; these are {} jobs", protocol.name()),
        ));
    }
    let mut stats = Stats::new(args.keep_query);
    for job in reader {
        stats.add(&job.map_err(|e| usage(e.to_string()))?);
    }
    let width = stats.bucket(bucket);
    let rate = stats.rate(width);
    let text = if json_out {
        let top: Vec<_> = stats
            .top(args.top)
            .into_iter()
            .map(|(k, c)| json!({"key": k, "requests": c.requests, "bytes": c.bytes}))
            .collect();
        serde_json::to_string_pretty(&json!({
            "jobs": stats.jobs,
            "requests": stats.requests,
            "bytes": stats.bytes,
            "duration_s": stats.duration().as_secs_f64(),
            "jobs_by_protocol": stats.by_protocol,
            "jobs_by_connection": stats.by_connection,
            "peak_concurrent_jobs": stats.peak_jobs,
            "peak_at_s": stats.peak_at.saturating_sub(stats.first_start.unwrap_or_default()).as_secs_f64(),
            "bucket_s": width.as_secs_f64(),
            "rate": rate,
            "top": top,
            "other": {"requests": stats.other.requests, "bytes": stats.other.bytes},
        }))? + "\n"
    } else {
        human(&stats, &args, width, &rate)
    };
    crate::out::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn human(s: &Stats, args: &StatsArgs, width: Duration, rate: &[u64]) -> String {
    let d = |x: Duration| format_human_ns(x.as_nanos() as f64);
    let mut out = String::new();
    let per = |m: &std::collections::BTreeMap<&str, u64>| {
        m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
    };
    let _ = writeln!(
        out,
        "{}: {} jobs, {} requests, {} bytes over {}",
        args.file.display(),
        s.jobs,
        s.requests,
        s.bytes,
        d(s.duration())
    );
    let _ = writeln!(
        out,
        "  jobs by protocol: {}; by connection: {}",
        per(&s.by_protocol),
        per(&s.by_connection)
    );
    let origin = s.first_start.unwrap_or_default();
    let _ = writeln!(
        out,
        "  peak concurrent jobs: {} (first at {})",
        s.peak_jobs,
        d(s.peak_at.saturating_sub(origin))
    );
    let _ = writeln!(out, "\nRequests per {} (from the first job's start):", d(width));
    let max = rate.iter().copied().max().unwrap_or(0).max(1);
    for (i, n) in rate.iter().enumerate() {
        let bar = "#".repeat(((n * 50).div_ceil(max)) as usize);
        let _ = writeln!(out, "  {:>10}  {n:>9}  {bar}", d(width * i as u32));
    }
    let what =
        if s.by_protocol.contains_key("http") { "method and path" } else { "command or server" };
    let _ = writeln!(out, "\nBusiest by {what}:");
    for (k, c) in s.top(args.top) {
        let share = 100.0 * c.requests as f64 / s.requests.max(1) as f64;
        let _ = writeln!(out, "  {:>9}  {share:>5.1}%  {:>12} B  {k}", c.requests, c.bytes);
    }
    if s.other.requests > 0 {
        let _ = writeln!(out, "  {:>9}  (in keys beyond the first 10,000)", s.other.requests);
    }
    out
}
