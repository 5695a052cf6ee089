//! `shrike run --protocol http3` against the real `shrike serve --tls --http3`: the client
//! validates the generated certificate over QUIC, honours the per-request config header,
//! sends request bodies, and multiplexes within `--max-concurrent-streams` and the worker's
//! `--max-active-requests` budget.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// `shrike serve --tls --http3` on 127.0.0.1:0 (HTTP/3 on the TCP port number over UDP).
fn h3_server(extra: &[&str]) -> TlsServer {
    let mut args = vec!["--tls", "--http3"];
    args.extend(extra);
    TlsServer::start(&args)
}

#[test]
fn http3_run_counts_responses_bodies_and_connections() {
    let server = h3_server(&[]);
    let url = server.url();
    let v = run_json_ok(&[
        "run",
        &url,
        "--protocol",
        "http3",
        "--tls-ca",
        &server.ca,
        "--rps",
        "50",
        "--duration",
        "1",
        "--request-header",
        r#"x-nighthawk-test-server-config: {"response_body_size":321}"#,
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50);
    assert!(counter(g, "upstream_cx_http3_total") >= 1);
    assert_eq!(counter(g, "upstream_cx_http2_total"), 0);
    assert!(counter(g, "ssl.handshake") >= 1);
    let body = statistic(g, "benchmark_http_client.response_body_size");
    assert_eq!(body["raw_min"], "321");
    assert_eq!(body["raw_max"], "321");
    assert_eq!(v["options"]["protocol"], "http3");

    // Request bodies go out: 50 × 4000 bytes leave in UDP datagrams.
    let v = run_json_ok(&[
        "run",
        &url,
        "--protocol",
        "http3",
        "--tls-ca",
        &server.ca,
        "--rps",
        "50",
        "--duration",
        "1",
        "--request-method",
        "POST",
        "--request-body-size",
        "4000",
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50);
    let tx = counter(g, "upstream_cx_tx_bytes_total");
    assert!(tx >= 50 * 4000, "sent {tx} bytes for 50 bodies of 4000");
}

#[test]
fn http3_verifies_the_certificate_unless_insecure() {
    let server = h3_server(&[]);
    let url = server.url();
    let out = run(
        &[
            "run",
            &url,
            "--protocol",
            "http3",
            "--rps",
            "10",
            "--duration",
            "1",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    let err = out.stderr.to_lowercase();
    assert!(err.contains("certificate"), "{}", out.stderr);
    assert!(err.contains("localhost"), "names the host: {}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);

    let v = run_json_ok(&[
        "run",
        &url,
        "--protocol",
        "http3",
        "--tls-insecure",
        "--rps",
        "10",
        "--duration",
        "1",
    ]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 10);
}

#[test]
fn http3_stream_limit_and_active_budget_shape_the_connections() {
    let server = h3_server(&[]);
    let url = server.url();
    // 100 rps against 0.2 s responses wants ~20 in flight; the budget holds it at 10, and one
    // stream per connection makes that 10 connections.
    let delayed = r#"x-nighthawk-test-server-config: {"static_delay":"0.2s"}"#;
    let conns = |streams: &str| {
        let v = run_json_ok(&[
            "run",
            &url,
            "--protocol",
            "http3",
            "--tls-ca",
            &server.ca,
            "--rps",
            "100",
            "--duration",
            "1",
            "--max-concurrent-streams",
            streams,
            "--max-active-requests",
            "10",
            "--request-header",
            delayed,
        ]);
        let g = global(&v);
        assert!(counter(g, "benchmark.http_2xx") >= 20, "{streams}");
        counter(g, "upstream_cx_http3_total")
    };
    assert_eq!(conns("1"), 10);
    // With room for every stream on one connection, one connection carries them all.
    assert_eq!(conns("100"), 1);
}

#[test]
fn http3_waiting_for_the_servers_stream_credit_is_queueing_not_service_time() {
    // The server allows 2 streams per connection and answers in 0.2 s: 20 requests in a
    // second wait their turn on the one connection.
    let server = h3_server(&["--max-concurrent-streams", "2"]);
    let v = run_json_ok(&[
        "run",
        &server.url(),
        "--protocol",
        "http3",
        "--tls-ca",
        &server.ca,
        "--rps",
        "20",
        "--duration",
        "1",
        "--request-header",
        r#"x-nighthawk-test-server-config: {"static_delay":"0.2s"}"#,
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 20);
    let service = secs(&statistic(g, "benchmark_http_client.request_to_response")["max"]);
    let queued = secs(&statistic(g, "benchmark_http_client.queue_to_connect")["max"]);
    assert!((0.2..0.45).contains(&service), "service time {service}s is the server's delay");
    assert!(queued > 0.5, "the wait for stream credit ({queued}s) is queueing");
}

#[test]
fn http3_max_requests_per_connection_recycles_connections() {
    let server = h3_server(&[]);
    let v = run_json_ok(&[
        "run",
        &server.url(),
        "--protocol",
        "http3",
        "--tls-ca",
        &server.ca,
        "--rps",
        "200",
        "--duration",
        "1",
        "--connections",
        "3",
        "--max-requests-per-connection",
        "30",
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200);
    // 200 requests at most 30 per connection: at least 7 connections, each retired by us.
    let opened = counter(g, "upstream_cx_http3_total");
    assert!(opened >= 7, "opened {opened}");
    assert!(counter(g, "upstream_cx_destroy_local") >= 6);
}

#[test]
fn http3_server_goaway_retires_the_connection() {
    let server = h3_server(&[]);
    let client = shrike()
        .args([
            "run",
            &server.url(),
            "--protocol",
            "http3",
            "--tls-ca",
            &server.ca,
            "--rps",
            "50",
            "--duration",
            "3",
            "--timeout",
            "1",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"static_delay":"0.1s"}"#,
            "--output-format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shrike run");
    std::thread::sleep(Duration::from_secs(1));
    // The server drains: GOAWAY, finish in-flight requests, close with H3_NO_ERROR, exit.
    let pid = server.child.id().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill");
    let out = wait_limited(client, LIMIT);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_cx_close_notify"), 1, "{}", out.stderr);
    assert!(counter(g, "benchmark.http_2xx") >= 20, "{}", out.stderr);
    // In-flight requests were finished by the draining server, not reset.
    assert_eq!(counter(g, "benchmark.stream_resets"), 0, "{}", out.stderr);
    // The server is gone, so the next connection cannot be opened: a failed run.
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("QUIC handshake"), "{}", out.stderr);
}

#[test]
fn http3_multi_target_rotates_over_endpoints() {
    let server = h3_server(&[]);
    // Two endpoints (each with its own TLS server name) on one server; each worker's pools
    // share its QUIC socket.
    let a = format!("localhost:{}", server.port);
    let b = format!("127.0.0.1:{}", server.port);
    let v = run_json_ok(&[
        "run",
        "--protocol",
        "http3",
        "--tls-ca",
        &server.ca,
        "--multi-target-endpoint",
        &a,
        "--multi-target-endpoint",
        &b,
        "--multi-target-use-https",
        "--rps",
        "50",
        "--duration",
        "1",
        "--concurrency",
        "2",
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 100);
    // One connection per endpoint per worker.
    assert_eq!(counter(g, "upstream_cx_http3_total"), 4);
}

#[test]
fn http3_needs_https() {
    let out = run(&["run", "http://127.0.0.1:9/", "--protocol", "http3"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("http3") && out.stderr.contains("https://"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// The server's caps hold over HTTP/3 as over h1 and h2: too many header fields or too many
/// header bytes get 431 on the stream (and the connection goes on), and the request cap sends
/// GOAWAY after the Nth request, so a client sees connections retired by the server. Each is
/// counted in the stats endpoint's `limits`.
#[test]
fn http3_server_caps_answer_431_and_retire_connections() {
    let server = h3_server(&[
        "--stats-path",
        "/.shrike/stats",
        "--max-request-headers",
        "10",
        "--max-request-header-bytes",
        "2048",
        "--max-requests-per-connection",
        "5",
    ]);
    let url = server.url();
    let h3_run = |extra: &[&str]| {
        let mut args =
            vec!["run", &url, "--protocol", "http3", "--tls-ca", &server.ca, "--rps", "40"];
        args.extend_from_slice(&["--duration", "1", "--connections", "1"]);
        args.extend_from_slice(extra);
        args.push("--no-default-failure-predicates");
        run_json_ok(&args)
    };
    let fields: Vec<String> = (0..12).map(|i| format!("x-{i}: 1")).collect();
    let mut many = Vec::new();
    for f in &fields {
        many.extend(["--request-header", f.as_str()]);
    }
    let v = h3_run(&many);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_4xx"), 40);
    assert_eq!(counter(g, "benchmark.http_2xx"), 0);

    let big = format!("x-big: {}", "a".repeat(3000));
    let v = h3_run(&["--request-header", &big]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_4xx"), 40);

    // Under the caps: every request answered, on connections the server retires every five
    // requests (a 431 counts as a request too, so the runs above were retired as well).
    let v = h3_run(&["--request-header", "x-fine: 1"]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 40);
    let opened = counter(g, "upstream_cx_http3_total");
    assert!(opened >= 8, "40 requests, at most 5 per connection, on {opened} connections");
    assert!(counter(g, "upstream_cx_close_notify") >= 7, "{v}");

    let stats = std::process::Command::new("curl")
        .args(["-s", "--cacert", &server.ca, &format!("{url}.shrike/stats")])
        .output()
        .expect("curl");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats JSON");
    let limits = &stats["limits"];
    assert_eq!(limits["too_many_headers"], 40, "{stats}");
    assert_eq!(limits["headers_too_large"], 40, "{stats}");
    // 120 requests accepted, five per connection: 24 retirements, less any connection a run
    // ended on before its fifth.
    assert!(limits["max_requests_reached"].as_u64() >= Some(20), "{stats}");
}
