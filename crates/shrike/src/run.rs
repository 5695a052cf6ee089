//! `shrike run`: Nighthawk's client flags → a validated [`EngineConfig`] → the engine → a sink.

use std::io::Write as _;
use std::num::{NonZeroU32, NonZeroU64};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use shrike_engine::pacer::RatePlan;
use shrike_engine::target::Scheme;
use shrike_engine::{
    AddressFamily, Endpoint, EngineConfig, H1Reuse, Predicate, PredicateKind, Protocol, StopHandle,
    StreamLimits, Target, TlsClient, TlsOptions, TlsVersion,
};
use shrike_output::OutputFormat;
use shrike_stats::duration::format_proto;
use shrike_stats::{RunResult, Termination};

use crate::args::{flag_duration, parse_concurrency, usage};
use crate::embedded::EmbeddedServer;
use crate::log::{self, info, warning, Level};
use crate::request_args::RequestArgs;
use crate::shaping::ShapingArgs;

/// Nighthawk's default for --max-requests-per-connection (effectively unlimited).
const DEFAULT_MAX_REQUESTS_PER_CONNECTION: u64 = 4_294_937_295;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// URL to benchmark (http:// or https://). Omit it to benchmark the built-in test server.
    pub url: Option<String>,

    /// Maximum connections per worker.
    #[arg(long, default_value_t = 100)]
    pub connections: u32,
    /// Test duration: seconds, or with a unit (500ms, 30s, 2m).
    #[arg(long, default_value = "5", value_name = "DURATION", conflicts_with = "no_duration")]
    pub duration: String,
    /// Run until stopped by a predicate or Ctrl-C. Default failure predicates still apply.
    #[arg(long)]
    pub no_duration: bool,
    /// Number of workers (one thread and event loop each), or 'auto' for one per usable CPU.
    /// Rates and connections are per worker.
    #[arg(long, default_value = "1", value_name = "N|auto")]
    pub concurrency: String,
    /// Connect timeout, and the grace period for in-flight requests when the run stops.
    #[arg(long, default_value = "30", value_name = "DURATION")]
    pub timeout: String,

    #[command(flatten)]
    pub request: RequestArgs,

    /// Requests that may queue in the pool when every connection is busy (0: none).
    #[arg(long, default_value_t = 0)]
    pub max_pending_requests: u32,
    /// Close and replace a connection after this many requests.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUESTS_PER_CONNECTION)]
    pub max_requests_per_connection: u64,
    /// Open loop: never wait for a free connection; count such requests as pool overflow.
    #[arg(long)]
    pub open_loop: bool,
    /// Release requests in bursts of this size (0 or 1: no bursts).
    #[arg(long, default_value_t = 0)]
    pub burst_size: u32,
    /// Uniform release jitter added to each scheduled time (e.g. .00001s or 10us).
    #[arg(long, value_name = "DURATION")]
    pub jitter_uniform: Option<String>,
    /// Open every connection before the run starts (HTTP/1 only, as in Nighthawk: HTTP/2
    /// opens connections as streams need them).
    #[arg(long)]
    pub prefetch_connections: bool,

    /// Multi-target mode: an endpoint HOST:PORT that requests rotate over round robin
    /// (repeatable; each endpoint gets its own pool with the per-worker limits). Replaces
    /// the URL.
    #[arg(long = "multi-target-endpoint", value_name = "HOST:PORT", conflicts_with = "url")]
    pub multi_target_endpoints: Vec<String>,
    /// Multi-target mode: the request path (default /).
    #[arg(long, value_name = "PATH")]
    pub multi_target_path: Option<String>,
    /// Multi-target mode: use https:// for every endpoint.
    #[arg(long)]
    pub multi_target_use_https: bool,

    /// HTTP version: http1, http2 (h2c with prior knowledge for http://, ALPN for https://) or
    /// http3 (QUIC, https:// only, on the URL's port over UDP).
    #[arg(short = 'p', long, value_name = "http1|http2|http3", conflicts_with = "h2")]
    pub protocol: Option<String>,
    /// Deprecated: same as --protocol http2.
    #[arg(long)]
    pub h2: bool,
    /// HTTP/2: streams per connection (the server's SETTINGS_MAX_CONCURRENT_STREAMS also
    /// applies).
    #[arg(long, default_value_t = 2_147_483_647, value_name = "N")]
    pub max_concurrent_streams: u32,
    /// HTTP/2: requests in flight per worker across all its connections.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_active_requests: u32,

    /// Which resolved addresses to use: auto (IPv4 first, then IPv6), v4 or v6.
    #[arg(long, default_value = "auto", value_name = "auto|v4|v6")]
    pub address_family: String,
    /// HTTP/1.1: which idle connection takes the next request: mru (most recently used) or
    /// lru (least recently used, spreading requests over every connection).
    #[arg(long, default_value = "mru", value_name = "mru|lru")]
    pub experimental_h1_connection_reuse_strategy: String,

    /// TLS: extra trust roots (PEM file), added to the system's.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS: do not verify the server's certificate (handshake signatures are still checked).
    #[arg(long)]
    pub tls_insecure: bool,
    /// TLS: server name to send (SNI) and verify. Default: the URL host (no SNI for an IP).
    #[arg(long, value_name = "NAME")]
    pub tls_sni: Option<String>,
    /// TLS: lowest protocol version to offer (1.2 or 1.3).
    #[arg(long, value_name = "1.2|1.3")]
    pub tls_min_version: Option<String>,
    /// TLS: highest protocol version to offer (1.2 or 1.3).
    #[arg(long, value_name = "1.2|1.3")]
    pub tls_max_version: Option<String>,
    /// TLS: cipher suites to offer, comma separated rustls names (e.g.
    /// TLS13_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).
    #[arg(long, value_name = "LIST")]
    pub tls_cipher_suites: Option<String>,
    /// TLS: never resume sessions, so every connection pays a full handshake.
    #[arg(long)]
    pub tls_no_session_resumption: bool,

    /// Fail the run (exit 1) when COUNTER exceeds N (repeatable), e.g. benchmark.http_5xx:0.
    #[arg(long = "failure-predicate", value_name = "COUNTER:N")]
    pub failure_predicates: Vec<String>,
    /// End the run (successfully) when COUNTER exceeds N (repeatable).
    #[arg(long = "termination-predicate", value_name = "COUNTER:N")]
    pub termination_predicates: Vec<String>,
    /// Do not add the default failure predicates (any 4xx, 5xx, connection failure or reset).
    #[arg(long)]
    pub no_default_failure_predicates: bool,

    /// Output format written to stdout.
    #[arg(long, default_value = "human", value_parser = parse_output_format)]
    pub output_format: OutputFormat,
    /// Log verbosity (logs go to stderr).
    #[arg(short = 'v', long, value_enum, default_value = "info")]
    pub verbosity: Level,
    /// Label stored in structured output (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,

    #[command(flatten)]
    pub shaping: ShapingArgs,

    #[command(flatten)]
    pub telemetry: crate::telemetry::TelemetryArgs,
}

