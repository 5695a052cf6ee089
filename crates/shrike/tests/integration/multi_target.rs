//! Multi-target mode: requests rotate round robin over several endpoints.

use crate::support::nginx;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

const LIMIT: Duration = Duration::from_secs(30);

/// A minimal keep-alive HTTP/1.1 server that counts the requests it answers and records the
/// path and host header of the last one.
fn counting_server() -> (String, Arc<AtomicU64>, Arc<std::sync::Mutex<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let count = Arc::new(AtomicU64::new(0));
    let last = Arc::new(std::sync::Mutex::new(String::new()));
    let (c, l) = (count.clone(), last.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let (c, l) = (c.clone(), l.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        *l.lock().unwrap() = head;
                        c.fetch_add(1, Ordering::SeqCst);
                        if s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
                            return;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, count, last)
}

#[test]
fn requests_rotate_round_robin_over_endpoints() {
    let (a, count_a, last_a) = counting_server();
    let (b, count_b, last_b) = counting_server();
    let out = run(
        &[
            "run",
            "--multi-target-endpoint",
            &a,
            "--multi-target-endpoint",
            &b,
            "--multi-target-path",
            "/mt?x=1",
            "--rps",
            "40",
            "--duration",
            "1",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 40);
    assert_eq!(count_a.load(Ordering::SeqCst), 20);
    assert_eq!(count_b.load(Ordering::SeqCst), 20);
    let sent = counter(&g, "upstream_rq_total") + counter(&g, "upstream_rq_retry");
    assert_eq!(sent, 40, "the servers' counts are every request the client sent");
    // Each endpoint gets its own host header; the path is shared.
    let (la, lb) = (last_a.lock().unwrap().clone(), last_b.lock().unwrap().clone());
    assert!(la.starts_with("GET /mt?x=1 HTTP/1.1") && la.contains(&format!("host: {a}")), "{la}");
    assert!(lb.contains(&format!("host: {b}")), "{lb}");
    assert_eq!(v["options"]["multi_target_endpoints"][1], b.as_str());
    assert!(v["options"]["uri"].is_null());
}

#[test]
fn multi_target_over_h2c() {
    let n1 = Nginx::start(Listen::H2c);
    let n2 = Nginx::start(Listen::H2c);
    let (a, b) = (format!("127.0.0.1:{}", n1.port), format!("127.0.0.1:{}", n2.port));
    let (mark1, mark2) = (n1.mark(), n2.mark());
    let out = run(
        &[
            "run",
            "--protocol",
            "http2",
            "--multi-target-endpoint",
            &a,
            "--multi-target-endpoint",
            &b,
            "--multi-target-path",
            "/file",
            "--rps",
            "40",
            "--duration",
            "1",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 40);
    // One connection per endpoint: both endpoints were used.
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 2);
    // Each nginx logged half the requests, over HTTP/2, on one connection.
    let sent = counter(&g, "upstream_rq_total") + counter(&g, "upstream_rq_retry");
    assert_eq!(sent, 40);
    for (nginx, mark) in [(&n1, mark1), (&n2, mark2)] {
        let lines = nginx.access_log().split_off(mark);
        assert_eq!(lines.len(), 20, "{lines:?}");
        assert!(lines.iter().all(|e| e.status == 200 && e.request == "GET /file HTTP/2.0"));
        let on: std::collections::BTreeSet<u64> = lines.iter().map(|e| e.connection).collect();
        assert_eq!(on.len(), 1, "{lines:?}");
    }
}

#[test]
fn multi_target_usage_errors() {
    for (args, needle) in [
        (vec!["--multi-target-endpoint", "127.0.0.1"], "HOST:PORT"),
        (vec!["--multi-target-endpoint", "127.0.0.1:80/x"], "HOST:PORT"),
        (vec!["--multi-target-path", "/x"], "need --multi-target-endpoint"),
        (
            vec!["--multi-target-endpoint", "127.0.0.1:9", "--multi-target-path", "x"],
            "start with '/'",
        ),
        (
            vec!["http://127.0.0.1:9/", "--multi-target-endpoint", "127.0.0.1:9"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(&args);
        let out = run(&all, LIMIT);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?} should mention {needle:?}: {}", out.stderr);
    }
}
