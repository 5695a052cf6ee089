//! A run spec as JSON: Nighthawk's `CommandLineOptions` in proto3 JSON (its option names, or
//! their lowerCamelCase as every proto3 JSON parser accepts; uint64 as strings or numbers,
//! durations as `"5s"`, enums in any case), plus Shrike's own options under names Nighthawk
//! does not use (`stages`, `ramp_duration`, `tls`, `labels`, …).
//!
//! Reading is field by field into the options as given ([`Given`]), so an error names the field
//! (`connections must be at least 1`) and an unknown option is refused by name rather than
//! silently ignored; [`Given::resolve`] then makes the spec, as for typed edits. Writing
//! produces the canonical form: every option with its effective value, under its proto field
//! name, which reads back to an equal spec.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};
use shrike_stats::duration::{format_proto, parse_duration};
use shrike_stats::timestamp::{format_rfc3339, parse_rfc3339};

use crate::error::SpecError;
use crate::format::OutputFormat;
use crate::given::{parse_header, Given, Rps};
use crate::msg;
use crate::names::{self as n, camel, Opt};
use crate::plan::{format_short, RatePlan};
use crate::predicate::{Predicate, PredicateKind};
use crate::shard::Shard;
use crate::spec::*;
use crate::types::*;

pub use crate::given::IO_BACKEND_ENV;

/// Options Shrike writes that are derived from others (for readers of a result), and
/// Nighthawk's that have no effect on a run: accepted and ignored on input.
const IGNORED: &[Opt] = &[n::WORKERS, n::REQUEST_FILE_ENTRIES, n::NUM_REQUESTS];

/// Nighthawk options Shrike refuses, and why: accepting them would run something other than
/// what was asked for. (`user_defined_plugin_configs` may be an empty list, as Nighthawk's own
/// JSON output writes it.)
const NIGHTHAWK_REFUSED: &[(Opt, &str)] = &[
    (
        n::USER_DEFINED_PLUGIN_CONFIGS,
        "is not implemented (Nighthawk itself rejects it as unimplemented)",
    ),
    (
        n::NIGHTHAWK_SERVICE,
        "is how a client sends a run (shrike run --nighthawk-service), not an option of the run",
    ),
];

impl RunSpec {
    /// Reads a spec from a JSON object of options: a spec file, a stored result's `options`,
    /// or the wire. Missing options take their defaults.
    pub fn from_json(v: &Value) -> Result<RunSpec, SpecError> {
        read_given(v)?.resolve()
    }

    /// The canonical JSON form: every option with its effective value.
    pub fn to_json(&self) -> Value {
        write(self)
    }
}

impl RateSpec {
    /// The rate part of a stored result's options, if they state one (`requests_per_second`
    /// or `stages`); for readers of results, which may come from older versions or other tools.
    pub fn from_options(options: &Value) -> Result<Option<RateSpec>, SpecError> {
        let Some(obj) = options.as_object() else { return Ok(None) };
        let mut r = Reader::new(obj, "")?;
        let mut g = Given::default();
        read_rate(&mut r, &mut g)?;
        // A plugin's ramp must end within the run.
        g.duration = r.duration(n::DURATION)?;
        g.no_duration = r.bool(n::NO_DURATION)?;
        if g.rps.is_none() && g.stages.is_none() {
            return Ok(None);
        }
        let spec = Given { uri: Some("http://127.0.0.1/".into()), ..g }.resolve()?;
        Ok(Some(spec.rate().clone()))
    }
}

