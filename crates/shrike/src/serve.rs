//! `shrike serve`: the test server on a multi-thread runtime until SIGINT or SIGTERM.
//!
//! One port serves HTTP/1.1 and HTTP/2: in plaintext HTTP/2 is spoken by prior knowledge (h2c),
//! over TLS (`--tls`, or `--tls-cert`/`--tls-key`) ALPN negotiates it. With `--http3` (TLS only)
//! the same port number serves HTTP/3 over UDP too.
//!
//! The bound address is the first line on stdout (so `--listen 127.0.0.1:0` is scriptable); with
//! a generated certificate the second line is `tls-ca: PATH`, the certificate to trust.
//! Everything else goes to stderr. The first signal drains in-flight requests and exits 0; a
//! second one exits at once with 1.

use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::interrupts::Signals;
use anyhow::Context as _;
use clap::Args;
use shrike_server::{
    ConfigError, SelfSignedCert, ServerConfig, ServerTotals, TlsConfig, DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_RESPONSE_BODY_SIZE,
};
use tokio::net::TcpListener;

use crate::args::{flag_duration, parse_concurrency, usage};
pub use limits::LimitArgs;

mod limits;
/// `ADDRESS/PREFIX` (or an address alone, a host network) for `--proxy-allow`.
fn parse_cidr(s: &str) -> Result<(std::net::IpAddr, u8), String> {
    let (ip, len) = match s.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (s, None),
    };
    let ip: std::net::IpAddr = ip
        .trim()
        .parse()
        .map_err(|_| format!("expected ADDRESS/PREFIX such as 10.0.0.0/8, got {s:?}"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= max)
            .ok_or_else(|| format!("the prefix length of {s:?} must be 0..={max}"))?,
    };
    Ok((ip, len))
}

