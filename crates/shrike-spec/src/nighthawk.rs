//! Nighthawk's structured options, as its users write them (JSON, or the compact form with
//! unquoted keys its examples use; snake_case or proto3 JSON's camelCase): the Envoy
//! `UpstreamTlsContext` of `transport_socket` and `tls_context`, `http3_protocol_options`,
//! `trace` and `request_source`.
//!
//! Only the parts that map onto Shrike's own options are accepted. Any other field is refused
//! by its full path (`transport_socket.typed_config.common_tls_context.tls_certificates is not
//! supported by Shrike`): a TLS or QUIC setting silently ignored would measure a different
//! connection than the one asked for.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::SpecError;
use crate::types::{Http3Options, TlsVersion, TraceSpec};

/// What an `UpstreamTlsContext` sets; `None` leaves Shrike's option as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TlsPatch {
    pub sni: Option<String>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// rustls names.
    pub cipher_suites: Option<Vec<String>>,
    pub ca_file: Option<PathBuf>,
    pub no_session_resumption: Option<bool>,
}

/// The proto3 JSON type of the one transport socket Shrike has.
const UPSTREAM_TLS_TYPE: &str = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";

/// Nighthawk's options accept JSON or the compact, unquoted form of its `--help` examples.
pub(crate) fn relaxed(v: Value, field: &str) -> Result<Value, SpecError> {
    match v {
        Value::String(s) => shrike_stats::relaxed::parse(&s)
            .map_err(|e| SpecError::invalid(field, format!("not JSON ({e})"))),
        other => Ok(other),
    }
}

/// `FIELD.KEY` for messages.
fn join(field: &str, key: &str) -> String {
    format!("{field}.{key}")
}

/// proto3 JSON accepts both `lowerCamelCase` and the proto field name.
fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `v` as an object whose keys (in snake_case) are all in `known`; anything else is refused
/// by name.
fn message(v: &Value, field: &str, known: &[&str]) -> Result<Map<String, Value>, SpecError> {
    let obj = v.as_object().ok_or_else(|| SpecError::must(field, "must be an object"))?;
    let mut out = Map::new();
    for (k, v) in obj {
        let k = snake(k);
        if !known.contains(&k.as_str()) {
            return Err(SpecError::must(
                join(field, &k),
                format!("is not supported by Shrike (it maps {})", known.join(", ")),
            ));
        }
        if !v.is_null() {
            out.insert(k, v.clone());
        }
    }
    Ok(out)
}

fn string(v: &Value, field: &str) -> Result<String, SpecError> {
    v.as_str().map(str::to_string).ok_or_else(|| SpecError::must(field, "must be a string"))
}

/// A proto3 uint32 (a number, or a string holding one) within `lo..=hi`.
fn uint32(v: &Value, field: &str, lo: u32, hi: u32) -> Result<u32, SpecError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.and_then(|n| u32::try_from(n).ok()).filter(|n| (lo..=hi).contains(n)).ok_or_else(|| {
        SpecError::must(field, format!("must be a whole number in {lo}..={hi}, got {v}"))
    })
}

/// `transport_socket`: `{name: "envoy.transport_sockets.tls", typed_config: {"@type":
/// "type.googleapis.com/…UpstreamTlsContext", …}}`.
pub(crate) fn transport_socket(v: Value, field: &str) -> Result<TlsPatch, SpecError> {
    let v = relaxed(v, field)?;
    let m = message(&v, field, &["name", "typed_config"])?;
    let name = m.get("name").map(|n| string(n, &join(field, "name"))).transpose()?;
    if let Some(n) = name.as_deref().filter(|n| *n != "envoy.transport_sockets.tls" && *n != "tls")
    {
        return Err(SpecError::must(
            join(field, "name"),
            format!("must be envoy.transport_sockets.tls (the only transport socket Shrike has), got {n:?}"),
        ));
    }
    let typed_field = join(field, "typed_config");
    let obj = typed_config(&m, &typed_field, UPSTREAM_TLS_TYPE, "an UpstreamTlsContext")?;
    upstream_tls_context(&Value::Object(obj), &typed_field)
}

