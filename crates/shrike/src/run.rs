//! `shrike run`: flags (over an optional `--spec` file) → a [`RunSpec`] → the engine's library
//! call → a sink. Each flag is one typed edit of the spec ([`shrike_spec::SpecEdit`]); the spec
//! holds the defaults and every rule, so a flag, a spec file and a stored result are validated
//! the same way.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use shrike_engine::RunSpec;
use shrike_output::OutputFormat;
use shrike_spec::{
    AddressFamily, Concurrency, H1Reuse, Predicate, Protocol, RatePlan, SpecEdit, TlsVersion,
    Verbosity,
};
use shrike_stats::{RunResult, Verdict};

use crate::args::{parse, usage};
use crate::harness::Harness;
use crate::load::LoadSpec;
use crate::log::{self, info, warning, Level, Tag};
use crate::request_args::RequestArgs;
use crate::shaping::ShapingArgs;
use crate::trials::Trials;

#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// URL to benchmark (http:// or https://). Omit it to benchmark the built-in test server.
    pub url: Option<String>,

    /// Run the options recorded in FILE: a spec file (a JSON object of options, as a result's
    /// "options" holds them) or a stored JSON result. Flags given here override its values.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,

    /// Maximum connections per worker [default: 100]. (`shrike sweep` takes a grid here.)
    #[arg(short = 'c', long, value_name = "N")]
    pub connections: Option<String>,
    /// Test duration: seconds, or with a unit (500ms, 30s, 2m) [default: 5, or none with
    /// --requests]. -z is hey's spelling.
    #[arg(
        short = 'd',
        short_alias = 'z',
        long,
        value_name = "DURATION",
        conflicts_with = "no_duration",
        value_parser = parse::duration
    )]
    pub duration: Option<std::time::Duration>,
    /// Send exactly N requests in all (split over the workers), then stop once they are
    /// answered. Without --duration the run lasts as long as they take.
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub total_requests: Option<u64>,
    /// Run until stopped by a predicate or Ctrl-C. Default failure predicates still apply.
    #[arg(long)]
    pub no_duration: bool,
    /// Number of workers (one thread and event loop each), or 'auto' for one per usable CPU.
    /// Rates and connections are per worker [default: 1].
    #[arg(long, value_name = "N|auto", value_parser = parse::concurrency)]
    pub concurrency: Option<Concurrency>,
    /// Connect timeout, request timeout, and the grace period for in-flight requests when the
    /// run stops [default: 30].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub timeout: Option<std::time::Duration>,

    #[command(flatten)]
    pub request: RequestArgs,

    /// Requests that may queue in the pool when every connection is busy [default: 0].
    #[arg(long)]
    pub max_pending_requests: Option<u32>,
    /// Close and replace a connection after this many requests [default: 4294937295].
    #[arg(long)]
    pub max_requests_per_connection: Option<u64>,
    /// Open loop: never wait for a free connection; count such requests as pool overflow.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub open_loop: Option<bool>,
    /// Release requests in bursts of this size (0 or 1: no bursts).
    #[arg(long)]
    pub burst_size: Option<u32>,
    /// Uniform release jitter added to each scheduled time (e.g. .00001s or 10us).
    #[arg(long, value_name = "DURATION", value_parser = parse::duration_with_unit)]
    pub jitter_uniform: Option<std::time::Duration>,
    /// Open every connection before the run starts (HTTP/1 only, as in Nighthawk: HTTP/2
    /// opens connections as streams need them).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub prefetch_connections: Option<bool>,
    /// Send a request again, once, when its first send got no answer and sending it again is
    /// safe: an idempotent method (RFC 9110 §9.2.2) on a reused HTTP/1.1 connection the server
    /// closed under it, or an HTTP/2 or HTTP/3 stream the server refused unprocessed. On by
    /// default, as in browsers and Envoy; each resend is counted as upstream_rq_retry.
    /// `--retry-unanswered=false` sends every request once and counts a failure instead.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub retry_unanswered: Option<bool>,

    /// Multi-target mode: an endpoint HOST:PORT that requests rotate over round robin
    /// (repeatable; each endpoint gets its own pool with the per-worker limits). Replaces
    /// the URL.
    #[arg(long = "multi-target-endpoint", value_name = "HOST:PORT", conflicts_with = "url")]
    pub multi_target_endpoints: Vec<String>,
    /// Multi-target mode: the request path (default /).
    #[arg(long, value_name = "PATH")]
    pub multi_target_path: Option<String>,
    /// Multi-target mode: use https:// for every endpoint.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub multi_target_use_https: Option<bool>,

    /// HTTP version: http1, http2 (h2c with prior knowledge for http://, ALPN for https://) or
    /// http3 (QUIC, https:// only, on the URL's port over UDP).
    #[arg(
        short = 'p',
        long,
        value_name = "http1|http2|http3",
        conflicts_with = "h2",
        value_parser = parse::protocol
    )]
    pub protocol: Option<Protocol>,
    /// Deprecated: same as --protocol http2.
    #[arg(long)]
    pub h2: bool,
    /// HTTP/2: streams per connection (the server's SETTINGS_MAX_CONCURRENT_STREAMS also
    /// applies).
    #[arg(long, value_name = "N")]
    pub max_concurrent_streams: Option<u32>,
    /// HTTP/2: requests in flight per worker across all its connections [default: 100].
    #[arg(long, value_name = "N")]
    pub max_active_requests: Option<u32>,

    /// Which resolved addresses to use: auto (IPv4 first, then IPv6), v4 or v6.
    #[arg(long, value_name = "auto|v4|v6", value_parser = parse::address_family)]
    pub address_family: Option<AddressFamily>,
    /// HTTP/1.1: which idle connection takes the next request: mru (most recently used, the
    /// default) or lru (least recently used, spreading requests over every connection).
    #[arg(long, value_name = "mru|lru", value_parser = parse::h1_reuse)]
    pub experimental_h1_connection_reuse_strategy: Option<H1Reuse>,

    /// TLS: extra trust roots (PEM file), added to the system's.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: do not verify the server's certificate (handshake signatures are still checked).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub tls_insecure: Option<bool>,
    /// TLS: server name to send (SNI) and verify. Default: the URL host (no SNI for an IP).
    #[arg(long, value_name = "NAME")]
    pub tls_sni: Option<String>,
    /// TLS: lowest protocol version to offer (1.2 or 1.3).
    #[arg(long, value_name = "1.2|1.3", value_parser = parse::tls_version)]
    pub tls_min_version: Option<TlsVersion>,
    /// TLS: highest protocol version to offer (1.2 or 1.3).
    #[arg(long, value_name = "1.2|1.3", value_parser = parse::tls_version)]
    pub tls_max_version: Option<TlsVersion>,
    /// TLS: cipher suites to offer, comma separated rustls names (e.g.
    /// TLS13_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).
    #[arg(long, value_name = "LIST")]
    pub tls_cipher_suites: Option<String>,
    /// TLS: never resume sessions, so every connection pays a full handshake.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub tls_no_session_resumption: Option<bool>,

    /// Fail the run (exit 1) when COUNTER exceeds N (repeatable), e.g. benchmark.http_5xx:0.
    #[arg(long = "failure-predicate", value_name = "COUNTER:N", value_parser = parse::failure_predicate)]
    pub failure_predicates: Vec<Predicate>,
    /// End the run (successfully) when COUNTER exceeds N (repeatable).
    #[arg(
        long = "termination-predicate",
        value_name = "COUNTER:N",
        value_parser = parse::termination_predicate
    )]
    pub termination_predicates: Vec<Predicate>,
    /// Do not add the default failure predicates (any 4xx, 5xx, connection failure or reset).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub no_default_failure_predicates: Option<bool>,

    /// Output format written to stdout: summary (the default: outcome, rates and latency on
    /// one screen), human (the summary plus every statistic's table and the counters), json,
    /// yaml, dotted, fortio, csv or prometheus.
    #[arg(long, value_parser = parse::output_format, value_name = "FORMAT")]
    pub output_format: Option<OutputFormat>,
    /// Also write the result to FILE (written whole or not at all), in the format its
    /// extension names (.json, .yaml, .yml, .csv, .prom, .txt for the full human report) or
    /// --output-file-format.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// The format of --output's file, when its extension does not say.
    #[arg(long, value_parser = parse::output_format, value_name = "FORMAT", requires = "output_file")]
    pub output_file_format: Option<OutputFormat>,
    /// Log verbosity (logs go to stderr) [default: info].
    #[arg(short = 'v', long, value_enum)]
    pub verbosity: Option<Level>,
    /// Label stored in structured output (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Check every flag and print what would run as JSON (the spec, where the result goes,
    /// where the run would go), without sending a request or starting anything.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub shaping: ShapingArgs,

    #[command(flatten)]
    pub telemetry: crate::telemetry::TelemetryArgs,

    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,

    #[command(flatten)]
    pub nighthawk: crate::nighthawk_args::NighthawkArgs,
}

