//! A run spec as JSON: Nighthawk's `CommandLineOptions` in proto3 JSON (its option names,
//! uint64 as strings or numbers, durations as `"5s"`, enums in any case), plus Shrike's own
//! options under names Nighthawk does not use (`stages`, `ramp_duration`, `tls`, `labels`, …).
//!
//! Reading is field by field, so an error names the field (`connections must be at least 1`)
//! and an unknown option is refused by name rather than silently ignored. Writing produces the
//! canonical form: every option with its effective value, which reads back to an equal spec.

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};
use shrike_stats::duration::{format_proto, parse_duration};
use shrike_stats::timestamp::{format_rfc3339, parse_rfc3339};

use crate::error::SpecError;
use crate::format::OutputFormat;
use crate::plan::{format_short, Rate, RatePlan};
use crate::predicate::{Predicate, PredicateKind};
use crate::shard::Shard;
use crate::spec::*;
use crate::types::*;
use crate::url::Url;

/// Sets the I/O backend of runs that do not choose one, so a whole test suite (or a fleet)
/// can run on io_uring without touching each command.
pub const IO_BACKEND_ENV: &str = "SHRIKE_IO_BACKEND";

/// Options Shrike writes that are derived from others (for readers of a result); accepted and
/// ignored on input.
const INFORMATIONAL: &[&str] = &["workers", "request_file_entries", "num_requests"];

/// Nighthawk options accepted for compatibility with no effect on a Shrike run.
const NIGHTHAWK_NO_OP: &[&str] = &["execution_id"];

/// Nighthawk options Shrike refuses, and why: accepting them would run something other than
/// what was asked for. (`user_defined_plugin_configs` may be an empty list, as Nighthawk's own
/// JSON output writes it.)
const NIGHTHAWK_REFUSED: &[(&str, &str)] = &[
    (
        "user_defined_plugin_configs",
        "is not implemented (Nighthawk itself rejects it as unimplemented)",
    ),
    ("tunnel_options", "is not supported by Shrike (it has no CONNECT tunnels)"),
    (
        "rate_limiter_plugin_config",
        "is not supported by Shrike (its rate is requests_per_second, a ramp or stages)",
    ),
    (
        "nighthawk_service",
        "is how a client sends a run (shrike run --nighthawk-service), not an option of the run",
    ),
];

impl RunSpec {
    /// Reads a spec from a JSON object of options: a spec file, a stored result's `options`,
    /// or flags written as JSON. Missing options take their defaults.
    pub fn from_json(v: &Value) -> Result<RunSpec, SpecError> {
        let obj =
            v.as_object().ok_or_else(|| SpecError::must("options", "must be a JSON object"))?;
        let mut r = Reader::new(obj, "");
        let spec = read(&mut r)?;
        r.finish()?;
        spec.check()
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
        let stated = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
        if !stated("requests_per_second") && !stated("stages") {
            return Ok(None);
        }
        read_rate(&mut Reader::new(obj, "")).map(Some)
    }
}

