//! `shrike replay FILE.jobs --target URL|HOST:PORT`: plays a jobs file's sessions with the
//! timing and parallelism they were captured with (scaled, idle gaps shrunk, sharded), on the
//! engine's workers. The load is read as `shrike run` reads it (`LoadSpec`), the feeder thread
//! reads the file as the replay goes (shrike-replay), and the result is written by the same
//! code as `run`'s, in every output format.
//!
//! The first Ctrl-C starts no new job and lets the running ones end; the second stops them
//! (the result is still written); the third exits at once.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use shrike_jobs::{JobProtocol, JobReader};
use shrike_output::OutputFormat;
use shrike_replay::protocols::{MysqlLogin, TcpFraming};
use shrike_replay::{FeedEnd, FeedProgress, ReplayOptions, Shard, TimeOptions};
use shrike_spec::{Concurrency, Predicate, Protocol};
use shrike_stats::duration::parse_duration;
use shrike_stats::Termination;

use crate::args::{parse, usage};
use crate::harness::Harness;
use crate::load::LoadSpec;
use crate::log::{info, warning};
use crate::run::RunArgs;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The jobs file (`shrike jobs import` writes one; `-` reads standard input).
    pub file: PathBuf,
    /// Where to send: a URL (http:// or https://) or HOST:PORT. Without one, an HTTP replay
    /// targets the built-in test server.
    #[arg(long, value_name = "URL|HOST:PORT")]
    pub target: Option<String>,
    /// Speed: 2 plays twice as fast as captured, 0.5 at half speed.
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    pub time_scale: f64,
    /// Shrink idle gaps longer than this (within a job, and when no job is running) to it.
    #[arg(long, value_name = "DURATION")]
    pub max_idle: Option<String>,
    /// HTTP: send the captured Host header instead of the target's.
    #[arg(long)]
    pub keep_host: bool,
    /// HTTP: rewrite what is sent, by a regular expression with captures ($1, ${name}):
    /// `path:REGEX=>REPLACEMENT` for the path and query, `header:NAME:REGEX=>REPLACEMENT` for
    /// a header's value. Repeatable; rules apply in order.
    #[arg(long = "rewrite", value_name = "RULE")]
    pub rewrites: Vec<String>,
    /// HTTP: the canary gate. Replay the whole file, then fail (exit 1) if more than N
    /// answers differed from the captured ones (status, or body size where captured). A
    /// failure predicate on replay.canary_differed stops at the first instead.
    #[arg(long, value_name = "N")]
    pub canary_max_differences: Option<u64>,
    /// HTTP: replay only the requests to this host (a glob against each request's Host
    /// header: `shop.example`, `*.example.com:8443`); repeatable. Needed when the jobs hold
    /// requests to several hosts (a recording of a site and its CDN): one target would get
    /// them all.
    #[arg(long = "host", value_name = "GLOB")]
    pub hosts: Vec<String>,
    /// Play the file N times over, each pass starting when the one before had its last
    /// request due (its jobs' times continued from there).
    #[arg(long = "loop", value_name = "N", default_value_t = 1)]
    pub loops: u32,
    /// Play only every N-th job from the i-th (0-based: 0/N … N-1/N), so N processes
    /// share a file.
    #[arg(long, value_name = "i/N")]
    pub shard: Option<String>,
    /// Start at this wall-clock time (RFC 3339 or Unix seconds), for synchronized processes.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// HTTP jobs: send the captured HTTP/1.1 requests as http1 (default), http2 (h2c on
    /// http://, ALPN h2 on https://) or http3 (https:// only).
    #[arg(short = 'p', long, value_name = "http1|http2|http3", value_parser = parse::protocol)]
    pub protocol: Option<Protocol>,
    /// Workers (threads); jobs are dealt to them in turn.
    #[arg(long, value_name = "N", value_parser = parse::concurrency)]
    pub concurrency: Option<Concurrency>,
    /// A request unanswered this long fails (upstream_rq_timeout) [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub timeout: Option<Duration>,
    /// Stop after this long even if jobs remain [default: when every job is done].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub duration: Option<Duration>,
    /// TCP: each answer ends with these bytes (escapes: \n, \r, \t, \0, \xNN) [default: the
    /// framing the jobs file recorded at import (its delimiter, or the captured answer sizes
    /// for fixed-length messages), else \0].
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["tcp_count", "tcp_no_answer"])]
    pub tcp_delimiter: Option<String>,
    /// TCP: read as many bytes of answer as the captured server sent.
    #[arg(long, conflicts_with = "tcp_no_answer")]
    pub tcp_count: bool,
    /// TCP: read no answers; send each request when due after the previous was written.
    #[arg(long)]
    pub tcp_no_answer: bool,
    /// MySQL: the user every connection logs in as [default: each session's captured user,
    /// else root]. The password comes from MYSQL_PWD, as the mysql client reads it (a capture
    /// holds only a scramble of the client's).
    #[arg(long, value_name = "USER")]
    pub mysql_user: Option<String>,
    /// MySQL: the database each connection starts in [default: each session's captured one]
    /// (captured USE and COM_INIT_DB still run).
    #[arg(long, value_name = "DB")]
    pub mysql_db: Option<String>,
    /// TLS (https:// targets): extra trust roots (PEM file).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: do not verify the server's certificate.
    #[arg(long)]
    pub tls_insecure: bool,
    /// End the replay as failed when this counter passes a value (COUNTER:VALUE; repeatable).
    /// Replay has no default predicates: errors are tallied and it goes on.
    #[arg(
        long = "failure-predicate",
        value_name = "COUNTER:VALUE",
        value_parser = parse::failure_predicate
    )]
    pub failure_predicates: Vec<Predicate>,
    /// Output format on stdout [default: summary].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub output_format: Option<OutputFormat>,
    /// Also write the result to FILE (its extension picks the format).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    #[command(flatten)]
    pub telemetry: crate::telemetry::TelemetryArgs,
    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
    /// Check every flag and the jobs file's header and print what would run as JSON (the
    /// load, how the jobs would be played), without sending a request or starting anything.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let options = replay_options(&args)?;
    let reader = JobReader::open(&args.file).map_err(|e| usage(e.to_string()))?;
    // The header's protocol is every job's default; jobs of another are skipped (and counted).
    let protocol = shrike_replay::protocol_of(&reader);
    refuse_for(&args, protocol)?;
    options
        .check_hosts(reader.header())
        .map_err(|e| usage(format!("{}: {e}", args.file.display())))?;
    let load = LoadSpec::from_args(&run_args(&args, protocol)?)?;
    let spec = &load.spec;
    let file = args
        .output_file
        .as_ref()
        .map(|p| crate::run::file_format(p, None).map(|f| (p.clone(), f)))
        .transpose()?;
    args.remote.check_used(args.remote.is_remote(), "--remote")?;
    if args.dry_run {
        let mut played = options.to_json();
        // The password is the generator's to log in with, not a dry run's to print.
        played["mysql_password"] = serde_json::json!(options.mysql.password.is_some());
        // What the file and the flags make of the framing together.
        if protocol == JobProtocol::Tcp {
            played["tcp"] = options.tcp_framing(reader.header()).to_json();
        }
        return crate::dry_run::print(serde_json::json!({
            "command": "replay",
            "spec": spec.to_json(),
            "jobs": {"file": args.file.display().to_string(), "protocol": protocol.name()},
            "replay": played,
            "output": crate::dry_run::output(spec.output_format(), file.as_ref()),
            "remote": if args.remote.is_remote() { Some(args.remote.plan()?) } else { None },
        }));
    }
    if let Some((path, _)) = &file {
        crate::atomic::ready(path, "--output")?;
    }
    let mut harness = Harness::start(spec, "replay")?;
    // Rate and lateness over time are what a replay's report plots: always keep the series.
    harness.keep_series(Duration::from_secs(1));
    if args.remote.is_remote() {
        return replay_remote(&args, &load, options, &mut harness, file.as_ref());
    }
    let prepared = harness
        .interrupts
        .preparing(|| shrike_replay::prepare(spec, &options, reader))
        .map_err(|e| load.explain(e))?;
    let path = args.file.clone();
    let prepared = prepared.reading_again(Box::new(move || JobReader::open(&path)));
    let admission = prepared.admission.clone();
    harness
        .interrupts
        .soften(move || admission.close(), "starting no new job; the running ones go on");
    let (ready, feeder) =
        prepared.start().map_err(|e| anyhow::anyhow!("cannot start the feeder thread: {e}"))?;
    let to = spec.urls().first().map_or("-".into(), |u| format!("{}:{}", u.host, u.port));
    // Without --target the jobs go to the built-in test server: say so, lest its answers be
    // read as the captured service's.
    let to = match load.server.is_some() {
        true => format!("the built-in test server at {to} (no --target given)"),
        false => to,
    };
    info!(
        "replaying {} ({}) to {to} at {}× speed",
        args.file.display(),
        protocol.name(),
        args.time_scale
    );
    let result = harness.execute(&load, ready);
    let progress = feeder.progress.clone();
    let end = feeder.finish();
    let mut result = result?;
    report_feed(&end, &progress);
    for a in shrike_replay::advice(&result, &options) {
        match a.warning {
            true => warning!("{}", a.text),
            false => info!("{}", a.text),
        }
    }
    // A soft stop ends the replay as the file's end would: it was still interrupted.
    if harness.interrupts.interrupted() && result.termination == Termination::Completed {
        result.mark_interrupted();
    }
    // How the sessions were played, beside the options of the load: formatters read it (a
    // replay has no rate plan to be judged against).
    let name = args.file.display().to_string();
    let prefix = shrike_replay::path_prefix(spec);
    result.options["replay"] =
        shrike_replay::record(&name, &options, protocol, &progress, &end, &prefix);
    options.judge_canary(&mut result);
    // A bad line ended the feed: the jobs before it played and their result is written, but
    // the replay did not play the file, and every output says so (this reason over any).
    if let Some(e) = &end.error {
        result.fail(format!("the jobs file stopped the replay: {e}"));
    }
    let code = crate::run::finish(&result, spec.output_format(), file.as_ref())?;
    drop(load);
    if let Some(e) = end.error {
        crate::log::line(crate::log::Tag::Error, &format!("{e}"));
        return Ok(ExitCode::from(2));
    }
    Ok(code)
}