/// A `TypedExtensionConfig`'s `typed_config` (an `Any`), which must be of type `ty`: its
/// fields, `@type` taken out.
fn typed_config(
    m: &Map<String, Value>,
    field: &str,
    ty: &str,
    what: &str,
) -> Result<Map<String, Value>, SpecError> {
    let Some(typed) = m.get("typed_config") else {
        return Err(SpecError::must(field, format!("is missing ({what})")));
    };
    let mut obj =
        typed.as_object().cloned().ok_or_else(|| SpecError::must(field, "must be an object"))?;
    match obj.remove("@type") {
        Some(Value::String(t)) if t.rsplit('/').next() == Some(ty) => Ok(obj),
        Some(t) => Err(SpecError::must(
            join(field, "@type"),
            format!("must be type.googleapis.com/{ty}, got {t}"),
        )),
        None => Err(SpecError::must(
            join(field, "@type"),
            format!("is missing (type.googleapis.com/{ty})"),
        )),
    }
}

/// The one rate limiter plugin Nighthawk ships, and its config's type.
pub(crate) const LINEAR_RAMPING_PLUGIN: &str = "nighthawk.linear-ramping-rate-limiter-plugin";
pub(crate) const LINEAR_RAMPING_TYPE: &str =
    "nighthawk.rate_limiter.LinearRampingRateLimiterConfig";

/// `rate_limiter_plugin_config`: `{name: "nighthawk.linear-ramping-rate-limiter-plugin",
/// typed_config: {"@type": "…LinearRampingRateLimiterConfig", ramp_time: "5.5s"}}`; the ramp's
/// length. `ramp_time` may also be `{seconds, nanos}`, as Nighthawk's own tests write it.
pub(crate) fn rate_limiter_plugin(v: Value, field: &str) -> Result<Duration, SpecError> {
    let v = relaxed(v, field)?;
    let m = message(&v, field, &["name", "typed_config"])?;
    let name_field = join(field, "name");
    match m.get("name").map(|n| string(n, &name_field)).transpose()? {
        Some(n) if n == LINEAR_RAMPING_PLUGIN => {}
        Some(n) => {
            return Err(SpecError::must(
                name_field,
                format!(
                    "{n:?} is not supported by Shrike (it has Nighthawk's {LINEAR_RAMPING_PLUGIN})"
                ),
            ))
        }
        None => {
            return Err(SpecError::must(
                name_field,
                format!("is missing ({LINEAR_RAMPING_PLUGIN})"),
            ))
        }
    }
    let typed_field = join(field, "typed_config");
    let what = "a LinearRampingRateLimiterConfig";
    let obj = typed_config(&m, &typed_field, LINEAR_RAMPING_TYPE, what)?;
    let c = message(&Value::Object(obj), &typed_field, &["ramp_time"])?;
    let ramp_field = join(&typed_field, "ramp_time");
    let ramp = match c.get("ramp_time") {
        None => return Err(SpecError::must(ramp_field, "is missing (the ramp's length, > 0)")),
        Some(v) => proto_duration(v, &ramp_field)?,
    };
    if ramp.is_zero() {
        return Err(SpecError::must(ramp_field, "must be greater than 0"));
    }
    Ok(ramp)
}

/// The plugin config of a linear ramp of `ramp_time`, as Nighthawk's proto3 JSON writes it.
pub(crate) fn linear_ramping(ramp_time: Duration) -> Value {
    serde_json::json!({
        "name": LINEAR_RAMPING_PLUGIN,
        "typed_config": {
            "@type": format!("type.googleapis.com/{LINEAR_RAMPING_TYPE}"),
            "ramp_time": shrike_stats::duration::format_proto(ramp_time),
        },
    })
}

/// A `google.protobuf.Duration`: proto3 JSON's `"5.5s"`, or the message's own `{seconds,
/// nanos}`.
fn proto_duration(v: &Value, field: &str) -> Result<Duration, SpecError> {
    let bad = || SpecError::must(field, format!("must be a duration such as \"5.5s\", got {v}"));
    match v {
        Value::String(s) => {
            shrike_stats::duration::parse_duration(s).map_err(|e| SpecError::invalid(field, e))
        }
        Value::Object(_) => {
            let m = message(v, field, &["seconds", "nanos"])?;
            let int = |k: &str| match m.get(k) {
                None => Some(0),
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.trim().parse().ok(),
                Some(_) => None,
            };
            match (int("seconds"), int("nanos")) {
                (Some(s), Some(n)) if n < 1_000_000_000 => Ok(Duration::new(s, n as u32)),
                _ => Err(bad()),
            }
        }
        _ => Err(bad()),
    }
}

/// `tls_context` (deprecated in Nighthawk): an `UpstreamTlsContext` itself.
pub(crate) fn tls_context(v: Value, field: &str) -> Result<TlsPatch, SpecError> {
    let v = relaxed(v, field)?;
    upstream_tls_context(&v, field)
}

