//! HTTP/2 (h2c and over TLS) and HTTPS/1.1 against a real nginx, through the real binary.

use crate::support::nginx;

use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

const LIMIT: Duration = Duration::from_secs(60);

fn run_ok(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output-format", "json"]);
    let out = run(&all, LIMIT);
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    global(&json(&out)).clone()
}

/// [`run_ok`] against `nginx`, whose access log must hold every request the run sent and
/// each status it counted; also returns how many connections nginx served them on.
fn run_at(nginx: &Nginx, args: &[&str]) -> (serde_json::Value, u64) {
    let mark = nginx.mark();
    let g = run_ok(args);
    let lines = nginx.agrees(mark, &g);
    let connections: std::collections::BTreeSet<u64> = lines.iter().map(|e| e.connection).collect();
    (g, connections.len() as u64)
}

/// 2 workers × 100 rps × 1 s, closed loop: exactly 200 answered requests.
fn assert_static_file_run(g: &serde_json::Value) {
    assert_eq!(counter(g, "benchmark.http_2xx"), 200);
    assert_eq!(counter(g, "upstream_rq_total"), 200);
    let body = statistic(g, "benchmark_http_client.response_body_size");
    assert_eq!((body["raw_min"].as_str(), body["raw_max"].as_str()), (Some("4321"), Some("4321")));
    assert_eq!(statistic(g, "benchmark_http_client.request_to_response")["count"], "200");
    assert_eq!(statistic(g, "benchmark_http_client.scheduled_to_response")["count"], "200");
    assert_eq!(statistic(g, "benchmark_http_client.latency_2xx")["count"], "200");
    assert_eq!(statistic(g, "benchmark_http_client.queue_to_connect")["count"], "200");
    assert!(counter(g, "upstream_cx_rx_bytes_total") >= 200 * 4321);
    assert!(counter(g, "upstream_cx_tx_bytes_total") > 0);
}

const LOAD: &[&str] = &["--rps", "100", "--duration", "1", "--concurrency", "2"];

#[test]
fn h2c_prior_knowledge_against_nginx() {
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/file");
    let mut args = vec![url.as_str(), "--protocol", "http2"];
    args.extend_from_slice(LOAD);
    let (g, served_on) = run_at(&nginx, &args);
    assert_static_file_run(&g);
    let h2 = counter(&g, "upstream_cx_http2_total");
    assert!((1..=4).contains(&h2), "multiplexed: few connections, got {h2}");
    assert_eq!(counter(&g, "upstream_cx_http1_total"), 0);
    assert_eq!(counter(&g, "upstream_cx_total"), h2);
    assert_eq!(served_on, h2, "nginx served the requests on as many connections");
    let hdr = statistic(&g, "benchmark_http_client.response_header_size");
    let min_hdr: u64 = hdr["raw_min"].as_str().expect("raw_min").parse().expect("n");
    assert!(min_hdr > 100, "HPACK-sized server/date/etag/... headers, got {min_hdr}");
}

#[test]
fn deprecated_h2_flag_means_http2() {
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/file");
    let mark = nginx.mark();
    let out = run(
        &["run", &url, "--h2", "--rps", "20", "--duration", "1", "--output-format", "json"],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("--h2 is deprecated"), "{}", out.stderr);
    let v = json(&out);
    assert_eq!(v["options"]["protocol"], "http2");
    let g = global(&v).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 20);
    assert!(counter(&g, "upstream_cx_http2_total") >= 1);
    assert!(nginx.agrees(mark, &g).iter().all(|e| e.request.ends_with("HTTP/2.0")), "sent as h2");
}

#[test]
fn h2_over_tls_against_nginx() {
    let nginx = Nginx::start(Listen::TlsH2);
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/file");
    let mut args = vec![url.as_str(), "--protocol", "http2", "--tls-ca", &ca];
    args.extend_from_slice(LOAD);
    let (g, served_on) = run_at(&nginx, &args);
    assert_static_file_run(&g);
    assert!(counter(&g, "upstream_cx_http2_total") >= 1);
    assert_eq!(counter(&g, "ssl.handshake"), counter(&g, "upstream_cx_total"));
    assert_eq!(served_on, counter(&g, "upstream_cx_total"));
}

