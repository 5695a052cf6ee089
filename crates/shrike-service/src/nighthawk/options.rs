//! Nighthawk's `CommandLineOptions` and Shrike's run spec, both ways.
//!
//! Shrike's spec reads Nighthawk's proto3 JSON as it is (its option names, enum wrapper
//! messages, durations as `"5s"`), so a request's options become a spec by way of JSON, and
//! every rule and error message is the spec's own. What a service refuses before that: fields
//! this copy of the API does not declare (named by number and path).
//!
//! The other way, a spec becomes the options Nighthawk has; options only Shrike has are
//! listed, so a client can refuse to send a run a Nighthawk service would run differently.

use prost_reflect::DynamicMessage;
use serde_json::{json, Map, Value};
use shrike_spec::{RunSpec, TlsVersion};

use super::wire;

pub(crate) const OPTIONS: &str = "nighthawk.client.CommandLineOptions";

/// Options Nighthawk's service ignores ("not relevant to gRPC service"), as Shrike's does.
const CLIENT_ONLY: &[&str] = &["output_format", "nighthawk_service"];

/// Request options (decoded from the wire) as spec JSON, or why not (naming the field).
pub fn to_spec_json(options: &DynamicMessage) -> Result<Value, String> {
    if let Some(path) = wire::unknown_field(options) {
        return Err(format!(
            "options: {path} is not supported by Shrike (its copy of Nighthawk's API does not \
             have it)"
        ));
    }
    let mut json = wire::to_json(options).map_err(|e| format!("options: {e}"))?;
    if let Some(o) = json.as_object_mut() {
        for k in CLIENT_ONLY {
            o.remove(*k);
        }
    }
    Ok(json)
}

