//! Preparing a run: what a [`RunSpec`] needs from the world before any load is sent. Hosts are
//! resolved, TLS clients built (CA files read), request files loaded and every request encoded
//! once, so a problem is reported as the spec field it comes from, before a worker starts.

use std::sync::Arc;
use std::time::SystemTime;

use shrike_spec::{IoBackend, RunSpec, Scheme, SpecError, TargetSpec};

use crate::config::{Body, Endpoint, EngineConfig, RequestSpec};
use crate::requests::{file, nighthawk, RequestSource};
use crate::target::Target;
use crate::tls::{TlsClient, TlsError};
use crate::tunnel::Tunnel;

/// Resolves `spec` into the engine's configuration.
pub(crate) fn prepare(spec: &RunSpec) -> Result<EngineConfig, SpecError> {
    check_start(spec)?;
    check_unbuilt(spec)?;
    let target_field = match spec.target() {
        TargetSpec::Uri(_) => "uri",
        TargetSpec::Multi { .. } => "multi_target_endpoints",
    };
    let tunnel = tunnel(spec)?;
    // Through a tunnel the proxy resolves the target (it may be a name only the proxy knows).
    let targets = spec
        .urls()
        .into_iter()
        .map(|u| match tunnel {
            Some(_) => Ok(Target::from_url(u)),
            None => Target::resolve(Target::from_url(u), spec.address_family()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SpecError::invalid(target_field, e))?;
    let requests = request_source(spec, &targets)?;
    let endpoints = endpoints(spec, targets)?;
    Ok(EngineConfig {
        endpoints,
        requests,
        protocol: spec.protocol(),
        streams: spec.streams(),
        workers: spec.concurrency().workers(),
        plan: spec.plan(),
        idle: spec.idle(),
        io_backend: io_backend(spec)?,
        read_coalesce: spec.read_coalesce(),
        max_lateness: spec.max_lateness(),
        burst: spec.burst(),
        jitter: spec.jitter(),
        connections: spec.connections(),
        h1_reuse: spec.h1_reuse(),
        duration: spec.duration(),
        timeout: spec.timeout(),
        max_pending_requests: spec.max_pending_requests(),
        max_requests_per_connection: Some(spec.max_requests_per_connection()),
        per_worker_requests: spec.total_requests().map(|_| {
            let n = spec.concurrency().workers().get();
            (0..n).filter_map(|i| spec.requests_for_worker(i, n)).collect()
        }),
        open_loop: spec.open_loop(),
        prefetch_connections: spec.prefetch_connections(),
        retry_unanswered: spec.retry_unanswered(),
        warmup: spec.simple_warmup(),
        start_at: spec.start_at(),
        shard: spec.shard(),
        bind_address: spec.bind_address(),
        tunnel,
        predicates: spec.predicates().to_vec(),
        trace: trace(spec)?,
        rate: None,
    })
}

/// Options the spec reads but this engine cannot run yet: refused, never run without.
fn check_unbuilt(spec: &RunSpec) -> Result<(), SpecError> {
    if spec.requests().remote_source.is_some() && spec.urls().len() > 1 {
        return Err(SpecError::must(
            "request_source",
            "needs a single target (uri): the source's requests all go to it",
        ));
    }
    Ok(())
}

/// The proxy of `tunnel_options`, resolved, with its TLS client when TLS goes to it.
fn tunnel(spec: &RunSpec) -> Result<Option<Arc<Tunnel>>, SpecError> {
    let Some(t) = spec.tunnel() else { return Ok(None) };
    let host = match t.host.contains(':') {
        true => format!("[{}]", t.host),
        false => t.host.clone(),
    };
    let proxy =
        Target::parse_with_family(&format!("http://{host}:{}/", t.port), Default::default())
            .map_err(|e| SpecError::invalid("tunnel_options.tunnel_uri", e))?;
    let tls = match &t.tls {
        None => None,
        Some(o) => Some(TlsClient::build(o, &t.host, t.protocol).map_err(|e| {
            // A CA file that --tunnel-ca named is that flag's error, not the context's.
            let ca = t.ca.as_ref().map(|c| c.display().to_string());
            let by_flag = matches!(&e, TlsError::CaFile { path, .. } if Some(path) == ca.as_ref());
            let option = match by_flag {
                true => "tunnel_options.tunnel_ca",
                false => "tunnel_options.tunnel_tls_context",
            };
            SpecError::invalid(option, e)
        })?),
    };
    Ok(Some(Arc::new(Tunnel::new(proxy, tls, t.uri.clone(), t.protocol))))
}

/// Where spans go; the collector must resolve now, not fail every batch later.
fn trace(spec: &RunSpec) -> Result<Option<crate::trace::TraceConfig>, SpecError> {
    let Some(t) = spec.trace() else { return Ok(None) };
    use std::net::ToSocketAddrs as _;
    let resolves = t.collector.to_socket_addrs().map(|mut a| a.next().is_some());
    match resolves {
        Ok(true) => {}
        Ok(false) => {
            return Err(SpecError::must("trace", format!("{}: resolves to no address", t.uri)))
        }
        Err(e) => return Err(SpecError::invalid("trace", format!("{}: {e}", t.uri))),
    }
    Ok(Some(crate::trace::TraceConfig {
        uri: t.uri.clone(),
        collector: t.collector.clone(),
        path: t.path.clone(),
        sample_rate: t.sample_rate,
    }))
}

fn check_start(spec: &RunSpec) -> Result<(), SpecError> {
    match spec.start_at() {
        Some(t) => shrike_spec::spec::check_start_at(t, SystemTime::now()),
        None => Ok(()),
    }
}

/// Pairs each target with its TLS client: one rustls config (and session cache) for every
/// endpoint; only the server name differs.
fn endpoints(spec: &RunSpec, targets: Vec<Target>) -> Result<Vec<Endpoint>, SpecError> {
    let tls_err = |e| SpecError::invalid("tls", e);
    let mut first: Option<TlsClient> = None;
    let mut endpoints = Vec::with_capacity(targets.len());
    for target in targets {
        let tls = match (target.scheme, &first) {
            (Scheme::Http, _) => None,
            (Scheme::Https, None) => Some(
                TlsClient::build(spec.tls(), &target.host, spec.protocol())
                    .map_err(tls_err)?
                    .with_quic_windows(spec.http3()),
            ),
            (Scheme::Https, Some(c)) => Some(c.for_host(&target.host).map_err(tls_err)?),
        };
        if first.is_none() {
            first = tls.clone();
        }
        endpoints.push(Endpoint { target, tls });
    }
    Ok(endpoints)
}

/// What the run sends: the one request of `request_options`, a request file, or Nighthawk's
/// request-source plugin, with the spec's headers.
fn request_source(spec: &RunSpec, targets: &[Target]) -> Result<RequestSource, SpecError> {
    let r = spec.requests();
    let headers = r.headers.clone();
    let mut source = if let Some(path) = &r.request_file {
        let entries = file::load(path, targets, &headers)
            .map_err(|e| SpecError::invalid("request_file", e))?;
        RequestSource::list(entries).map_err(|e| SpecError::invalid("request_file", e))?
    } else if let Some(cfg) = &r.plugin_config {
        let field = "request_source_plugin_config";
        let (entries, limit) =
            nighthawk::nighthawk_plugin(cfg, &headers).map_err(|e| SpecError::invalid(field, e))?;
        let s = RequestSource::list(entries).map_err(|e| SpecError::invalid(field, e))?;
        match limit {
            Some(n) => s.with_limit(n),
            None => s,
        }
    } else {
        RequestSource::single(single_request(spec)?)
    };
    if let Some(name) = &r.latency_header {
        source = source
            .with_latency_header(name)
            .map_err(|e| SpecError::invalid("latency_response_header_name", e))?;
    }
    Ok(source)
}

/// The one request of a run without a request list.
fn single_request(spec: &RunSpec) -> Result<RequestSpec, SpecError> {
    let r = spec.requests();
    let req = RequestSpec::try_new(&r.method, r.headers.clone(), r.body_size)
        .map_err(|e| SpecError::invalid("request_options", e))?;
    if let Some(path) = &r.body_file {
        let field = "request_options.request_body_file";
        let bytes = std::fs::read(path).map_err(|e| {
            SpecError::invalid(field, format!("cannot read {}: {e}", path.display()))
        })?;
        return req
            .with_body(Body::Bytes(Arc::from(bytes)))
            .map_err(|e| SpecError::invalid(field, e));
    }
    if let Some(j) = &r.json_body {
        return file::json_body(req, j)
            .map_err(|e| SpecError::invalid("request_options.json_body", e));
    }
    Ok(req)
}

/// The spec's I/O backend, once the kernel has shown it grants it: a refusal (an old kernel,
/// `kernel.io_uring_disabled`, a container's seccomp filter) is one clear error before any
/// load, not a run that quietly measures something else.
fn io_backend(spec: &RunSpec) -> Result<IoBackend, SpecError> {
    let backend = spec.io_backend();
    if backend == IoBackend::IoUring {
        shrike_uring::available().map_err(|e| {
            SpecError::invalid(
                "io_backend",
                format!("this kernel refuses io_uring ({e}); use --io-backend epoll"),
            )
        })?;
    }
    Ok(backend)
}