/// The options a JSON object gives: each read and checked on its own, none combined yet.
pub(crate) fn read_given(v: &Value) -> Result<Given, SpecError> {
    let obj = v.as_object().ok_or_else(|| SpecError::must("options", "must be a JSON object"))?;
    let mut r = Reader::new(obj, "")?;
    let mut g = Given::default();
    for (opt, why) in NIGHTHAWK_REFUSED {
        let set = match r.take(*opt) {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(SpecError::must(*opt, *why));
        }
    }
    read_target(&mut r, &mut g)?;
    g.built_in_server = r.bool(n::BUILT_IN_SERVER)?;
    g.protocol = r.choice(n::PROTOCOL, Protocol::parse, "http1, http2 or http3")?;
    g.h2 = r.bool(n::H2)?;
    g.concurrency = match r.string_or_number(n::CONCURRENCY)? {
        None => None,
        Some(c) => Some(Concurrency::parse(&c).ok_or_else(|| {
            r.must(n::CONCURRENCY, format!("must be a positive number or 'auto', got {c:?}"))
        })?),
    };
    g.connections = r.u64(n::CONNECTIONS)?;
    read_rate(&mut r, &mut g)?;
    g.no_duration = r.bool(n::NO_DURATION)?;
    g.duration = r.duration(n::DURATION)?;
    g.timeout = r.duration(n::TIMEOUT)?;
    g.idle = r.choice(n::IDLE_STRATEGY, IdleStrategy::parse, "spin, poll or sleep")?;
    g.io_backend = r.choice(n::IO_BACKEND, IoBackend::parse, "epoll or io_uring")?;
    g.read_coalesce = r.duration(n::READ_COALESCE)?;
    g.max_lateness = r.duration(n::MAX_LATENESS)?;
    g.burst_size = r.u64(n::BURST_SIZE)?;
    g.jitter = r.duration(n::JITTER_UNIFORM)?;
    g.max_pending_requests = r.u64(n::MAX_PENDING_REQUESTS)?;
    g.max_requests_per_connection = r.u64(n::MAX_REQUESTS_PER_CONNECTION)?;
    g.total_requests = r.u64(n::TOTAL_REQUESTS)?;
    g.open_loop = r.bool(n::OPEN_LOOP)?;
    g.prefetch_connections = r.bool(n::PREFETCH_CONNECTIONS)?;
    g.retry_unanswered = r.bool(n::RETRY_UNANSWERED)?;
    g.simple_warmup = r.bool(n::SIMPLE_WARMUP)?;
    g.start_at = match (r.str(n::START_AT)?, r.str(n::SCHEDULED_START)?) {
        (Some(t), _) | (None, Some(t)) => {
            Some(parse_rfc3339(t).map_err(|e| SpecError::invalid(r.path(n::START_AT), e))?)
        }
        (None, None) => None,
    };
    g.shard = match r.str(n::SHARD)? {
        None => None,
        Some(t) => Some(Shard::parse(t).map_err(|e| SpecError::invalid(r.path(n::SHARD), e))?),
    };
    g.execution_id = r.str(n::EXECUTION_ID)?.map(str::to_string);
    g.bind_address = read_bind_address(&mut r)?;
    g.max_concurrent_streams = r.u64(n::MAX_CONCURRENT_STREAMS)?;
    g.max_active_requests = r.u64(n::MAX_ACTIVE_REQUESTS)?;
    if let Some(v) = r.take(n::HTTP3_PROTOCOL_OPTIONS).filter(|v| !v.is_null()) {
        let field = r.path(n::HTTP3_PROTOCOL_OPTIONS);
        g.http3 = Some(crate::nighthawk::http3_protocol_options(v, &field)?);
    }
    g.h2_multiple_connections = r.bool(n::H2_MULTIPLE_CONNECTIONS)?;
    g.h1_reuse = r.choice(n::H1_REUSE, H1Reuse::parse, "mru or lru")?;
    g.address_family = r.choice(n::ADDRESS_FAMILY, AddressFamily::parse, "auto, v4 or v6")?;
    read_tls(&mut r, &mut g)?;
    read_tunnel(&mut r, &mut g)?;
    g.trace_sample_rate = match r.present(n::TRACE_SAMPLE_RATE) {
        None => None,
        Some(v) => {
            Some(v.as_f64().or_else(|| v.as_str()?.trim().parse().ok()).ok_or_else(|| {
                r.must(n::TRACE_SAMPLE_RATE, format!("must be in (0, 1], got {v}"))
            })?)
        }
    };
    g.trace = r.str(n::TRACE)?.map(str::to_string);
    read_requests(&mut r, &mut g)?;
    g.no_default_failure_predicates = r.bool(n::NO_DEFAULT_FAILURE_PREDICATES)?;
    g.failure_predicates = r.predicates(n::FAILURE_PREDICATES, PredicateKind::Failure)?;
    g.termination_predicates =
        r.predicates(n::TERMINATION_PREDICATES, PredicateKind::Termination)?;
    g.labels = r.strings(n::LABELS)?;
    g.output_format = match r.choice_str(n::OUTPUT_FORMAT)? {
        None => None,
        Some(s) => Some(
            s.parse::<OutputFormat>()
                .map_err(|e| SpecError::invalid(r.path(n::OUTPUT_FORMAT), e))?,
        ),
    };
    // Nighthawk's DEFAULT means its default, info.
    g.verbosity =
        r.choice(n::VERBOSITY, Verbosity::parse, "trace, debug, info, warn, error or critical")?;
    read_telemetry(&mut r, &mut g)?;
    for o in IGNORED {
        r.take(*o);
    }
    r.finish()?;
    Ok(g)
}

