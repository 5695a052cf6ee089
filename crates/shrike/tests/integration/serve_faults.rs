//! Fault injection in `shrike serve`, driven by `shrike run` (and curl) through the real
//! binaries: resets, truncations, stalls and injected statuses on HTTP/1.1, HTTP/2 and HTTP/3.
//! The client must keep running to its end and count each fault; the server's statistics
//! endpoint must agree with what the client saw.

use crate::support::dice;

use std::process::Command;

use crate::support::*;
use dice::{binomial_9999, Dice};

const CONFIG: &str = "x-nighthawk-test-server-config";
const STATS: &str = "/.shrike/stats";

/// `shrike run` against `url` on `server` with `config` in the header, without the default
/// failure predicates (they would end the run at the first fault), `rps` for one second; its
/// `global` result and what the server counted meanwhile, which each test compares with it.
/// Each connection the server served, and each handshake it completed, was one the run
/// counted (the run may also count one it opened as it ended, before the server saw it).
fn run_with(
    server: &impl Counted,
    url: &str,
    protocol: &str,
    config: &str,
    rps: &str,
    extra: &[&str],
) -> (serde_json::Value, Witness) {
    let (v, w) = run_doc(server, url, protocol, config, rps, extra);
    (global(&v).clone(), w)
}

/// [`run_with`], with the run's whole JSON document.
fn run_doc(
    server: &impl Counted,
    url: &str,
    protocol: &str,
    config: &str,
    rps: &str,
    extra: &[&str],
) -> (serde_json::Value, Witness) {
    let header = format!("{CONFIG}: {config}");
    let mut args = vec![
        "run",
        url,
        "--protocol",
        protocol,
        "--no-default-failure-predicates",
        "--request-header",
        &header,
        "--rps",
        rps,
        "--duration",
        "1",
        "--output-format",
        "json",
    ];
    args.extend(extra);
    let (out, w) = run_witnessed(server, &args, std::time::Duration::from_secs(60));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    assert!(w.connections() <= counter(g, "upstream_cx_total"), "connections: {g}");
    assert!(w.count("/tls/handshakes") <= counter(g, "ssl.handshake"), "handshakes: {g}");
    (v, w)
}

fn stats(server: &Server) -> serde_json::Value {
    server.stats(STATS)
}

/// Asserts a seeded run's fault count. The count is exact: on a fresh server every request
/// rolls the same config's dice, so `n` requests see exactly draws `0..n` (see `support/dice.rs`),
/// whatever order they arrived in. The expected count itself must lie in the 99.99% binomial
/// interval, which checks that the seed picked is not a freak and the dice are fair.
fn assert_seeded(what: &str, got: u64, expected: u64, n: u64, p: f64) {
    let fair = binomial_9999(n, p);
    assert!(fair.contains(&expected), "{what}: model says {expected} of {n}, outside {fair:?}");
    assert_eq!(got, expected, "{what}: {got} of {n} requests, the seeded dice give {expected}");
}

#[test]
fn h1_reset_is_a_tcp_rst_counted_as_a_stream_reset() {
    let server = Server::start(&["--stats-path", STATS]);
    let (g, w) = run_with(&server, &server.url("/"), "http1", r#"{"reset": {}}"#, "100", &[]);
    w.agrees(&g);
    let sent = counter(&g, "upstream_rq_total");
    assert!(sent >= 90, "{sent} requests");
    assert_eq!(counter(&g, "benchmark.stream_resets"), sent);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    // Every reset took its connection with it; the client reconnected each time.
    assert!(counter(&g, "upstream_cx_total") >= sent, "{g}");
    assert_eq!(w.count("/connections/http1"), sent, "each request came on its own connection");
    let s = stats(&server);
    assert_eq!(s["faults"]["reset_stream"], sent);
    assert_eq!(s["requests"], sent);
    assert_eq!(s["responses"]["2xx"], 0);
}

#[test]
fn h2_stream_resets_with_probability_0_3() {
    let server = Server::start(&["--stats-path", STATS]);
    let config = r#"{"reset": {"scope": "stream", "probability": 0.3}, "seed": 42}"#;
    let (g, w) = run_with(&server, &server.url("/"), "http2", config, "400", &[]);
    w.agrees(&g);
    let sent = counter(&g, "upstream_rq_total");
    let resets = counter(&g, "benchmark.stream_resets");
    let ok = counter(&g, "benchmark.http_2xx");
    assert!(sent >= 380, "{sent}");
    assert_eq!(resets + ok, sent);
    let dice = Dice { seed: 42, reset: Some(0.3), status: None };
    assert_seeded("resets", resets, dice.count(0..sent).resets, sent, 0.3);
    // Stream resets leave the connection up.
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 1);
    assert_eq!(w.count("/connections/http2"), 1);
    let s = stats(&server);
    assert_eq!(s["faults"]["reset_stream"], resets);
    assert_eq!(s["responses"]["2xx"], ok);
}

