//! `shrike service`: the gRPC execution service until SIGINT or SIGTERM: Shrike's own API
//! (`shrike.v1`) and Nighthawk's (`nighthawk.client.NighthawkService`), with Nighthawk's
//! service flags (`--service`, `--listen`, `--listener-address-file`).
//!
//! The bound address is the first line on stdout, as with `shrike serve`, and is written to
//! `--listener-address-file` when given. A service that
//! listens beyond loopback must authenticate its clients (a bearer token or mTLS), and every
//! service needs a target allowlist: a load generator must never become an open relay.

use std::net::IpAddr;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use shrike_service::nighthawk::request_source::{specifier, Source};
use shrike_service::policy::{Allowlist, Limits};
use shrike_service::server::{serve, serve_request_source, Security};
use shrike_service::service::ServiceConfig;

use crate::args::{flag_duration, flag_file, token, usage};
use crate::interrupts::Signals;
use crate::serve::bind;

/// Which service to run (Nighthawk's `--service`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Which {
    /// Runs tests: shrike.v1 and nighthawk.client.NighthawkService.
    #[default]
    TrafficGeneratorService,
    /// Serves requests to load generators' workers
    /// (nighthawk.request_source.NighthawkRequestSourceService): --request-file's requests
    /// in order, or Nighthawk's dummy requests without one.
    DummyRequestSource,
}