/// Applies a JSON merge patch (RFC 7396): objects merge key by key, `null` removes.
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn read(r: &mut Reader) -> Result<RunSpec, SpecError> {
    let target = read_target(r)?;
    let built_in_server = r.bool("built_in_server")?.unwrap_or(false);
    for (key, why) in NIGHTHAWK_REFUSED {
        let set = match r.take(key) {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(r.must(key, *why));
        }
    }
    let protocol = match r.choice("protocol")? {
        Some(p) => Protocol::parse(p).ok_or_else(|| {
            r.must("protocol", format!("must be http1, http2 or http3, got {p:?}"))
        })?,
        // Nighthawk's deprecated `h2` switch.
        None if r.bool("h2")? == Some(true) => Protocol::Http2,
        None => Protocol::Http1,
    };
    let concurrency = match r.string_or_number("concurrency")? {
        None => Concurrency::Workers(std::num::NonZeroUsize::MIN),
        Some(c) => Concurrency::parse(&c).ok_or_else(|| {
            r.must("concurrency", format!("must be a positive number or 'auto', got {c:?}"))
        })?,
    };
    let connections = r.nonzero_u32("connections", 100)?;
    let rate = read_rate(r)?;
    let no_duration = r.bool("no_duration")?.unwrap_or(false);
    let given_duration = r.duration("duration")?;
    let duration = match (&rate, no_duration, given_duration) {
        (RateSpec::Stages(s), false, d) => {
            let total = RatePlan::stages_duration(s);
            if d.is_some_and(|d| d != total) {
                return Err(r.must(
                    "duration",
                    "cannot be used with stages (the run lasts the sum of the stages)",
                ));
            }
            Some(total)
        }
        (RateSpec::Stages(_), true, _) => {
            return Err(r.must("no_duration", "cannot be used with stages"));
        }
        (_, true, Some(_)) => {
            return Err(r.must("duration", "cannot be used with no_duration"));
        }
        (_, true, None) => None,
        (_, false, d) => {
            let d = d.unwrap_or(Duration::from_secs(5));
            if d.is_zero() {
                return Err(r.must(
                    "duration",
                    "must be greater than 0 (use no_duration to run until stopped)",
                ));
            }
            Some(d)
        }
    };
    let timeout = r.duration("timeout")?.unwrap_or(Duration::from_secs(30));
    if timeout.is_zero() {
        return Err(r.must("timeout", "must be greater than 0"));
    }
    let idle = match r.choice("sequencer_idle_strategy")? {
        None => IdleStrategy::default(),
        Some(s) => IdleStrategy::parse(s).ok_or_else(|| {
            r.must("sequencer_idle_strategy", format!("must be spin, poll or sleep, got {s:?}"))
        })?,
    };
    let io_backend = match r.choice("io_backend")? {
        Some(s) => IoBackend::parse(s)
            .ok_or_else(|| r.must("io_backend", format!("must be epoll or io_uring, got {s:?}")))?,
        None => match std::env::var(IO_BACKEND_ENV) {
            Err(_) => IoBackend::default(),
            Ok(s) => IoBackend::parse(&s).ok_or_else(|| {
                r.must(
                    "io_backend",
                    format!("{IO_BACKEND_ENV} must be epoll or io_uring, got {s:?}"),
                )
            })?,
        },
    };
    let read_coalesce = read_coalesce(r, protocol, &rate)?;
    let burst_size = r.u64("burst_size")?.unwrap_or(0);
    let burst_size = u32::try_from(burst_size)
        .map_err(|_| r.must("burst_size", "must be at most 4294967295"))?;
    let jitter = r.duration("jitter_uniform")?.unwrap_or_default();
    let max_pending_requests = r.u64("max_pending_requests")?.unwrap_or(0);
    let max_pending_requests = u32::try_from(max_pending_requests)
        .map_err(|_| r.must("max_pending_requests", "must be at most 4294967295"))?;
    let max_requests_per_connection = NonZeroU64::new(
        r.u64("max_requests_per_connection")?.unwrap_or(DEFAULT_MAX_REQUESTS_PER_CONNECTION),
    )
    .ok_or_else(|| r.must("max_requests_per_connection", "must be at least 1"))?;
    let total_requests = match r.u64("total_requests")? {
        None => None,
        Some(n) => {
            Some(NonZeroU64::new(n).ok_or_else(|| r.must("total_requests", "must be at least 1"))?)
        }
    };
    let open_loop = r.bool("open_loop")?.unwrap_or(false);
    let prefetch_connections = r.bool("prefetch_connections")?.unwrap_or(false);
    let simple_warmup = r.bool("simple_warmup")?.unwrap_or(false);
    let start_at = match (r.str("start_at")?, r.str("scheduled_start")?) {
        (Some(t), _) | (None, Some(t)) => {
            Some(parse_rfc3339(t).map_err(|e| SpecError::invalid(r.path("start_at"), e))?)
        }
        (None, None) => None,
    };
    let shard = match r.str("shard")? {
        None => None,
        Some(t) => Some(Shard::parse(t).map_err(|e| SpecError::invalid(r.path("shard"), e))?),
    };
    let bind_address = read_bind_address(r)?;
    let (streams, http3) = read_streams(r)?;
    let h1_reuse = match r.choice("experimental_h1_connection_reuse_strategy")? {
        None => H1Reuse::default(),
        Some(s) => H1Reuse::parse(s).ok_or_else(|| {
            r.must(
                "experimental_h1_connection_reuse_strategy",
                format!("must be mru or lru, got {s:?}"),
            )
        })?,
    };
    let address_family = match r.choice("address_family")? {
        None => AddressFamily::default(),
        Some(s) => AddressFamily::parse(s).ok_or_else(|| {
            r.must("address_family", format!("must be auto, v4 or v6, got {s:?}"))
        })?,
    };
    let tls = read_tls(r)?;
    let trace = read_trace(r)?;
    let requests = read_requests(r)?;
    let no_default_failure_predicates = r.bool("no_default_failure_predicates")?.unwrap_or(false);
    let mut predicates =
        if no_default_failure_predicates { Vec::new() } else { Predicate::default_failures() };
    for (field, kind) in [
        ("failure_predicates", PredicateKind::Failure),
        ("termination_predicates", PredicateKind::Termination),
    ] {
        for p in r.predicates(field, kind)? {
            // A user predicate on a counter replaces the default one on it (Nighthawk users
            // write `benchmark.http_5xx:100` to tolerate some 5xx).
            // Replaced in place, so a spec reads back in the order it was written.
            match predicates.iter_mut().find(|q| q.counter == p.counter && q.kind == p.kind) {
                Some(q) => *q = p,
                None => predicates.push(p),
            }
        }
    }
    let labels = r.strings("labels")?;
    let output_format = match r.choice("output_format")? {
        None => OutputFormat::Summary,
        Some(s) => {
            s.parse::<OutputFormat>().map_err(|e| SpecError::invalid(r.path("output_format"), e))?
        }
    };
    let verbosity = match r.choice("verbosity")? {
        // Nighthawk's DEFAULT means its default, info.
        None => Verbosity::default(),
        Some(s) => Verbosity::parse(s).ok_or_else(|| {
            r.must(
                "verbosity",
                format!("must be trace, debug, info, warn, error or critical, got {s:?}"),
            )
        })?,
    };
    let telemetry = read_telemetry(r)?;
    for k in INFORMATIONAL.iter().chain(NIGHTHAWK_NO_OP) {
        r.take(k);
    }
    Ok(RunSpec {
        target,
        built_in_server,
        protocol,
        concurrency,
        connections,
        duration,
        timeout,
        rate,
        idle,
        io_backend,
        read_coalesce,
        burst_size,
        jitter,
        max_pending_requests,
        max_requests_per_connection,
        total_requests,
        open_loop,
        prefetch_connections,
        simple_warmup,
        start_at,
        shard,
        bind_address,
        streams,
        h1_reuse,
        address_family,
        tls,
        http3,
        trace,
        requests,
        predicates,
        no_default_failure_predicates,
        labels,
        output_format,
        verbosity,
        telemetry,
    })
}

