//! Shrike against a real nginx (Debian's package) on loopback.

use crate::support::nginx;

use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

#[test]
fn shrike_against_nginx_static_file() {
    let nginx = Nginx::start(Listen::Http1);
    let url = format!("http://127.0.0.1:{}/file", nginx.port);
    let mark = nginx.mark();
    let out = run(
        &[
            "run",
            &url,
            "--rps",
            "200",
            "--duration",
            "1",
            "--concurrency",
            "2",
            "--connections",
            "4",
            "--output-format",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let g = global(&json(&out)).clone();
    // Every release answered; on a loaded machine a worker that fell behind may still hold a
    // couple queued when the second ends, cancelled and said so.
    let (ok, cancelled) = (counter(&g, "benchmark.http_2xx"), counter(&g, "upstream_rq_cancelled"));
    assert_eq!(ok + cancelled, 400, "{g}");
    assert!(ok >= 390, "{g}");
    let body = statistic(&g, "benchmark_http_client.response_body_size");
    assert_eq!((body["raw_min"].as_str(), body["raw_max"].as_str()), (Some("4321"), Some("4321")));
    let hdr = statistic(&g, "benchmark_http_client.response_header_size");
    let min_hdr: u64 = hdr["raw_min"].as_str().expect("raw_min").parse().expect("n");
    assert!(min_hdr > 100, "nginx sends server/date/etag/... headers");
    assert!(counter(&g, "upstream_cx_rx_bytes_total") >= ok * (4321 + min_hdr));
    // nginx logged each answered request, each a 200, on the connections the client opened.
    let lines = nginx.agrees(mark, &g);
    let served_on: std::collections::BTreeSet<u64> = lines.iter().map(|e| e.connection).collect();
    assert_eq!(served_on.len() as u64, counter(&g, "upstream_cx_total"));
}

#[test]
fn nginx_404_fires_default_failure_predicate() {
    let nginx = Nginx::start(Listen::Http1);
    let url = format!("http://127.0.0.1:{}/missing", nginx.port);
    let mark = nginx.mark();
    let out = run(
        &["run", &url, "--rps", "50", "--duration", "2", "--output-format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("benchmark.http_4xx:0"), "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.http_4xx") >= 1);
    // nginx answered 404 to each request the client counted, and to none besides.
    let lines = nginx.agrees(mark, &g);
    assert!(lines.iter().all(|e| e.status == 404), "{lines:?}");
}