fn read_target(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    g.uri = r.str(n::URI)?.map(str::to_string);
    g.endpoints = r.strings(n::MULTI_TARGET_ENDPOINTS)?.filter(|e| !e.is_empty());
    g.multi_target_path = r.str(n::MULTI_TARGET_PATH)?.map(str::to_string);
    g.multi_target_use_https = r.bool(n::MULTI_TARGET_USE_HTTPS)?;
    // Nighthawk's form: {"multi_target": {"use_https", "endpoints": [{address, port}], "path"}}.
    let Some(mt) = r.take(n::MULTI_TARGET).filter(|v| !v.is_null()) else { return Ok(()) };
    let field = r.path(n::MULTI_TARGET);
    let obj = mt.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
    let mut m = Reader::new(obj, &field)?;
    let key = |k: &'static str| Opt { name: k, flag: None };
    g.multi_target_use_https = g.multi_target_use_https.or(m.bool(key("use_https"))?);
    g.multi_target_path = g.multi_target_path.take().or(m.str(key("path"))?.map(str::to_string));
    if let Some(eps) = m.take(key("endpoints")) {
        let list = g.endpoints.get_or_insert_with(Vec::new);
        for ep in eps.as_array().into_iter().flatten() {
            let addr = ep.get("address").and_then(Value::as_str).unwrap_or_default();
            let port = ep.get("port").and_then(|p| p.as_u64().or_else(|| p.as_str()?.parse().ok()));
            match port {
                Some(p) if addr.contains(':') => list.push(format!("[{addr}]:{p}")),
                Some(p) => list.push(format!("{addr}:{p}")),
                None => {
                    return Err(SpecError::must(
                        format!("{field}.endpoints"),
                        "must each have an address and a port",
                    ))
                }
            }
        }
    }
    m.finish()
}

fn read_rate(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    g.ramp = r.duration(n::RAMP_DURATION)?;
    g.rate_limiter = match r.take(n::RATE_LIMITER_PLUGIN_CONFIG) {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(crate::nighthawk::rate_limiter_plugin(v, &r.path(n::RATE_LIMITER_PLUGIN_CONFIG))?)
        }
    };
    g.stages = match r.str(n::STAGES)? {
        None => None,
        Some(s) => {
            Some(RatePlan::parse_stages(s).map_err(|e| SpecError::invalid(r.path(n::STAGES), e))?)
        }
    };
    g.rps = match r.present(n::REQUESTS_PER_SECOND) {
        None => None,
        Some(Value::String(m)) if m.trim().eq_ignore_ascii_case("max") => Some(Rps::Max),
        Some(v) => {
            let n = match &v {
                Value::Number(x) => x.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            match n {
                Some(x) => Some(Rps::PerSecond(x)),
                None => {
                    return Err(r.must(
                        n::REQUESTS_PER_SECOND,
                        format!("must be a number greater than 0 or 'max', got {v}"),
                    ))
                }
            }
        }
    };
    Ok(())
}

fn read_bind_address(r: &mut Reader) -> Result<Option<IpAddr>, SpecError> {
    let given = r.str(n::BIND_ADDRESS)?;
    let config = r.take(n::UPSTREAM_BIND_CONFIG).filter(|v| !v.is_null());
    match (given, config) {
        (Some(_), Some(_)) => {
            Err(r.must(n::BIND_ADDRESS, msg!("cannot be used with ", n::UPSTREAM_BIND_CONFIG)))
        }
        (Some(a), None) => {
            let ip = a.trim().trim_start_matches('[').trim_end_matches(']');
            ip.parse()
                .map(Some)
                .map_err(|_| r.must(n::BIND_ADDRESS, format!("must be an IP address, got {a:?}")))
        }
        (None, Some(cfg)) => bind_config(cfg, &r.path(n::UPSTREAM_BIND_CONFIG)).map(Some),
        (None, None) => Ok(None),
    }
}

