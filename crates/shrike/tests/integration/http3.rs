//! `shrike run --protocol http3` against the real `shrike serve --tls --http3`: the client
//! validates the generated certificate over QUIC, honours the per-request config header,
//! sends request bodies, and multiplexes within `--max-concurrent-streams` and the worker's
//! `--max-active-requests` budget.

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

/// [`run_agreed`] for an HTTP/3 run (the result says it was one): the server also counted as
/// many QUIC connections, and a completed handshake for each, as the run reports.
fn run_h3(server: &TlsServer, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, LIMIT);
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    assert_eq!(v["options"]["protocol"], "http3");
    let g = global(&v).clone();
    w.agrees(&g);
    let opened = counter(&g, "upstream_cx_http3_total");
    assert_eq!(w.count("/connections/http3"), opened, "QUIC connections the server served");
    assert_eq!(w.count("/tls/handshakes"), counter(&g, "ssl.handshake"), "handshakes");
    (g, w)
}

#[test]
fn http3_run_counts_responses_bodies_and_connections() {
    let server = h3_server(&[]);
    let url = server.url();
    let (g, w) = run_h3(
        &server,
        &[
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
        ],
    );
    let g = &g;
    assert_eq!(counter(g, "benchmark.http_2xx"), 50);
    assert!(counter(g, "upstream_cx_http3_total") >= 1);
    assert_eq!(counter(g, "upstream_cx_http2_total"), 0);
    assert!(counter(g, "ssl.handshake") >= 1);
    let body = statistic(g, "benchmark_http_client.response_body_size");
    assert_eq!(body["raw_min"], "321");
    assert_eq!(body["raw_max"], "321");
    assert_eq!(w.count("/response_body_bytes"), 50 * 321, "the bodies the server sent");

    // Request bodies go out: 50 × 4000 bytes leave in UDP datagrams.
    let (g, w) = run_h3(
        &server,
        &[
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
        ],
    );
    let g = &g;
    assert_eq!(counter(g, "benchmark.http_2xx"), 50);
    let tx = counter(g, "upstream_cx_tx_bytes_total");
    assert!(tx >= 50 * 4000, "sent {tx} bytes for 50 bodies of 4000");
    assert_eq!(w.count("/request_body_bytes"), 50 * 4000, "the bodies the server read");
}