impl RunArgs {
    /// The flags given, each as its typed edit of the spec (over a `--spec` file's options, or
    /// the defaults). A flag replaces what it names, and what that makes meaningless: a URL
    /// replaces multi-target endpoints, `--rps` replaces stages, and so on ([`SpecEdit`]).
    pub(crate) fn edit(&self, mut e: SpecEdit) -> anyhow::Result<SpecEdit> {
        if let Some(u) = &self.url {
            e = e.url(u);
        }
        if !self.multi_target_endpoints.is_empty() {
            e = e.multi_target_endpoints(self.multi_target_endpoints.clone());
        }
        if let Some(p) = &self.multi_target_path {
            e = e.multi_target_path(p);
        }
        if let Some(h) = self.multi_target_use_https {
            e = e.multi_target_use_https(h);
        }
        if let Some(c) = &self.connections {
            let n: u32 = c.trim().parse().map_err(|_| {
                usage(format!(
                    "--connections {c:?}: expected a number of connections per worker (a grid \
                     such as 1,4,16 is for shrike sweep)"
                ))
            })?;
            e = e.connections(n);
        }
        if let Some(n) = self.total_requests {
            e = e.total_requests(Some(n));
            // A count without a duration runs as long as the count takes.
            if self.duration.is_none() {
                e = e.no_duration();
            }
        }
        if let Some(d) = self.duration {
            e = e.duration(d);
        }
        if self.no_duration {
            e = e.no_duration();
        }
        if let Some(c) = self.concurrency {
            e = e.concurrency(c);
        }
        if let Some(t) = self.timeout {
            e = e.timeout(t);
        }
        e = self.request.edit(e);
        if let Some(n) = self.max_pending_requests {
            e = e.max_pending_requests(n);
        }
        if let Some(n) = self.max_requests_per_connection {
            e = e.max_requests_per_connection(n);
        }
        if let Some(on) = self.open_loop {
            e = e.open_loop(on);
        }
        if let Some(n) = self.burst_size {
            e = e.burst_size(n);
        }
        if let Some(j) = self.jitter_uniform {
            e = e.jitter_uniform(j);
        }
        if let Some(on) = self.prefetch_connections {
            e = e.prefetch_connections(on);
        }
        if let Some(on) = self.retry_unanswered {
            e = e.retry_unanswered(on);
        }
        if self.h2 {
            e = e.protocol(Protocol::Http2);
        }
        if let Some(p) = self.protocol {
            e = e.protocol(p);
        }
        if let Some(n) = self.max_concurrent_streams {
            e = e.max_concurrent_streams(n);
        }
        if let Some(n) = self.max_active_requests {
            e = e.max_active_requests(n);
        }
        if let Some(f) = self.address_family {
            e = e.address_family(f);
        }
        if let Some(r) = self.experimental_h1_connection_reuse_strategy {
            e = e.h1_reuse(r);
        }
        if let Some(ca) = &self.tls_ca {
            e = e.tls_ca(ca.clone());
        }
        if let Some(on) = self.tls_insecure {
            e = e.tls_insecure(on);
        }
        if let Some(sni) = &self.tls_sni {
            e = e.tls_sni(sni);
        }
        if let Some(v) = self.tls_min_version {
            e = e.tls_min_version(v);
        }
        if let Some(v) = self.tls_max_version {
            e = e.tls_max_version(v);
        }
        if let Some(list) = &self.tls_cipher_suites {
            let suites = list.split(',').map(str::trim).filter(|s| !s.is_empty());
            e = e.tls_cipher_suites(suites.map(String::from).collect());
        }
        if let Some(off) = self.tls_no_session_resumption {
            e = e.tls_session_resumption(!off);
        }
        if !self.failure_predicates.is_empty() {
            e = e.failure_predicates(self.failure_predicates.clone());
        }
        if !self.termination_predicates.is_empty() {
            e = e.termination_predicates(self.termination_predicates.clone());
        }
        if let Some(off) = self.no_default_failure_predicates {
            e = e.no_default_failure_predicates(off);
        }
        if let Some(f) = self.output_format {
            e = e.output_format(f);
        }
        if let Some(v) = self.verbosity {
            e = e.verbosity(verbosity(v));
        }
        if !self.labels.is_empty() {
            e = e.labels(self.labels.clone());
        }
        e = self.shaping.edit(e)?;
        e = self.telemetry.edit(e);
        self.nighthawk.edit(e)
    }
}