/// Nighthawk's `BindConfig` (JSON, its compact form, or the object): the source address.
pub(crate) fn bind_config(cfg: Value, field: &str) -> Result<IpAddr, SpecError> {
    let bad = |why: &str| {
        SpecError::invalid(
            field,
            format!("{why}; expected e.g. {{\"source_address\":{{\"address\":\"127.0.0.1\",\"port_value\":0}}}}"),
        )
    };
    // Nighthawk's example writes unquoted keys (proto text-ish JSON); accept both, and the
    // object itself (its proto3 JSON form).
    let v = match cfg {
        Value::String(s) => {
            shrike_stats::relaxed::parse(&s).map_err(|e| bad(&format!("not JSON ({e})")))?
        }
        other => other,
    };
    let sa = v
        .get("source_address")
        .or_else(|| v.get("sourceAddress"))
        .ok_or_else(|| bad("no source_address"))?;
    let port = sa.get("port_value").or_else(|| sa.get("portValue"));
    if port.and_then(Value::as_u64).is_some_and(|p| p != 0) {
        return Err(bad(
            "a fixed source port_value is not supported (connections would collide); use 0",
        ));
    }
    let addr = sa
        .get("address")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("source_address.address is missing"))?;
    addr.parse().map_err(|_| bad(&format!("{addr:?} is not an IP address")))
}

/// `tunnel_options`: `{tunnel_uri, tunnel_protocol, tunnel_tls_context}` (and Shrike's
/// `tunnel_ca`).
fn read_tunnel(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    let Some(v) = r.take(n::TUNNEL_OPTIONS).filter(|v| !v.is_null()) else { return Ok(()) };
    let field = r.path(n::TUNNEL_OPTIONS);
    let obj = v.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
    let mut t = Reader::new(obj, &field)?;
    g.tunnel.uri = t.str(n::TUNNEL_URI)?.map(str::to_string);
    g.tunnel.protocol = t.choice(n::TUNNEL_PROTOCOL, Protocol::parse, "http1, http2 or http3")?;
    g.tunnel.tls_context = match t.take(n::TUNNEL_TLS_CONTEXT).filter(|v| !v.is_null()) {
        None => None,
        Some(v) => {
            let path = t.path(n::TUNNEL_TLS_CONTEXT);
            let v = crate::nighthawk::relaxed(v, &path)?;
            let patch = crate::nighthawk::tls_context(v.clone(), &path)?;
            Some((v, patch))
        }
    };
    g.tunnel.ca = t.str(n::TUNNEL_CA)?.map(PathBuf::from);
    t.finish()
}

fn read_tls(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    if let Some(v) = r.take(n::TLS).filter(|v| !v.is_null()) {
        let field = r.path(n::TLS);
        let obj = v.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
        let mut t = Reader::new(obj, &field)?;
        let version = |t: &mut Reader, o: Opt| -> Result<Option<TlsVersion>, SpecError> {
            match t.str(o)? {
                None => Ok(None),
                Some(s) => TlsVersion::parse(s)
                    .map(Some)
                    .ok_or_else(|| t.must(o, format!("must be 1.2 or 1.3, got {s:?}"))),
            }
        };
        g.tls_ca = t.str(n::TLS_CA)?.map(PathBuf::from);
        g.tls_insecure = t.bool(n::TLS_INSECURE)?;
        g.tls_sni = t.str(n::TLS_SNI)?.map(str::to_string);
        g.tls_min_version = version(&mut t, n::TLS_MIN_VERSION)?;
        g.tls_max_version = version(&mut t, n::TLS_MAX_VERSION)?;
        g.tls_cipher_suites = match t.take(n::TLS_CIPHER_SUITES) {
            Some(Value::String(s)) => Some(
                s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
            ),
            Some(Value::Array(a)) => {
                Some(a.iter().filter_map(Value::as_str).map(String::from).collect())
            }
            Some(Value::Null) | None => None,
            Some(_) => {
                return Err(
                    t.must(n::TLS_CIPHER_SUITES, "must be a comma-separated string or a list")
                )
            }
        };
        g.tls_session_resumption = t.bool(n::TLS_SESSION_RESUMPTION)?;
        t.finish()?;
    }
    let socket = r.take(n::TRANSPORT_SOCKET).filter(|v| !v.is_null());
    let context = r.take(n::TLS_CONTEXT).filter(|v| !v.is_null());
    g.tls_envoy = match (socket, context) {
        (Some(_), Some(_)) => {
            return Err(r.must(n::TRANSPORT_SOCKET, msg!("cannot be used with ", n::TLS_CONTEXT)))
        }
        (Some(v), None) => Some((
            n::TRANSPORT_SOCKET,
            crate::nighthawk::transport_socket(v, &r.path(n::TRANSPORT_SOCKET))?,
        )),
        (None, Some(v)) => {
            Some((n::TLS_CONTEXT, crate::nighthawk::tls_context(v, &r.path(n::TLS_CONTEXT))?))
        }
        (None, None) => None,
    };
    Ok(())
}