fn read_target(r: &mut Reader) -> Result<TargetSpec, SpecError> {
    let uri = r.str("uri")?.map(str::to_string);
    let mut endpoints = r.strings("multi_target_endpoints")?;
    let mut path = r.str("multi_target_path")?.map(str::to_string);
    let mut https = r.bool("multi_target_use_https")?;
    // Nighthawk's form: {"multi_target": {"use_https", "endpoints": [{address, port}], "path"}}.
    if let Some(mt) = r.take("multi_target").filter(|v| !v.is_null()) {
        let field = r.path("multi_target");
        let obj = mt.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
        let mut m = Reader::new(obj, &field);
        https = https.or(m.bool("use_https")?);
        path = path.or(m.str("path")?.map(str::to_string));
        if let Some(eps) = m.take("endpoints") {
            for ep in eps.as_array().into_iter().flatten() {
                let addr = ep.get("address").and_then(Value::as_str).unwrap_or_default();
                let port =
                    ep.get("port").and_then(|p| p.as_u64().or_else(|| p.as_str()?.parse().ok()));
                match port {
                    Some(p) if addr.contains(':') => endpoints.push(format!("[{addr}]:{p}")),
                    Some(p) => endpoints.push(format!("{addr}:{p}")),
                    None => {
                        return Err(SpecError::must(
                            format!("{field}.endpoints"),
                            "must each have an address and a port",
                        ))
                    }
                }
            }
        }
        m.finish()?;
    }
    match (uri, endpoints.is_empty()) {
        (Some(_), false) => Err(r.must("uri", "cannot be used with multi_target_endpoints")),
        (Some(u), true) => {
            if path.is_some() || https.is_some_and(|h| h) {
                return Err(r.must(
                    "multi_target_path",
                    "and multi_target_use_https need multi_target_endpoints, not a uri",
                ));
            }
            Url::parse(&u).map(TargetSpec::Uri).map_err(|e| SpecError::invalid(r.path("uri"), e))
        }
        (None, true) => {
            Err(r.must("uri", "is missing: a run needs a target (uri, or multi_target_endpoints)"))
        }
        (None, false) => {
            let path = path.unwrap_or_else(|| "/".into());
            if !path.starts_with('/') {
                return Err(
                    r.must("multi_target_path", format!("must start with '/', got {path:?}"))
                );
            }
            for ep in &endpoints {
                let port_ok = ep.rsplit_once(':').is_some_and(|(h, p)| {
                    !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
                });
                let url = format!("http://{ep}{path}");
                if !port_ok || ep.contains(['/', '?', '#', '@']) || Url::parse(&url).is_err() {
                    return Err(r.must(
                        "multi_target_endpoints",
                        format!("must each be HOST:PORT (IPv6 as [::1]:PORT), got {ep:?}"),
                    ));
                }
            }
            Ok(TargetSpec::Multi { endpoints, path, https: https.unwrap_or(false) })
        }
    }
}

