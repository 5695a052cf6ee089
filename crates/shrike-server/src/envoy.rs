//! A Nighthawk test-server configuration as its users keep it (`shrike serve --config-path
//! envoy.yaml`): an Envoy bootstrap (YAML or JSON) whose HTTP connection manager carries
//! Nighthawk's filters. Read from text here, so a fuzz target reaches it; the caller reads the
//! file and says which one failed.
//!
//! Taken from it:
//! - the first listener's `socket_address` (`address`, `port_value`): where to listen;
//! - the `test-server` filter's `ResponseOptions`, the `dynamic-delay` filter's delay and the
//!   `time-tracking` filter's header: the server-wide defaults, in the shape of the
//!   `x-nighthawk-test-server-config` header (which each request may still override, as with
//!   Nighthawk's filters).
//!
//! Everything else (the admin listener, clusters, routes, other filters, codec settings) has
//! no meaning for Shrike's server and is listed as ignored, so nobody believes it applied.

use serde_json::{Map, Value};

/// What a test-server configuration says.
#[derive(Debug, Default)]
pub struct EnvoyConfig {
    /// `ADDR:PORT` of the first listener.
    pub listen: Option<String>,
    /// Server-wide defaults, as the test-server config header's JSON.
    pub defaults: Map<String, Value>,
    /// Paths of the parts that were not applied.
    pub ignored: Vec<String>,
}

/// The test-server filter's options Shrike's server has (Nighthawk's `ResponseOptions`).
const RESPONSE_OPTIONS: &[&str] = &[
    "response_body_size",
    "response_headers",
    "v3_response_headers",
    "echo_request_headers",
    "static_delay",
    "concurrency_based_linear_delay",
    "emit_previous_request_delta_in_response_header",
];

/// The configuration in `text` (YAML, or JSON, which YAML reads too), or what is wrong with it.
pub fn parse_text(text: &str) -> Result<EnvoyConfig, String> {
    let root: Value = serde_norway::from_str(text).map_err(|e| format!("not YAML or JSON: {e}"))?;
    parse(&root)
}

fn parse(root: &Value) -> Result<EnvoyConfig, String> {
    let root = root.as_object().ok_or("expected an Envoy bootstrap (a mapping)")?;
    let mut c = EnvoyConfig::default();
    for (k, v) in root {
        if k != "static_resources" {
            c.ignored.push(k.clone());
            continue;
        }
        let sr = v.as_object().ok_or("static_resources must be a mapping")?;
        for (k, v) in sr {
            if k != "listeners" {
                c.ignored.push(format!("static_resources.{k}"));
                continue;
            }
            let listeners = v.as_array().ok_or("static_resources.listeners must be a list")?;
            for (i, l) in listeners.iter().enumerate() {
                let path = format!("static_resources.listeners[{i}]");
                if i == 0 {
                    listener(l, &path, &mut c)?;
                } else {
                    c.ignored.push(format!("{path} (Shrike serves the first listener)"));
                }
            }
        }
    }
    if c.listen.is_none() {
        return Err(
            "no listener with a socket_address (static_resources.listeners[0].address)".into()
        );
    }
    Ok(c)
}

fn listener(l: &Value, path: &str, c: &mut EnvoyConfig) -> Result<(), String> {
    let l = l.as_object().ok_or_else(|| format!("{path} must be a mapping"))?;
    for (k, v) in l {
        let p = format!("{path}.{k}");
        match k.as_str() {
            "address" => {
                let sa = v
                    .get("socket_address")
                    .ok_or_else(|| format!("{p}: only a socket_address can be served"))?;
                let addr = sa
                    .get("address")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{p}.socket_address.address is missing"))?;
                let port = match sa.get("port_value") {
                    Some(Value::Number(n)) => n.as_u64(),
                    Some(Value::String(s)) => s.parse().ok(),
                    _ => None,
                }
                .filter(|p| *p <= 65535)
                .ok_or_else(|| format!("{p}.socket_address.port_value must be a port number"))?;
                c.listen = Some(if addr.contains(':') {
                    format!("[{addr}]:{port}")
                } else {
                    format!("{addr}:{port}")
                });
            }
            "filter_chains" => {
                for (i, chain) in v.as_array().into_iter().flatten().enumerate() {
                    let filters = chain.get("filters").and_then(Value::as_array);
                    for (j, f) in filters.into_iter().flatten().enumerate() {
                        network_filter(f, &format!("{p}[{i}].filters[{j}]"), c)?;
                    }
                }
            }
            _ => c.ignored.push(p),
        }
    }
    Ok(())
}

