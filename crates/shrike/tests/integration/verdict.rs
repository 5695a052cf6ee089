//! One verdict, computed once in the library's result: the same failing run started by
//! `shrike run`, by a gRPC client of `shrike service`, and by `shrike run --remote` fails the
//! same way, for the same reason, with the same exit code where there is one.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A target that accepts connections and never answers: every request times out, and no
/// default failure predicate counts timeouts (Nighthawk's do not), so only the rule "requests
/// were sent and none completed" can fail the run.
fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().take(64).flatten() {
            held.push(s);
        }
    });
    format!("http://{addr}/")
}

/// How the service judged `spec`, asked by Python's grpcio.
fn over_grpc(service: &Service, spec: &Value) -> Value {
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/verdict_client.py");
    let client = Command::new("python3")
        .args([script, proto, &service.addr, &spec.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_limited(client, LIMIT);
    assert_eq!(out.code(), 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// `shrike run ARGS --output-format json`: the exit code and the stored verdict.
fn cli(args: &[&str]) -> (i32, Value, String) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let out = run(&all, LIMIT);
    let v = json(&out);
    (out.code(), v["shrike"]["verdict"].clone(), out.stderr)
}

#[test]
fn a_run_where_nothing_answers_fails_alike_however_it_is_started() {
    let service = Service::start(&["--allow-target", "127.0.0.0/8"]);
    for (url, failure, reason) in [
        // Nothing answers: no predicate fires, the rule does.
        (black_hole(), "nothing_completed", "no request completed: request timed out"),
        // Nothing listens: the default predicate on connection failures fires.
        (
            "http://127.0.0.1:9/".to_string(),
            "predicate",
            "failure predicate benchmark.pool_connection_failure:0 fired",
        ),
    ] {
        let args = ["run", &url, "-n", "3", "--timeout", "0.3s", "--rps", "20"];
        let (code, local, stderr) = cli(&args);
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(local["outcome"], "failed", "{local}");
        assert_eq!(local["failure"], failure, "{local}");
        let description = local["description"].as_str().unwrap().to_string();
        assert!(description.starts_with(&format!("failed: {reason}")), "{description}");
        assert!(stderr.contains(&format!("run failed: {reason}")), "{stderr}");

        let spec = serde_json::json!({"uri": url, "total_requests": 3, "no_duration": true,
            "timeout": "0.3s", "requests_per_second": 20});
        let remote = over_grpc(&service, &spec);
        assert_eq!(remote["failed"], true, "{remote}");
        assert_eq!(remote["verdict"], description.as_str(), "{remote}");
        assert_eq!(remote["document"], local, "{remote}");

        let mut fleet = args.to_vec();
        fleet.extend(["--remote", &service.addr, "--remote-start-delay", "0.5s"]);
        let (code, coordinated, stderr) = cli(&fleet);
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(coordinated["failure"], failure, "{coordinated}");
        assert!(
            coordinated["description"].as_str().unwrap().starts_with(&format!("failed: {reason}")),
            "{coordinated}"
        );
    }
}

#[test]
fn tolerated_failures_and_replays_are_judged_by_their_own_rules() {
    let url = black_hole();
    // No failure predicate at all: errors are no failure, not even when nothing completes.
    let (code, v, stderr) =
        cli(&["run", &url, "-n", "2", "--timeout", "0.3s", "--no-default-failure-predicates"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["outcome"], "succeeded");
    // A replay has no default predicates, yet one in which nothing completed failed.
    let dir = scratch("verdict-replay");
    let jobs = dir.join("one.jobs");
    let job = r#"{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/"}]}"#;
    std::fs::write(&jobs, format!("{{\"shrike_jobs\": 1, \"protocol\": \"http\"}}\n{job}\n"))
        .unwrap();
    let out = run(
        &[
            "replay",
            jobs.to_str().unwrap(),
            "--target",
            &url,
            "--timeout",
            "0.3s",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(json(&out)["shrike"]["verdict"]["failure"], "nothing_completed");
}