#[test]
fn h2_connection_reset_is_goaway_and_the_run_continues() {
    let server = Server::start(&[]);
    let config = r#"{"reset": {"scope": "connection"}}"#;
    let (out, w) = run_doc(&server, &server.url("/"), "http2", config, "50", &[]);
    let g = global(&out).clone();
    let sent = counter(&g, "upstream_rq_total");
    assert!(sent >= 45, "{sent}");
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    assert_eq!(counter(&g, "benchmark.stream_resets"), sent);
    assert!(counter(&g, "upstream_cx_http2_total") > 1, "reconnected: {g}");
    // The streams the server processed are those its GOAWAY covered: each failed with its
    // connection, which the server ended for it. A stream sent above the GOAWAY's last id was
    // refused unprocessed and sent again (a retry the server never counts as a request), so
    // the server's requests are the streams cut off, not the client's sends.
    let cut_off = errors_starting(&out, "HTTP/2 stream ended by the server's GOAWAY");
    assert!(cut_off <= sent, "{}", out["shrike"]["errors"]);
    assert_eq!(w.count("/requests"), cut_off, "{}", out["shrike"]["errors"]);
    assert_eq!(w.count("/faults/reset_connection"), cut_off);
    assert_eq!(w.count("/responses/2xx"), 0);
}