#[cfg(test)]
use crate::UsageError;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port. The bound address is printed as the
    /// first line of stdout [default: 127.0.0.1:10000, or --config-path's listener].
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// A Nighthawk test-server configuration (Envoy bootstrap YAML or JSON): its first
    /// listener's address, and the test-server, dynamic-delay and time-tracking filters'
    /// options as server-wide defaults. Everything else in it is listed as ignored on stderr.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub config_path: Option<PathBuf>,
    /// Write the bound ADDRESS:PORT to this file once listening (for scripts using port 0).
    #[arg(long, value_name = "FILE")]
    pub listener_address_file: Option<PathBuf>,
    /// Worker threads, or 'auto' for one per usable CPU.
    #[arg(long, default_value = "auto", value_name = "N|auto")]
    pub concurrency: String,
    /// Response body size in bytes (a body of 'a's) unless a request asks otherwise.
    #[arg(long, default_value_t = DEFAULT_RESPONSE_BODY_SIZE, value_name = "BYTES")]
    pub response_body_size: u64,
    /// Delay before every response unless a request asks otherwise (e.g. 0.25s, 250ms).
    #[arg(long, value_name = "DURATION")]
    pub static_delay: Option<String>,
    /// Response header 'name: value' (repeatable). The first with a given name replaces the
    /// server's own header of that name (e.g. server); later ones are added alongside.
    #[arg(long = "response-header", value_name = "HEADER")]
    pub response_headers: Vec<String>,
    /// Answer with the request's headers, one 'name: value' line each, instead of 'a's.
    #[arg(long)]
    pub echo_request_headers: bool,
    /// Response status unless a request asks otherwise (200-599).
    #[arg(long, default_value_t = 200, value_name = "STATUS")]
    pub response_status: u16,
    /// Largest request body accepted (larger ones get 413), and largest response body a
    /// request may ask for.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_SIZE, value_name = "BYTES")]
    pub max_body_size: u64,
    /// Most TCP connections served at once. Further ones are accepted and reset at once (the
    /// client sees ECONNRESET), counted as limits.connections_refused in --stats-path; the
    /// connections being served are unaffected. With --http3, QUIC connections have a cap of the
    /// same size, counted apart (further ones are refused in the handshake).
    #[arg(long, default_value_t = shrike_server::DEFAULT_MAX_CONNECTIONS.get(), value_name = "N")]
    pub max_connections: usize,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Most HTTP/2 streams one connection may have open at once.
    #[arg(long, default_value_t = DEFAULT_MAX_CONCURRENT_STREAMS.get(), value_name = "N")]
    pub max_concurrent_streams: u32,
    /// After a shutdown signal, how long in-flight requests may take before connections are cut.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub drain_timeout: String,
    /// Server-wide defaults as JSON in the shape of the x-nighthawk-test-server-config header
    /// (every field, faults included), or @FILE to read them from a file. Applied over the
    /// flags above; each request's header then overrides it field by field.
    #[arg(long, value_name = "JSON|@FILE")]
    pub config: Option<String>,
    /// Serve JSON statistics (requests, responses by class, active requests, bytes, injected
    /// faults, connection limits hit, uptime) at this path, e.g. /.shrike/stats. Off by default.
    #[arg(long, value_name = "PATH")]
    pub stats_path: Option<String>,
    /// Also serve HTTP/3 over QUIC on the same port number (UDP). Needs TLS (--tls or
    /// --tls-cert/--tls-key); TCP responses then advertise it with alt-svc.
    #[arg(long)]
    pub http3: bool,
    /// Also be a forward proxy: a CONNECT host:port (HTTP/1.1, or an HTTP/2 or HTTP/3 stream)
    /// opens a TCP connection there and carries bytes both ways (shrike run --tunnel-uri, curl
    /// -p -x); over HTTP/2 and HTTP/3, CONNECT-UDP (RFC 9298) carries UDP for HTTP/3 load.
    /// Counted under proxy in --stats-path. Destinations are limited to --proxy-allow.
    #[arg(long)]
    pub connect_proxy: bool,
    /// Networks a CONNECT may reach, as CIDR (repeatable) [default: 127.0.0.0/8 and ::1]; a
    /// destination resolving outside them gets 403.
    #[arg(long, value_name = "CIDR", requires = "connect_proxy", value_parser = parse_cidr)]
    pub proxy_allow: Vec<(std::net::IpAddr, u8)>,
    #[command(flatten)]
    pub tls: Box<TlsArgs>,
    /// Check every flag and print the server's configuration as JSON, without listening (or
    /// writing a certificate).
    #[arg(long)]
    pub dry_run: bool,
}

