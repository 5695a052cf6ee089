//! Timing behaviour of `shrike serve` through the real binaries: Nighthawk's concurrency-based
//! linear delay, paced chunked bodies, the server-side stats
//! headers, and `--config` defaults under per-request overrides. Sub-millisecond checks live in
//! `timing_precise.rs`, away from this file's tests running in parallel.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;

const CONFIG: &str = "x-nighthawk-test-server-config";

/// A run against `server` with `config` in the header: its `global` result, already checked
/// against the server's requests and status classes, and the server's counts. The server
/// also served as many connections as the run opened.
fn run_with(
    server: &impl Counted,
    url: &str,
    protocol: &str,
    config: &str,
    extra: &[&str],
) -> (serde_json::Value, Witness) {
    let header = format!("{CONFIG}: {config}");
    let mut args = vec!["run", url, "--protocol", protocol, "--request-header", &header];
    args.extend(extra);
    let (g, w) = run_agreed(server, &args);
    assert_eq!(w.connections(), counter(&g, "upstream_cx_total"), "connections: {g}");
    (g, w)
}

fn service_p50(g: &serde_json::Value) -> f64 {
    percentile_secs(statistic(g, "benchmark_http_client.request_to_response"), 0.5)
}

#[test]
fn linear_delay_grows_with_concurrency() {
    let server = Server::start(&[]);
    let config = r#"{"concurrency_based_linear_delay":
        {"minimal_delay": "0.002s", "concurrency_delay_factor": "0.004s"}}"#;
    let config = config.replace('\n', " ");
    // One connection, one request at a time: 2 ms + 1 × 4 ms.
    let (one, w) = run_with(
        &server,
        &server.url("/"),
        "http1",
        &config,
        &["--rps", "50", "--duration", "1", "--connections", "1"],
    );
    assert_eq!(w.count("/connections/http1"), 1, "the server served one connection");
    let p50_one = service_p50(&one);
    assert!((0.006..0.009).contains(&p50_one), "one in flight: {p50_one}");
    // Eight connections kept busy (closed loop at a rate they cannot reach): about eight
    // requests in flight, so 2 ms + ~8 × 4 ms.
    let (eight, w) = run_with(
        &server,
        &server.url("/"),
        "http1",
        &config,
        &["--rps", "1000", "--duration", "1", "--connections", "8"],
    );
    assert_eq!(w.count("/connections/http1"), 8, "the server served eight connections");
    let p50_eight = service_p50(&eight);
    assert!((0.026..0.045).contains(&p50_eight), "eight in flight: {p50_eight}");
}

#[test]
fn chunked_body_arrives_in_spaced_chunks_on_http1() {
    let server = Server::start(&[]);
    let config =
        r#"{"response_body_size": 12, "response_chunk_size": 4, "response_chunk_delay": "0.04s"}"#;
    let mut socket = TcpStream::connect(&server.addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(socket, "GET / HTTP/1.1\r\nhost: x\r\n{CONFIG}: {config}\r\n\r\n").unwrap();
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut arrivals = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.ends_with(b"0\r\n\r\n") {
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        arrivals.push((start.elapsed(), seen.len()));
    }
    let text = String::from_utf8(seen).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert_eq!(body, "4\r\naaaa\r\n4\r\naaaa\r\n4\r\naaaa\r\n0\r\n\r\n");
    // Each chunk was written on its own: three reads at least, the last ≥ 2 pauses after the
    // first.
    assert!(arrivals.len() >= 3, "{arrivals:?}");
    let spread = arrivals.last().unwrap().0 - arrivals[0].0;
    assert!(spread >= Duration::from_millis(78), "{arrivals:?}");
}

#[test]
fn chunked_body_is_paced_on_http2() {
    let server = Server::start(&[]);
    let config = r#"{"response_body_size": 3000, "response_chunk_size": 1000, "response_chunk_delay": "0.05s"}"#;
    let out = Command::new("curl")
        .args(["-s", "-N", "--http2-prior-knowledge", "-o", "/dev/null", "--max-time", "5"])
        .args(["-w", "%{time_starttransfer} %{time_total} %{size_download}"])
        .args(["-H", &format!("{CONFIG}: {config}"), &server.url("/")])
        .output()
        .unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    let v: Vec<f64> = out.split(' ').map(|x| x.parse().unwrap()).collect();
    assert_eq!(v[2], 3000.0, "{out}");
    // Two pauses between three chunks: the whole exchange takes at least both, and most of
    // them fall after the first byte (curl may notice that first byte a little late).
    assert!(v[1] >= 0.1, "{out}");
    assert!(v[1] - v[0] >= 0.085, "{out}");
    assert!(v[1] - v[0] < 0.5, "{out}");
}

#[test]
fn stats_headers_report_active_requests_and_service_time() {
    let server = Server::start(&[]);
    for http2 in [false, true] {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-D", "-", "-o", "/dev/null", "--max-time", "5"]).args([
            "-H",
            &format!(r#"{CONFIG}: {{"emit_server_stats_headers": true, "static_delay": "3ms"}}"#),
            &server.url("/"),
        ]);
        if http2 {
            curl.arg("--http2-prior-knowledge");
        }
        let head = String::from_utf8(curl.output().unwrap().stdout).unwrap();
        let value = |name: &str| -> u64 {
            head.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .unwrap_or_else(|| panic!("{name} in {head}"))
                .trim()
                .parse()
                .unwrap()
        };
        assert_eq!(value("x-shrike-active-requests"), 1, "{head}");
        let service = value("x-shrike-service-time-us");
        assert!((3000..50_000).contains(&service), "{head}");
    }
}