/// `--remote`: every generator gets the file streamed and plays its shard of the jobs; the
/// fleet's result is written as a local replay's would be.
fn replay_remote(
    args: &ReplayArgs,
    load: &LoadSpec,
    options: ReplayOptions,
    harness: &mut Harness,
    file: Option<&(PathBuf, OutputFormat)>,
) -> anyhow::Result<ExitCode> {
    if args.shard.is_some() {
        return Err(usage("--shard with --remote: the generators are the shards (each plays 1/N)"));
    }
    if args.loops > 1 {
        return Err(usage(
            "--loop with --remote: the generators read the file as it is streamed, once",
        ));
    }
    if load.server.is_some() {
        return Err(usage("--remote needs a --target the generators can reach"));
    }
    let fleet = args.remote.fleet()?;
    info!(
        "replaying {} on {} generator(s): {}",
        args.file.display(),
        fleet.generators.len(),
        fleet.generators.join(", ")
    );
    let gate = options.clone();
    let work = shrike_service::coordinator::Work::Replay {
        file: args.file.clone(),
        options: Box::new(options),
    };
    let mut done = harness.coordinate(&load.spec, &work, &fleet)?;
    // The gate judges the fleet's differences together, as one replay's.
    gate.judge_canary(&mut done.result);
    crate::run::finish(&done.result, load.spec.output_format(), file)
}