#[test]
fn https_1_1_against_nginx() {
    let nginx = Nginx::start(Listen::Tls);
    let ca = nginx.ca();
    // An IP literal: no SNI is sent, and the certificate's IP SAN is what is checked.
    let url = nginx.url("https", "127.0.0.1", "/file");
    let mut args = vec![url.as_str(), "--tls-ca", &ca, "--connections", "3"];
    args.extend_from_slice(LOAD);
    let (g, served_on) = run_at(&nginx, &args);
    assert_static_file_run(&g);
    assert!(counter(&g, "upstream_cx_http1_total") >= 1);
    assert!(counter(&g, "ssl.handshake") >= 1);
    assert_eq!(counter(&g, "ssl.handshake"), counter(&g, "upstream_cx_total"));
    assert!(served_on <= counter(&g, "upstream_cx_total"), "nginx saw no connection unopened");
}

#[test]
fn alpn_mismatch_fails_the_connection_clearly() {
    // The server offers only HTTP/1.1 over TLS; asking for HTTP/2 must not silently downgrade.
    let nginx = Nginx::start(Listen::Tls);
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/file");
    let out = run(&["run", &url, "--protocol", "http2", "--tls-ca", &ca, "--duration", "1"], LIMIT);
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("ALPN"), "{}", out.stderr);
    assert!(out.stderr.contains("http2"), "{}", out.stderr);
}

#[test]
fn streams_per_connection_bound_the_connections_opened() {
    // Each request takes 200 ms; the closed-loop pacer wants 200 rps, so the 20-request
    // in-flight budget is always full. With one stream per connection that needs exactly 20
    // connections — not the 100 allowed.
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/slow");
    let (g, served_on) = run_at(
        &nginx,
        &[
            &url,
            "--protocol",
            "http2",
            "--max-concurrent-streams",
            "1",
            "--max-active-requests",
            "20",
            "--connections",
            "100",
            "--rps",
            "200",
            "--duration",
            "2",
        ],
    );
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 20);
    assert_eq!(served_on, 20, "nginx saw 20 connections");
    let ok = counter(&g, "benchmark.http_2xx");
    // 20 in flight × 5 per second × 2 s ≈ 200 (bounded by the budget, not the rate).
    assert!((150..=220).contains(&ok), "{ok} responses");
    assert!(statistic(&g, "sequencer.blocking")["count"].as_str().is_some());
}

#[test]
fn many_streams_share_one_connection() {
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/slow");
    let (g, served_on) = run_at(
        &nginx,
        &[
            &url,
            "--protocol",
            "http2",
            "--max-active-requests",
            "20",
            "--rps",
            "50",
            "--duration",
            "1",
        ],
    );
    // ~10 requests in flight fit in one connection's streams.
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 1);
    assert_eq!(served_on, 1);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 50);
}

#[test]
fn max_requests_per_connection_recycles_h2_connections() {
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/file");
    let (g, served_on) = run_at(
        &nginx,
        &[
            &url,
            "--protocol",
            "http2",
            "--max-requests-per-connection",
            "5",
            "--rps",
            "50",
            "--duration",
            "1",
        ],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 50);
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 10);
    assert_eq!(served_on, 10, "nginx saw each connection carry its 5");
    assert_eq!(counter(&g, "upstream_cx_destroy_local"), 10);
}

#[test]
fn request_bodies_are_sent_over_h2() {
    let nginx = Nginx::start(Listen::H2c);
    // /upload reads the whole body before answering: 100 kB is more than nginx's initial
    // stream window, so this only completes if the body is sent under flow control.
    let url = nginx.url("http", "127.0.0.1", "/upload");
    let (g, _) = run_at(
        &nginx,
        &[
            &url,
            "--protocol",
            "http2",
            "--request-method",
            "POST",
            "--request-body-size",
            "100000",
            "--rps",
            "20",
            "--duration",
            "1",
        ],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 20);
    assert!(counter(&g, "upstream_cx_tx_bytes_total") >= 20 * 100_000);
}

#[test]
fn goaway_retires_the_connection_without_failing_requests() {
    // nginx ends an h2 connection with GOAWAY after 10 streams.
    let nginx = Nginx::start_with(Listen::H2c, "keepalive_requests 10;");
    let url = nginx.url("http", "127.0.0.1", "/file");
    let (g, served_on) =
        run_at(&nginx, &[&url, "--protocol", "http2", "--rps", "50", "--duration", "1"]);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 50);
    let cx = counter(&g, "upstream_cx_http2_total");
    assert!(cx >= 5, "a new connection after each GOAWAY, got {cx}");
    assert_eq!(served_on, cx, "nginx served requests on every connection opened");
    assert!(counter(&g, "upstream_cx_close_notify") >= 4, "GOAWAYs counted");
}