fn read_requests(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    if let Some(v) = r.take(n::REQUEST_OPTIONS).filter(|v| !v.is_null()) {
        let field = r.path(n::REQUEST_OPTIONS);
        let obj = v.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
        let mut o = Reader::new(obj, &field)?;
        g.method = o.str(n::REQUEST_METHOD)?.map(str::to_string);
        g.headers = o.headers(n::REQUEST_HEADERS)?;
        g.body_size = o.u64(n::REQUEST_BODY_SIZE)?;
        g.body_file = o.str(n::REQUEST_BODY_FILE)?.map(PathBuf::from);
        g.json_body = o.str(n::JSON_BODY)?.map(str::to_string);
        o.finish()?;
    }
    g.request_file = r.str(n::REQUEST_FILE)?.map(PathBuf::from);
    g.request_source = match r.take(n::REQUEST_SOURCE) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(crate::nighthawk::request_source(&v, &r.path(n::REQUEST_SOURCE))?),
    };
    g.plugin_config = match r.take(n::REQUEST_SOURCE_PLUGIN_CONFIG) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        // Nighthawk's proto3 JSON writes the TypedExtensionConfig as an object.
        Some(other) => Some(other.to_string()),
    };
    g.latency_header = r.str(n::LATENCY_HEADER)?.map(str::to_string);
    Ok(())
}

fn read_telemetry(r: &mut Reader, g: &mut Given) -> Result<(), SpecError> {
    g.stats_interval = r.duration(n::STATS_INTERVAL)?;
    g.metrics_listen = r.str(n::METRICS_LISTEN)?.map(str::to_string);
    g.statsd = r.strings(n::STATSD)?;
    g.stats_sinks = match r.take(n::STATS_SINKS) {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.into_iter()
                .map(|v| match v {
                    Value::String(s) => s,
                    // Nighthawk's proto3 JSON writes each StatsSink as an object.
                    other => other.to_string(),
                })
                .collect(),
        ),
        Some(_) => return Err(r.must(n::STATS_SINKS, "must be a list")),
    };
    g.stats_flush_interval = r.duration(n::STATS_FLUSH_INTERVAL)?;
    g.stats_flush_interval_duration = r.duration(n::STATS_FLUSH_INTERVAL_DURATION)?;
    g.no_progress = r.bool(n::NO_PROGRESS)?;
    Ok(())
}