/// The flags of another protocol's jobs than the file's: a replay that would ignore them
/// refuses them.
fn refuse_for(args: &ReplayArgs, protocol: JobProtocol) -> anyhow::Result<()> {
    let given = [
        (JobProtocol::Tcp, "--tcp-delimiter", args.tcp_delimiter.is_some()),
        (JobProtocol::Tcp, "--tcp-count", args.tcp_count),
        (JobProtocol::Tcp, "--tcp-no-answer", args.tcp_no_answer),
        (JobProtocol::Mysql, "--mysql-user", args.mysql_user.is_some()),
        (JobProtocol::Mysql, "--mysql-db", args.mysql_db.is_some()),
        (JobProtocol::Http, "--keep-host", args.keep_host),
        (JobProtocol::Http, "--rewrite", !args.rewrites.is_empty()),
        (JobProtocol::Http, "--canary-max-differences", args.canary_max_differences.is_some()),
        (JobProtocol::Http, "--host", !args.hosts.is_empty()),
    ];
    match given.iter().find(|(p, _, set)| *set && *p != protocol) {
        Some((p, flag, _)) => Err(crate::refuse::in_mode(
            "replay",
            flag,
            &format!("it is for {} jobs; these are {}", p.name(), protocol.name()),
        )),
        None => Ok(()),
    }
}

