//! Nighthawk's gRPC API as `shrike service` serves it and `shrike run --nighthawk-service`
//! speaks it: a Python grpcio client generated from the protos, a round trip against a local
//! run, refusals by name, and `--listener-address-file`. `.ci/run` installs grpcio and
//! grpcio-tools from PyPI.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// `shrike service` on 127.0.0.1:0 (loopback: no token needed), killed on drop.
struct Service {
    child: Child,
    addr: String,
}

impl Service {
    fn start(extra: &[&str]) -> Service {
        let mut child = shrike()
            .args(["service", "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.0/8"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut addr = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut addr).unwrap();
        Service { child, addr: addr.trim().to_string() }
    }

    fn uri(&self) -> String {
        format!("grpc://{}", self.addr)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_python_client_runs_a_test_through_execution_stream() {
    let target = Server::start(&[]);
    let service = Service::start(&[]);
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/nighthawk");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/nighthawk_client.py");
    let client = Command::new("python3")
        .args([script, proto, &service.addr, &target.url("/")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_limited(client, Duration::from_secs(90));
    assert_eq!(out.code(), 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    for line in
        ["run:", "unsupported:", "failed run:", "nighthawk.client.NighthawkService", "all ok"]
    {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
}

/// The same paced run here and through the service: the same request count (a paced run of
/// 1 worker at 200/s for 2 s plans exactly 400), and the remote result keeps its exact
/// histograms through Nighthawk's Output.
#[test]
fn a_run_through_the_service_counts_as_a_local_one() {
    let target = Server::start(&[]);
    let service = Service::start(&[]);
    let url = target.url("/");
    let args = ["run", &url, "--rps", "200", "--duration", "2", "--connections", "4"];
    let local = run_json_ok(&args);
    let remote = run_json_ok(&[&args[..], &["--nighthawk-service", &service.uri()]].concat());
    for doc in [&local, &remote] {
        assert_eq!(counter(global(doc), "upstream_rq_total"), 400, "{doc}");
        assert_eq!(counter(global(doc), "benchmark.http_2xx"), 400, "{doc}");
    }
    let latency = statistic(global(&remote), "benchmark_http_client.request_to_response");
    assert_eq!(latency["count"], "400");
    assert!(latency["shrike_histogram"].as_str().is_some_and(|h| !h.is_empty()), "{latency}");
    // How the run ended travels in Shrike's extension.
    assert_eq!(remote["shrike"]["termination"]["kind"], local["shrike"]["termination"]["kind"]);
    assert_eq!(remote["options"]["requests_per_second"], 200);
}

#[test]
fn refusals_name_the_option() {
    let target = Server::start(&[]);
    let service = Service::start(&["--max-rps", "500"]);
    let url = target.url("/");
    // An option Nighthawk's API has no field for: refused before anything is sent.
    let out = run(
        &["run", &url, "-n", "10", "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("total_requests"), "{}", out.stderr);
    // The service's own limits answer as error_detail; the client reports them as refusals.
    let out = run(
        &["run", &url, "--rps", "900", "--duration", "1", "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("max-rps") || out.stderr.contains("rps"), "{}", out.stderr);
    // Outside the allowlist.
    let out = run(
        &["run", "http://192.0.2.1:9/", "--nighthawk-service", &service.uri(), "--duration", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("allowlist"), "{}", out.stderr);
}

#[test]
fn the_listener_address_file_names_the_bound_port() {
    let dir = scratch("listener-address");
    let file = dir.join("addr");
    let service = Service::start(&["--listener-address-file", file.to_str().unwrap()]);
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.trim(), service.addr);
}
