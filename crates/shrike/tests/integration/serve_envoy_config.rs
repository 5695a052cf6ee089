//! `shrike serve --config-path` with a Nighthawk test-server configuration in the Envoy YAML
//! form Nighthawk documents: the listener's address, the test-server, dynamic-delay and
//! time-tracking filters' options take effect (checked with curl), per-request headers still
//! override them, and the rest of the file is listed as ignored.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const CONFIG: &str = r#"
static_resources:
  listeners:
  - address:
      socket_address:
        address: 127.0.0.1
        port_value: 0
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          generate_request_id: false
          codec_type: AUTO
          stat_prefix: ingress_http
          route_config:
            name: local_route
            virtual_hosts:
            - name: service
              domains:
              - "*"
          http_filters:
          - name: time-tracking
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.TimeTrackingConfiguration
              emit_previous_request_delta_in_response_header: x-origin-delta
          - name: dynamic-delay
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.DynamicDelayConfiguration
              static_delay: 1s
          - name: test-server
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.ResponseOptions
              response_body_size: 123
              v3_response_headers:
              - { header: { key: "x-nh", value: "from-yaml" } }
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
              dynamic_stats: false
admin:
  access_log_path: /dev/null
  address:
    socket_address:
      address: 127.0.0.1
      port_value: 0
"#;

/// curl's response: the head (lowercased) and the body's length, and how long it took.
fn curl(url: &str, headers: &[&str]) -> (String, usize, Duration) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-D", "-", "-o", "/dev/stderr", "--max-time", "10", url]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let started = Instant::now();
    let out = cmd.output().expect("curl");
    (String::from_utf8_lossy(&out.stdout).to_lowercase(), out.stderr.len(), started.elapsed())
}

#[test]
fn a_nighthawk_test_server_yaml_configures_the_server() {
    let dir = scratch("envoy-config");
    let yaml = dir.join("envoy.yaml");
    std::fs::write(&yaml, CONFIG).unwrap();
    let addr_file = dir.join("address");
    let mut server = shrike()
        .args(["serve", "--config-path", yaml.to_str().unwrap()])
        .args(["--listener-address-file", addr_file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(&addr_file) {
            break a;
        }
        assert!(Instant::now() < deadline, "no listener address file");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let url = format!("http://{addr}/");

    let (head, body, took) = curl(&url, &[]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, 123, "{head}");
    assert!(head.contains("x-nh: from-yaml"), "{head}");
    // A second's delay: a request without it is told apart even on a busy machine (a plain
    // request was seen taking 305 ms with many tests running at once).
    assert!(took >= Duration::from_millis(990), "static_delay 1s, took {took:?}");
    // The second request carries the time since the first (time-tracking).
    let (head, _, _) = curl(&url, &[]);
    assert!(head.contains("x-origin-delta: "), "{head}");
    // A request's own config still overrides the file's defaults.
    let (head, body, took) = curl(
        &url,
        &[r#"x-nighthawk-test-server-config: {"response_body_size": 7, "static_delay": "0s"}"#],
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, 7);
    assert!(took < Duration::from_millis(900), "{took:?}");

    let _ = server.kill();
    let _ = server.wait();
    let mut stderr = String::new();
    server.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    for ignored in ["admin", "route_config", "codec_type", "envoy.filters.http.router"] {
        assert!(stderr.contains(ignored), "{ignored} not listed as ignored: {stderr}");
    }
}

#[test]
fn a_bad_filter_option_is_a_usage_error_naming_it() {
    let dir = scratch("envoy-config-bad");
    let yaml = dir.join("envoy.yaml");
    std::fs::write(&yaml, CONFIG.replace("response_body_size: 123", "response_body_sise: 123"))
        .unwrap();
    let out = run(&["serve", "--config-path", yaml.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("response_body_sise"), "{}", out.stderr);
}