fn parse_output_format(s: &str) -> Result<OutputFormat, String> {
    s.parse::<OutputFormat>().map_err(|e| e.to_string())
}

fn parse_protocol(args: &RunArgs) -> anyhow::Result<Protocol> {
    if args.h2 {
        return Ok(Protocol::Http2);
    }
    match args.protocol.as_deref().map(|p| p.trim().to_ascii_lowercase()).as_deref() {
        None | Some("http1") => Ok(Protocol::Http1),
        Some("http2") => Ok(Protocol::Http2),
        Some("http3") => Ok(Protocol::Http3),
        Some(other) => {
            Err(usage(format!("--protocol: expected http1, http2 or http3, got {other:?}")))
        }
    }
}

fn parse_h1_reuse(s: &str) -> anyhow::Result<H1Reuse> {
    match s.trim().to_ascii_lowercase().as_str() {
        "mru" => Ok(H1Reuse::Mru),
        "lru" => Ok(H1Reuse::Lru),
        other => Err(usage(format!(
            "--experimental-h1-connection-reuse-strategy: expected mru or lru, got {other:?}"
        ))),
    }
}

fn tls_version(flag: &str, v: &Option<String>) -> anyhow::Result<Option<TlsVersion>> {
    v.as_deref()
        .map(|s| {
            TlsVersion::parse(s)
                .ok_or_else(|| usage(format!("--{flag}: expected 1.2 or 1.3, got {s:?}")))
        })
        .transpose()
}

