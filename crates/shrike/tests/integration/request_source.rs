//! `--request-source grpc://…` against `shrike service --service dummy-request-source`: each
//! worker streams its requests from the source, nginx sees exactly the requests served, each
//! once, in order on each worker's connection, and the run ends when the source is spent.
//! The same through a service (`--nighthawk-service`), which connects to the source itself.

use crate::support::nginx;

use std::collections::BTreeMap;

use crate::support::*;
use nginx::{Listen, Nginx};

const N: usize = 60;

fn source() -> Service {
    let dir = scratch("request-source");
    let file = dir.join("requests.jsonl");
    let lines: Vec<String> = (0..N)
        .map(|i| {
            format!(r#"{{"method": "GET", "path": "/file?r={i}", "headers": {{"x-i": "{i}"}}}}"#)
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    Service::start(&["--service", "dummy-request-source", "--request-file", file.to_str().unwrap()])
}

/// Every served request reached nginx once, and each connection (one per worker) saw its
/// requests in the order the source served them.
fn check_log(target: &Nginx) {
    let log = target.access_log();
    assert_eq!(log.len(), N, "{log:?}");
    let mut by_connection: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for e in &log {
        let i: usize = e
            .request
            .split("?r=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("unexpected request {:?}", e.request));
        by_connection.entry(e.connection).or_default().push(i);
    }
    let mut all: Vec<usize> = by_connection.values().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "each request exactly once");
    // One connection per worker; a worker that asked late may have found the list spent.
    assert!((1..=2).contains(&by_connection.len()), "{by_connection:?}");
    for (c, seq) in &by_connection {
        assert!(seq.windows(2).all(|w| w[0] < w[1]), "connection {c} out of order: {seq:?}");
    }
}

#[test]
fn workers_send_exactly_the_requests_the_source_serves() {
    let target = Nginx::start_logged(Listen::Http1);
    let source = source();
    let url = target.url("http", "127.0.0.1", "/");
    let uri = format!("grpc://{}", source.addr);
    let mark = target.mark();
    // 2 workers at 100/s each for up to 10 s: the source's 60 requests end the run first.
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-source",
        &uri,
        "--concurrency",
        "2",
        "--connections",
        "1",
        "--rps",
        "100",
        "--duration",
        "10",
    ]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), N as u64);
    assert_eq!(v["options"]["request_source"], uri.as_str());
    let took = secs(&global(&v)["execution_duration"]);
    assert!(took < 5.0, "the run ends when the source is spent, took {took}s");
    check_log(&target);
    target.agrees(mark, global(&v));
}

#[test]
fn a_service_streams_from_the_source_itself() {
    let target = Nginx::start_logged(Listen::Http1);
    let source = source();
    let generator = Service::start(&["--allow-target", "127.0.0.0/8"]);
    let url = target.url("http", "127.0.0.1", "/");
    let mark = target.mark();
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-source",
        &format!("grpc://{}", source.addr),
        "--nighthawk-service",
        &format!("grpc://{}", generator.addr),
        "--concurrency",
        "2",
        "--connections",
        "1",
        "--rps",
        "100",
        "--duration",
        "10",
    ]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), N as u64);
    check_log(&target);
    target.agrees(mark, global(&v));
}

#[test]
fn nighthawks_dummy_source_is_endless_and_an_unreachable_one_fails_the_run() {
    let target = Server::start(&[]);
    let dummy = Service::start(&["--service", "dummy-request-source"]);
    let (g, w) = run_agreed(
        &target,
        &[
            "run",
            &target.url("/"),
            "--request-source",
            &format!("grpc://{}", dummy.addr),
            "-n",
            "25",
            "--rps",
            "200",
        ],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 25);
    assert_eq!(w.count("/responses/2xx"), 25);
    // Nothing listens there: the workers' streams fail, the run says why and sent nothing.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (out, w) = run_witnessed(
        &target,
        &[
            "run",
            &target.url("/"),
            "--request-source",
            &format!("grpc://127.0.0.1:{port}"),
            "--duration",
            "2",
        ],
        std::time::Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "sent nothing, by the target's count");
    assert!(out.stderr.contains("request source grpc://127.0.0.1"), "{}", out.stderr);
}

/// A jobs file's HTTP requests, served in the order they were sent (job start + offset),
/// whatever the order of the jobs in the file.
#[test]
fn a_jobs_file_is_served_in_send_order() {
    let dir = scratch("request-source-jobs");
    let jobs = dir.join("traffic.jobs");
    std::fs::write(
        &jobs,
        concat!(
            "{\"shrike_jobs\": 1}\n",
            "{\"job\": 1, \"start\": 0.0, \"requests\": [{\"at\": 0, \"text\": \"GET /file?r=0 HTTP/1.1\\r\\nHost: shop.example\\r\\n\\r\\n\"}, ",
            "{\"at\": 0.3, \"method\": \"POST\", \"path\": \"/upload?r=3\", \"body\": \"hello\"}]}\n",
            "{\"job\": 2, \"start\": 0.1, \"requests\": [{\"at\": 0, \"method\": \"GET\", \"path\": \"/file?r=1\"}, ",
            "{\"at\": 0.1, \"method\": \"GET\", \"path\": \"/file?r=2\"}]}\n",
        ),
    )
    .unwrap();
    let source =
        Service::start(&["--service", "dummy-request-source", "--jobs", jobs.to_str().unwrap()]);
    let target = Nginx::start_logged(Listen::Http1);
    let url = target.url("http", "127.0.0.1", "/");
    let mark = target.mark();
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-source",
        &format!("grpc://{}", source.addr),
        "--rps",
        "50",
        "--duration",
        "10",
        "--connections",
        "1",
    ]);
    assert_eq!(counter(global(&v), "upstream_rq_total"), 4);
    target.agrees(mark, global(&v));
    let log = target.access_log();
    let requests: Vec<&str> = log.iter().map(|e| e.request.as_str()).collect();
    assert_eq!(
        requests,
        [
            "GET /file?r=0 HTTP/1.1",
            "GET /file?r=1 HTTP/1.1",
            "GET /file?r=2 HTTP/1.1",
            "POST /upload?r=3 HTTP/1.1"
        ]
    );
    // The captured host travels as the authority; the body as its length.
    assert_eq!(log[0].host, "shop.example");
    assert!(log[3].request_length > log[2].request_length);
}