/// How many errors the run's JSON `out` lists whose message starts with `prefix`.
fn errors_starting(out: &serde_json::Value, prefix: &str) -> u64 {
    out["shrike"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter(|e| e["message"].as_str().expect("message").starts_with(prefix))
        .map(|e| {
            e["count"].as_str().map_or_else(|| e["count"].as_u64().unwrap(), |c| c.parse().unwrap())
        })
        .sum()
}

#[test]
fn status_faults_give_503_about_20_percent() {
    let config = r#"{"status_faults": [{"status": 503, "probability": 0.2}], "seed": 20}"#;
    for protocol in ["http1", "http2"] {
        // A fresh server per protocol, so its draws start at 0 (see `assert_seeded`).
        let server = Server::start(&["--stats-path", STATS]);
        let (g, w) = run_with(&server, &server.url("/"), protocol, config, "400", &[]);
        w.agrees(&g);
        let sent = counter(&g, "upstream_rq_total");
        let errors = counter(&g, "benchmark.http_5xx");
        assert!(sent >= 380, "{protocol}: {sent}");
        assert_eq!(errors + counter(&g, "benchmark.http_2xx"), sent, "{protocol}");
        let dice = Dice { seed: 20, reset: None, status: Some(0.2) };
        assert_seeded(protocol, errors, dice.count(0..sent).statuses, sent, 0.2);
        let s = stats(&server);
        assert_eq!(s["requests"], sent, "{protocol}");
        assert_eq!(s["responses"]["5xx"], errors, "{protocol}");
        assert_eq!(s["faults"]["status"], errors, "{protocol}");
    }
}

#[test]
fn close_after_bytes_truncates_on_h1_and_h2() {
    let server = Server::start(&[]);
    let config = r#"{"response_body_size": 1000, "close_after_bytes": {"bytes": 100}}"#;
    for protocol in ["http1", "http2"] {
        let (g, w) = run_with(&server, &server.url("/"), protocol, config, "50", &[]);
        let sent = counter(&g, "upstream_rq_total");
        assert!(sent >= 45, "{protocol}: {sent}");
        assert_eq!(counter(&g, "benchmark.stream_resets"), sent, "{protocol}: {g}");
        assert_eq!(counter(&g, "benchmark.http_2xx"), 0, "{protocol}");
        // The server began each answer as a 200 and cut it after 100 body bytes: a 200 to the
        // server, a reset stream to the client.
        assert_eq!(w.count("/requests"), sent, "{protocol}");
        assert_eq!(w.count("/faults/close_after_bytes"), sent, "{protocol}");
        assert_eq!(w.count("/responses/2xx"), sent, "{protocol}");
        assert_eq!(w.count("/response_body_bytes"), 100 * sent, "{protocol}");
    }
    // curl sees the head, 100 bytes, then the end.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{size_download} %{http_code}", "--max-time", "5"])
        .args(["-H", &format!("{CONFIG}: {config}"), &server.url("/")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "100 200");
    assert_ne!(out.status.code(), Some(0), "curl must report the truncated transfer");
}

#[test]
fn stall_before_the_head_and_mid_body() {
    let server = Server::start(&[]);
    let before = r#"{"stall": {"duration": "0.2s"}}"#;
    for protocol in ["http1", "http2"] {
        let (g, w) = run_with(&server, &server.url("/"), protocol, before, "10", &[]);
        w.agrees(&g);
        assert_eq!(counter(&g, "benchmark.http_2xx"), 10, "{protocol}");
        assert_eq!(w.count("/faults/stall"), 10, "{protocol}: the server stalled each");
        let min = secs(&statistic(&g, "benchmark_http_client.request_to_response")["min"]);
        assert!(min >= 0.2, "{protocol}: {min}");
    }
    // Mid-body: the head and first 10 bytes come at once, the rest 300 ms later.
    let mid = r#"{"response_body_size": 20, "stall": {"duration": "0.3s", "after_bytes": 10}}"#;
    for http2 in [false, true] {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-o", "/dev/null", "--max-time", "5"])
            .args(["-w", "%{time_starttransfer} %{time_total} %{size_download}"])
            .args(["-H", &format!("{CONFIG}: {mid}"), &server.url("/")]);
        if http2 {
            curl.arg("--http2-prior-knowledge");
        }
        let out = String::from_utf8(curl.output().unwrap().stdout).unwrap();
        let v: Vec<f64> = out.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(v[2], 20.0, "{out}");
        assert!(v[0] < 0.2, "head came late: {out}");
        assert!(v[1] >= 0.3, "{out}");
        // curl may notice the first byte a little late, so allow some of the stall before it.
        assert!(v[1] - v[0] >= 0.27, "no stall mid-body: {out}");
    }
}

#[test]
fn bad_fault_values_get_a_500_naming_the_field() {
    let server = Server::start(&[]);
    for (config, field) in [
        (r#"{"reset": {"probability": 1.5}}"#, "reset.probability"),
        (r#"{"status_faults": [{"status": 42, "probability": 0.1}]}"#, "status_faults.status"),
        (r#"{"stall": {"duration": "soon"}}"#, "stall.duration"),
        (r#"{"delay_distribution": {"uniform": {"min": "5ms", "max": "1ms"}}}"#, "uniform"),
        (r#"{"reset": {"scope": "socket"}}"#, "unknown variant `socket`"),
        (r#"{"response_chunk_delay": "x"}"#, "response_chunk_delay"),
    ] {
        let out = Command::new("curl")
            .args(["-s", "-w", " %{http_code}", "--max-time", "5"])
            .args(["-H", &format!("{CONFIG}: {config}"), &server.url("/")])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.ends_with(" 500"), "{config}: {text}");
        assert!(text.contains(field), "{config}: {text}");
    }
}

#[test]
fn h3_stream_reset_is_counted() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    let url = server.url();
    let config = r#"{"reset": {"probability": 0.5}, "seed": 7}"#;
    let (g, w) = run_with(&server, &url, "http3", config, "100", &["--tls-ca", &server.ca]);
    w.agrees(&g);
    let g = &g;
    let sent = counter(g, "upstream_rq_total");
    let resets = counter(g, "benchmark.stream_resets");
    assert!(sent >= 90, "{sent}");
    assert_eq!(resets + counter(g, "benchmark.http_2xx"), sent);
    assert_eq!(w.count("/faults/reset_stream"), resets, "the streams the server reset");
    assert_eq!(w.count("/connections/http3"), counter(g, "upstream_cx_http3_total"));
    let dice = Dice { seed: 7, reset: Some(0.5), status: None };
    assert_seeded("resets", resets, dice.count(0..sent).resets, sent, 0.5);
}

#[test]
fn tls_h1_reset_and_h3_truncation_are_counted() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    let url = server.url();
    let cases = [
        ("http1", r#"{"reset": {"scope": "connection"}}"#),
        ("http3", r#"{"response_body_size": 5000, "close_after_bytes": {"bytes": 1000}}"#),
        ("http3", r#"{"reset": {"scope": "connection"}}"#),
    ];
    for (protocol, config) in cases {
        let (g, w) = run_with(&server, &url, protocol, config, "30", &["--tls-ca", &server.ca]);
        let g = &g;
        let sent = counter(g, "upstream_rq_total");
        assert!(sent >= 25, "{protocol} {config}: {sent}");
        assert_eq!(counter(g, "benchmark.stream_resets"), sent, "{protocol} {config}: {g}");
        assert_eq!(counter(g, "benchmark.http_2xx"), 0, "{protocol} {config}");
        // The server broke each answer as told: a connection ended per request, or each 200
        // cut after 1000 body bytes (a 200 to the server, a reset stream to the client).
        if config.contains("close_after_bytes") {
            assert_eq!(w.count("/requests"), sent, "{protocol} {config}");
            assert_eq!(w.count("/faults/close_after_bytes"), sent, "{protocol} {config}");
            assert_eq!(w.count("/responses/2xx"), sent, "{protocol} {config}");
        } else if protocol == "http1" {
            // One request at a time on a connection, each read before its connection ended.
            w.agrees(g);
            assert_eq!(w.count("/faults/reset_connection"), sent, "{protocol} {config}");
            assert_eq!(w.count("/connections/http1"), sent, "{protocol}: a connection each");
        } else {
            // Each request the server processed ended its connection; a stream that reached a
            // connection as it closed was never processed, though the client counts it reset.
            let served = w.count("/requests");
            assert_eq!(w.count("/faults/reset_connection"), served, "{protocol} {config}");
            assert!((1..=sent).contains(&served), "{protocol} {config}: server {served}");
            assert_eq!(w.count("/responses/2xx"), 0, "{protocol} {config}");
        }
    }
}

/// A peer client agrees: h2load's own status and error counts match the server's statistics.
#[test]
fn h2load_counts_match_the_stats_endpoint() {
    let server = Server::start(&["--stats-path", STATS]);
    let config = r#"{"status_faults": [{"status": 503, "probability": 0.2}],
        "reset": {"probability": 0.1}, "seed": 3}"#
        .replace('\n', " ");
    let out = Command::new("timeout")
        .args(["20", "h2load", "-n", "300", "-c", "4", "-m", "10", "-H"])
        .arg(format!("{CONFIG}: {config}"))
        .arg(server.url("/"))
        .output()
        .expect("timeout runs");
    // timeout(1) exits 127 when it cannot find the command.
    assert_ne!(out.status.code(), Some(127), "h2load is missing: install Debian's nghttp2-client");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |line: &str, suffix: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(line)).unwrap_or_else(|| panic!("{text}"));
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let at = words.iter().position(|w| *w == suffix).unwrap_or_else(|| panic!("{line}"));
        words[at - 1].parse().unwrap()
    };
    let (ok, errors) = (field("status codes:", "2xx"), field("status codes:", "5xx"));
    let errored = field("requests:", "errored");
    assert_eq!(ok + errors + errored, 300, "{text}");
    let s = stats(&server);
    assert_eq!(s["requests"], 300);
    assert_eq!(s["responses"]["2xx"], ok);
    assert_eq!(s["responses"]["5xx"], errors);
    assert_eq!(s["faults"]["status"], errors);
    assert_eq!(s["faults"]["reset_stream"], errored);
    // h2load's 300 requests are the fresh server's draws 0..300; a reset pre-empts the status
    // roll, so of the rest a fifth (not a fifth of all 300) get the 503.
    let dice = Dice { seed: 3, reset: Some(0.1), status: Some(0.2) }.count(0..300);
    assert_seeded("resets", errored, dice.resets, 300, 0.1);
    assert_seeded("503s", errors, dice.statuses, 300 - dice.resets, 0.2);
}