/// The typed config of a filter: `typed_config` (v3), or `config` (v2 files), without `@type`.
fn typed(f: &Value) -> (String, Map<String, Value>) {
    let cfg = f.get("typed_config").or_else(|| f.get("config"));
    let mut m = cfg.and_then(Value::as_object).cloned().unwrap_or_default();
    let ty = match m.remove("@type") {
        Some(Value::String(t)) => t.rsplit('.').next().unwrap_or_default().to_string(),
        _ => String::new(),
    };
    (ty, m)
}

fn network_filter(f: &Value, path: &str, c: &mut EnvoyConfig) -> Result<(), String> {
    let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
    let (ty, cfg) = typed(f);
    let is_hcm = ty == "HttpConnectionManager"
        || name == "envoy.filters.network.http_connection_manager"
        || name == "envoy.http_connection_manager";
    if !is_hcm {
        c.ignored.push(format!("{path} ({name})"));
        return Ok(());
    }
    for (k, v) in &cfg {
        if k != "http_filters" {
            c.ignored.push(format!("{path}.{k}"));
            continue;
        }
        for (i, hf) in v.as_array().into_iter().flatten().enumerate() {
            http_filter(hf, &format!("{path}.http_filters[{i}]"), c)?;
        }
    }
    Ok(())
}

fn http_filter(f: &Value, path: &str, c: &mut EnvoyConfig) -> Result<(), String> {
    let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
    let (ty, cfg) = typed(f);
    let kind = match (name, ty.as_str()) {
        ("test-server", _) | (_, "ResponseOptions") => "test-server",
        ("dynamic-delay", _) | (_, "DynamicDelayConfiguration") => "dynamic-delay",
        ("time-tracking", _) | (_, "TimeTrackingConfiguration") => "time-tracking",
        _ => {
            c.ignored.push(format!("{path} ({name})"));
            return Ok(());
        }
    };
    let known: &[&str] = match kind {
        "test-server" => RESPONSE_OPTIONS,
        "dynamic-delay" => &["static_delay", "concurrency_based_linear_delay"],
        _ => &["emit_previous_request_delta_in_response_header"],
    };
    for (k, v) in cfg {
        if !known.contains(&k.as_str()) {
            return Err(format!(
                "{path}.{k}: the {kind} filter has no option {k:?} that Shrike's server \
                 knows (it has {})",
                known.join(", ")
            ));
        }
        // One header shape for the server: Nighthawk's v3 headers are the v2 ones.
        let key = if k == "v3_response_headers" { "response_headers".to_string() } else { k };
        let delay = key == "static_delay" || key == "concurrency_based_linear_delay";
        let clash = c.defaults.contains_key(&key)
            || (delay
                && ["static_delay", "concurrency_based_linear_delay"]
                    .iter()
                    .any(|d| c.defaults.contains_key(*d)));
        if clash {
            return Err(format!("{path}.{key}: set twice (by two filters, or two spellings)"));
        }
        c.defaults.insert(key, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nighthawks_documented_config_maps_onto_the_defaults() {
        let yaml = r#"
static_resources:
  listeners:
  - address:
      socket_address: { address: 127.0.0.1, port_value: 10000 }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          generate_request_id: false
          codec_type: AUTO
          stat_prefix: ingress_http
          route_config: { name: local_route }
          http_filters:
          - name: dynamic-delay
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.DynamicDelayConfiguration
              static_delay: 0.01s
          - name: test-server
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.ResponseOptions
              response_body_size: 10
              v3_response_headers:
              - { header: { key: "x-nh", value: "1" } }
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
admin:
  address:
    socket_address: { address: 127.0.0.1, port_value: 8081 }
"#;
        let v: Value = serde_norway::from_str(yaml).unwrap();
        let c = parse(&v).unwrap();
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:10000"));
        assert_eq!(c.defaults["static_delay"], "0.01s");
        assert_eq!(c.defaults["response_body_size"], 10);
        assert_eq!(c.defaults["response_headers"][0]["header"]["key"], "x-nh");
        for part in ["admin", "generate_request_id", "route_config", "envoy.filters.http.router"] {
            assert!(c.ignored.iter().any(|i| i.contains(part)), "{part}: {:?}", c.ignored);
        }
    }

    #[test]
    fn an_unknown_filter_option_is_an_error_naming_it() {
        let v = serde_json::json!({"static_resources": {"listeners": [{
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                "typed_config": {"http_filters": [{"name": "test-server",
                    "typed_config": {"response_body_sise": 3}}]}}]}]}]}});
        let e = parse(&v).unwrap_err();
        assert!(e.contains("response_body_sise"), "{e}");
    }
}
