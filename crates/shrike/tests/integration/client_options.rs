//! Client options beyond the protocol: address family and HTTP/1.1 connection reuse.

use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

fn connections_used(server: &Server, strategy: &str) -> u64 {
    let url = server.url("/");
    let (out, w) = run_witnessed(
        server,
        &[
            "run",
            &url,
            "--experimental-h1-connection-reuse-strategy",
            strategy,
            "--connections",
            "4",
            "--rps",
            "10",
            "--duration",
            "4",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    assert_eq!(v["options"]["experimental_h1_connection_reuse_strategy"], strategy);
    let g = global(&v).clone();
    w.agrees(&g);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 40);
    // The server served requests on as many connections as the client says it opened.
    let opened = counter(&g, "upstream_cx_total");
    assert_eq!(w.count("/connections/http1"), opened, "{strategy}");
    opened
}

#[test]
fn h1_reuse_strategy_mru_keeps_one_connection_hot_lru_rotates() {
    // 10 rps against a fast server: each request finishes long before the next is due (100 ms
    // apart, so a stall on a loaded machine rarely makes two overlap), so most-recently-used
    // reuse needs one connection (two at a stall) and least-recently-used cycles all four.
    let server = Server::start(&[]);
    let mru = connections_used(&server, "mru");
    assert!(mru <= 2, "mru opened {mru} connections");
    assert_eq!(connections_used(&server, "lru"), 4);
}

#[test]
fn address_family_selects_addresses() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let (g, w) = run_agreed(
        &server,
        &["run", &url, "--address-family", "v4", "--rps", "10", "--duration", "1"],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 10);
    assert_eq!(w.count("/connections/http1"), counter(&g, "upstream_cx_total"));
    let (out, w) =
        run_witnessed(&server, &["run", &url, "--address-family", "v6", "--duration", "1"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("no IPv6 addresses"), "{}", out.stderr);
    // Refused before anything was sent: the server saw no connection.
    assert_eq!((w.connections(), w.count("/requests")), (0, 0));
    let out = run(&["run", &url, "--address-family", "v5"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--address-family"), "{}", out.stderr);
    let out = run(&["run", &url, "--experimental-h1-connection-reuse-strategy", "fifo"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("mru or lru"), "{}", out.stderr);
}
