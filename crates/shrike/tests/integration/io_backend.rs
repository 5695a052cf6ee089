//! `--io-backend` through the real binary: io_uring carries HTTP/1.1 and HTTP/2, plain and
//! TLS, with exact counts and byte totals, the result says which backend ran, and a wrong name
//! is a usage error. (The whole suite also runs on io_uring in CI: SHRIKE_IO_BACKEND.)

use std::process::Stdio;
use std::time::Duration;

use crate::support::{counter, global, run, Counted, Server, TlsServer, Witness};

/// Runs `args` on io_uring; `None` (after checking the refusal is a clear usage error) where
/// the kernel does not grant io_uring.
fn on_uring(args: &[&str]) -> Option<serde_json::Value> {
    let mut all = args.to_vec();
    all.extend(["--io-backend", "io_uring", "--output-format", "json", "-v", "error"]);
    let out = run(&all, Duration::from_secs(30));
    if out.code() == 2 && out.stderr.contains("refuses io_uring") {
        assert!(out.stderr.contains("--io-backend epoll"), "{}", out.stderr);
        eprintln!("io_uring refused by this kernel: {}", out.stderr.trim());
        return None;
    }
    assert_eq!(out.code(), 0, "{}", out.stderr);
    Some(serde_json::from_str(&out.stdout).expect("json"))
}

fn assert_exact(v: &serde_json::Value, n: u64, body: u64, what: &str) {
    let g = global(v);
    assert_eq!(counter(g, "benchmark.http_2xx"), n, "{what}");
    assert_eq!(counter(g, "upstream_rq_total"), n, "{what}");
    let rx = counter(g, "upstream_cx_rx_bytes_total");
    assert!(rx >= n * body, "{what}: {rx} bytes received for {n} bodies of {body}");
    assert_eq!(v["shrike"]["environment"]["io_backend"], "io_uring", "{what}");
    assert_eq!(v["options"]["io_backend"], "io_uring", "{what}");
}

/// [`on_uring`] against `server`, checked by [`assert_exact`] and against what the server
/// counted: the 400 requests, each answered 2xx with its 70,000 bytes, on the connections of
/// the protocol (`http1`, `http2`) the client counted, each over TLS a handshake. False where
/// the kernel does not grant io_uring.
fn exactly_on_uring(server: &impl Counted, what: &str, protocol: &str, target: &[&str]) -> bool {
    let body = r#"x-nighthawk-test-server-config: {"response_body_size":70000}"#;
    // Bodies larger than a receive buffer (32 KiB) and a closed loop over 4 connections.
    let mut args = vec!["run"];
    args.extend(target);
    args.extend(["-n", "400", "--rps", "max", "--connections", "4", "--request-header", body]);
    let before = Witness::before(server);
    let Some(v) = on_uring(&args) else { return false };
    let w = Witness::since(server, before);
    assert_exact(&v, 400, 70_000, what);
    let g = global(&v);
    w.agrees(g);
    assert_eq!(w.count("/response_body_bytes"), 400 * 70_000, "{what}");
    let connections = counter(g, &format!("upstream_cx_{protocol}_total"));
    assert_eq!(w.count(&format!("/connections/{protocol}")), connections, "{what}: {g}");
    assert_eq!(w.connections(), counter(g, "upstream_cx_total"), "{what}: {g}");
    assert_eq!(w.count("/tls/handshakes"), counter(g, "ssl.handshake"), "{what}: {g}");
    true
}

#[test]
fn io_uring_carries_http1_and_http2_plain_and_tls_exactly() {
    let plain = Server::start(&[]);
    let tls = TlsServer::start(&["--tls"]);
    let (plain_url, tls_url) = (plain.url("/"), tls.url());
    let _ = exactly_on_uring(&plain, "h1", "http1", &[&plain_url])
        && exactly_on_uring(&plain, "h2c", "http2", &[&plain_url, "--protocol", "http2"])
        && exactly_on_uring(&tls, "h1 tls", "http1", &[&tls_url, "--tls-ca", &tls.ca])
        && exactly_on_uring(
            &tls,
            "h2 tls",
            "http2",
            &[&tls_url, "--tls-ca", &tls.ca, "--protocol", "http2"],
        );
}

#[test]
fn the_default_backend_is_epoll_and_a_wrong_name_is_a_usage_error() {
    let server = Server::start(&[]);
    let args = ["run", &server.url("/"), "-n", "20", "--output-format", "json", "-v", "error"];
    let before = Witness::before(&server);
    let out = with_env(&args, None);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["shrike"]["environment"]["io_backend"], "epoll");
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 20);
    // The server saw the 20 and answered each.
    Witness::since(&server, before).agrees(global(&v));

    // A usage error sends nothing: the server saw no connection and no request.
    let before = Witness::before(&server);
    let out = run(&["run", &server.url("/"), "--io-backend", "kqueue"], Duration::from_secs(10));
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("epoll or io_uring"), "{}", out.stderr);
    let out = with_env(&["run", &server.url("/"), "-n", "1"], Some("select"));
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("SHRIKE_IO_BACKEND must be epoll or io_uring"), "{}", out.stderr);
    let w = Witness::since(&server, before);
    assert_eq!((w.count("/requests"), w.connections()), (0, 0));
}

/// `shrike args` with SHRIKE_IO_BACKEND set to `backend` (or unset), time-limited.
fn with_env(args: &[&str], backend: Option<&str>) -> crate::support::Output {
    let mut cmd = crate::support::shrike();
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    match backend {
        Some(b) => cmd.env("SHRIKE_IO_BACKEND", b),
        None => cmd.env_remove("SHRIKE_IO_BACKEND"),
    };
    crate::support::wait_limited(cmd.spawn().unwrap(), Duration::from_secs(20))
}