fn upstream_tls_context(v: &Value, field: &str) -> Result<TlsPatch, SpecError> {
    let m = message(
        v,
        field,
        &["common_tls_context", "sni", "allow_renegotiation", "max_session_keys"],
    )?;
    let mut p = TlsPatch::default();
    if let Some(s) = m.get("sni") {
        let s = string(s, &join(field, "sni"))?;
        p.sni = (!s.is_empty()).then_some(s);
    }
    if m.get("allow_renegotiation").and_then(Value::as_bool) == Some(true) {
        return Err(SpecError::must(
            join(field, "allow_renegotiation"),
            "is not supported: rustls never renegotiates (TLS 1.3 removed renegotiation)",
        ));
    }
    if let Some(k) = m.get("max_session_keys") {
        // Envoy: 0 disables session resumption; any other number keeps it on.
        p.no_session_resumption =
            Some(uint32(k, &join(field, "max_session_keys"), 0, u32::MAX)? == 0);
    }
    if let Some(c) = m.get("common_tls_context") {
        common_tls_context(c, &join(field, "common_tls_context"), &mut p)?;
    }
    Ok(p)
}

fn common_tls_context(v: &Value, field: &str, p: &mut TlsPatch) -> Result<(), SpecError> {
    let m = message(v, field, &["tls_params", "validation_context", "alpn_protocols"])?;
    if m.get("alpn_protocols").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
        return Err(SpecError::must(
            join(field, "alpn_protocols"),
            "is not supported: Shrike offers the ALPN of its protocol (http/1.1, h2 or h3)",
        ));
    }
    if let Some(t) = m.get("tls_params") {
        let field = join(field, "tls_params");
        let t = message(
            t,
            &field,
            &["tls_minimum_protocol_version", "tls_maximum_protocol_version", "cipher_suites"],
        )?;
        p.min_version = tls_version(
            t.get("tls_minimum_protocol_version"),
            &join(&field, "tls_minimum_protocol_version"),
        )?;
        p.max_version = tls_version(
            t.get("tls_maximum_protocol_version"),
            &join(&field, "tls_maximum_protocol_version"),
        )?;
        if let Some(c) = t.get("cipher_suites") {
            let list = c
                .as_array()
                .ok_or_else(|| SpecError::must(join(&field, "cipher_suites"), "must be a list"))?;
            let mut names = Vec::new();
            for (i, s) in list.iter().enumerate() {
                let f = format!("{field}.cipher_suites[{i}]");
                cipher_list(&string(s, &f)?, &f, &mut names)?;
            }
            if !names.is_empty() {
                // Envoy's list governs TLS 1.2 and below; TLS 1.3's suites are always on.
                names.extend(TLS13_SUITES.iter().map(|s| s.to_string()));
                p.cipher_suites = Some(names);
            }
        }
    }
    if let Some(vc) = m.get("validation_context") {
        let field = join(field, "validation_context");
        let vc = message(vc, &field, &["trusted_ca"])?;
        if let Some(ca) = vc.get("trusted_ca") {
            let field = join(&field, "trusted_ca");
            let ca = message(
                ca,
                &field,
                &["filename", "inline_string", "inline_bytes", "environment_variable"],
            )?;
            match ca.get("filename") {
                Some(f) => p.ca_file = Some(PathBuf::from(string(f, &join(&field, "filename"))?)),
                None => {
                    return Err(SpecError::must(
                        field,
                        "must name a PEM file (filename); inline CAs are not supported",
                    ))
                }
            }
        }
    }
    Ok(())
}

fn tls_version(v: Option<&Value>, field: &str) -> Result<Option<TlsVersion>, SpecError> {
    let Some(v) = v else { return Ok(None) };
    let name = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_u64() {
            Some(0) => "TLS_AUTO".into(),
            Some(3) => "TLSv1_2".into(),
            Some(4) => "TLSv1_3".into(),
            _ => n.to_string(),
        },
        other => other.to_string(),
    };
    match name.as_str() {
        "TLS_AUTO" => Ok(None),
        "TLSv1_2" => Ok(Some(TlsVersion::Tls12)),
        "TLSv1_3" => Ok(Some(TlsVersion::Tls13)),
        "TLSv1_0" | "TLSv1_1" => Err(SpecError::must(
            field,
            format!("{name} is not supported: rustls speaks TLS 1.2 and 1.3 only"),
        )),
        _ => {
            Err(SpecError::must(field, format!("must be TLS_AUTO, TLSv1_2 or TLSv1_3, got {name}")))
        }
    }
}

