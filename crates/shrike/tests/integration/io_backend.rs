//! `--io-backend` through the real binary: io_uring carries HTTP/1.1 and HTTP/2, plain and
//! TLS, with exact counts and byte totals, the result says which backend ran, and a wrong name
//! is a usage error. (The whole suite also runs on io_uring in CI: SHRIKE_IO_BACKEND.)
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use crate::support::{counter, global, run, Server, TlsServer};

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

#[test]
fn io_uring_carries_http1_and_http2_plain_and_tls_exactly() {
    let body = r#"x-nighthawk-test-server-config: {"response_body_size":70000}"#;
    let plain = Server::start(&[]);
    let tls = TlsServer::start(&["--tls"]);
    let tls_url = tls.url();
    let cases: [(&str, &[&str]); 4] = [
        ("h1", &[&plain.url("/")]),
        ("h2c", &[&plain.url("/"), "--protocol", "http2"]),
        ("h1 tls", &[&tls_url, "--tls-ca", &tls.ca]),
        ("h2 tls", &[&tls_url, "--tls-ca", &tls.ca, "--protocol", "http2"]),
    ];
    for (what, target) in cases {
        // Bodies larger than a receive buffer (32 KiB) and a closed loop over 4 connections.
        let mut args = vec!["run"];
        args.extend(target);
        args.extend(["-n", "400", "--rps", "max", "--connections", "4", "--request-header", body]);
        let Some(v) = on_uring(&args) else { return };
        assert_exact(&v, 400, 70_000, what);
    }
}

#[test]
fn the_default_backend_is_epoll_and_a_wrong_name_is_a_usage_error() {
    let server = Server::start(&[]);
    let args = ["run", &server.url("/"), "-n", "20", "--output-format", "json", "-v", "error"];
    let out = with_env(&args, None);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["shrike"]["environment"]["io_backend"], "epoll");
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 20);

    let out = run(&["run", &server.url("/"), "--io-backend", "kqueue"], Duration::from_secs(10));
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("epoll or io_uring"), "{}", out.stderr);
    let out = with_env(&["run", &server.url("/"), "-n", "1"], Some("select"));
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("SHRIKE_IO_BACKEND must be epoll or io_uring"), "{}", out.stderr);
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
