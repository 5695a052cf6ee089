//! The HTTP/2 client codec at its edges, through the real binary against real servers: receive
//! windows given back, head blocks split into CONTINUATION frames both ways, and a server that
//! does not speak HTTP/2 at all. (Request bodies under the server's flow control:
//! `protocols.rs`.)

use crate::support::nginx;

use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

const LIMIT: Duration = Duration::from_secs(60);

fn run_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output-format", "json"]);
    let out = run(&all, LIMIT);
    let code = out.code();
    let stderr = out.stderr.clone();
    (code, global(&json(&out)).clone(), stderr)
}

/// [`run_json`] against `server`, which must have counted every request the run sent, each
/// status class, and as many HTTP/2 connections.
fn run_served(server: &Server, args: &[&str]) -> (i32, serde_json::Value, String, Witness) {
    let before = Witness::before(server);
    let (code, g, stderr) = run_json(args);
    let w = Witness::since(server, before);
    w.agrees(&g);
    assert_eq!(w.count("/connections/http2"), counter(&g, "upstream_cx_http2_total"));
    (code, g, stderr, w)
}

#[test]
fn responses_larger_than_both_receive_windows_arrive_whole() {
    // 3 × 24 MiB on one connection, possibly at once: past the 16 MiB stream window and,
    // together, past the 64 MiB connection window, so this completes only if both are given
    // back as the bodies are counted.
    const SIZE: u64 = 24 << 20;
    let server = Server::start(&["--max-body-size", &(SIZE + 1).to_string()]);
    let config = format!(r#"x-nighthawk-test-server-config: {{"response_body_size":{SIZE}}}"#);
    let (code, g, stderr, w) = run_served(
        &server,
        &[
            &server.url("/"),
            "--protocol",
            "http2",
            "--request-header",
            &config,
            "--connections",
            "1",
            "--max-active-requests",
            "3",
            "--rps",
            "3",
            "--duration",
            "1",
            "--timeout",
            "30",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(counter(&g, "benchmark.http_2xx"), 3, "{stderr}");
    let body = statistic(&g, "benchmark_http_client.response_body_size");
    let want = SIZE.to_string();
    assert_eq!((body["raw_min"].as_str(), body["raw_max"].as_str()), (Some(&*want), Some(&*want)));
    assert!(counter(&g, "upstream_cx_rx_bytes_total") >= 3 * SIZE);
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 1);
    assert_eq!(w.count("/response_body_bytes"), 3 * SIZE, "the bodies the server sent");
}

#[test]
fn heads_split_into_continuation_frames_are_reassembled() {
    // A 20,000-byte header each way: the request's head block is split by the client, the
    // response's by the server, both past the 16,384-byte frame limit.
    let server = Server::start(&[]);
    let big = "v".repeat(20_000);
    let config = format!(
        r#"x-nighthawk-test-server-config: {{"response_headers":[{{"header":{{"key":"x-big","value":"{big}"}}}}]}}"#
    );
    let (code, g, stderr, _) = run_served(
        &server,
        &[
            &server.url("/"),
            "--protocol",
            "http2",
            "--request-header",
            &config,
            "--request-header",
            &format!("x-pad: {big}"),
            "--rps",
            "20",
            "--duration",
            "1",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(counter(&g, "benchmark.http_2xx"), 20, "{stderr}");
    let head = statistic(&g, "benchmark_http_client.response_header_size");
    let min: u64 = head["raw_min"].as_str().unwrap().parse().unwrap();
    let max: u64 = head["raw_max"].as_str().unwrap().parse().unwrap();
    // x-big's entry (name + value + 32) plus a few small fields.
    assert!((20_037..20_600).contains(&min), "head size {min}");
    assert_eq!(min, max);
}

#[test]
fn a_server_that_answers_in_http1_is_named_as_such() {
    let nginx = Nginx::start(Listen::Http1);
    let url = nginx.url("http", "127.0.0.1", "/file");
    let mark = nginx.mark();
    let (code, g, stderr) =
        run_json(&[&url, "--protocol", "http2", "--rps", "5", "--duration", "1"]);
    assert_eq!(code, 1, "every request failed, so the run failed:\n{stderr}");
    // nginx read each connection's preface as an HTTP/1.x request line and refused it: one
    // 400 for each connection the client found speaking HTTP/1.x, and no file served.
    let lines = nginx.access_log().split_off(mark);
    assert!(lines.iter().all(|e| e.status == 400 && e.request.starts_with("PRI * HTTP/2.0")));
    assert_eq!(lines.len() as u64, counter(&g, "upstream_cx_protocol_error"), "{lines:?}");
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    assert!(counter(&g, "upstream_cx_protocol_error") >= 1, "{g}");
    assert!(stderr.contains("HTTP/1.x"), "{stderr}");
}