fn verbosity(l: Level) -> Verbosity {
    match l {
        Level::Trace => Verbosity::Trace,
        Level::Debug => Verbosity::Debug,
        Level::Info => Verbosity::Info,
        Level::Warn => Verbosity::Warn,
        Level::Error => Verbosity::Error,
        Level::Critical => Verbosity::Critical,
    }
}

pub(crate) fn level(v: Verbosity) -> Level {
    match v {
        Verbosity::Trace => Level::Trace,
        Verbosity::Debug => Level::Debug,
        Verbosity::Info => Level::Info,
        Verbosity::Warn => Level::Warn,
        Verbosity::Error => Level::Error,
        Verbosity::Critical => Level::Critical,
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(v) = args.verbosity {
        log::set_level(v);
    }
    let load = LoadSpec::from_args(&args)?;
    let spec = &load.spec;
    let file = match &args.output_file {
        None => None,
        Some(path) => Some((path.clone(), file_format(path, args.output_file_format)?)),
    };
    log::set_level(level(spec.verbosity()));
    let trials = Trials::of(&args, &load)?;
    if args.dry_run {
        // A run here is prepared as it would be (hosts resolved, files read, TLS built), so
        // what cannot run is said now. A fleet's or a service's run is prepared there.
        let here = matches!(trials, Trials::Local)
            && !spec.built_in_server()
            && spec.requests().remote_source.is_none();
        if here {
            shrike_engine::Run::new(spec).prepare().map_err(|e| load.explain(e))?;
        }
        let service = match &trials {
            Trials::Nighthawk { address, .. } => Some(address.clone()),
            _ => None,
        };
        return crate::dry_run::print(serde_json::json!({
            "command": "run",
            "spec": spec.to_json(),
            "output": crate::dry_run::output(spec.output_format(), file.as_ref()),
            "remote": if args.remote.is_remote() { Some(args.remote.plan()?) } else { None },
            "nighthawk_service": service,
        }));
    }
    if let Some((path, _)) = &file {
        crate::atomic::ready(path, "--output")?;
    }
    if let (Some(_), Some(url)) = (&load.server, spec.urls().first()) {
        info!("no URL given: benchmarking the built-in test server at {url}");
    }
    if args.h2 {
        warning!("--h2 is deprecated; use --protocol http2");
    }
    if args.nighthawk.experimental_h2_use_multiple_connections == Some(true) {
        warning!(
            "--experimental-h2-use-multiple-connections is deprecated (as in Nighthawk); it \
             means --max-concurrent-streams 1, which says so directly"
        );
    }
    if let Some((need, room)) = spec.lateness_overflow() {
        warning!(
            "--max-lateness gathers up to {need} releases per wake-up at the peak rate, but a \
             worker's connections take {room} at once: open loop, the rest overflow (not sent); \
             give --connections {need} or more, or a smaller budget"
        );
    }
    let format = spec.output_format();
    match trials {
        Trials::Fleet(fleet) => {
            let mut harness = Harness::start(spec, "coordinated run")?;
            info!(
                "running on {} generator(s): {}",
                fleet.generators.len(),
                fleet.generators.join(", ")
            );
            let done = harness.coordinate(spec, &shrike_service::coordinator::Work::Run, &fleet)?;
            return finish(&done.result, format, file.as_ref());
        }
        Trials::Nighthawk { address, security } => {
            let mut harness = Harness::start(spec, "run")?;
            info!("sending the run to the Nighthawk service at {address}");
            let answered = harness.nighthawk(spec, &address, &security)?;
            return finish(&answered.result, format, file.as_ref());
        }
        Trials::Local => {}
    }
    let mut harness = Harness::start(spec, "run")?;
    let mut run = shrike_engine::Run::new(spec);
    if spec.requests().remote_source.is_some() {
        let streams =
            shrike_service::nighthawk::request_source::streams(spec, &args.remote.security()?)
                .map_err(anyhow::Error::msg)?;
        run = run.request_streams(streams);
    }
    let ready = harness.interrupts.preparing(|| run.prepare()).map_err(|e| load.explain(e))?;
    announce(spec);
    let result = harness.execute(&load, ready)?;
    let code = finish(&result, format, file.as_ref());
    // The built-in server stops only now: nothing of the run outlives it.
    drop(load);
    code
}

/// The format of `--output FILE`: given, or named by the file's extension.
pub(crate) fn file_format(
    path: &Path,
    given: Option<OutputFormat>,
) -> anyhow::Result<OutputFormat> {
    if let Some(f) = given {
        return Ok(f);
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "json" => Ok(OutputFormat::Json),
        "yaml" | "yml" => Ok(OutputFormat::Yaml),
        "csv" => Ok(OutputFormat::Csv),
        "prom" => Ok(OutputFormat::Prometheus),
        "txt" => Ok(OutputFormat::Human),
        _ => Err(usage(format!(
            "--output {}: the extension does not name a format (.json, .yaml, .csv, .prom, \
             .txt); give --output-file-format",
            path.display()
        ))),
    }
}

/// Reports the errors seen, writes the result to the output file and stdout, and exits as
/// the result's verdict says: 1 for a failed run, 130 for an interrupted one (as shells report
/// Ctrl-C), so a script can tell an interrupted run from a complete one although its result
/// was written. The verdict is the library's, the same a gRPC client or a fleet gets.
pub(crate) fn finish(
    result: &RunResult,
    format: OutputFormat,
    file: Option<&(PathBuf, OutputFormat)>,
) -> anyhow::Result<ExitCode> {
    for (msg, n) in &result.errors {
        warning!("{n} × {msg}");
    }
    // The file first: if stdout is gone (a closed pipe), the result is still kept.
    let saved = file.map(|(path, f)| {
        crate::atomic::write(path, |out| shrike_output::write(*f, result, out))
            .with_context(|| format!("cannot write the result to {}", path.display()))
    });
    crate::out::stdout(|out| shrike_output::write(format, result, out))?;
    if let Some(saved) = saved {
        saved?;
    }
    match &result.verdict {
        Verdict::Failed { .. } => {
            let why = result.verdict.reason().unwrap_or_default();
            log::line(Tag::Error, &format!("run failed: {why}"));
        }
        Verdict::Interrupted => info!("done: {}", result.termination.describe()),
        Verdict::Succeeded => {
            if log::enabled(Level::Info) {
                log::line(Tag::Done, &format!("done: {}", result.termination.describe()));
            }
        }
    }
    Ok(ExitCode::from(match result.verdict {
        Verdict::Interrupted => crate::interrupts::status(),
        _ => result.verdict.exit_code(),
    }))
}

fn announce(spec: &RunSpec) {
    let n = spec.concurrency().workers().get();
    let duration = match spec.duration() {
        Some(d) => format!("{}s", d.as_secs_f64()),
        None => "until stopped".to_string(),
    };
    let urls: Vec<String> = spec.urls().iter().map(ToString::to_string).collect();
    let (label, urls) = if urls.len() == 1 {
        ("Target", urls.join(""))
    } else {
        ("Targets (round robin)", urls.join(", "))
    };
    info!("starting {n} worker(s). Test duration: {duration}. {label}: {urls}");
    let plan = spec.plan();
    let (global, per_worker) = match &plan {
        RatePlan::Constant(r) => (
            format!("{} calls per second", r.per_second() * n as f64),
            format!("{} calls per second", r.per_second()),
        ),
        RatePlan::Unpaced => {
            ("as many calls as the connections carry (unpaced)".into(), "unpaced".into())
        }
        RatePlan::Stages(stages) => {
            let peak = plan.peak().unwrap_or_default();
            (
                format!(
                    "{} stage(s) peaking at {} calls per second",
                    stages.len(),
                    peak * n as f64
                ),
                format!("peak {peak} calls per second"),
            )
        }
    };
    let connections = spec.connections().get() as usize;
    info!("global targets: {} connections and {global}", connections * n);
    info!("   (per-worker targets: {connections} connections and {per_worker})");
    if let Some(s) = spec.shard() {
        info!("shard {s}: this process sends 1/{} of the run", s.count());
    }
    if let Some(t) = spec.start_at() {
        info!("starting at {}", shrike_output::timestamp::format_rfc3339(t));
    }
}