fn write(s: &RunSpec) -> Value {
    let preds = |kind: PredicateKind| -> Map<String, Value> {
        s.predicates
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| (p.counter.name().to_string(), json!(p.threshold.to_string())))
            .collect()
    };
    let (uri, endpoints, path, https) = match &s.target {
        TargetSpec::Uri(u) => (Some(u.to_string()), Vec::new(), None, false),
        TargetSpec::Multi { endpoints, path, https } => {
            (None, endpoints.clone(), Some(path.clone()), *https)
        }
    };
    let (rps, ramp, stages) = match &s.rate {
        RateSpec::Rps { rate, ramp } => (json!(rate.per_second()), ramp.map(format_short), None),
        RateSpec::LinearRamp { rate, .. } => (json!(rate.per_second()), None, None),
        RateSpec::Max => (json!("max"), None, None),
        RateSpec::Stages(st) => (Value::Null, None, Some(RatePlan::format_stages(st))),
    };
    let rate_limiter = match &s.rate {
        RateSpec::LinearRamp { ramp_time, .. } => {
            Some(crate::nighthawk::linear_ramping(*ramp_time))
        }
        _ => None,
    };
    let r = &s.requests;
    let t = &s.telemetry;
    let mut o = Options(Map::new());
    o.put(n::URI, uri);
    o.put(n::MULTI_TARGET_ENDPOINTS, endpoints);
    o.put(n::MULTI_TARGET_PATH, path);
    o.put(n::MULTI_TARGET_USE_HTTPS, https);
    o.put(n::BUILT_IN_SERVER, s.built_in_server);
    o.put(n::CONNECTIONS, s.connections.get());
    o.put(n::ADDRESS_FAMILY, s.address_family.name());
    o.put(n::H1_REUSE, s.h1_reuse.name());
    o.put(n::DURATION, s.duration.map(format_proto));
    o.put(n::NO_DURATION, s.duration.is_none());
    o.put(n::TIMEOUT, format_proto(s.timeout));
    o.put(n::CONCURRENCY, s.concurrency.name());
    o.put(n::WORKERS, s.concurrency.workers().get());
    o.put(n::PROTOCOL, s.protocol.name());
    o.put(n::MAX_CONCURRENT_STREAMS, s.streams.max_concurrent_streams.get());
    o.put(n::MAX_ACTIVE_REQUESTS, s.streams.max_active_requests.get());
    o.put(
        n::HTTP3_PROTOCOL_OPTIONS,
        (s.http3 != Http3Options::default()).then(|| {
            json!({
                "quic_protocol_options": {
                    "initial_stream_window_size": s.http3.stream_window,
                    "initial_connection_window_size": s.http3.connection_window,
                }
            })
        }),
    );
    o.put(n::TRACE, s.trace.as_ref().map(|t| t.uri.as_str()).unwrap_or(""));
    o.put(n::TRACE_SAMPLE_RATE, s.trace.as_ref().map(|t| t.sample_rate));
    let mut tls = Options(Map::new());
    tls.put(n::TLS_CA, s.tls.ca_file.as_ref().map(|p| p.display().to_string()));
    tls.put(n::TLS_INSECURE, s.tls.insecure);
    tls.put(n::TLS_SNI, s.tls.sni.clone());
    tls.put(n::TLS_MIN_VERSION, s.tls.min_version.map(TlsVersion::name));
    tls.put(n::TLS_MAX_VERSION, s.tls.max_version.map(TlsVersion::name));
    let suites = (!s.tls.cipher_suites.is_empty()).then(|| s.tls.cipher_suites.join(","));
    tls.put(n::TLS_CIPHER_SUITES, suites);
    tls.put(n::TLS_SESSION_RESUMPTION, !s.tls.no_session_resumption);
    o.put(n::TLS, tls.0);
    o.put(n::MAX_PENDING_REQUESTS, s.max_pending_requests);
    o.put(n::MAX_REQUESTS_PER_CONNECTION, s.max_requests_per_connection.get().to_string());
    o.put(n::TOTAL_REQUESTS, s.total_requests.map(|n| n.get().to_string()));
    o.put(n::OPEN_LOOP, s.open_loop);
    o.put(n::BURST_SIZE, s.burst_size);
    o.put(n::JITTER_UNIFORM, format_proto(s.jitter));
    o.put(n::PREFETCH_CONNECTIONS, s.prefetch_connections);
    o.put(n::RETRY_UNANSWERED, s.retry_unanswered);
    o.put(n::FAILURE_PREDICATES, preds(PredicateKind::Failure));
    o.put(n::TERMINATION_PREDICATES, preds(PredicateKind::Termination));
    o.put(n::NO_DEFAULT_FAILURE_PREDICATES, s.no_default_failure_predicates);
    o.put(n::OUTPUT_FORMAT, s.output_format.name());
    o.put(n::VERBOSITY, s.verbosity.name());
    o.put(n::LABELS, s.labels.clone());
    let mut req = Options(Map::new());
    req.put(n::REQUEST_METHOD, r.method.clone());
    let headers: Vec<Value> =
        r.headers.iter().map(|(k, v)| json!({"header": {"key": k, "value": v}})).collect();
    req.put(n::REQUEST_HEADERS, headers);
    req.put(n::REQUEST_BODY_SIZE, r.body_size);
    req.put(n::REQUEST_BODY_FILE, r.body_file.as_ref().map(|p| p.display().to_string()));
    req.put(n::JSON_BODY, r.json_body.clone());
    o.put(n::REQUEST_OPTIONS, req.0);
    o.put(n::REQUEST_FILE, r.request_file.as_ref().map(|p| p.display().to_string()));
    o.put(n::REQUEST_SOURCE_PLUGIN_CONFIG, r.plugin_config.clone());
    o.put(n::REQUEST_SOURCE, r.remote_source.as_ref().map(|a| format!("grpc://{a}")));
    o.put(n::LATENCY_HEADER, r.latency_header.as_deref().unwrap_or(""));
    o.put(n::REQUESTS_PER_SECOND, rps);
    o.put(n::RAMP_DURATION, ramp);
    o.put(n::RATE_LIMITER_PLUGIN_CONFIG, rate_limiter);
    o.put(n::TUNNEL_OPTIONS, s.tunnel.as_ref().map(crate::tunnel::to_json));
    o.put(n::STAGES, stages);
    o.put(n::IDLE_STRATEGY, s.idle.name());
    o.put(n::IO_BACKEND, s.io_backend.name());
    o.put(n::READ_COALESCE, s.read_coalesce.map(format_short));
    o.put(n::MAX_LATENESS, s.max_lateness.map(format_short));
    o.put(n::SIMPLE_WARMUP, s.simple_warmup);
    o.put(n::START_AT, s.start_at.map(format_rfc3339));
    o.put(n::SHARD, s.shard.map(|x| x.to_string()));
    o.put(n::EXECUTION_ID, s.execution_id.clone());
    o.put(n::BIND_ADDRESS, s.bind_address.map(|a| a.to_string()));
    o.put(n::STATS_INTERVAL, t.stats_interval.map(format_short));
    o.put(n::METRICS_LISTEN, t.metrics_listen.clone());
    o.put(n::STATSD, t.statsd.clone());
    o.put(n::STATS_SINKS, t.stats_sinks.clone());
    o.put(n::STATS_FLUSH_INTERVAL, format_short(t.stats_flush_interval));
    o.put(n::NO_PROGRESS, t.no_progress);
    Value::Object(o.0)
}

