//! Nighthawk's gRPC API as `shrike service` serves it and `shrike run --nighthawk-service`
//! speaks it: a Python grpcio client generated from the protos, a round trip against a local
//! run, refusals by name, and `--listener-address-file`. `.ci/run` installs grpcio and
//! grpcio-tools from PyPI.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// `args` run with JSON output against `server`, exit 0, and what the server counted of it,
/// checked against the result (every request sent, every status class): a run through the
/// service is witnessed by the target as a local one is.
fn agreed(server: &impl Counted, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, Duration::from_secs(60));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    (v, w)
}

const LIMIT: Duration = Duration::from_secs(60);

/// A service allowed to load loopback.
fn service(extra: &[&str]) -> Service {
    Service::start(&[&["--allow-target", "127.0.0.0/8"], extra].concat())
}

#[test]
fn a_python_client_runs_a_test_through_execution_stream() {
    let target = Server::start(&[]);
    let service = service(&[]);
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/nighthawk");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/nighthawk_client.py");
    let before = Witness::before(&target);
    let client = Command::new("python3")
        .args([script, proto, &service.addr, &target.url("/")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_limited(client, Duration::from_secs(90));
    assert_eq!(out.code(), 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    for line in [
        "run:",
        "ramp:",
        "unsupported:",
        "failed run:",
        "nighthawk.client.NighthawkService",
        "all ok",
    ] {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
    // The target counted the runs' 2xx answers as the client decoded them ("run: N
    // responses", then the ramp's 150), and the failed run's 503s: at least the one that
    // fired the default failure predicate (the client does not print how many).
    let w = Witness::since(&target, before);
    let ran: u64 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("run: ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("run: N responses in {}", out.stdout));
    assert_eq!(w.count("/responses/2xx"), ran + 150, "{}", out.stdout);
    let failed = w.count("/responses/5xx");
    assert!(failed >= 1, "{}", out.stdout);
    assert_eq!(w.count("/requests"), ran + 150 + failed);
}

/// The same paced run here and through the service: the same request count (a paced run of
/// 1 worker at 200/s for 2 s plans exactly 400), and the remote result keeps its exact
/// histograms through Nighthawk's Output.
#[test]
fn a_run_through_the_service_counts_as_a_local_one() {
    let target = Server::start(&[]);
    let service = service(&[]);
    let url = target.url("/");
    // Connections enough that a moment's stall of a busy machine cannot hold every one of
    // them busy past the run's end (a closed loop sends nothing after it).
    let args = ["run", &url, "--rps", "200", "--duration", "2", "--connections", "16"];
    let (local, lw) = agreed(&target, &args);
    let uri = service.uri();
    let remote = [&args[..], &["--nighthawk-service", &uri]].concat();
    let (remote, rw) = agreed(&target, &remote);
    for (doc, w) in [(&local, lw), (&remote, rw)] {
        assert_eq!(counter(global(doc), "upstream_rq_total"), 400, "{doc}");
        assert_eq!(counter(global(doc), "benchmark.http_2xx"), 400, "{doc}");
        assert_eq!(w.count("/responses/2xx"), 400, "the target's own count");
    }
    let latency = statistic(global(&remote), "benchmark_http_client.request_to_response");
    assert_eq!(latency["count"], "400");
    assert!(latency["shrike_histogram"].as_str().is_some_and(|h| !h.is_empty()), "{latency}");
    // How the run ended travels in Shrike's extension.
    assert_eq!(remote["shrike"]["termination"]["kind"], local["shrike"]["termination"]["kind"]);
    assert_eq!(remote["options"]["requests_per_second"], 200);
}

/// Nighthawk's linear-ramping rate limiter plugin through the API (an `Any` on the wire): the
/// service runs the ramp's integral, as a local run does, and echoes the plugin.
#[test]
fn the_rate_limiter_plugin_travels_to_the_service() {
    let target = Server::start(&[]);
    let service = service(&[]);
    let url = target.url("/");
    let plugin = "{\"name\":\"nighthawk.linear-ramping-rate-limiter-plugin\",\"typed_config\":\
        {\"@type\":\"type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig\",\
        \"ramp_time\":\"0.5s\"}}";
    let args =
        ["run", &url, "--rps", "200", "--duration", "1", "--rate-limiter-plugin-config", plugin];
    let (local, lw) = agreed(&target, &args);
    let uri = service.uri();
    let remote = [&args[..], &["--nighthawk-service", &uri]].concat();
    let (remote, rw) = agreed(&target, &remote);
    for (doc, w) in [(&local, lw), (&remote, rw)] {
        // 0→200 over 0.5 s (50), then 200/s for 0.5 s (100).
        assert_eq!(counter(global(doc), "benchmark.http_2xx"), 150, "{doc}");
        assert_eq!(w.count("/responses/2xx"), 150, "the target's own count");
        let echoed = &doc["options"]["rate_limiter_plugin_config"];
        assert_eq!(echoed["typed_config"]["ramp_time"], "0.500s", "{echoed}");
    }
}

#[test]
fn refusals_name_the_option() {
    let target = Server::start(&[]);
    let service = service(&["--max-rps", "500"]);
    let url = target.url("/");
    let before = Witness::before(&target);
    // An option Nighthawk's API has no field for: refused before anything is sent.
    let out = run(
        &["run", &url, "-n", "10", "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("total_requests"), "{}", out.stderr);
    // The service's own limits answer as error_detail; the client reports them as refusals.
    let out = run(
        &["run", &url, "--rps", "900", "--duration", "1", "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("max-rps") || out.stderr.contains("rps"), "{}", out.stderr);
    // Outside the allowlist.
    let out = run(
        &["run", "http://192.0.2.1:9/", "--nighthawk-service", &service.uri(), "--duration", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("allowlist"), "{}", out.stderr);
    // A trace collector is a host the service would reach: the allowlist covers it too.
    let zipkin = "zipkin://192.0.2.1:9411/api/v2/spans";
    let out = run(
        &["run", &url, "--duration", "1", "--trace", zipkin, "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("trace 192.0.2.1:9411"), "{}", out.stderr);
    // Every refusal came before a request: the target saw none.
    assert_eq!(Witness::since(&target, before).count("/requests"), 0);
}

#[test]
fn the_listener_address_file_names_the_bound_port() {
    let dir = scratch("listener-address");
    let file = dir.join("addr");
    let service = service(&["--listener-address-file", file.to_str().unwrap()]);
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.trim(), service.addr);
}

/// The counter `counter_name` of a 1 s run at 200/s against `server`, which holds each
/// response 50 ms (about 10 requests in flight), with `extra` flags; asserted equal to the
/// connections the server counted at `served` (`/connections/http2`, …).
fn connections_for(
    server: &impl Counted,
    url: &str,
    extra: &[&str],
    counter_name: &str,
    served: &str,
) -> u64 {
    let mut args = vec![
        "run",
        url,
        "--rps",
        "200",
        "--duration",
        "1",
        "--request-header",
        r#"x-nighthawk-test-server-config: {"static_delay": "50ms"}"#,
    ];
    args.extend(extra);
    let (v, w) = agreed(server, &args);
    let opened = counter(global(&v), counter_name);
    assert_eq!(w.count(served), opened, "{served}: the server's count against {counter_name}");
    opened
}

/// Nighthawk's deprecated flag means one stream per HTTP/2 connection: the requests in flight
/// need as many connections. Without it, one connection carries them all.
#[test]
fn h2_use_multiple_connections_opens_a_connection_per_stream() {
    let target = Server::start(&[]);
    let url = target.url("/");
    let h2 = ["-p", "http2"];
    let (cx, served) = ("upstream_cx_http2_total", "/connections/http2");
    assert_eq!(connections_for(&target, &url, &h2, cx, served), 1);
    let many = ["-p", "http2", "--experimental-h2-use-multiple-connections"];
    assert!(connections_for(&target, &url, &many, cx, served) >= 5);
}

/// `--http3-protocol-options`' max_concurrent_streams limits streams per QUIC connection.
#[test]
fn http3_protocol_options_limit_streams_per_connection() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    let url = server.url();
    let h3 = ["-p", "http3", "--tls-ca", &server.ca];
    let (cx, served) = ("upstream_cx_http3_total", "/connections/http3");
    assert_eq!(connections_for(&server, &url, &h3, cx, served), 1);
    let opts =
        "{quic_protocol_options:{max_concurrent_streams:1,initial_stream_window_size:65536}}";
    let limited = ["-p", "http3", "--tls-ca", &server.ca, "--http3-protocol-options", opts];
    assert!(connections_for(&server, &url, &limited, cx, served) >= 5);
}

#[test]
fn the_nighthawk_api_needs_the_services_token() {
    let target = Server::start(&[]);
    let service = Service::start_with(
        shrike()
            .args(["service", "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.0/8"])
            .args(["--token-env", "SHRIKE_NH_TOKEN"])
            .env("SHRIKE_NH_TOKEN", "nh-secret"),
    );
    let url = target.url("/");
    let base = ["run", &url, "--duration", "1", "--nighthawk-service"];
    let uri = service.uri();
    let args = [&base[..], &[&uri]].concat();
    let (out, w) = run_witnessed(&target, &args, Duration::from_secs(30));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "refused before any load");
    assert!(out.stderr.contains("Unauthenticated"), "{}", out.stderr);
    let token = scratch("nh-token").join("token");
    std::fs::write(&token, "nh-secret\n").unwrap();
    let token = token.to_str().unwrap();
    let (v, w) =
        agreed(&target, &[&base[..], &[&service.uri(), "--remote-token-file", token]].concat());
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 5);
    assert_eq!(w.count("/responses/2xx"), 5);
}

/// `--nighthawk-service` works wherever `run` takes it: a capacity search and a sweep send
/// every trial to the service. A service whose allowlist leaves the target out refuses the
/// first trial by name, which only a trial sent there could be.
#[test]
fn capacity_and_sweep_run_their_trials_on_the_service() {
    let target = Server::start(&[]);
    let url = target.url("/");
    let service = service(&[]);
    let nighthawk = ["--nighthawk-service", service.uri().leak()];
    let capacity = [
        "capacity",
        &url,
        "--slo",
        "p99<=1s",
        "--start",
        "20",
        "--trial-duration",
        "0.3s",
        "--final-duration",
        "0.3s",
        "--max-trials",
        "2",
        "--output-format",
        "json",
    ];
    let (out, w) = run_witnessed(&target, &[&capacity[..], &nighthawk].concat(), LIMIT);
    // Two trials at most: no answer was confirmed above the first pass, but trials ran.
    let v = json(&out);
    let trials = v["capacity"]["trials"].as_array().unwrap();
    // The target answered what the trials' results say they sent, trial by trial summed.
    let sent: u64 = trials.iter().map(|t| counter(global(&t["result"]), "upstream_rq_total")).sum();
    let ok: u64 = trials.iter().map(|t| counter(global(&t["result"]), "benchmark.http_2xx")).sum();
    assert_eq!(w.count("/requests"), sent, "the target's requests against the trials'");
    assert_eq!(w.count("/responses/2xx"), ok, "the target's 2xx against the trials'");
    assert!(!trials.is_empty(), "{}", out.stderr);
    // The first trial was measured on the service: answered at its rate, none failed. On a
    // loaded machine the judge may call it invalid (the service's client released late, seen
    // in CI), which still says a trial ran there; only a failure would not.
    let first = &trials[0];
    assert!(["pass", "invalid"].contains(&first["verdicts"][0].as_str().unwrap()), "{first}");
    assert!(first["achieved_rps"].as_f64().unwrap() > 15.0, "{first}");
    assert_eq!(first["error_ratio"].as_f64(), Some(0.0), "{first}");
    let sweep = ["sweep", &url, "--rates", "30", "--iterations", "1", "-d", "0.3s", "--wait", "0s"];
    let (out, w) = run_witnessed(
        &target,
        &[&sweep[..], &nighthawk, &["--output-format", "json"]].concat(),
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let it = &json(&out)["sweep"]["points"][0]["iterations"][0];
    assert!(it["throughput_rps"].as_f64().unwrap() > 20.0);
    // The one iteration's answers are the target's.
    assert_eq!(w.count("/responses/2xx"), it["successes"].as_u64().unwrap(), "{it}");
    assert_eq!(w.count("/requests"), it["successes"].as_u64().unwrap(), "{it}");

    let elsewhere = Service::start(&["--allow-target", "127.0.0.2/32"]);
    let nighthawk = ["--nighthawk-service", elsewhere.uri().leak()];
    for args in [&capacity[..], &sweep[..]] {
        let (out, w) = run_witnessed(&target, &[args, &nighthawk].concat(), LIMIT);
        assert_eq!(out.code(), 2, "a refusal is a usage error: {args:?}: {}", out.stderr);
        assert_eq!(w.count("/requests"), 0, "refused before any load: {args:?}");
        assert!(out.stderr.contains("outside this service's allowlist"), "{}", out.stderr);
    }
}