/// The spec as Nighthawk's `CommandLineOptions` (proto3 JSON), and the options set in it that
/// Nighthawk has no field for (by their spec names).
pub fn from_spec(spec: &RunSpec) -> (Value, Vec<String>) {
    let canonical = spec.to_json();
    let get = |k: &str| canonical.get(k).cloned().unwrap_or(Value::Null);
    let mut o = Map::new();
    let mut shrike_only = Vec::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            o.insert(k.to_string(), v);
        }
    };
    let wrapped = |v: Value| v.as_str().map(|s| json!({ "value": s.to_ascii_uppercase() }));

    match (get("uri"), get("multi_target_endpoints")) {
        (Value::String(u), _) => put("uri", json!(u)),
        (_, Value::Array(eps)) => {
            let endpoints: Vec<Value> = eps
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|ep| ep.rsplit_once(':'))
                .map(|(h, p)| {
                    let host = h.trim_start_matches('[').trim_end_matches(']');
                    json!({ "address": host, "port": p.parse::<u32>().unwrap_or(0) })
                })
                .collect();
            put(
                "multi_target",
                json!({
                    "use_https": get("multi_target_use_https"),
                    "endpoints": endpoints,
                    "path": get("multi_target_path"),
                }),
            );
        }
        _ => {}
    }
    match spec.rate() {
        shrike_spec::RateSpec::Rps { rate, ramp: None } if rate.per_second().fract() == 0.0 => {
            put("requests_per_second", json!(rate.per_second() as u64));
        }
        shrike_spec::RateSpec::LinearRamp { rate, .. } if rate.per_second().fract() == 0.0 => {
            put("requests_per_second", json!(rate.per_second() as u64));
            put("rate_limiter_plugin_config", get("rate_limiter_plugin_config"));
        }
        _ => shrike_only.push("requests_per_second (a fraction, max, a ramp or stages)".into()),
    }
    for k in [
        "connections",
        "timeout",
        "concurrency",
        "max_active_requests",
        "max_concurrent_streams",
        "max_pending_requests",
        "max_requests_per_connection",
        "burst_size",
        "jitter_uniform",
        "open_loop",
        "prefetch_connections",
        "simple_warmup",
        "no_default_failure_predicates",
        "failure_predicates",
        "termination_predicates",
        "labels",
        "http3_protocol_options",
    ] {
        put(k, get(k));
    }
    match spec.duration() {
        Some(_) => put("duration", get("duration")),
        None => put("no_duration", json!(true)),
    }
    let sinks: Vec<Value> = spec.telemetry().stats_sinks.iter().map(|s| stats_sink(s)).collect();
    if !sinks.is_empty() {
        put("stats_sinks", json!(sinks));
        put("stats_flush_interval_duration", get("stats_flush_interval"));
    }
    for k in [
        "protocol",
        "address_family",
        "sequencer_idle_strategy",
        "experimental_h1_connection_reuse_strategy",
        "verbosity",
    ] {
        put(k, wrapped(get(k)).unwrap_or(Value::Null));
    }
    if let Some(t) = spec.trace() {
        put("trace", json!(t.uri));
        if t.sample_rate < 1.0 {
            shrike_only.push("trace_sample_rate".into());
        }
    }
    if let Some(h) = spec.requests().latency_header.as_ref() {
        put("latency_response_header_name", json!(h));
    }
    if let Some(t) = spec.start_at() {
        put("scheduled_start", json!(shrike_stats::timestamp::format_rfc3339(t)));
    }
    if let Some(ip) = spec.bind_address() {
        put(
            "upstream_bind_config",
            json!({ "source_address": { "address": ip.to_string(), "port_value": 0 } }),
        );
    }
    let r = spec.requests();
    match (&r.remote_source, &r.plugin_config) {
        (Some(a), _) => put("request_source", json!({ "uri": format!("grpc://{a}") })),
        (None, Some(c)) => match shrike_stats::relaxed::parse(c) {
            Ok(v) => put("request_source_plugin_config", v),
            Err(_) => shrike_only.push("request_source_plugin_config (not JSON)".into()),
        },
        (None, None) => {
            let mut ro = Map::new();
            ro.insert("request_method".into(), json!(r.method));
            let headers: Vec<Value> = r
                .headers
                .iter()
                .map(|(k, v)| json!({ "header": { "key": k, "value": v } }))
                .collect();
            ro.insert("request_headers".into(), json!(headers));
            if r.body_size > 0 {
                ro.insert("request_body_size".into(), json!(r.body_size));
            }
            if let Some(b) = &r.json_body {
                ro.insert("json_body".into(), json!(b));
            }
            put("request_options", Value::Object(ro));
        }
    }
    if r.request_file.is_some() {
        shrike_only.push("request_file".into());
    }
    if r.body_file.is_some() {
        shrike_only.push("request_options.request_body_file".into());
    }
    if let Some(t) = spec.tunnel() {
        let mut tunnel = get("tunnel_options");
        if let Some(o) = tunnel.as_object_mut() {
            if o.remove("tunnel_ca").is_some() {
                shrike_only.push("tunnel_options.tunnel_ca".into());
            }
            o.insert(
                "tunnel_protocol".into(),
                json!({ "value": t.protocol.name().to_ascii_uppercase() }),
            );
        }
        put("tunnel_options", tunnel);
    }
    match tls_context(spec) {
        Ok(Some(ctx)) => put(
            "transport_socket",
            json!({
                "name": "envoy.transport_sockets.tls",
                "typed_config": ctx,
            }),
        ),
        Ok(None) => {}
        Err(what) => shrike_only.push(what),
    }
    let t = spec.telemetry();
    for (set, name) in [
        (spec.total_requests().is_some(), "total_requests"),
        (spec.shard().is_some(), "shard"),
        (spec.built_in_server(), "built_in_server"),
        (t.stats_interval.is_some(), "stats_interval"),
        (t.metrics_listen.is_some(), "metrics_listen"),
        (!t.statsd.is_empty(), "statsd"),
    ] {
        if set {
            shrike_only.push(name.into());
        }
    }
    (Value::Object(o), shrike_only)
}