/// An options object being written, keyed by each option's proto field name.
struct Options(Map<String, Value>);

impl Options {
    fn put(&mut self, o: Opt, v: impl Into<Value>) {
        self.0.insert(o.key().to_string(), v.into());
    }
}

/// Reads one JSON object's fields, remembering which it took so unknown ones can be named.
/// Each option is found by its proto field name or its lowerCamelCase form.
struct Reader<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    taken: Vec<&'a str>,
}

impl<'a> Reader<'a> {
    /// A reader of `obj` (at `prefix`), refusing an option given twice, once in each case.
    fn new(obj: &'a Map<String, Value>, prefix: &str) -> Result<Reader<'a>, SpecError> {
        let r = Reader { obj, prefix: prefix.to_string(), taken: Vec::new() };
        for k in obj.keys().filter(|k| k.contains('_')) {
            let c = camel(k);
            if obj.contains_key(&c) {
                return Err(SpecError::must(
                    r.path_of(k),
                    format!("is given twice, also as {c} (proto3 JSON's lowerCamelCase)"),
                ));
            }
        }
        Ok(r)
    }

    fn path_of(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn path(&self, o: Opt) -> String {
        self.path_of(o.key())
    }

    fn must(&self, o: Opt, predicate: impl Into<crate::error::Message>) -> SpecError {
        SpecError::must(self.path(o), predicate)
    }

    /// The value of `o` (`None` when absent; `null` is returned as is).
    fn take(&mut self, o: Opt) -> Option<Value> {
        let key = o.key();
        let found = self.obj.get_key_value(key).or_else(|| self.obj.get_key_value(&camel(key)));
        let (k, v) = found?;
        self.taken.push(k);
        Some(v.clone())
    }

    fn present(&mut self, o: Opt) -> Option<Value> {
        self.take(o).filter(|v| !v.is_null())
    }

    /// An enum option: `"http2"`, or Nighthawk's proto3 JSON wrapper message `{"value":
    /// "HTTP2"}` (`{}` when the value is the enum's zero, which proto3 JSON leaves out).
    /// Nighthawk's `DEFAULT` means "not set".
    fn choice_str(&mut self, o: Opt) -> Result<Option<String>, SpecError> {
        let s = match self.present(o) {
            None => return Ok(None),
            Some(Value::String(s)) => s,
            Some(Value::Object(m)) if m.keys().all(|k| k == "value") => match m.get("value") {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(s)) => s.clone(),
                Some(v) => return Err(self.must(o, format!("value must be a string, got {v}"))),
            },
            Some(v) => return Err(self.must(o, format!("must be a string, got {v}"))),
        };
        Ok((!s.eq_ignore_ascii_case("default")).then_some(s))
    }

    /// An enum option read by `parse`; `expected` lists its values for the error.
    fn choice<T>(
        &mut self,
        o: Opt,
        parse: fn(&str) -> Option<T>,
        expected: &str,
    ) -> Result<Option<T>, SpecError> {
        match self.choice_str(o)? {
            None => Ok(None),
            Some(s) => parse(&s)
                .map(Some)
                .ok_or_else(|| self.must(o, format!("must be {expected}, got {s:?}"))),
        }
    }

    fn str(&mut self, o: Opt) -> Result<Option<&'a str>, SpecError> {
        let key = o.key();
        let found = self.obj.get_key_value(key).or_else(|| self.obj.get_key_value(&camel(key)));
        let Some((k, v)) = found else { return Ok(None) };
        self.taken.push(k);
        match v {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            v => Err(self.must(o, format!("must be a string, got {v}"))),
        }
    }