#[test]
fn http3_verifies_the_certificate_unless_insecure() {
    let server = h3_server(&[]);
    let url = server.url();
    let (out, w) = run_witnessed(
        &server,
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
    // The server saw each QUIC handshake the client refused fail, and no request.
    let failed = counter(global(&json(&out)), "upstream_cx_connect_fail");
    assert!(failed >= 1, "{}", out.stdout);
    assert_eq!(w.count("/tls/handshake_failures"), failed);
    assert_eq!((w.count("/connections/http3"), w.count("/requests")), (0, 0));
    let err = out.stderr.to_lowercase();
    assert!(err.contains("certificate"), "{}", out.stderr);
    assert!(err.contains("localhost"), "names the host: {}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);

    let (g, _) = run_h3(
        &server,
        &["run", &url, "--protocol", "http3", "--tls-insecure", "--rps", "10", "--duration", "1"],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 10);
}

#[test]
fn http3_stream_limit_and_active_budget_shape_the_connections() {
    let server = h3_server(&[]);
    let url = server.url();
    // 100 rps against 0.2 s responses wants ~20 in flight; the budget holds it at 10, and one
    // stream per connection makes that 10 connections.
    let delayed = r#"x-nighthawk-test-server-config: {"static_delay":"0.2s"}"#;
    let conns = |streams: &str| {
        let (g, _) = run_h3(
            &server,
            &[
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
            ],
        );
        assert!(counter(&g, "benchmark.http_2xx") >= 20, "{streams}");
        counter(&g, "upstream_cx_http3_total")
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
    let (g, _) = run_h3(
        &server,
        &[
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
        ],
    );
    let g = &g;
    assert_eq!(counter(g, "benchmark.http_2xx"), 20);
    let service = secs(&statistic(g, "benchmark_http_client.request_to_response")["max"]);
    let queued = secs(&statistic(g, "benchmark_http_client.queue_to_connect")["max"]);
    assert!((0.2..0.45).contains(&service), "service time {service}s is the server's delay");
    assert!(queued > 0.5, "the wait for stream credit ({queued}s) is queueing");
}

#[test]
fn http3_max_requests_per_connection_recycles_connections() {
    let server = h3_server(&[]);
    let (g, _) = run_h3(
        &server,
        &[
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
        ],
    );
    let g = &g;
    assert_eq!(counter(g, "benchmark.http_2xx"), 200);
    // 200 requests at most 30 per connection: at least 7 connections, each retired by us.
    let opened = counter(g, "upstream_cx_http3_total");
    assert!(opened >= 7, "opened {opened}");
    assert!(counter(g, "upstream_cx_destroy_local") >= 6);
}

#[test]
fn http3_server_goaway_retires_the_connection() {
    let mut server = h3_server(&[]);
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
    // The server's count just before it is told to stop: every one of these requests was
    // received, so the drain must answer each (the server cannot be read once it has gone).
    let received = server.stats(WITNESS_STATS)["requests"].as_u64().expect("requests");
    // The server drains: GOAWAY, finish in-flight requests, close with H3_NO_ERROR, exit.
    let pid = server.child.id().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill");
    let out = wait_limited(client, LIMIT);
    let drained = server.child.wait().expect("wait for the server");
    assert!(drained.success(), "the server drained and exited 0: {drained}");
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_cx_close_notify"), 1, "{}", out.stderr);
    assert!(counter(g, "benchmark.http_2xx") >= 20, "{}", out.stderr);
    assert!(received >= 20, "the server had received {received}");
    assert!(
        counter(g, "benchmark.http_2xx") >= received,
        "the server had received {received} requests, every one answered: {}",
        out.stderr
    );
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
    let (g, _) = run_h3(
        &server,
        &[
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
        ],
    );
    let g = &g;
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
        args.extend_from_slice(&["--no-default-failure-predicates", "--output-format", "json"]);
        let (out, w) = run_witnessed(&server, &args, LIMIT);
        assert_eq!(out.code(), 0, "{}", out.stderr);
        let g = global(&json(&out)).clone();
        assert_eq!(w.count("/connections/http3"), counter(&g, "upstream_cx_http3_total"));
        assert_eq!(w.count("/tls/handshakes"), counter(&g, "ssl.handshake"));
        // A stream sent after the server's GOAWAY is refused unprocessed (H3_REQUEST_REJECTED)
        // and sent again: a retry to the client, never a request to the server, and at most
        // one for each connection the server retired at its cap.
        let retried = counter(&g, "upstream_rq_retry");
        assert!(retried <= w.count("/limits/max_requests_reached"), "{retried} retries: {g}");
        (g, w)
    };
    let fields: Vec<String> = (0..12).map(|i| format!("x-{i}: 1")).collect();
    let mut many = Vec::new();
    for f in &fields {
        many.extend(["--request-header", f.as_str()]);
    }
    let (g, w) = h3_run(&many);
    assert_eq!(counter(&g, "benchmark.http_4xx"), 40);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    // The server counts a 431 under its limits, and as a request it answered 4xx.
    assert_eq!(w.count("/limits/too_many_headers"), 40, "the server refused each for its fields");
    assert_eq!(w.count("/responses/4xx"), 40);
    assert_eq!(w.count("/requests"), counter(&g, "upstream_rq_total"));
    assert_eq!(w.count("/responses/2xx"), 0);

    let big = format!("x-big: {}", "a".repeat(3000));
    let (g, w) = h3_run(&["--request-header", &big]);
    assert_eq!(counter(&g, "benchmark.http_4xx"), 40);
    assert_eq!(w.count("/limits/headers_too_large"), 40, "the server refused each for its size");
    assert_eq!(w.count("/responses/4xx"), 40);
    assert_eq!(w.count("/responses/2xx"), 0);

    // Under the caps: every request answered, on connections the server retires every five
    // requests (a 431 counts as a request too, so the runs above were retired as well).
    let (g, w) = h3_run(&["--request-header", "x-fine: 1"]);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 40);
    assert_eq!(w.count("/requests"), counter(&g, "upstream_rq_total"), "each served once");
    assert_eq!(w.count("/responses/2xx"), 40);
    let opened = counter(&g, "upstream_cx_http3_total");
    assert!(opened >= 8, "40 requests, at most 5 per connection, on {opened} connections");
    let notified = counter(&g, "upstream_cx_close_notify");
    assert!(notified >= 7, "{g}");
    // Each GOAWAY the client counted is one the server sent for the cap; the server may have
    // sent one more than the client saw, on the connection the run ended with.
    let retired = w.count("/limits/max_requests_reached");
    assert!((notified..=notified + 1).contains(&retired), "server {retired}, client {notified}");

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