/// A stats sink as Envoy's `StatsSink`: Shrike's `statsd://HOST:PORT` shorthand spelled out,
/// anything else is already Envoy's JSON.
fn stats_sink(s: &str) -> Value {
    if let Some((host, port)) = s.strip_prefix("statsd://").and_then(|a| a.rsplit_once(':')) {
        return json!({
            "name": "envoy.stat_sinks.statsd",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.config.metrics.v3.StatsdSink",
                "address": { "socket_address": {
                    "address": host.trim_start_matches('[').trim_end_matches(']'),
                    "port_value": port.parse::<u32>().unwrap_or(0),
                }},
            },
        });
    }
    shrike_stats::relaxed::parse(s).unwrap_or_else(|_| json!(s))
}

/// Shrike's TLS options as an `UpstreamTlsContext` (with its `@type`), `None` when they are
/// the defaults, or the option Nighthawk cannot express.
fn tls_context(spec: &RunSpec) -> Result<Option<Value>, String> {
    let t = spec.tls();
    if t.insecure {
        return Err("tls.insecure (Nighthawk never verifies; Shrike does unless told)".into());
    }
    let mut common = Map::new();
    let mut params = Map::new();
    let version = |v: TlsVersion| match v {
        TlsVersion::Tls12 => "TLSv1_2",
        TlsVersion::Tls13 => "TLSv1_3",
    };
    if let Some(v) = t.min_version {
        params.insert("tls_minimum_protocol_version".into(), json!(version(v)));
    }
    if let Some(v) = t.max_version {
        params.insert("tls_maximum_protocol_version".into(), json!(version(v)));
    }
    let tls12: Vec<&str> = t
        .cipher_suites
        .iter()
        .filter(|s| !s.starts_with("TLS13_"))
        .map(|s| shrike_spec::openssl_name(s).ok_or_else(|| format!("tls.cipher_suites ({s})")))
        .collect::<Result<_, _>>()?;
    if !tls12.is_empty() {
        // Envoy's list governs TLS 1.2 only; TLS 1.3's suites stay on whatever it says.
        let tls13 = shrike_spec::TLS13_SUITES;
        let all_tls13 = tls13.iter().all(|s| t.cipher_suites.iter().any(|c| c == s));
        if !all_tls13 {
            return Err("tls.cipher_suites (a list that leaves out TLS 1.3 suites)".into());
        }
        params.insert("cipher_suites".into(), json!([tls12.join(":")]));
    }
    if !params.is_empty() {
        common.insert("tls_params".into(), Value::Object(params));
    }
    if let Some(ca) = &t.ca_file {
        common.insert(
            "validation_context".into(),
            json!({ "trusted_ca": { "filename": ca.display().to_string() } }),
        );
    }
    let mut ctx = Map::new();
    ctx.insert(
        "@type".into(),
        json!("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
    );
    if !common.is_empty() {
        ctx.insert("common_tls_context".into(), Value::Object(common));
    }
    if let Some(s) = &t.sni {
        ctx.insert("sni".into(), json!(s));
    }
    if t.no_session_resumption {
        ctx.insert("max_session_keys".into(), json!(0));
    }
    Ok((ctx.len() > 1).then_some(Value::Object(ctx)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(spec: &RunSpec) -> RunSpec {
        let (json, only) = from_spec(spec);
        assert!(only.is_empty(), "{only:?}");
        let msg = wire::from_json(OPTIONS, &json).unwrap();
        RunSpec::from_json(&to_spec_json(&msg).unwrap()).unwrap()
    }

    #[test]
    fn a_spec_survives_nighthawks_options() {
        let spec = RunSpec::from_json(&json!({
            "uri": "https://127.0.0.1:8443/x",
            "requests_per_second": 250,
            "connections": 7,
            "duration": "3s",
            "protocol": "http2",
            "concurrency": "2",
            "max_active_requests": 9,
            "address_family": "v4",
            "sequencer_idle_strategy": "sleep",
            "failure_predicates": {"benchmark.http_5xx": "3"},
            "termination_predicates": {"benchmark.http_2xx": "100"},
            "labels": ["a"],
            "jitter_uniform": "0.001s",
            "request_options": {"request_method": "POST", "request_body_size": 10,
                "request_headers": ["x-a: 1"]},
            "tls": {"sni": "example.test", "max_version": "1.2",
                "cipher_suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS13_AES_256_GCM_SHA384,TLS13_AES_128_GCM_SHA256,TLS13_CHACHA20_POLY1305_SHA256"},
            "trace": "zipkin://127.0.0.1:9411/api/v2/spans",
        }))
        .unwrap();
        let back = round_trip(&spec);
        assert_eq!(back.to_json(), spec.to_json());
    }

    /// Tunnel options cross the wire as Nighthawk's `TunnelOptions`.
    #[test]
    fn tunnel_options_survive_nighthawks_options() {
        let spec = RunSpec::from_json(&json!({
            "uri": "https://127.0.0.1:8443/", "tunnel_options": {"tunnel_uri": "127.0.0.1:3128",
                "tunnel_protocol": "http1", "tunnel_tls_context": {"sni": "proxy.test"}},
        }))
        .unwrap();
        let back = round_trip(&spec);
        assert_eq!(back.tunnel(), spec.tunnel());
        assert_eq!(back.to_json(), spec.to_json());
        assert_eq!(back.tunnel().unwrap().tls.as_ref().unwrap().sni.as_deref(), Some("proxy.test"));
    }

    /// The linear-ramping plugin crosses the wire as an `Any` Nighthawk's API resolves.
    #[test]
    fn the_rate_limiter_plugin_survives_nighthawks_options() {
        let spec = RunSpec::from_json(&json!({
            "uri": "http://127.0.0.1:8080/", "requests_per_second": 100, "duration": "12s",
            "rate_limiter_plugin_config": "{name:\"nighthawk.linear-ramping-rate-limiter-plugin\",typed_config:{\"@type\":\"type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig\",ramp_time:{seconds:5,nanos:500000000}}}",
        }))
        .unwrap();
        let (json, _) = from_spec(&spec);
        assert_eq!(json["rate_limiter_plugin_config"]["typed_config"]["ramp_time"], "5.500s");
        let back = round_trip(&spec);
        assert_eq!(back.rate(), spec.rate());
        assert_eq!(back.to_json(), spec.to_json());
    }

    #[test]
    fn shrike_only_options_are_listed() {
        let spec = RunSpec::from_json(&json!({
            "uri": "http://127.0.0.1:1/", "requests_per_second": "max", "total_requests": 5,
            "tls": {"insecure": true},
        }));
        // TLS options need https; check the rest on their own.
        assert!(spec.is_err());
        let spec = RunSpec::from_json(
            &json!({"uri": "http://127.0.0.1:1/", "requests_per_second": "max", "total_requests": 5}),
        )
        .unwrap();
        let (_, only) = from_spec(&spec);
        assert!(only.iter().any(|o| o.starts_with("requests_per_second")), "{only:?}");
        assert!(only.iter().any(|o| o == "total_requests"), "{only:?}");
    }

    #[test]
    fn undeclared_fields_are_refused_by_path() {
        let msg = wire::from_json(OPTIONS, &json!({"uri": "http://127.0.0.1:1/"})).unwrap();
        let mut bytes = prost::Message::encode_to_vec(&msg);
        // transport_socket (27) holding an undeclared field 9 (varint 1).
        bytes.extend_from_slice(&[0xda, 0x01, 0x02, 0x48, 0x01]);
        let back = wire::decode(OPTIONS, &bytes).unwrap();
        let e = to_spec_json(&back).unwrap_err();
        assert!(e.contains("transport_socket: field number 9"), "{e}");
    }
}