    fn string_or_number(&mut self, o: Opt) -> Result<Option<String>, SpecError> {
        match self.present(o) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => Err(self.must(o, format!("must be a string or a number, got {v}"))),
        }
    }

    fn bool(&mut self, o: Opt) -> Result<Option<bool>, SpecError> {
        match self.present(o) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(v) => Err(self.must(o, format!("must be true or false, got {v}"))),
        }
    }

    /// A proto3 JSON uint64: a number, or a string of digits.
    fn u64(&mut self, o: Opt) -> Result<Option<u64>, SpecError> {
        let Some(v) = self.present(o) else { return Ok(None) };
        let parsed = match &v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        match parsed {
            Some(n) => Ok(Some(n)),
            None => Err(self.must(o, format!("must be a whole number >= 0, got {v}"))),
        }
    }

    /// A duration: `"5s"`, `"250ms"`, `"0.000010s"`, or a number of seconds.
    fn duration(&mut self, o: Opt) -> Result<Option<Duration>, SpecError> {
        match self.present(o) {
            None => Ok(None),
            Some(Value::String(s)) => {
                parse_duration(&s).map(Some).map_err(|e| SpecError::invalid(self.path(o), e))
            }
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0 && *x < 1e10)
                .map(|x| Some(Duration::from_secs_f64(x)))
                .ok_or_else(|| self.must(o, format!("must be a duration such as \"5s\", got {n}"))),
            Some(v) => Err(self.must(o, format!("must be a duration such as \"5s\", got {v}"))),
        }
    }

    fn strings(&mut self, o: Opt) -> Result<Option<Vec<String>>, SpecError> {
        match self.present(o) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .ok_or_else(|| self.must(o, "must be a list of strings"))
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(self.must(o, "must be a list of strings")),
        }
    }

    /// Nighthawk's `[{"header": {"key", "value"}}]`, or `["name: value"]` as users type them.
    fn headers(&mut self, o: Opt) -> Result<Option<Vec<(String, String)>>, SpecError> {
        let Some(v) = self.present(o) else { return Ok(None) };
        let list = v.as_array().ok_or_else(|| self.must(o, "must be a list of headers"))?;
        let mut out = Vec::with_capacity(list.len());
        for h in list {
            let raw = match h {
                Value::String(s) => s.clone(),
                other => {
                    let kv = other.get("header").unwrap_or(other);
                    let k = kv.get("key").and_then(Value::as_str);
                    let v = kv.get("value").and_then(Value::as_str).unwrap_or_default();
                    match k {
                        Some(k) => format!("{k}: {v}"),
                        None => return Err(self.must(o, format!("must each be 'name: value' or {{\"header\":{{\"key\",\"value\"}}}}, got {other}"))),
                    }
                }
            };
            let parsed = parse_header(&raw).ok_or_else(|| {
                self.must(o, format!("must each be 'name: value' with a token name and no line breaks, got {raw:?}"))
            })?;
            out.push(parsed);
        }
        Ok(Some(out))
    }

    /// Nighthawk's map `{"counter": "threshold"}`, or `["counter:threshold"]` as typed.
    fn predicates(
        &mut self,
        o: Opt,
        kind: PredicateKind,
    ) -> Result<Option<Vec<Predicate>>, SpecError> {
        let raw: Vec<String> = match self.present(o) {
            None => return Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}:{s}"),
                    other => format!("{k}:{other}"),
                })
                .collect(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
                .collect(),
            Some(v) => {
                return Err(self.must(o, format!("must be a map of counter to threshold, got {v}")))
            }
        };
        raw.iter()
            .map(|p| Predicate::parse(p, kind).map_err(|e| SpecError::invalid(self.path(o), e)))
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// Fails on the first field nobody took.
    fn finish(self) -> Result<(), SpecError> {
        match self.obj.keys().find(|k| !self.taken.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => {
                Err(SpecError::must(self.path_of(k), "is not an option Shrike knows (misspelt?)"))
            }
        }
    }
}