/// The TLS options as given; `None` when no TLS flag was used.
fn tls_options(args: &RunArgs) -> anyhow::Result<TlsOptions> {
    Ok(TlsOptions {
        ca_file: args.tls_ca.clone(),
        insecure: args.tls_insecure,
        sni: args.tls_sni.clone(),
        min_version: tls_version("tls-min-version", &args.tls_min_version)?,
        max_version: tls_version("tls-max-version", &args.tls_max_version)?,
        cipher_suites: args
            .tls_cipher_suites
            .iter()
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        no_session_resumption: args.tls_no_session_resumption,
    })
}

/// The multi-target endpoints as URLs, or `None` when the run has a single target.
fn multi_target_urls(args: &RunArgs) -> anyhow::Result<Option<Vec<String>>> {
    if args.multi_target_endpoints.is_empty() {
        if args.multi_target_path.is_some() || args.multi_target_use_https {
            return Err(usage(
                "--multi-target-path and --multi-target-use-https need --multi-target-endpoint",
            ));
        }
        return Ok(None);
    }
    let path = args.multi_target_path.as_deref().unwrap_or("/");
    if !path.starts_with('/') {
        return Err(usage(format!("--multi-target-path must start with '/', got {path:?}")));
    }
    let scheme = if args.multi_target_use_https { "https" } else { "http" };
    args.multi_target_endpoints
        .iter()
        .map(|ep| {
            let port_ok = ep.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
            });
            if !port_ok || ep.contains(['/', '?', '#', '@']) {
                return Err(usage(format!(
                    "--multi-target-endpoint: expected HOST:PORT (IPv6 as [::1]:PORT), got {ep:?}"
                )));
            }
            Ok(format!("{scheme}://{ep}{path}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(Some)
}

/// Pairs each target with its TLS client: one rustls config (and session cache) for every
/// endpoint; only the server name differs.
fn endpoints(
    args: &RunArgs,
    targets: Vec<Target>,
    protocol: Protocol,
) -> anyhow::Result<Vec<Endpoint>> {
    let tls_opts = tls_options(args)?;
    if tls_opts != TlsOptions::default() && targets.iter().all(|t| t.scheme == Scheme::Http) {
        return Err(usage(format!(
            "--tls-* options need an https:// target, got {}",
            targets.first().map(Target::url).unwrap_or_default()
        )));
    }
    let mut first: Option<TlsClient> = None;
    let mut endpoints = Vec::with_capacity(targets.len());
    for target in targets {
        let tls = match (target.scheme, &first) {
            (Scheme::Http, _) => None,
            (Scheme::Https, None) => Some(
                TlsClient::build(&tls_opts, &target.host, protocol)
                    .map_err(|e| usage(format!("TLS: {e}")))?,
            ),
            (Scheme::Https, Some(c)) => {
                Some(c.for_host(&target.host).map_err(|e| usage(format!("TLS: {e}")))?)
            }
        };
        if first.is_none() {
            first = tls.clone();
        }
        endpoints.push(Endpoint { target, tls });
    }
    Ok(endpoints)
}

/// The default failure predicates plus the user's; a user predicate on a counter replaces
/// the default one on it.
fn predicates(args: &RunArgs) -> anyhow::Result<Vec<Predicate>> {
    let mut predicates =
        if args.no_default_failure_predicates { Vec::new() } else { Predicate::default_failures() };
    for (list, kind, flag) in [
        (&args.failure_predicates, PredicateKind::Failure, "failure-predicate"),
        (&args.termination_predicates, PredicateKind::Termination, "termination-predicate"),
    ] {
        for p in list {
            let p = Predicate::parse(p, kind).map_err(|e| usage(format!("--{flag}: {e}")))?;
            // A user-given predicate on the same counter replaces the default (Nighthawk
            // users write `--failure-predicate benchmark.http_5xx:100` to tolerate some 5xx).
            predicates.retain(|q| !(q.counter == p.counter && q.kind == p.kind));
            predicates.push(p);
        }
    }
    Ok(predicates)
}

/// Validates the flags into the engine's config. Every problem is a usage error (exit 2).
pub fn build_config(args: &RunArgs, targets: Vec<Target>) -> anyhow::Result<EngineConfig> {
    let protocol = parse_protocol(args)?;
    if protocol == Protocol::Http3 {
        if let Some(t) = targets.iter().find(|t| t.scheme == Scheme::Http) {
            return Err(usage(format!(
                "--protocol http3 needs an https:// URL (QUIC always runs TLS), got {}",
                t.url()
            )));
        }
    }
    let requests = args.request.build(&targets)?;
    let endpoints = endpoints(args, targets, protocol)?;
    let streams = StreamLimits {
        max_concurrent_streams: NonZeroU32::new(args.max_concurrent_streams)
            .ok_or_else(|| usage("--max-concurrent-streams must be at least 1"))?,
        max_active_requests: NonZeroU32::new(args.max_active_requests)
            .ok_or_else(|| usage("--max-active-requests must be at least 1"))?,
    };
    let shaping = args.shaping.validate(args.open_loop)?;
    let connections = NonZeroU32::new(args.connections)
        .ok_or_else(|| usage("--connections must be at least 1"))?;
    let duration = if let Some(d) = shaping.stages_duration {
        Some(d)
    } else if args.no_duration {
        None
    } else {
        let d = flag_duration("duration", &args.duration)?;
        if d.is_zero() {
            return Err(usage(
                "--duration must be greater than 0 (use --no-duration to run until stopped)",
            ));
        }
        Some(d)
    };
    let timeout = flag_duration("timeout", &args.timeout)?;
    if timeout.is_zero() {
        return Err(usage("--timeout must be greater than 0"));
    }
    let jitter = match &args.jitter_uniform {
        Some(j) => flag_duration("jitter-uniform", j)?,
        None => Duration::ZERO,
    };
    let max_requests_per_connection = Some(
        NonZeroU64::new(args.max_requests_per_connection)
            .ok_or_else(|| usage("--max-requests-per-connection must be at least 1"))?,
    );
    let predicates = predicates(args)?;
    let cfg = EngineConfig {
        endpoints,
        requests,
        protocol,
        streams,
        workers: parse_concurrency(&args.concurrency)?,
        plan: shaping.plan,
        idle: shaping.idle,
        burst: NonZeroU32::new(args.burst_size.max(1)).unwrap_or(NonZeroU32::MIN),
        jitter,
        connections,
        h1_reuse: parse_h1_reuse(&args.experimental_h1_connection_reuse_strategy)?,
        duration,
        timeout,
        max_pending_requests: args.max_pending_requests,
        max_requests_per_connection,
        open_loop: args.open_loop,
        prefetch_connections: args.prefetch_connections,
        warmup: args.shaping.simple_warmup,
        start_at: shaping.start_at,
        bind_address: shaping.bind_address,
        predicates,
    };
    // What only the engine can judge (e.g. a host header that is no valid HTTP/2
    // :authority) is still a configuration error: report it before anything starts.
    shrike_engine::validate(&cfg).map_err(|e| usage(e.to_string()))?;
    Ok(cfg)
}

/// The `options` object of the JSON result: every option with its effective value, under
/// Nighthawk's CommandLineOptions names.
fn options_json(args: &RunArgs, cfg: &EngineConfig) -> serde_json::Value {
    let preds = |kind: PredicateKind| -> serde_json::Map<String, serde_json::Value> {
        cfg.predicates
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| (p.counter.name().to_string(), json!(p.threshold.to_string())))
            .collect()
    };
    let mut options = json!({
        "uri": (args.multi_target_endpoints.is_empty())
            .then(|| cfg.endpoints.first().map(|e| e.target.url())),
        "multi_target_endpoints": args.multi_target_endpoints,
        "multi_target_path": args.multi_target_path,
        "multi_target_use_https": args.multi_target_use_https,
        "connections": cfg.connections.get(),
        "address_family": args.address_family.to_ascii_lowercase(),
        "experimental_h1_connection_reuse_strategy": cfg.h1_reuse.name(),
        "duration": cfg.duration.map(format_proto),
        "no_duration": cfg.duration.is_none(),
        "timeout": format_proto(cfg.timeout),
        "concurrency": args.concurrency,
        "workers": cfg.workers.get(),
        "protocol": cfg.protocol.name(),
        "max_concurrent_streams": cfg.streams.max_concurrent_streams.get(),
        "max_active_requests": cfg.streams.max_active_requests.get(),
        "tls": {
            "ca": args.tls_ca.as_ref().map(|p| p.display().to_string()),
            "insecure": args.tls_insecure,
            "sni": args.tls_sni,
            "min_version": args.tls_min_version,
            "max_version": args.tls_max_version,
            "cipher_suites": args.tls_cipher_suites,
            "session_resumption": !args.tls_no_session_resumption,
        },
        "max_pending_requests": cfg.max_pending_requests,
        "max_requests_per_connection": cfg.max_requests_per_connection.map(|m| m.get().to_string()),
        "open_loop": cfg.open_loop,
        "burst_size": args.burst_size,
        "jitter_uniform": format_proto(cfg.jitter),
        "prefetch_connections": cfg.prefetch_connections,
        "failure_predicates": preds(PredicateKind::Failure),
        "termination_predicates": preds(PredicateKind::Termination),
        "no_default_failure_predicates": args.no_default_failure_predicates,
        "output_format": args.output_format.to_string(),
        "verbosity": format!("{:?}", args.verbosity).to_lowercase(),
        "labels": args.labels,
    });
    if let Some(o) = options.as_object_mut() {
        o.extend(args.request.options_json(&cfg.requests));
        if let serde_json::Value::Object(shaping) = args.shaping.options_json(cfg) {
            o.extend(shaping);
        }
    }
    options
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    log::set_level(args.verbosity);
    // Resolve the target (or start the built-in server) before anything else, so a typo fails
    // fast with exit 2 and no half-started run.
    let family = AddressFamily::parse(&args.address_family).ok_or_else(|| {
        usage(format!("--address-family: expected auto, v4 or v6, got {:?}", args.address_family))
    })?;
    let parse =
        |url: &str| Target::parse_with_family(url, family).map_err(|e| usage(e.to_string()));
    let (targets, server) = match (&args.url, multi_target_urls(&args)?) {
        (_, Some(urls)) => (urls.iter().map(|u| parse(u)).collect::<anyhow::Result<_>>()?, None),
        (Some(url), None) => (vec![parse(url)?], None),
        (None, None) => {
            let server = EmbeddedServer::start()?;
            let url = format!("http://{}/", server.addr);
            info!("no URL given: benchmarking the built-in test server at {url}");
            (vec![Target::parse(&url).map_err(|e| usage(e.to_string()))?], Some(server))
        }
    };
    let cfg = build_config(&args, targets)?;
    if args.h2 {
        warning!("--h2 is deprecated; use --protocol http2");
    }
    let mut options = options_json(&args, &cfg);
    if let (Some(o), serde_json::Value::Object(t)) =
        (options.as_object_mut(), crate::telemetry::options_json(&args.telemetry))
    {
        o.extend(t);
    }
    let mut session = crate::telemetry::start(&args.telemetry, args.output_format, cfg.duration)?;
    announce(&cfg);

    let stop = StopHandle::new();
    let output = run_with_signals(cfg, stop, session.telemetry.take());
    session.stop();
    let output = output?;
    drop(server);

    for (msg, n) in &output.errors {
        warning!("{n} × {msg}");
    }
    let mut result = RunResult::new(options, output.workers, output.termination.clone());
    result.intervals = output.intervals;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    shrike_output::write(args.output_format, &result, &mut out)
        .and_then(|()| out.flush())
        .context("cannot write the result to stdout")?;
    match &output.termination {
        Termination::FailurePredicate(p) => {
            eprintln!("error: run failed: failure predicate {p} fired");
            if let Some((msg, _)) = output.errors.iter().next() {
                eprintln!("error: first error: {msg}");
            }
            Ok(ExitCode::from(1))
        }
        t => {
            info!("done: {}", t.describe());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn announce(cfg: &EngineConfig) {
    let n = cfg.workers.get();
    let duration = match cfg.duration {
        Some(d) => format!("{}s", d.as_secs_f64()),
        None => "until stopped".to_string(),
    };
    let urls: Vec<String> = cfg.endpoints.iter().map(|e| e.target.url()).collect();
    let (label, urls) = if urls.len() == 1 {
        ("Target", urls.join(""))
    } else {
        ("Targets (round robin)", urls.join(", "))
    };
    info!("starting {n} worker(s). Test duration: {duration}. {label}: {urls}");
    let (global, per_worker) = match &cfg.plan {
        RatePlan::Constant(r) => (
            format!("{} calls per second", r.per_second() * n as f64),
            format!("{} calls per second", r.per_second()),
        ),
        RatePlan::Unpaced => {
            ("as many calls as the connections carry (unpaced)".into(), "unpaced".into())
        }
        RatePlan::Stages(stages) => {
            let peak = cfg.plan.peak().unwrap_or_default();
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
    info!("global targets: {} connections and {global}", cfg.connections.get() as usize * n);
    info!("   (per-worker targets: {} connections and {per_worker})", cfg.connections.get());
    if let Some(t) = cfg.start_at {
        info!("starting at {}", shrike_output::timestamp::format_rfc3339(t));
    }
}

/// Runs the engine on its own threads while this thread handles signals: the first SIGINT or
/// SIGTERM stops the run and drains in-flight requests (up to --timeout) so the result is still
/// written; a second one exits at once.
fn run_with_signals(
    cfg: EngineConfig,
    stop: StopHandle,
    telemetry: Option<shrike_engine::Telemetry>,
) -> anyhow::Result<shrike_engine::RunOutput> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal-handling runtime")?;
    let grace = cfg.timeout;
    rt.block_on(async move {
        // Register before the engine starts so an early Ctrl-C is not lost.
        let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let engine_stop = stop.clone();
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
        let engine = std::thread::Builder::new()
            .name("shrike-engine".into())
            .spawn(move || {
                let out = shrike_engine::run_observed(cfg, engine_stop, telemetry);
                let _ = done_tx.send(());
                out
            })
            .context("cannot start the engine thread")?;
        let mut interrupts = 0;
        loop {
            tokio::select! {
                _ = &mut done_rx => break,
                _ = sigint.recv() => interrupts += 1,
                _ = sigterm.recv() => interrupts += 1,
            }
            if interrupts == 1 {
                stop.request(Termination::Interrupted);
                eprintln!(
                    "[shrike] interrupted: finishing in-flight requests (up to {}s) and writing the result; interrupt again to exit immediately",
                    grace.as_secs_f64()
                );
            } else {
                eprintln!("[shrike] interrupted twice: exiting without a result");
                std::process::exit(130);
            }
        }
        let out = engine
            .join()
            .map_err(|_| anyhow::anyhow!("the engine thread crashed"))?
            .context("the run could not start")?;
        Ok(out)
    })
}
