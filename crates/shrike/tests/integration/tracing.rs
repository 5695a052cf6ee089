//! `--trace zipkin://…`: a local collector (a plain HTTP listener in this test, standing in for
//! Zipkin's `/api/v2/spans`) receives one span per sampled request, as many as the sample rate
//! says, with valid ids that match the B3 headers nginx logged on the wire, and the scheduled
//! and actual send times as annotations. Over HTTP/1.1 and HTTP/2.

use crate::support::nginx;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};
use serde_json::Value;

/// Accepts POSTs of JSON span arrays (answering 202 as Zipkin does) until dropped.
struct Collector {
    addr: String,
    spans: Arc<Mutex<Vec<Value>>>,
    posts: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let posts = Arc::new(Mutex::new(Vec::new()));
        let (s, p) = (spans.clone(), posts.clone());
        // The thread ends with the test process; each connection is one bounded POST.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                p.lock().unwrap().push(line.trim().to_string());
                let mut length = 0;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let batch: Value = serde_json::from_slice(&body).unwrap();
                s.lock().unwrap().extend(batch.as_array().unwrap().iter().cloned());
                let _ = conn.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
            }
        });
        Collector { addr, spans, posts }
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0')
}

fn traced_run(protocol: &str, listen: Listen) {
    let target = Nginx::start_b3_logged(listen);
    let collector = Collector::start();
    let url = target.url("http", "127.0.0.1", "/file");
    let trace = format!("zipkin://{}/api/v2/spans", collector.addr);
    // 400 requests (200/s for 2 s), a quarter of them traced.
    let v = run_json_ok(&[
        "run",
        &url,
        "-p",
        protocol,
        "--rps",
        "200",
        "--duration",
        "2",
        "--trace",
        &trace,
        "--trace-sample-rate",
        "0.25",
    ]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 400);
    assert!(v["shrike"]["errors"].as_array().is_none_or(|e| e.is_empty()), "{}", v["shrike"]);

    let spans = collector.spans.lock().unwrap().clone();
    // Binomial(400, 0.25): mean 100, sd 8.7; ±35 is four standard deviations.
    assert!((65..=135).contains(&spans.len()), "{} spans", spans.len());
    assert!(collector.posts.lock().unwrap().iter().all(|p| p == "POST /api/v2/spans HTTP/1.1"));
    for s in &spans {
        assert!(is_hex(s["traceId"].as_str().unwrap(), 32), "{s}");
        assert!(is_hex(s["id"].as_str().unwrap(), 16), "{s}");
        assert_eq!(s["kind"], "CLIENT");
        assert_eq!(s["tags"]["http.status_code"], "200");
        assert_eq!(s["tags"]["http.path"], "/file");
        assert!(s["duration"].as_u64().unwrap() >= 1);
        let notes: Vec<&str> = s["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["value"].as_str().unwrap())
            .collect();
        assert_eq!(notes, ["scheduled", "sent"], "{s}");
        let scheduled = s["annotations"][0]["timestamp"].as_u64().unwrap();
        let sent = s["annotations"][1]["timestamp"].as_u64().unwrap();
        assert!(sent + 1 >= scheduled && sent.saturating_sub(scheduled) < 1_000_000, "{s}");
    }
    // The wire: exactly the traced requests carried B3 headers, with the spans' ids.
    let log = target.raw_access_log();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 400, "{log}");
    let on_wire: BTreeSet<(String, String)> = lines
        .iter()
        .filter(|l| !l.starts_with("- "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f[2], "1", "x-b3-sampled: {l}");
            (f[0].to_string(), f[1].to_string())
        })
        .collect();
    let in_spans: BTreeSet<(String, String)> = spans
        .iter()
        .map(|s| (s["traceId"].as_str().unwrap().into(), s["id"].as_str().unwrap().into()))
        .collect();
    assert_eq!(on_wire.len(), spans.len(), "every traced request has its own ids");
    assert_eq!(on_wire, in_spans);
}

#[test]
fn http1_spans_match_the_sample_rate_and_the_b3_headers_on_the_wire() {
    traced_run("http1", Listen::Http1);
}

#[test]
fn http2_spans_match_the_sample_rate_and_the_b3_headers_on_the_wire() {
    traced_run("http2", Listen::H2c);
}

#[test]
fn an_unreachable_collector_is_reported_not_fatal() {
    let target = Server::start(&[]);
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let trace = format!("zipkin://127.0.0.1:{port}/api/v2/spans");
    let (out, w) = run_witnessed(
        &target,
        &["run", &target.url("/"), "--rps", "50", "--duration", "1", "--trace", &trace],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("spans not delivered"), "{}", out.stderr);
    // The load went on regardless: the target answered the whole run (1 s at 50/s).
    assert_eq!(w.count("/responses/2xx"), 50);
    assert_eq!(w.count("/requests"), 50);
}