#[derive(Args, Debug)]
pub struct ServiceArgs {
    /// Which service to run (Nighthawk's flag).
    #[arg(long, value_enum, default_value_t = Which::TrafficGeneratorService)]
    pub service: Which,
    /// Write the bound ADDRESS:PORT to this file once listening (Nighthawk's flag), for
    /// scripts that start the service on port 0.
    #[arg(long, value_name = "FILE")]
    pub listener_address_file: Option<std::path::PathBuf>,
    /// dummy-request-source: serve this request file's requests (JSON Lines, JSON or YAML, as
    /// shrike run --request-file reads), each once across all streams, in order.
    #[arg(long, value_name = "FILE")]
    pub request_file: Option<std::path::PathBuf>,
    /// dummy-request-source: serve a jobs file's HTTP requests (shrike jobs import's format)
    /// in the order they were sent, each once across all streams.
    #[arg(long, value_name = "FILE", conflicts_with = "request_file")]
    pub jobs: Option<std::path::PathBuf>,
    /// dummy-request-source: start the list over when it is spent, instead of ending the
    /// streams.
    #[arg(long)]
    pub repeat: bool,
    /// Address to listen on; port 0 picks a free port (printed as stdout's first line).
    /// Beyond loopback, --token-file, --token-env or --client-ca is required.
    #[arg(long, default_value = "127.0.0.1:8443", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Targets runs may load (repeatable or comma-separated, at least one): a CIDR (10.0.0.0/8), an address, or
    /// a host name (allowing what it resolves to). Every address a run would connect to is
    /// checked after DNS resolution.
    #[arg(long = "allow-target", value_name = "CIDR|HOST[,…]", value_delimiter = ',')]
    pub allow_target: Vec<String>,
    /// Read the bearer token clients must send (authorization: Bearer TOKEN) from this file.
    #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
    pub token_file: Option<std::path::PathBuf>,
    /// Read the bearer token from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS. Needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<std::path::PathBuf>,
    /// Most runs at once; a run beyond them is refused with RESOURCE_EXHAUSTED [default: 1].
    #[arg(long, value_name = "N")]
    pub max_concurrent_runs: Option<usize>,
    /// Per-run cap on requests per second, all workers together (unpaced runs are refused).
    #[arg(long, value_name = "RPS")]
    pub max_rps: Option<f64>,
    /// Per-run cap on duration (runs without end are refused) [default: 1h].
    #[arg(long, value_name = "DURATION")]
    pub max_duration: Option<String>,
    /// Per-run cap on connections, all workers together.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u64>,
    /// Per-run cap on workers.
    #[arg(long, value_name = "N")]
    pub max_workers: Option<usize>,
    /// The name clients see for this generator [default: the host name].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Runs that name no source address send from this one (a generator with several).
    #[arg(long, value_name = "IP")]
    pub bind_address: Option<IpAddr>,
    /// Check every flag and print the service's configuration as JSON, without listening.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ServiceArgs) -> anyhow::Result<ExitCode> {
    let source = match args.service {
        Which::TrafficGeneratorService => {
            if args.request_file.is_some() || args.jobs.is_some() || args.repeat {
                return Err(usage(
                    "--request-file, --jobs and --repeat are for --service dummy-request-source",
                ));
            }
            None
        }
        Which::DummyRequestSource => {
            // What runs load, and how much, means nothing to a request source.
            let runs = [
                ("--allow-target", !args.allow_target.is_empty()),
                ("--max-concurrent-runs", args.max_concurrent_runs.is_some()),
                ("--max-rps", args.max_rps.is_some()),
                ("--max-duration", args.max_duration.is_some()),
                ("--max-connections", args.max_connections.is_some()),
                ("--max-workers", args.max_workers.is_some()),
                ("--name", args.name.is_some()),
                ("--bind-address", args.bind_address.is_some()),
            ];
            if let Some((flag, _)) = runs.iter().find(|(_, given)| *given) {
                return Err(crate::refuse::in_mode(
                    "service",
                    flag,
                    "it is for --service traffic-generator-service (a request source runs no load)",
                ));
            }
            Some(request_source(&args)?)
        }
    };
    let (config, security) = configure(&args, source.is_none())?;
    if args.dry_run {
        return crate::dry_run::print(serde_json::json!({
            "command": "service",
            "service": format!("{:?}", args.service),
            "listen": args.listen,
            "listener_address_file": args.listener_address_file.as_ref().map(|p| p.display().to_string()),
            "name": config.name,
            "allow": config.allow.describe(),
            "limits": format!("{:?}", config.limits),
            "max_concurrent_runs": config.max_concurrent_runs,
            "bind_address": config.bind_address.map(|a| a.to_string()),
            "security": format!("{security:?}"),
            "request_source": source.as_ref().map(|s| format!("{s:?}")),
        }));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("shrike-service")
        .enable_all()
        .build()
        .context("cannot start the service runtime")?;
    runtime.block_on(async move {
        // Checked before binding: an unauthenticated service is never reachable, even briefly.
        let wanted = tokio::net::lookup_host(&args.listen)
            .await
            .map_err(|e| usage(format!("--listen {:?}: {e}", args.listen)))?;
        if let Some(a) = wanted.into_iter().find(|a| !a.ip().is_loopback()) {
            if !security.authenticates() {
                return Err(usage(format!(
                    "refusing to listen on {a} without authentication: a load generator open \
                     to the network is an open relay; give --token-file, --token-env or \
                     --client-ca (or listen on loopback)"
                )));
            }
        }
        let listener = bind(&args.listen).await?;
        let addr = listener.local_addr().context("cannot read the bound address")?;
        if !addr.ip().is_loopback() && security.token.is_some() && security.tls.is_none() {
            crate::log::warning!(
                "the bearer token travels in plaintext; serve TLS \
                 (--tls-cert/--tls-key) on networks you do not trust"
            );
        }
        let signals = Signals::install()?;
        if let Some(path) = &args.listener_address_file {
            crate::atomic::write(path, |out| write!(out, "{addr}")).with_context(|| {
                format!("cannot write --listener-address-file {}", path.display())
            })?;
        }
        crate::out::stdout(|out| writeln!(out, "{addr}"))?;
        crate::log::info!(
            "service {} on {}://{addr}: targets {}; {}",
            config.name,
            if security.tls.is_some() { "https" } else { "http" },
            config.allow.describe(),
            match (&security.token, &security.client_ca) {
                (Some(_), Some(_)) => "bearer token and client certificates required",
                (Some(_), None) => "bearer token required",
                (None, Some(_)) => "client certificates required",
                (None, None) => "no authentication (loopback only)",
            }
        );
        let (shutdown, force_rx) =
            signals.two_phase("stopping runs and draining", "exiting at once");
        let served = async move {
            match source {
                None => serve(listener, config, security, shutdown).await,
                Some(s) => serve_request_source(listener, s, security, shutdown).await,
            }
        };
        tokio::select! {
            served = served => {
                served.context("the service failed")?;
                Ok(ExitCode::SUCCESS)
            }
            Ok(()) = force_rx => Ok(ExitCode::FAILURE),
        }
    })
}

/// The requests `--service dummy-request-source` serves.
fn request_source(args: &ServiceArgs) -> anyhow::Result<Source> {
    if let Some(path) = &args.jobs {
        let name = path.display().to_string();
        let jobs =
            shrike_jobs::JobReader::open(path).map_err(|e| usage(format!("--jobs {name}: {e}")))?;
        let requests = shrike_service::nighthawk::request_source::from_jobs(jobs)
            .map_err(|e| usage(format!("--jobs {name}: {e}")))?;
        if requests.is_empty() {
            return Err(usage(format!("--jobs {name}: no requests")));
        }
        return Ok(Source::List { requests, repeat: args.repeat });
    }
    if args.repeat && args.request_file.is_none() {
        return Err(usage("--repeat needs --request-file or --jobs (the dummy source is endless)"));
    }
    let Some(path) = &args.request_file else { return Ok(Source::Dummy) };
    let entries = shrike_engine::requests::file::load(path, &[], &[])
        .map_err(|e| usage(format!("--request-file: {e}")))?;
    if entries.is_empty() {
        return Err(usage(format!("--request-file {}: no requests", path.display())));
    }
    if entries.iter().any(|e| !matches!(e.body(), shrike_engine::Body::Size(_))) {
        crate::log::warning!(
            "--request-file {}: bodies travel as their length only (Nighthawk's \
             RequestSpecifier has no body); workers send that many 'a's",
            path.display()
        );
    }
    let requests = entries.iter().map(specifier).collect();
    Ok(Source::List { requests, repeat: args.repeat })
}

/// Everything the flags say, checked before anything listens. A request source runs no
/// load, so it needs no target allowlist.
fn configure(args: &ServiceArgs, runs_load: bool) -> anyhow::Result<(ServiceConfig, Security)> {
    let mut allow = Allowlist::default();
    for a in &args.allow_target {
        allow.add(a).map_err(|e| usage(format!("--allow-target {e}")))?;
    }
    if allow.is_empty() && runs_load {
        return Err(usage(
            "name the targets runs may load with --allow-target (e.g. --allow-target \
             127.0.0.0/8): a service with no allowlist would load anything",
        ));
    }
    let max_concurrent_runs = args.max_concurrent_runs.unwrap_or(1);
    if max_concurrent_runs == 0 {
        return Err(usage("--max-concurrent-runs must be at least 1"));
    }
    if args.max_rps.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(usage("--max-rps must be a number above 0"));
    }
    let limits = Limits {
        rps: args.max_rps,
        duration: Some(flag_duration(
            "max-duration",
            args.max_duration.as_deref().unwrap_or("1h"),
        )?),
        connections: args.max_connections,
        workers: args.max_workers,
    };
    let token = token("", args.token_file.as_deref(), args.token_env.as_deref())?;
    let tls = match (
        flag_file("tls-cert", args.tls_cert.as_deref())?,
        flag_file("tls-key", args.tls_key.as_deref())?,
    ) {
        (Some(c), Some(k)) => Some((c, k)),
        _ => None,
    };
    let client_ca = flag_file("client-ca", args.client_ca.as_deref())?;
    let security = Security { token, tls, client_ca };
    let name = args.name.clone().unwrap_or_else(host_name);
    let config =
        ServiceConfig { name, allow, limits, max_concurrent_runs, bind_address: args.bind_address };
    Ok((config, security))
}

/// The machine's name (a pod's name in Kubernetes), else "shrike".
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "shrike".into())
}
