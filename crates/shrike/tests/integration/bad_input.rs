//! Bad input gets a clear message and the right exit code: 2 for usage, 1 for a failed run.

use std::time::Duration;

use crate::support::*;

fn expect(args: &[&str], code: i32, needle: &str) {
    let out = run(args, Duration::from_secs(20));
    assert_eq!(out.code(), code, "args {args:?}\nstderr:\n{}", out.stderr);
    assert!(
        out.stderr.to_lowercase().contains(&needle.to_lowercase()),
        "args {args:?}: stderr should mention {needle:?}:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let u = "http://127.0.0.1:9/";
    expect(&["run", "not a url"], 2, "scheme must be http");
    expect(&["run", "ftp://127.0.0.1/"], 2, "scheme must be http");
    expect(&["run", "http://127.0.0.1:99999/"], 2, "port");
    expect(&["run", "http://no-such-host.invalid/"], 2, "cannot resolve");
    expect(&["run", u, "--rps", "0"], 2, "'--rps <RATE|max>': must be a number greater than 0");
    expect(&["run", u, "--rps", "-5"], 2, "rps");
    expect(&["run", u, "--rps", "abc"], 2, "rps");
    expect(&["run", u, "--connections", "0"], 2, "--connections");
    expect(&["run", u, "--concurrency", "0"], 2, "--concurrency");
    expect(&["run", u, "--concurrency", "lots"], 2, "--concurrency");
    expect(&["run", u, "--duration", "soon"], 2, "--duration");
    expect(&["run", u, "--duration", "0"], 2, "--duration");
    expect(&["run", u, "--duration", "5", "--no-duration"], 2, "cannot be used with");
    expect(&["run", u, "--timeout", "0"], 2, "--timeout");
    expect(&["run", u, "--jitter-uniform", "x"], 2, "--jitter-uniform");
    expect(&["run", u, "--request-header", "no-colon"], 2, "--request-header");
    expect(&["run", u, "--request-method", "G ET"], 2, "method");
    expect(&["run", u, "--failure-predicate", "benchmark.http_9xx:0"], 2, "unknown counter");
    expect(&["run", u, "--termination-predicate", "benchmark.http_2xx"], 2, "COUNTER:THRESHOLD");
    expect(&["run", u, "--output-format", "xml"], 2, "xml");
    expect(&["run", u, "--max-requests-per-connection", "0"], 2, "--max-requests-per-connection");
    expect(&["run", u, "--no-such-flag"], 2, "--no-such-flag");
    expect(&["frobnicate"], 2, "frobnicate");
}

#[test]
fn port_nobody_listens_on_fails_the_run_with_exit_1() {
    // Bind and drop to find a port that is (almost certainly) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let out =
        run(&["run", &url, "--duration", "2", "--output-format", "json"], Duration::from_secs(20));
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("benchmark.pool_connection_failure"), "{}", out.stderr);
    assert!(out.stderr.to_lowercase().contains("connection refused"), "{}", out.stderr);
    // The result is still written.
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "upstream_cx_connect_fail") >= 1);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
}

#[test]
fn a_server_that_speaks_garbage_is_a_counted_failure_not_a_hang() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(50) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
        }
    });
    let url = format!("http://{addr}/");
    let out =
        run(&["run", &url, "--duration", "2", "--output-format", "json"], Duration::from_secs(20));
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("benchmark.stream_resets"), "{}", out.stderr);
    assert!(out.stderr.contains("invalid HTTP/1.1 response"), "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "upstream_cx_protocol_error") >= 1);
}

/// Every command that writes `-o FILE` checks it before it spends anything: a destination
/// that cannot be created (here, under a regular file) is a usage error naming it, at once,
/// with no load sent; missing parent directories are created (a fresh volume's `shards/`).
#[test]
fn an_output_that_cannot_be_written_is_refused_before_any_load() {
    let dir = scratch("output-checked-first");
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let bad = blocker.join("result.json");
    let bad = bad.to_str().unwrap();
    let jobs = dir.join("one.jobs");
    std::fs::write(&jobs, "{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"text\": \"GET / HTTP/1.1\\r\\n\\r\\n\"}]}\n").unwrap();
    let jobs = jobs.to_str().unwrap();
    let result = dir.join("r.json");
    std::fs::write(&result, "{}").unwrap();
    let result = result.to_str().unwrap();
    // Each would run for seconds (or fail with exit 1 after) if it sent load first.
    let server = Server::start(&[]);
    let url = server.url("/");
    let target = server.addr.as_str();
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", &url, "--rps", "50", "--duration", "5", "-o", bad],
        vec!["replay", jobs, "--target", target, "-o", bad],
        vec!["sweep", &url, "--rates", "10,20", "--duration", "5", "-o", bad],
        vec!["capacity", &url, "--slo", "p99<=50ms", "--trial-duration", "5s", "-o", bad],
        vec!["report", result, "-o", bad],
        vec!["transform", "--merge", result, "-o", bad],
        vec!["jobs", "filter", jobs, "-o", bad],
    ];
    for args in &commands {
        let began = std::time::Instant::now();
        let out = run(args, Duration::from_secs(30));
        assert_eq!(out.code(), 2, "{args:?}\n{}", out.stderr);
        assert!(
            out.stderr.contains(&format!("--output {bad}: cannot be written")),
            "{}",
            out.stderr
        );
        assert!(began.elapsed() < Duration::from_secs(3), "{args:?} ran before refusing");
    }

    // Missing parents are made, and the result lands there.
    let nested = dir.join("shards/0/result.json");
    let out =
        run(&["run", &url, "-n", "3", "-o", nested.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&nested).unwrap()).unwrap();
    assert!(written["results"].is_array());
}
