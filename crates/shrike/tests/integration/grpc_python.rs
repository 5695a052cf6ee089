//! A real third-party gRPC client: Python's grpcio, with stubs generated from the proto in
//! the test, drives `shrike service` (run, stream samples, cancel, busy, refusals, capacity,
//! sweep, health, reflection). `.ci/run` installs grpcio, grpcio-tools, grpcio-health-checking and
//! grpcio-reflection from PyPI.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

#[test]
fn a_python_grpcio_client_drives_the_service() {
    let target = Server::start(&[]);
    let mut service = shrike()
        .args(["service", "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.0/8"])
        .args(["--token-env", "SHRIKE_TEST_TOKEN", "--max-rps", "1000"])
        .env("SHRIKE_TEST_TOKEN", "py-token")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut addr = String::new();
    BufReader::new(service.stdout.take().unwrap()).read_line(&mut addr).unwrap();
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/grpc_client.py");
    let client = Command::new("python3")
        .args([script, proto, addr.trim(), "py-token", &target.url("/")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_limited(client, Duration::from_secs(90));
    let _ = service.kill();
    let _ = service.wait();
    assert_eq!(out.code(), 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    for line in [
        "health: SERVING",
        "reflection:",
        "no token: UNAUTHENTICATED",
        "busy:",
        "run:",
        "closed stream: run stopped",
        "refusals:",
        "capacity:",
        "sweep: 4 runs streamed over 2 points",
        "sweep: a run over --max-rps is refused",
        "all ok",
    ] {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
    assert!(out.stdout.contains("shrike.v1.Shrike"), "{}", out.stdout);
}