/// `read_coalesce`: only where every response is timed by the kernel's receive stamp (TCP
/// receives, on epoll or io_uring), and where waking late delays nothing but reads. A paced
/// worker must wake at each release; an HTTP/3 stream (QUIC's own socket) is timed by the
/// thread's clock, which the wait would make late.
fn read_coalesce(
    r: &mut Reader,
    protocol: Protocol,
    rate: &RateSpec,
) -> Result<Option<Duration>, SpecError> {
    let Some(window) = r.duration("read_coalesce")?.filter(|d| !d.is_zero()) else {
        return Ok(None);
    };
    let why = if window > Duration::from_millis(1) {
        Some("must be at most 1ms: every response waits up to this long to be read")
    } else if !matches!(rate, RateSpec::Max) {
        Some("needs an unpaced run (requests_per_second max): a paced worker must wake at each release")
    } else if protocol == Protocol::Http3 {
        Some("works with HTTP/1.1 and HTTP/2 only: HTTP/3 responses are not timed by the kernel's receive stamps")
    } else {
        None
    };
    match why {
        Some(why) => Err(r.must("read_coalesce", why)),
        None => Ok(Some(window)),
    }
}

fn read_rate(r: &mut Reader) -> Result<RateSpec, SpecError> {
    let rps = r.take("requests_per_second").filter(|v| !v.is_null());
    let ramp = r.duration("ramp_duration")?;
    let stages = r.str("stages")?;
    let bad_rps = |v: &Value| {
        r.must("requests_per_second", format!("must be a number greater than 0 or 'max', got {v}"))
    };
    match (stages, rps) {
        (Some(_), Some(_)) => Err(r.must("stages", "cannot be used with requests_per_second")),
        (Some(_), None) if ramp.is_some() => {
            Err(r.must("stages", "cannot be used with ramp_duration"))
        }
        (Some(s), None) => RatePlan::parse_stages(s)
            .map(RateSpec::Stages)
            .map_err(|e| SpecError::invalid(r.path("stages"), e)),
        (None, Some(Value::String(m))) if m.trim().eq_ignore_ascii_case("max") => {
            if ramp.is_some() {
                return Err(
                    r.must("ramp_duration", "needs a numeric requests_per_second to ramp to")
                );
            }
            Ok(RateSpec::Max)
        }
        (None, Some(v)) => {
            let n = match &v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            let rate = n.and_then(Rate::try_new).ok_or_else(|| bad_rps(&v))?;
            Ok(RateSpec::Rps { rate, ramp })
        }
        (None, None) => Ok(RateSpec::Rps {
            rate: Rate::try_new(DEFAULT_RPS).ok_or_else(|| bad_rps(&json!(DEFAULT_RPS)))?,
            ramp,
        }),
    }
}

fn read_bind_address(r: &mut Reader) -> Result<Option<IpAddr>, SpecError> {
    if let Some(a) = r.str("bind_address")? {
        let ip = a.trim().trim_start_matches('[').trim_end_matches(']');
        return ip
            .parse()
            .map(Some)
            .map_err(|_| r.must("bind_address", format!("must be an IP address, got {a:?}")));
    }
    let Some(cfg) = r.take("upstream_bind_config").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let field = r.path("upstream_bind_config");
    let bad = |why: &str| {
        SpecError::invalid(
            &field,
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
    let sa = v.get("source_address").ok_or_else(|| bad("no source_address"))?;
    if sa.get("port_value").and_then(Value::as_u64).is_some_and(|p| p != 0) {
        return Err(bad(
            "a fixed source port_value is not supported (connections would collide); use 0",
        ));
    }
    let addr = sa
        .get("address")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("source_address.address is missing"))?;
    addr.parse().map(Some).map_err(|_| bad(&format!("{addr:?} is not an IP address")))
}

/// The stream limits and QUIC windows: Nighthawk's `http3_protocol_options` may set HTTP/3's
/// stream limit itself (exclusive with `max_concurrent_streams`, as in Nighthawk), and its
/// deprecated `experimental_h2_use_multiple_connections` means one stream per connection.
fn read_streams(r: &mut Reader) -> Result<(StreamLimits, Http3Options), SpecError> {
    let given_streams = r.present("max_concurrent_streams").is_some();
    let mut streams = StreamLimits {
        max_concurrent_streams: r.nonzero_u32("max_concurrent_streams", 2_147_483_647)?,
        max_active_requests: r.nonzero_u32("max_active_requests", 100)?,
    };
    let (h3_streams, http3) = match r.take("http3_protocol_options").filter(|v| !v.is_null()) {
        None => (None, Http3Options::default()),
        Some(v) => crate::nighthawk::http3_protocol_options(v, &r.path("http3_protocol_options"))?,
    };
    if let Some(n) = h3_streams {
        if given_streams && n != streams.max_concurrent_streams {
            return Err(r.must(
                "http3_protocol_options",
                "cannot set max_concurrent_streams when max_concurrent_streams is given too",
            ));
        }
        streams.max_concurrent_streams = n;
    }
    if r.bool("experimental_h2_use_multiple_connections")? == Some(true) {
        if given_streams && streams.max_concurrent_streams != NonZeroU32::MIN {
            return Err(r.must(
                "experimental_h2_use_multiple_connections",
                "means max_concurrent_streams 1, which contradicts the max_concurrent_streams given",
            ));
        }
        streams.max_concurrent_streams = NonZeroU32::MIN;
    }
    Ok((streams, http3))
}

/// `trace` (Nighthawk's zipkin URI, `""` for none) and Shrike's `trace_sample_rate`.
fn read_trace(r: &mut Reader) -> Result<Option<TraceSpec>, SpecError> {
    let rate = match r.present("trace_sample_rate") {
        None => None,
        Some(v) => Some(
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|x| *x > 0.0 && *x <= 1.0)
                .ok_or_else(|| {
                    r.must("trace_sample_rate", format!("must be in (0, 1], got {v}"))
                })?,
        ),
    };
    match r.str("trace")?.map(str::trim).filter(|t| !t.is_empty()) {
        None if rate.is_some() => Err(r.must("trace_sample_rate", "needs trace (a zipkin:// URI)")),
        None => Ok(None),
        Some(t) => crate::nighthawk::trace(t, rate.unwrap_or(1.0), &r.path("trace")).map(Some),
    }
}