/// The TLS flags, boxed so `ServeArgs` stays small next to the other subcommands' arguments.
#[derive(Args, Debug)]
pub struct TlsArgs {
    /// Serve TLS (HTTP/2 or HTTP/1.1 by ALPN). Without --tls-cert, a self-signed certificate
    /// for localhost, 127.0.0.1 and ::1 is generated; its path is printed on stdout after the
    /// address as 'tls-ca: PATH' (pass it to --tls-ca or curl --cacert).
    #[arg(long = "tls")]
    pub enabled: bool,
    /// PEM certificate chain (leaf first) to serve TLS with; implies --tls. Needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where to write the generated cert.pem and key.pem (default: a new temporary directory).
    #[arg(long, value_name = "DIR", conflicts_with = "tls_cert")]
    pub tls_cert_out: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let workers = parse_concurrency(&args.concurrency)?;
    let tls = tls_setup(&args)?;
    let tls_on = args.tls.enabled || args.tls.tls_cert.is_some();
    if args.http3 && !tls_on {
        return Err(usage(
            "--http3 needs TLS: add --tls (self-signed) or --tls-cert/--tls-key \
             (QUIC has no plaintext form)",
        ));
    }
    let envoy = match &args.config_path {
        Some(path) => {
            let name = path.display();
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--config-path {name}: {e}")))?;
            let c = shrike_server::envoy::parse_text(&text)
                .map_err(|e| usage(format!("--config-path {name}: {e}")))?;
            if !c.ignored.is_empty() {
                crate::log::warning!(
                    "--config-path {}: ignored (no meaning for Shrike's server): {}",
                    path.display(),
                    c.ignored.join(", ")
                );
            }
            Some(c)
        }
        None => None,
    };
    let listen = match (&args.listen, envoy.as_ref().and_then(|c| c.listen.clone())) {
        (Some(l), _) => l.clone(),
        (None, Some(l)) => l,
        (None, None) => "127.0.0.1:10000".to_string(),
    };
    let defaults = envoy.map(|c| serde_json::Value::Object(c.defaults).to_string());
    let config = build_config(&args, defaults, tls.as_ref().map(|t| t.config.clone()))?;
    if args.dry_run {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let t = &*args.tls;
        return crate::dry_run::print(serde_json::json!({
            "command": "serve",
            "listen": listen,
            "listener_address_file": path(&args.listener_address_file),
            "workers": workers.get(),
            "http3": args.http3,
            "tls": {
                "on": tls_on,
                "cert": path(&t.tls_cert),
                "key": path(&t.tls_key),
                "self_signed": t.enabled && t.tls_cert.is_none(),
                "cert_out": path(&t.tls_cert_out),
            },
            "config_path": path(&args.config_path),
            "server": format!("{config:?}"),
        }));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.get())
        .thread_name("shrike-serve")
        // Microsecond delays need timers that fire on time, not within the 50 µs default slack.
        .on_thread_start(shrike_timer::tighten_timer_slack)
        .enable_all()
        .build()
        .context("cannot start the server runtime")?;
    let at = Listen { addr: &listen, file: args.listener_address_file.as_deref() };
    runtime.block_on(serve(at, args.http3, workers, config, tls))
}

/// The TLS side of the configuration, and where a generated certificate was written.
struct TlsSetup {
    config: TlsConfig,
    generated: Option<PathBuf>,
    /// Held for the server's lifetime: dropping it removes the generated files.
    _temp_dir: Option<TempDir>,
}

/// A directory we created for a generated certificate, removed when dropped: `serve` returns
/// (and so drops it) on a normal exit and after SIGINT/SIGTERM alike, so runs of
/// `shrike serve --tls` do not pile up directories in /tmp. `--tls-cert-out` directories are
/// the user's and are never wrapped in this.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a directory someone else already removed is not an error at exit.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// TLS as the flags ask (certificate files read, or one generated and written); a dry run
/// checks the flags and writes nothing.
fn tls_setup(args: &ServeArgs) -> anyhow::Result<Option<TlsSetup>> {
    let dry = args.dry_run;
    let args = &*args.tls;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let config = TlsConfig::from_pem_files(cert, key)
            .map_err(|e| usage(format!("--tls-cert/--tls-key: {e}")))?;
        return Ok(Some(TlsSetup { config, generated: None, _temp_dir: None }));
    }
    if !args.enabled {
        if args.tls_cert_out.is_some() {
            return Err(usage(
                "--tls-cert-out needs --tls (it names where the generated certificate goes)",
            ));
        }
        return Ok(None);
    }
    if dry {
        return Ok(None);
    }
    let cert = SelfSignedCert::generate(&SelfSignedCert::LOOPBACK_NAMES)
        .context("cannot generate a self-signed certificate")?;
    let (dir, temp_dir) = match &args.tls_cert_out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--tls-cert-out: cannot create {}", dir.display()))?;
            (dir.clone(), None)
        }
        None => {
            let dir = new_temp_dir()?;
            // Guarded before anything is written, so a failure below removes it too.
            (dir.clone(), Some(TempDir(dir)))
        }
    };
    let cert_path = dir.join("cert.pem");
    write_file(&cert_path, cert.cert_pem(), 0o644)?;
    write_file(&dir.join("key.pem"), cert.key_pem(), 0o600)?;
    let config = cert.tls_config().context("the generated certificate is unusable")?;
    Ok(Some(TlsSetup { config, generated: Some(cert_path), _temp_dir: temp_dir }))
}