/// TLS 1.3's suites, which Envoy's `cipher_suites` does not govern.
pub const TLS13_SUITES: &[&str] =
    &["TLS13_AES_256_GCM_SHA384", "TLS13_AES_128_GCM_SHA256", "TLS13_CHACHA20_POLY1305_SHA256"];

/// OpenSSL/BoringSSL cipher names (Envoy's) for the TLS 1.2 suites rustls has.
const OPENSSL_NAMES: &[(&str, &str)] = &[
    ("ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
    ("ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    ("ECDHE-RSA-CHACHA20-POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
];

/// One Envoy cipher string (`-ALL:ECDHE-RSA-AES128-GCM-SHA256`, `[A|B]` groups) applied to
/// `names`, in order: `-X`/`!X` removes, `-ALL` clears, anything else must be a suite rustls has.
fn cipher_list(s: &str, field: &str, names: &mut Vec<String>) -> Result<(), SpecError> {
    for token in s.split(':').flat_map(|t| t.trim_matches(|c| c == '[' || c == ']').split('|')) {
        let token = token.trim();
        if token.is_empty() {
            continue;
        }
        if let Some(removed) = token.strip_prefix('-').or_else(|| token.strip_prefix('!')) {
            if removed.eq_ignore_ascii_case("ALL") {
                names.clear();
            } else if let Some(n) = rustls_name(removed) {
                names.retain(|x| x != n);
            }
            continue;
        }
        let token = token.strip_prefix('+').unwrap_or(token);
        let name = rustls_name(token).ok_or_else(|| {
            SpecError::must(
                field,
                format!(
                    "names {token:?}, which Shrike's TLS (rustls) does not have; it has {}",
                    OPENSSL_NAMES.iter().map(|(o, _)| *o).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    Ok(())
}

/// Envoy's (OpenSSL's) name for a TLS 1.2 suite by its rustls name: the way back to Envoy's
/// `cipher_suites`.
pub fn openssl_name(rustls: &str) -> Option<&'static str> {
    OPENSSL_NAMES.iter().find(|(_, r)| *r == rustls).map(|(o, _)| *o)
}

fn rustls_name(s: &str) -> Option<&'static str> {
    OPENSSL_NAMES
        .iter()
        .find(|(o, r)| s.eq_ignore_ascii_case(o) || s.eq_ignore_ascii_case(r))
        .map(|(_, r)| *r)
}

/// `http3_protocol_options`: `{quic_protocol_options: {max_concurrent_streams,
/// initial_stream_window_size, initial_connection_window_size}}` (Envoy's bounds).
pub(crate) fn http3_protocol_options(
    v: Value,
    field: &str,
) -> Result<(Option<NonZeroU32>, Http3Options), SpecError> {
    let v = relaxed(v, field)?;
    let m = message(&v, field, &["quic_protocol_options"])?;
    let mut h3 = Http3Options::default();
    let Some(q) = m.get("quic_protocol_options") else { return Ok((None, h3)) };
    let field = join(field, "quic_protocol_options");
    let q = message(
        q,
        &field,
        &["max_concurrent_streams", "initial_stream_window_size", "initial_connection_window_size"],
    )?;
    let streams = q
        .get("max_concurrent_streams")
        .map(|v| uint32(v, &join(&field, "max_concurrent_streams"), 1, 2_147_483_647))
        .transpose()?
        .and_then(NonZeroU32::new);
    h3.stream_window = q
        .get("initial_stream_window_size")
        .map(|v| uint32(v, &join(&field, "initial_stream_window_size"), 1, 16_777_216))
        .transpose()?;
    h3.connection_window = q
        .get("initial_connection_window_size")
        .map(|v| uint32(v, &join(&field, "initial_connection_window_size"), 1, 25_165_824))
        .transpose()?;
    Ok((streams, h3))
}

/// `trace`: `zipkin://HOST:PORT[/PATH]` (the path defaults to Zipkin's `/api/v2/spans`).
pub(crate) fn trace(uri: &str, sample_rate: f64, field: &str) -> Result<TraceSpec, SpecError> {
    let rest = uri.strip_prefix("zipkin://").ok_or_else(|| {
        SpecError::must(
            field,
            format!(
                "must be a zipkin:// URI such as zipkin://localhost:9411/api/v2/spans, got {uri:?}"
            ),
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/api/v2/spans"),
    };
    let path = if path == "/" { "/api/v2/spans" } else { path };
    host_port(authority, field, uri)?;
    Ok(TraceSpec {
        uri: uri.to_string(),
        collector: authority.to_string(),
        path: path.to_string(),
        sample_rate,
    })
}

/// `request_source`: `grpc://HOST:PORT[/]` (a string, or Nighthawk's `{uri: …}` message).
pub(crate) fn request_source(v: &Value, field: &str) -> Result<String, SpecError> {
    let uri = match v {
        Value::String(s) => s.clone(),
        Value::Object(_) => {
            let m = message(v, field, &["uri"])?;
            m.get("uri").map(|u| string(u, &join(field, "uri"))).transpose()?.unwrap_or_default()
        }
        _ => return Err(SpecError::must(field, "must be a grpc:// URI")),
    };
    if !uri.starts_with("grpc://") {
        let why = format!("must be a grpc://HOST:PORT URI, got {uri:?}");
        return Err(SpecError::must(field, why));
    }
    grpc_authority(&uri)
        .map(str::to_string)
        .ok_or_else(|| SpecError::must(field, format!("needs HOST:PORT, got {uri:?}")))
}

/// The `HOST:PORT` of a `grpc://HOST:PORT[/]` URI (Nighthawk's request-source and service
/// addresses), if it is one.
pub fn grpc_authority(uri: &str) -> Option<&str> {
    let authority = uri.strip_prefix("grpc://")?.trim_end_matches('/');
    is_host_port(authority).then_some(authority)
}

fn is_host_port(authority: &str) -> bool {
    authority
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p != 0))
}

fn host_port(authority: &str, field: &str, uri: &str) -> Result<(), SpecError> {
    if is_host_port(authority) {
        Ok(())
    } else {
        Err(SpecError::must(field, format!("needs HOST:PORT, got {uri:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nighthawks_compact_transport_socket_maps_onto_tls_options() {
        let p = transport_socket(
            json!("{name:\"envoy.transport_sockets.tls\",typed_config:{\"@type\":\"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\",sni:\"example.test\",common_tls_context:{tls_params:{tls_maximum_protocol_version:\"TLSv1_2\",cipher_suites:[\"-ALL:ECDHE-RSA-AES128-GCM-SHA256\"]}}}}"),
            "transport_socket",
        )
        .unwrap();
        assert_eq!(p.sni.as_deref(), Some("example.test"));
        assert_eq!(p.max_version, Some(TlsVersion::Tls12));
        let suites = p.cipher_suites.unwrap();
        assert_eq!(suites[0], "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        assert_eq!(suites.len(), 1 + TLS13_SUITES.len());
    }

    #[test]
    fn unsupported_parts_are_named() {
        let e = tls_context(json!({"commonTlsContext": {"tlsCertificates": []}}), "tls_context")
            .unwrap_err();
        assert!(e.to_string().contains("tls_context.common_tls_context.tls_certificates"), "{e}");
        let e = tls_context(
            json!({"common_tls_context": {"tls_params": {"cipher_suites": ["-ALL:ECDHE-RSA-AES128-SHA"]}}}),
            "tls_context",
        )
        .unwrap_err();
        assert!(e.to_string().contains("ECDHE-RSA-AES128-SHA"), "{e}");
        let e = transport_socket(json!({"name": "envoy.transport_sockets.raw_buffer"}), "ts")
            .unwrap_err();
        assert!(e.to_string().contains("ts.name"), "{e}");
    }

    #[test]
    fn http3_options_keep_envoys_bounds() {
        let (s, h3) = http3_protocol_options(
            json!("{quic_protocol_options:{max_concurrent_streams:1,initial_stream_window_size:65536}}"),
            "h3",
        )
        .unwrap();
        assert_eq!(s.map(NonZeroU32::get), Some(1));
        assert_eq!(h3.stream_window, Some(65536));
        let e = http3_protocol_options(
            json!({"quic_protocol_options": {"initial_stream_window_size": 0}}),
            "h3",
        )
        .unwrap_err();
        assert!(e.to_string().contains("initial_stream_window_size"), "{e}");
    }

    #[test]
    fn trace_and_request_source_uris() {
        let t = trace("zipkin://127.0.0.1:9411", 1.0, "trace").unwrap();
        assert_eq!((t.collector.as_str(), t.path.as_str()), ("127.0.0.1:9411", "/api/v2/spans"));
        assert!(trace("http://x:1/", 1.0, "trace").is_err());
        assert_eq!(
            request_source(&json!({"uri": "grpc://[::1]:8443/"}), "rs").unwrap(),
            "[::1]:8443"
        );
        assert!(request_source(&json!("grpc://nohost"), "rs").is_err());
    }
}