fn read_tls(r: &mut Reader) -> Result<TlsOptions, SpecError> {
    let mut opts = read_tls_object(r)?;
    let socket = r.take("transport_socket").filter(|v| !v.is_null());
    let context = r.take("tls_context").filter(|v| !v.is_null());
    let patch = match (socket, context) {
        (Some(_), Some(_)) => {
            return Err(r.must("transport_socket", "cannot be used with tls_context"))
        }
        (Some(v), None) => crate::nighthawk::transport_socket(v, &r.path("transport_socket"))?,
        (None, Some(v)) => crate::nighthawk::tls_context(v, &r.path("tls_context"))?,
        (None, None) => return Ok(opts),
    };
    // A setting given both ways is refused rather than one silently winning.
    let clash = |what: &str| {
        r.must("transport_socket", format!("sets {what}, which the tls options set too"))
    };
    if let Some(v) = patch.sni {
        if opts.sni.is_some() {
            return Err(clash("sni"));
        }
        opts.sni = Some(v);
    }
    if let Some(v) = patch.min_version {
        if opts.min_version.is_some() {
            return Err(clash("the minimum TLS version"));
        }
        opts.min_version = Some(v);
    }
    if let Some(v) = patch.max_version {
        if opts.max_version.is_some() {
            return Err(clash("the maximum TLS version"));
        }
        opts.max_version = Some(v);
    }
    if let Some(v) = patch.cipher_suites {
        if !opts.cipher_suites.is_empty() {
            return Err(clash("cipher suites"));
        }
        opts.cipher_suites = v;
    }
    if let Some(v) = patch.ca_file {
        if opts.ca_file.is_some() {
            return Err(clash("a trusted CA"));
        }
        opts.ca_file = Some(v);
    }
    if let Some(v) = patch.no_session_resumption {
        opts.no_session_resumption |= v;
    }
    if let (Some(lo), Some(hi)) = (opts.min_version, opts.max_version) {
        if lo > hi {
            return Err(r.must("transport_socket", "sets a minimum TLS version above the maximum"));
        }
    }
    Ok(opts)
}

fn read_tls_object(r: &mut Reader) -> Result<TlsOptions, SpecError> {
    let Some(v) = r.take("tls").filter(|v| !v.is_null()) else { return Ok(TlsOptions::default()) };
    let field = r.path("tls");
    let obj = v.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
    let mut t = Reader::new(obj, &field);
    let version = |t: &mut Reader, k: &str| -> Result<Option<TlsVersion>, SpecError> {
        match t.str(k)? {
            None => Ok(None),
            Some(s) => TlsVersion::parse(s)
                .map(Some)
                .ok_or_else(|| t.must(k, format!("must be 1.2 or 1.3, got {s:?}"))),
        }
    };
    let opts = TlsOptions {
        ca_file: t.str("ca")?.map(PathBuf::from),
        insecure: t.bool("insecure")?.unwrap_or(false),
        sni: t.str("sni")?.map(str::to_string),
        min_version: version(&mut t, "min_version")?,
        max_version: version(&mut t, "max_version")?,
        cipher_suites: match t.take("cipher_suites") {
            Some(Value::String(s)) => {
                s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
            }
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(String::from).collect(),
            Some(Value::Null) | None => Vec::new(),
            Some(_) => {
                return Err(t.must("cipher_suites", "must be a comma-separated string or a list"))
            }
        },
        no_session_resumption: !t.bool("session_resumption")?.unwrap_or(true),
    };
    if let (Some(lo), Some(hi)) = (opts.min_version, opts.max_version) {
        if lo > hi {
            return Err(t.must(
                "min_version",
                format!("({}) must not be above max_version ({})", lo.name(), hi.name()),
            ));
        }
    }
    t.finish()?;
    Ok(opts)
}