/// How to play the file, from the flags.
fn replay_options(args: &ReplayArgs) -> anyhow::Result<ReplayOptions> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(usage(format!("--time-scale {}: must be above 0", args.time_scale)));
    }
    let max_idle = args
        .max_idle
        .as_deref()
        .map(|d| parse_duration(d).map_err(|e| usage(format!("--max-idle: {e}"))))
        .transpose()?;
    let shard = args
        .shard
        .as_deref()
        .map(|s| Shard::parse(s).map_err(|e| usage(format!("--shard {e}"))))
        .transpose()?;
    Ok(ReplayOptions {
        time: TimeOptions { scale: args.time_scale, max_idle },
        shard,
        keep_host: args.keep_host,
        loops: match args.loops {
            0 => return Err(usage("--loop 0: play the file at least once")),
            n => n,
        },
        rewrites: shrike_replay::rewrite::Rewrites::parse(&args.rewrites)
            .map_err(|e| usage(format!("--rewrite {e}")))?,
        tcp: framing(args)?,
        mysql: MysqlLogin {
            user: args.mysql_user.clone(),
            password: std::env::var("MYSQL_PWD").ok(),
            database: args.mysql_db.clone(),
        },
        canary_max_differences: args.canary_max_differences,
        hosts: args.hosts.clone(),
    })
}

/// The load: `shrike run`'s reading of the target, workers, timeout, TLS and outputs, with
/// no default failure predicates (replay tallies errors and goes on).
fn run_args(args: &ReplayArgs, protocol: JobProtocol) -> anyhow::Result<RunArgs> {
    let url = match &args.target {
        Some(t) if t.contains("://") => Some(t.clone()),
        // HOST:PORT: the engine connects by URL; the scheme only says "no TLS".
        Some(t) => Some(format!("http://{t}/")),
        None if protocol == JobProtocol::Http => None,
        None => return Err(usage(format!("{} replay needs --target HOST:PORT", protocol.name()))),
    };
    if args.protocol.is_some() && protocol != JobProtocol::Http {
        return Err(usage(format!("--protocol is for HTTP jobs; these are {}", protocol.name())));
    }
    let mut r = RunArgs {
        url,
        protocol: args.protocol,
        concurrency: args.concurrency,
        timeout: args.timeout,
        duration: args.duration,
        no_duration: args.duration.is_none(),
        tls_ca: args.tls_ca.clone(),
        tls_insecure: args.tls_insecure.then_some(true),
        failure_predicates: args.failure_predicates.clone(),
        no_default_failure_predicates: Some(true),
        output_format: args.output_format,
        telemetry: args.telemetry.clone(),
        ..RunArgs::default()
    };
    r.shaping.start_at = args.start_at.clone();
    Ok(r)
}

/// How TCP answers end, from the flags; `None` without any: the jobs file's own framing.
fn framing(args: &ReplayArgs) -> anyhow::Result<Option<TcpFraming>> {
    if args.tcp_count {
        return Ok(Some(TcpFraming::Count));
    }
    if args.tcp_no_answer {
        return Ok(Some(TcpFraming::None));
    }
    let Some(d) = args.tcp_delimiter.as_deref() else { return Ok(None) };
    let bytes = unescape(d).map_err(|e| usage(format!("--tcp-delimiter {d:?}: {e}")))?;
    if bytes.is_empty() {
        return Err(usage("--tcp-delimiter: give at least one byte"));
    }
    Ok(Some(TcpFraming::Delimiter(bytes)))
}

/// `\n`, `\r`, `\t`, `\0`, `\\` and `\xNN` escapes; other bytes as they are.
pub(crate) fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b't') => out.push(b'\t'),
            Some(b'0') => out.push(0),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = it.by_ref().take(2).collect();
                let v = std::str::from_utf8(&hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .filter(|_| hex.len() == 2)
                    .ok_or("\\x takes two hex digits")?;
                out.push(v);
            }
            _ => return Err("unknown escape (\\n, \\r, \\t, \\0, \\\\, \\xNN)".into()),
        }
    }
    Ok(out)
}

/// What was fed.
fn report_feed(end: &FeedEnd, fed: &FeedProgress) {
    use std::sync::atomic::Ordering::Relaxed;
    let skipped = fed.skipped.load(Relaxed);
    info!(
        "fed {} job(s) with {} request(s) of {} read{}",
        fed.jobs.load(Relaxed),
        fed.requests.load(Relaxed),
        fed.read.load(Relaxed),
        if skipped > 0 {
            format!("; skipped {skipped} of another protocol or without requests")
        } else {
            String::new()
        }
    );
    if !end.complete && end.error.is_none() {
        info!("the replay stopped before the end of the jobs file");
    }
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn escapes() {
        assert_eq!(unescape("\\0").as_deref(), Ok(&[0u8][..]));
        assert_eq!(unescape("a\\r\\n\\x7f").as_deref(), Ok(&b"a\r\n\x7f"[..]));
        assert!(unescape("\\q").is_err() && unescape("\\x1").is_err());
    }
}