/// A directory of our own under the system temp dir (no tempfile crate for one call: the name
/// carries the pid and the time, and `create_dir` refuses to reuse an existing one).
fn new_temp_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir();
    let mut last_error = None;
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("shrike-tls-{}-{nanos:09}-{attempt}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last_error = Some(e),
        }
    }
    let e = last_error.map_or_else(|| "unknown error".to_string(), |e| e.to_string());
    anyhow::bail!("cannot create a temporary directory in {}: {e}", base.display())
}

/// Writes `contents` to a new or truncated file; `mode` applies on Unix (the key stays private).
fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    options
        .open(path)
        .and_then(|mut file| file.write_all(contents.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Where to listen, and where to tell scripts the bound address.
struct Listen<'a> {
    addr: &'a str,
    file: Option<&'a Path>,
}

async fn serve(
    listen: Listen<'_>,
    http3: bool,
    workers: NonZeroUsize,
    config: ServerConfig,
    tls: Option<TlsSetup>,
) -> anyhow::Result<ExitCode> {
    let listener = bind(listen.addr).await?;
    let addr = listener.local_addr().context("cannot read the bound address")?;
    let udp = if http3 { Some(bind_udp(addr)?) } else { None };
    if let Some(path) = listen.file {
        crate::atomic::write(path, |out| write!(out, "{addr}"))
            .with_context(|| format!("cannot write --listener-address-file {}", path.display()))?;
    }
    // Installed before the address is announced, so a script that signals as soon as it has
    // read the address still gets a graceful shutdown.
    let signals = Signals::install()?;
    let generated = tls.as_ref().and_then(|t| t.generated.as_deref());
    crate::out::stdout(|out| {
        writeln!(out, "{addr}")?;
        match generated {
            Some(path) => writeln!(out, "tls-ca: {}", path.display()),
            None => Ok(()),
        }
    })?;
    if http3 {
        crate::log::info!(
            "serving HTTP/2 and HTTP/1.1 (by ALPN) on https://{addr}, and HTTP/3 on \
             udp/{}, with {workers} worker thread(s)",
            addr.port()
        );
    } else if tls.is_some() {
        crate::log::info!(
            "serving HTTP/2 and HTTP/1.1 (by ALPN) on https://{addr} with {workers} \
             worker thread(s)"
        );
    } else {
        crate::log::info!(
            "serving HTTP/1.1 and HTTP/2 (prior knowledge) on http://{addr} with \
             {workers} worker thread(s)"
        );
    }
    if let Some(proxy) = config.proxy() {
        let allow: Vec<String> =
            proxy.allow.iter().map(|(net, len)| format!("{net}/{len}")).collect();
        let udp = if http3 { "over HTTP/2 and HTTP/3" } else { "over HTTP/2" };
        crate::log::info!(
            "also a CONNECT proxy: tunnels (CONNECT, and CONNECT-UDP {udp}) to {} only; \
             requests to forward (absolute-form) are refused with 405",
            allow.join(", ")
        );
    }
    if let Some(path) = generated {
        let path = path.display();
        crate::log::info!(
            "self-signed certificate for {}: {path} (trust it with --tls-ca {path} or \
             curl --cacert {path})",
            SelfSignedCert::LOOPBACK_NAMES.join(", ")
        );
    }
    let with_tls = tls.is_some();

    let (shutdown, force_rx) = signals
        .two_phase("draining in-flight requests", "exiting without waiting for in-flight requests");
    tokio::select! {
        served = shrike_server::run_with_udp(listener, udp, Arc::new(config), shutdown) => {
            let totals = served.context("the server failed")?;
            crate::log::info!(
            "stopped: {}", summary(&totals, with_tls, http3));
            Ok(ExitCode::SUCCESS)
        }
        Ok(()) = force_rx => Ok(ExitCode::FAILURE),
    }
}

pub(crate) async fn bind(listen: &str) -> anyhow::Result<TcpListener> {
    let addrs = tokio::net::lookup_host(listen).await.map_err(|e| {
        usage(format!("--listen {listen:?}: {e} (expected ADDR:PORT, e.g. 127.0.0.1:10000)"))
    })?;
    let mut failure = None;
    for addr in addrs {
        match listen_on(addr) {
            Ok(listener) => return Ok(listener),
            Err(e) => failure = Some(format!("--listen {listen:?}: cannot bind {addr}: {e}")),
        }
    }
    Err(usage(failure.unwrap_or_else(|| format!("--listen {listen:?}: resolves to no address"))))
}

/// Listens on `addr` with a deep accept backlog: a load test (a replay opening thousands of
/// connections in a second) must not see SYNs dropped, and a one-second SYN retransmit, for
/// lack of queue (tokio's default is 1024; the kernel caps it at net.core.somaxconn).
fn listen_on(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(65_535)
}

/// HTTP/3 on the TCP listener's own address and port, so `--listen 127.0.0.1:0` gives one port
/// number for both. Bound before anything is announced, so a taken UDP port is a clear error
/// rather than a server that silently lacks HTTP/3.
fn bind_udp(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    UdpSocket::bind(addr).map_err(|e| {
        usage(format!("--http3: cannot bind UDP {addr} (the TCP listener's address) for QUIC: {e}"))
    })
}

/// One line on what the server did, for the stop message.
fn summary(totals: &ServerTotals, tls: bool, http3: bool) -> String {
    let mut line = if http3 {
        format!(
            "served {} HTTP/1.1, {} HTTP/2 and {} HTTP/3 connection(s)",
            totals.http1_connections, totals.http2_connections, totals.http3_connections
        )
    } else {
        format!(
            "served {} HTTP/1.1 and {} HTTP/2 connection(s)",
            totals.http1_connections, totals.http2_connections
        )
    };
    if tls {
        line.push_str(&format!("; {} TLS handshake(s) failed", totals.tls_handshake_failures));
    }
    line
}

/// The server's configuration from the flags; `defaults` (a test-server configuration's
/// filters, as header JSON) stands in for `--config`.
fn build_config(
    args: &ServeArgs,
    defaults: Option<String>,
    tls: Option<TlsConfig>,
) -> anyhow::Result<ServerConfig> {
    let mut builder = ServerConfig::builder()
        .response_body_size(args.response_body_size)
        .echo_request_headers(args.echo_request_headers)
        .response_status(args.response_status)
        .max_body_size(args.max_body_size)
        .max_connections(args.max_connections)
        .max_concurrent_streams(args.max_concurrent_streams)
        .drain_timeout(flag_duration("drain-timeout", &args.drain_timeout)?);
    builder = args.limits.apply(builder)?;
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    if args.connect_proxy {
        let allow = match args.proxy_allow.is_empty() {
            true => vec![
                (std::net::Ipv4Addr::LOCALHOST.into(), 8),
                (std::net::Ipv6Addr::LOCALHOST.into(), 128),
            ],
            false => args.proxy_allow.clone(),
        };
        builder = builder.connect_proxy(shrike_server::ProxyConfig {
            allow,
            connect_timeout: std::time::Duration::from_secs(10),
        });
    }
    if let Some(delay) = &args.static_delay {
        builder = builder.static_delay(flag_duration("static-delay", delay)?);
    }
    if let Some(config) = &args.config {
        let json = match config.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--config: cannot read {path}: {e}")))?,
            None => config.clone(),
        };
        builder = builder.defaults_json(json);
    }
    if let Some(json) = defaults {
        builder = builder.defaults_json(json);
    }
    if let Some(path) = &args.stats_path {
        builder = builder.stats_path(path.clone());
    }
    let mut seen: Vec<String> = Vec::new();
    for header in &args.response_headers {
        let (name, value) = header
            .split_once(':')
            .map(|(n, v)| (n.trim(), v.trim()))
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(|| {
                usage(format!("--response-header: expected 'name: value', got {header:?}"))
            })?;
        let name = name.to_ascii_lowercase();
        builder = if seen.contains(&name) {
            builder.append_response_header(name, value)
        } else {
            seen.push(name.clone());
            builder.response_header(name, value)
        };
    }
    builder.build().map_err(|e| match e {
        ConfigError::InvalidLimit { .. } => limits::explain(&e),
        e => usage(format!("invalid server configuration: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn args(argv: &[&str]) -> ServeArgs {
        Cli::try_parse_from(std::iter::once("serve").chain(argv.iter().copied())).unwrap().args
    }

    #[test]
    fn defaults() {
        let a = args(&[]);
        assert_eq!(a.listen, None);
        let c = build_config(&a, None, None).unwrap();
        assert_eq!(c.response_body_size(), 10);
        assert_eq!(c.max_body_size(), 4 << 20);
        assert!(parse_concurrency(&a.concurrency).is_ok());
        assert_eq!(c.request_header_timeout(), shrike_server::DEFAULT_REQUEST_HEADER_TIMEOUT);
        assert_eq!(c.idle_timeout(), shrike_server::DEFAULT_IDLE_TIMEOUT);
        assert_eq!(c.max_request_headers(), 100);
        assert_eq!(c.max_request_header_bytes(), 64 * 1024);
        assert_eq!(c.max_requests_per_connection(), None);
    }

    #[test]
    fn config_json_sets_defaults_over_flags() {
        let a = args(&[
            "--response-body-size",
            "5",
            "--config",
            r#"{"response_body_size": 7, "response_status": 503, "static_delay": "0.000250s"}"#,
        ]);
        let c = build_config(&a, None, None).unwrap();
        assert_eq!(c.response_body_size(), 7);
        assert_eq!(c.response_status(), 503);
        assert_eq!(c.static_delay(), std::time::Duration::from_micros(250));
        let err =
            build_config(&args(&["--config", r#"{"reset": {"probability": 2}}"#]), None, None);
        let err = format!("{:#}", err.unwrap_err());
        assert!(err.contains("reset.probability"), "{err}");
    }

    #[test]
    fn headers_replace_then_append() {
        let a = args(&[
            "--response-header",
            "Server: test",
            "--response-header",
            "x-a: 1",
            "--response-header",
            "x-a:2",
        ]);
        let c = build_config(&a, None, None).unwrap();
        let headers: Vec<_> = c.response_headers().collect();
        assert_eq!(headers, [("server", "test"), ("x-a", "1"), ("x-a", "2")]);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for argv in [
            &["--static-delay", "soon"][..],
            &["--response-header", "no colon"],
            &["--response-header", "content-length: 5"],
            &["--response-body-size", "5000000"],
            &["--response-status", "42"],
            &["--max-connections", "0"],
            &["--max-concurrent-streams", "0"],
            &["--drain-timeout=-1s"],
            &["--config", "{\"reset\": {\"probability\": 2}}"],
            &["--config", "{\"nope\": 1}"],
            &["--config", "@/nonexistent/shrike.json"],
            &["--stats-path", "stats"],
            &["--request-header-timeout", "0s"],
            &["--request-header-timeout", "soon"],
            &["--idle-timeout", "0"],
            &["--max-request-headers", "0"],
            &["--max-request-headers", "5000"],
            &["--max-request-header-bytes", "10"],
            &["--max-request-header-bytes", "99999999"],
            &["--max-requests-per-connection", "0"],
        ] {
            let err = build_config(&args(argv), None, None).unwrap_err();
            assert!(err.downcast_ref::<UsageError>().is_some(), "{argv:?}: {err:#}");
        }
        for bad in ["0", "-1", "many"] {
            assert!(parse_concurrency(bad).is_err(), "{bad}");
        }
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shrike-serve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn plaintext_by_default() {
        let a = args(&[]);
        assert!(tls_setup(&a).unwrap().is_none());
        let c = build_config(&a, None, None).unwrap();
        assert!(c.tls().is_none());
        assert_eq!(c.max_concurrent_streams(), DEFAULT_MAX_CONCURRENT_STREAMS);
        let c = build_config(&args(&["--max-concurrent-streams", "128"]), None, None).unwrap();
        assert_eq!(c.max_concurrent_streams().get(), 128);
    }

    #[test]
    fn tls_generates_a_certificate_that_loads_back() {
        let dir = scratch_dir("gen");
        let out = dir.display().to_string();
        let setup = tls_setup(&args(&["--tls", "--tls-cert-out", &out])).unwrap().unwrap();
        let cert = dir.join("cert.pem");
        assert_eq!(setup.generated.as_deref(), Some(cert.as_path()));
        let key = dir.join("key.pem");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the private key is readable by others: {mode:o}");
        }
        // The written files serve as --tls-cert/--tls-key.
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        let a = args(&["--tls-cert", &cert, "--tls-key", &key]);
        let reloaded = tls_setup(&a).unwrap().unwrap();
        assert!(reloaded.generated.is_none());
        assert!(build_config(&a, None, Some(reloaded.config)).unwrap().tls().is_some());
        let _ = std::fs::remove_dir_all(&dir);

        // Without --tls-cert-out, a fresh directory of its own, removed with the setup.
        let setup = tls_setup(&args(&["--tls"])).unwrap().unwrap();
        let generated = setup.generated.clone().unwrap();
        assert!(generated.ends_with("cert.pem") && generated.is_file());
        drop(setup);
        assert!(!generated.parent().unwrap().exists());
    }

    #[test]
    fn bad_tls_flags_are_usage_errors() {
        let err = tls_setup(&args(&["--tls-cert-out", "/tmp/x"])).err().unwrap();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        let missing = ["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/k"];
        let err = tls_setup(&args(&missing)).err().unwrap();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err:#}");
        // clap enforces the pairs.
        let parse = |argv: &[&str]| {
            Cli::try_parse_from(std::iter::once("serve").chain(argv.iter().copied())).is_err()
        };
        assert!(parse(&["--tls-cert", "c.pem"]));
        assert!(parse(&["--tls-key", "k.pem"]));
        assert!(parse(&["--tls-cert", "c", "--tls-key", "k", "--tls-cert-out", "d"]));
    }

    #[test]
    fn summary_mentions_tls_only_when_serving_it() {
        let totals = ServerTotals::default();
        assert_eq!(summary(&totals, false, false), "served 0 HTTP/1.1 and 0 HTTP/2 connection(s)");
        assert!(summary(&totals, true, false).ends_with("; 0 TLS handshake(s) failed"));
        assert_eq!(
            summary(&totals, true, true),
            "served 0 HTTP/1.1, 0 HTTP/2 and 0 HTTP/3 connection(s); 0 TLS handshake(s) failed"
        );
    }

    #[test]
    fn http3_needs_tls_and_a_free_udp_port() {
        let err = run(args(&["--http3", "--listen", "127.0.0.1:0"])).unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        assert!(err.to_string().contains("--http3 needs TLS"), "{err:#}");
        assert!(!args(&[]).http3);

        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind_udp(addr).unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        assert!(err.to_string().contains(&addr.to_string()), "{err:#}");
        drop(taken);
        assert!(bind_udp(addr).is_ok());
    }

    #[test]
    fn bind_failures_name_the_address() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = taken.local_addr().unwrap().to_string();
            let err = bind(&addr).await.unwrap_err();
            assert!(err.downcast_ref::<UsageError>().is_some());
            assert!(err.to_string().contains(&addr), "{err}");
            let err = bind("127.0.0.1").await.unwrap_err();
            assert!(err.to_string().contains("expected ADDR:PORT"), "{err}");
            let ok = bind("127.0.0.1:0").await.unwrap();
            assert_ne!(ok.local_addr().unwrap().port(), 0);
        });
    }
}