fn read_requests(r: &mut Reader) -> Result<RequestsSpec, SpecError> {
    let mut spec = RequestsSpec { method: "GET".into(), ..RequestsSpec::default() };
    if let Some(v) = r.take("request_options").filter(|v| !v.is_null()) {
        let field = r.path("request_options");
        let obj = v.as_object().ok_or_else(|| SpecError::must(&field, "must be an object"))?;
        let mut o = Reader::new(obj, &field);
        if let Some(m) = o.str("request_method")? {
            let m = m.trim();
            if m.is_empty() || !m.bytes().all(is_token_byte) {
                return Err(o.must(
                    "request_method",
                    format!("must be an HTTP token such as GET or POST, got {m:?}"),
                ));
            }
            spec.method = m.to_ascii_uppercase();
        }
        spec.headers = o.headers("request_headers")?;
        spec.body_size = u32::try_from(o.u64("request_body_size")?.unwrap_or(0))
            .map_err(|_| o.must("request_body_size", "must be at most 4294967295"))?;
        spec.body_file = o.str("request_body_file")?.map(PathBuf::from);
        spec.json_body = o.str("json_body")?.filter(|s| !s.is_empty()).map(str::to_string);
        o.finish()?;
    }
    spec.request_file = r.str("request_file")?.map(PathBuf::from);
    spec.remote_source = match r.take("request_source") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(crate::nighthawk::request_source(&v, &r.path("request_source"))?),
    };
    spec.plugin_config = match r.take("request_source_plugin_config") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        // Nighthawk's proto3 JSON writes the TypedExtensionConfig as an object.
        Some(other) => Some(other.to_string()),
    };
    spec.latency_header = match r.str("latency_response_header_name")?.map(str::trim) {
        // Nighthawk's default is "": no header.
        None | Some("") => None,
        Some(h)
            if h.bytes().all(|b| b.is_ascii_graphic() && !b":()<>@,;\\\"/[]?={}".contains(&b)) =>
        {
            Some(h.to_ascii_lowercase())
        }
        Some(h) => {
            return Err(
                r.must("latency_response_header_name", format!("must be an HTTP token, got {h:?}"))
            )
        }
    };
    Ok(spec)
}

fn read_telemetry(r: &mut Reader) -> Result<TelemetrySpec, SpecError> {
    let mut t =
        TelemetrySpec { stats_interval: r.duration("stats_interval")?, ..TelemetrySpec::default() };
    if t.stats_interval.is_some_and(|d| d < MIN_STATS_INTERVAL) {
        return Err(r.must(
            "stats_interval",
            "must be at least 100ms (each interval holds full histograms)",
        ));
    }
    t.metrics_listen = r.str("metrics_listen")?.map(str::to_string);
    t.statsd = r.strings("statsd")?;
    t.stats_sinks = match r.take("stats_sinks") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .into_iter()
            .map(|v| match v {
                Value::String(s) => s,
                // Nighthawk's proto3 JSON writes each StatsSink as an object.
                other => other.to_string(),
            })
            .collect(),
        Some(_) => return Err(r.must("stats_sinks", "must be a list")),
    };
    let flush =
        match (r.duration("stats_flush_interval")?, r.duration("stats_flush_interval_duration")?) {
            (Some(_), Some(_)) => {
                return Err(r.must(
                    "stats_flush_interval",
                    "cannot be used with stats_flush_interval_duration",
                ))
            }
            (a, b) => a.or(b),
        };
    t.stats_flush_interval = flush.unwrap_or(t.stats_flush_interval);
    if t.stats_flush_interval.is_zero() {
        return Err(r.must("stats_flush_interval", "must be greater than 0"));
    }
    t.no_progress = r.bool("no_progress")?.unwrap_or(false);
    Ok(t)
}