#[test]
fn the_servers_stream_limit_bounds_streams_per_connection() {
    // nginx allows 2 concurrent streams per connection; ~20 requests are in flight (200 ms
    // each at 100 rps, budget 20), so the pool must spread them over about 10 connections
    // instead of queueing them on one. Streams sent before nginx's SETTINGS arrived may be
    // refused; those are retried, never failed.
    let nginx = Nginx::start_with(Listen::H2c, "http2_max_concurrent_streams 2;");
    let url = nginx.url("http", "127.0.0.1", "/slow");
    let (g, served_on) = run_at(
        &nginx,
        &[
            &url,
            "--protocol",
            "http2",
            "--max-active-requests",
            "20",
            "--rps",
            "100",
            "--duration",
            "2",
        ],
    );
    let cx = counter(&g, "upstream_cx_http2_total");
    assert!((8..=20).contains(&cx), "about 10 connections expected, got {cx}");
    assert_eq!(served_on, cx);
    assert_eq!(counter(&g, "benchmark.stream_resets"), 0);
    assert!(counter(&g, "benchmark.http_2xx") >= 150);
}

#[test]
fn h1_connection_close_is_counted_as_close_notify() {
    // nginx answers every 5th request on a connection with `connection: close`. One
    // connection at a time, so each carries exactly 5 requests even on a loaded machine.
    let nginx = Nginx::start_with(Listen::Http1, "keepalive_requests 5;");
    let url = nginx.url("http", "127.0.0.1", "/file");
    let (g, served_on) =
        run_at(&nginx, &[&url, "--connections", "1", "--rps", "50", "--duration", "1"]);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 50);
    assert_eq!(counter(&g, "upstream_cx_close_notify"), 10);
    assert_eq!(counter(&g, "upstream_cx_http1_total"), 10);
    assert_eq!(served_on, 10, "nginx closed after each 5");
}

#[test]
fn h2c_against_shrikes_own_test_server() {
    // The built-in server speaks h2c too; its per-request config header works over HTTP/2.
    let server = Server::start(&[]);
    let url = server.url("/");
    let (g, w) = run_agreed(
        &server,
        &[
            "run",
            &url,
            "--protocol",
            "http2",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"response_body_size":1000,"static_delay":"0.05s"}"#,
            "--rps",
            "40",
            "--duration",
            "1",
        ],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 40);
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 1);
    assert_eq!(w.count("/connections/http2"), 1, "the server served one HTTP/2 connection");
    let body = statistic(&g, "benchmark_http_client.response_body_size");
    assert_eq!((body["raw_min"].as_str(), body["raw_max"].as_str()), (Some("1000"), Some("1000")));
    // Every response waited the server's 50 ms delay.
    let min = secs(&statistic(&g, "benchmark_http_client.request_to_response")["min"]);
    assert!(min >= 0.049, "min latency {min}s");
}

#[test]
fn no_url_benchmarks_the_built_in_server_over_h2c() {
    let g = run_ok(&["--protocol", "http2", "--rps", "20", "--duration", "1"]);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 20);
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 1);
}

#[test]
fn h2_budget_overflows_in_open_loop_and_queues_with_pending() {
    // One request in flight at a time (200 ms each) against 50 rps: open loop counts the
    // rest as overflow instead of waiting, exactly as the h1 pool does.
    let nginx = Nginx::start(Listen::H2c);
    let url = nginx.url("http", "127.0.0.1", "/slow");
    let base = ["--protocol", "http2", "--max-active-requests", "1", "--rps", "50"];
    let mut args = vec![url.as_str()];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--duration", "1", "--open-loop"]);
    let (g, _) = run_at(&nginx, &args);
    let (ok, overflow) =
        (counter(&g, "benchmark.http_2xx"), counter(&g, "benchmark.pool_overflow"));
    assert!((2..=8).contains(&ok), "{ok} answered");
    assert_eq!(ok + overflow, 50, "every released request is answered or overflows");
    // With a pending budget the excess waits in the queue instead (and the rest overflow).
    let mut args = vec![url.as_str()];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--duration", "1", "--open-loop", "--max-pending-requests", "3"]);
    let (g, _) = run_at(&nginx, &args);
    assert!(counter(&g, "upstream_rq_pending_total") >= 3);
    assert!(counter(&g, "benchmark.pool_overflow") >= 30);
}