#[test]
fn config_defaults_are_overridden_field_by_field() {
    // The default delay is long enough that a loaded CI machine cannot make
    // an undelayed request look delayed.
    let defaults = r#"{"response_status": 503, "response_body_size": 5, "static_delay": "250ms"}"#;
    let server = Server::start(&["--config", defaults]);
    let curl = |header: Option<&str>| {
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "/dev/null", "--max-time", "5"])
            .args(["-w", "%{http_code} %{size_download} %{time_total}"]);
        if let Some(h) = header {
            c.args(["-H", &format!("{CONFIG}: {h}")]);
        }
        let out = String::from_utf8(c.arg(server.url("/")).output().unwrap().stdout).unwrap();
        let v: Vec<String> = out.split(' ').map(str::to_string).collect();
        (v[0].clone(), v[1].clone(), v[2].parse::<f64>().unwrap())
    };
    let (status, size, time) = curl(None);
    assert_eq!((status.as_str(), size.as_str()), ("503", "5"));
    assert!(time >= 0.25, "{time}");
    // The header replaces only the fields it names.
    let (status, size, time) = curl(Some(r#"{"response_body_size": 7}"#));
    assert_eq!((status.as_str(), size.as_str()), ("503", "7"));
    assert!(time >= 0.25, "{time}");
    let (status, _, time) = curl(Some(r#"{"response_status": 200, "static_delay": "0s"}"#));
    assert_eq!(status, "200");
    assert!(time < 0.2, "{time}");

    // A bad --config is a usage error naming the field.
    let out = run(
        &["serve", "--listen", "127.0.0.1:0", "--config", r#"{"stall": {}}"#],
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("duration"), "{}", out.stderr);
}

#[test]
fn paced_body_and_stall_over_http3() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    let config = r#"{"response_body_size": 3000, "response_chunk_size": 1000,
        "response_chunk_delay": "0.03s", "stall": {"duration": "0.05s", "after_bytes": 1500}}"#;
    let header = format!("{CONFIG}: {}", config.replace('\n', " "));
    let (g, w) = run_agreed(
        &server,
        &[
            "run",
            &server.url(),
            "--protocol",
            "http3",
            "--tls-ca",
            &server.ca,
            "--request-header",
            &header,
            "--rps",
            "10",
            "--duration",
            "1",
        ],
    );
    let g = &g;
    assert_eq!(counter(g, "benchmark.http_2xx"), 10);
    // The server stalled each answer, and sent each body whole.
    assert_eq!(w.count("/faults/stall"), 10);
    assert_eq!(w.count("/response_body_bytes"), 10 * 3000);
    assert_eq!(w.count("/connections/http3"), counter(g, "upstream_cx_http3_total"));
    let body = statistic(g, "benchmark_http_client.response_body_size");
    assert_eq!(body["raw_min"], "3000");
    // Two chunk pauses and one stall.
    let min = secs(&statistic(g, "benchmark_http_client.request_to_response")["min"]);
    assert!(min >= 0.11, "{min}");
    assert!(min < 0.5, "{min}");
}

#[test]
fn weighted_delay_distribution_gives_a_tail() {
    // A fresh server and a seed make the draws exact: of the first 200 requests, a fixed
    // number (near 10%) get the slow delay.
    let server = Server::start(&[]);
    let config = r#"{"delay_distribution": {"weighted":
        [{"delay": "0.001s", "weight": 90}, {"delay": "0.05s", "weight": 10}]}, "seed": 5}"#;
    let (g, w) = run_with(
        &server,
        &server.url("/"),
        "http2",
        &config.replace('\n', " "),
        &["--rps", "200", "--duration", "1"],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 200);
    assert_eq!(w.count("/connections/http2"), counter(&g, "upstream_cx_http2_total"));
    let service = statistic(&g, "benchmark_http_client.request_to_response");
    let min = secs(&service["min"]);
    assert!(min >= 0.001, "{min}");
    assert!(percentile_secs(service, 0.5) < 0.01, "{service}");
    assert!(percentile_secs(service, 0.99) >= 0.05, "{service}");
    let mean = secs(&service["mean"]);
    // 0.9 × 1 ms + 0.1 × 50 ms = 5.9 ms, give or take the sample.
    assert!((0.0035..0.0095).contains(&mean), "{mean}");
}