/// Whether `b` may appear in an HTTP token (a method or header name, RFC 9110 §5.6.2).
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses a `name: value` header as a user writes it.
pub fn parse_header(raw: &str) -> Option<(String, String)> {
    let (k, v) = raw.split_once(':')?;
    let k = k.trim();
    let v = v.trim();
    if k.is_empty()
        || !k.bytes().all(is_token_byte)
        || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
    {
        return None;
    }
    Some((k.to_string(), v.to_string()))
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
        RateSpec::Max => (json!("max"), None, None),
        RateSpec::Stages(st) => (Value::Null, None, Some(RatePlan::format_stages(st))),
    };
    let r = &s.requests;
    let t = &s.telemetry;
    json!({
        "uri": uri,
        "multi_target_endpoints": endpoints,
        "multi_target_path": path,
        "multi_target_use_https": https,
        "built_in_server": s.built_in_server,
        "connections": s.connections.get(),
        "address_family": s.address_family.name(),
        "experimental_h1_connection_reuse_strategy": s.h1_reuse.name(),
        "duration": s.duration.map(format_proto),
        "no_duration": s.duration.is_none(),
        "timeout": format_proto(s.timeout),
        "concurrency": s.concurrency.name(),
        "workers": s.concurrency.workers().get(),
        "protocol": s.protocol.name(),
        "max_concurrent_streams": s.streams.max_concurrent_streams.get(),
        "max_active_requests": s.streams.max_active_requests.get(),
        "http3_protocol_options": (s.http3 != Http3Options::default()).then(|| json!({
            "quic_protocol_options": {
                "initial_stream_window_size": s.http3.stream_window,
                "initial_connection_window_size": s.http3.connection_window,
            }
        })),
        "trace": s.trace.as_ref().map(|t| t.uri.as_str()).unwrap_or(""),
        "trace_sample_rate": s.trace.as_ref().map(|t| t.sample_rate),
        "tls": {
            "ca": s.tls.ca_file.as_ref().map(|p| p.display().to_string()),
            "insecure": s.tls.insecure,
            "sni": s.tls.sni,
            "min_version": s.tls.min_version.map(TlsVersion::name),
            "max_version": s.tls.max_version.map(TlsVersion::name),
            "cipher_suites": (!s.tls.cipher_suites.is_empty()).then(|| s.tls.cipher_suites.join(",")),
            "session_resumption": !s.tls.no_session_resumption,
        },
        "max_pending_requests": s.max_pending_requests,
        "max_requests_per_connection": s.max_requests_per_connection.get().to_string(),
        "total_requests": s.total_requests.map(|n| n.get().to_string()),
        "open_loop": s.open_loop,
        "burst_size": s.burst_size,
        "jitter_uniform": format_proto(s.jitter),
        "prefetch_connections": s.prefetch_connections,
        "failure_predicates": preds(PredicateKind::Failure),
        "termination_predicates": preds(PredicateKind::Termination),
        "no_default_failure_predicates": s.no_default_failure_predicates,
        "output_format": s.output_format.name(),
        "verbosity": s.verbosity.name(),
        "labels": s.labels,
        "request_options": {
            "request_method": r.method,
            "request_headers": r.headers.iter()
                .map(|(k, v)| json!({"header": {"key": k, "value": v}}))
                .collect::<Vec<_>>(),
            "request_body_size": r.body_size,
            "request_body_file": r.body_file.as_ref().map(|p| p.display().to_string()),
            "json_body": r.json_body,
        },
        "request_file": r.request_file.as_ref().map(|p| p.display().to_string()),
        "request_source_plugin_config": r.plugin_config,
        "request_source": r.remote_source.as_ref().map(|a| format!("grpc://{a}")),
        "latency_response_header_name": r.latency_header.as_deref().unwrap_or(""),
        "requests_per_second": rps,
        "ramp_duration": ramp,
        "stages": stages,
        "sequencer_idle_strategy": s.idle.name(),
        "io_backend": s.io_backend.name(),
        "read_coalesce": s.read_coalesce.map(format_short),
        "simple_warmup": s.simple_warmup,
        "start_at": s.start_at.map(format_rfc3339),
        "shard": s.shard.map(|x| x.to_string()),
        "bind_address": s.bind_address.map(|a| a.to_string()),
        "stats_interval": t.stats_interval.map(format_short),
        "metrics_listen": t.metrics_listen,
        "statsd": t.statsd,
        "stats_sinks": t.stats_sinks,
        "stats_flush_interval": format_short(t.stats_flush_interval),
        "no_progress": t.no_progress,
    })
}

/// Reads one JSON object's fields, remembering which it took so unknown ones can be named.
struct Reader<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    taken: Vec<&'a str>,
}

impl<'a> Reader<'a> {
    fn new(obj: &'a Map<String, Value>, prefix: &str) -> Reader<'a> {
        Reader { obj, prefix: prefix.to_string(), taken: Vec::new() }
    }

    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn must(&self, key: &str, predicate: impl Into<String>) -> SpecError {
        SpecError::must(self.path(key), predicate)
    }

    /// The value of `key` (`None` when absent; `null` is returned as is).
    fn take(&mut self, key: &str) -> Option<Value> {
        let (k, v) = self.obj.get_key_value(key)?;
        self.taken.push(k);
        Some(v.clone())
    }

    fn present(&mut self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.obj.get_key_value(key)?;
        self.taken.push(k);
        (!v.is_null()).then_some(v)
    }

    /// An enum option: `"http2"`, or Nighthawk's proto3 JSON wrapper message `{"value":
    /// "HTTP2"}` (`{}` when the value is the enum's zero, which proto3 JSON leaves out).
    /// Nighthawk's `DEFAULT` means "not set".
    fn choice(&mut self, key: &str) -> Result<Option<&'a str>, SpecError> {
        let s = match self.present(key) {
            None => return Ok(None),
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Object(o)) if o.keys().all(|k| k == "value") => match o.get("value") {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(s)) => s.as_str(),
                Some(v) => return Err(self.must(key, format!("value must be a string, got {v}"))),
            },
            Some(v) => return Err(self.must(key, format!("must be a string, got {v}"))),
        };
        Ok((!s.eq_ignore_ascii_case("default")).then_some(s))
    }

    fn str(&mut self, key: &str) -> Result<Option<&'a str>, SpecError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.must(key, format!("must be a string, got {v}"))),
        }
    }

    fn string_or_number(&mut self, key: &str) -> Result<Option<String>, SpecError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => Err(self.must(key, format!("must be a string or a number, got {v}"))),
        }
    }

    fn bool(&mut self, key: &str) -> Result<Option<bool>, SpecError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(v) => Err(self.must(key, format!("must be true or false, got {v}"))),
        }
    }

    /// A proto3 JSON uint64: a number, or a string of digits.
    fn u64(&mut self, key: &str) -> Result<Option<u64>, SpecError> {
        let parsed = match self.present(key) {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            Some(_) => None,
        };
        match parsed {
            Some(n) => Ok(Some(n)),
            None => {
                Err(self.must(key, format!("must be a whole number >= 0, got {}", self.obj[key])))
            }
        }
    }

    fn nonzero_u32(&mut self, key: &str, default: u32) -> Result<NonZeroU32, SpecError> {
        let n = self.u64(key)?.unwrap_or(u64::from(default));
        u32::try_from(n)
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| self.must(key, "must be at least 1 (and at most 4294967295)"))
    }

    /// A duration: `"5s"`, `"250ms"`, `"0.000010s"`, or a number of seconds.
    fn duration(&mut self, key: &str) -> Result<Option<Duration>, SpecError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                parse_duration(s).map(Some).map_err(|e| SpecError::invalid(self.path(key), e))
            }
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0 && *x < 1e10)
                .map(|x| Some(Duration::from_secs_f64(x)))
                .ok_or_else(|| {
                    self.must(key, format!("must be a duration such as \"5s\", got {n}"))
                }),
            Some(v) => Err(self.must(key, format!("must be a duration such as \"5s\", got {v}"))),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Vec<String>, SpecError> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .ok_or_else(|| self.must(key, "must be a list of strings"))
                })
                .collect(),
            Some(_) => Err(self.must(key, "must be a list of strings")),
        }
    }

    /// Nighthawk's `[{"header": {"key", "value"}}]`, or `["name: value"]` as users type them.
    fn headers(&mut self, key: &str) -> Result<Vec<(String, String)>, SpecError> {
        let Some(v) = self.present(key) else { return Ok(Vec::new()) };
        let list = v.as_array().ok_or_else(|| self.must(key, "must be a list of headers"))?;
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
                        None => return Err(self.must(key, format!("must each be 'name: value' or {{\"header\":{{\"key\",\"value\"}}}}, got {other}"))),
                    }
                }
            };
            let parsed = parse_header(&raw).ok_or_else(|| {
                self.must(key, format!("must each be 'name: value' with a token name and no line breaks, got {raw:?}"))
            })?;
            out.push(parsed);
        }
        Ok(out)
    }

    /// Nighthawk's map `{"counter": "threshold"}`, or `["counter:threshold"]` as typed.
    fn predicates(&mut self, key: &str, kind: PredicateKind) -> Result<Vec<Predicate>, SpecError> {
        let raw: Vec<String> = match self.present(key) {
            None => return Ok(Vec::new()),
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
                return Err(
                    self.must(key, format!("must be a map of counter to threshold, got {v}"))
                )
            }
        };
        raw.iter()
            .map(|p| Predicate::parse(p, kind).map_err(|e| SpecError::invalid(self.path(key), e)))
            .collect()
    }

    /// Fails on the first field nobody took.
    fn finish(self) -> Result<(), SpecError> {
        match self.obj.keys().find(|k| !self.taken.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => {
                Err(SpecError::must(self.path(k), "is not an option Shrike knows (misspelt?)"))
            }
        }
    }
}
