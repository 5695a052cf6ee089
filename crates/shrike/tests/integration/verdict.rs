//! One verdict, computed once in the library's result: the same failing run started by
//! `shrike run`, by a gRPC client of `shrike service`, and by `shrike run --remote` fails the
//! same way, for the same reason, with the same exit code where there is one.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A target that accepts connections and never answers: every request times out, and no
/// default failure predicate counts timeouts (Nighthawk's do not), so only the rule "requests
/// were sent and none completed" can fail the run.
struct BlackHole {
    url: String,
    /// Request heads it has read (it reads everything, and writes nothing).
    heads: Arc<AtomicU64>,
}

impl BlackHole {
    fn heads(&self) -> u64 {
        self.heads.load(Ordering::Relaxed)
    }

    /// The heads read since `before`, once the client has gone (it reads while the
    /// connection lives, so a moment covers any that was in flight).
    fn since(&self, before: u64) -> u64 {
        std::thread::sleep(Duration::from_millis(100));
        self.heads() - before
    }
}

fn black_hole() -> BlackHole {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(AtomicU64::new(0));
    let counted = heads.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().take(64).flatten() {
            let heads = counted.clone();
            std::thread::spawn(move || read_heads(s, &heads));
        }
    });
    BlackHole { url: format!("http://{addr}/"), heads }
}

/// Reads `s` until the client closes it, counting the request heads (`\r\n\r\n` ends each;
/// these requests have no body).
fn read_heads(mut s: std::net::TcpStream, heads: &AtomicU64) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        seen.extend_from_slice(&buf[..n]);
        while let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            seen.drain(..i + 4);
            heads.fetch_add(1, Ordering::Relaxed);
        }
    }
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

/// `shrike run ARGS --output-format json`: the exit code, the stored verdict, stderr and the
/// `global` result.
fn cli(args: &[&str]) -> (i32, Value, String, Value) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let out = run(&all, LIMIT);
    let v = json(&out);
    (out.code(), v["shrike"]["verdict"].clone(), out.stderr, global(&v).clone())
}

#[test]
fn a_run_where_nothing_answers_fails_alike_however_it_is_started() {
    let service = Service::start(&["--allow-target", "127.0.0.0/8"]);
    let hole = black_hole();
    for (url, failure, reason, witness) in [
        // Nothing answers: no predicate fires, the rule does. The black hole read every
        // request sent.
        (
            hole.url.clone(),
            "nothing_completed",
            "no request completed: request timed out",
            Some(&hole),
        ),
        // Nothing listens: the default predicate on connection failures fires. (No one to
        // ask what arrived: nothing could.)
        (
            "http://127.0.0.1:9/".to_string(),
            "predicate",
            "failure predicate benchmark.pool_connection_failure:0 fired",
            None,
        ),
    ] {
        // Heads the black hole read since `before`, against what a run says it sent: every
        // request, and every one of them timed out.
        let sent_all = |before: u64, g: Option<&Value>| {
            if let Some(hole) = witness {
                let read = hole.since(before);
                assert_eq!(read, 3, "the three requests reached the black hole");
                if let Some(g) = g {
                    assert_eq!(counter(g, "upstream_rq_timeout"), read, "{g}");
                    assert_eq!(counter(g, "upstream_rq_total"), read, "{g}");
                }
            }
        };
        let args = ["run", &url, "-n", "3", "--timeout", "0.3s", "--rps", "20"];
        let before = hole.heads();
        let (code, local, stderr, g) = cli(&args);
        sent_all(before, Some(&g));
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(local["outcome"], "failed", "{local}");
        assert_eq!(local["failure"], failure, "{local}");
        let description = local["description"].as_str().unwrap().to_string();
        assert!(description.starts_with(&format!("failed: {reason}")), "{description}");
        assert!(stderr.contains(&format!("run failed: {reason}")), "{stderr}");

        let spec = serde_json::json!({"uri": url, "total_requests": 3, "no_duration": true,
            "timeout": "0.3s", "requests_per_second": 20});
        let before = hole.heads();
        let remote = over_grpc(&service, &spec);
        sent_all(before, None);
        assert_eq!(remote["failed"], true, "{remote}");
        assert_eq!(remote["verdict"], description.as_str(), "{remote}");
        assert_eq!(remote["document"], local, "{remote}");

        let mut fleet = args.to_vec();
        fleet.extend(["--remote", &service.addr, "--remote-start-delay", "0.5s"]);
        let before = hole.heads();
        let (code, coordinated, stderr, g) = cli(&fleet);
        sent_all(before, Some(&g));
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
    let hole = black_hole();
    let url = hole.url.clone();
    // No failure predicate at all: errors are no failure, not even when nothing completes.
    let before = hole.heads();
    let (code, v, stderr, g) =
        cli(&["run", &url, "-n", "2", "--timeout", "0.3s", "--no-default-failure-predicates"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["outcome"], "succeeded");
    // Both were sent (the black hole read them) and timed out.
    let read = hole.since(before);
    assert_eq!(read, 2);
    assert_eq!(counter(&g, "upstream_rq_timeout"), read, "{g}");
    // A replay has no default predicates, yet one in which nothing completed failed.
    let dir = scratch("verdict-replay");
    let jobs = dir.join("one.jobs");
    let job = r#"{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/"}]}"#;
    std::fs::write(&jobs, format!("{{\"shrike_jobs\": 1, \"protocol\": \"http\"}}\n{job}\n"))
        .unwrap();
    let before = hole.heads();
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
    let v = json(&out);
    assert_eq!(v["shrike"]["verdict"]["failure"], "nothing_completed");
    // The one request was sent (the black hole read it), and nothing completed.
    let read = hole.since(before);
    assert_eq!(read, 1);
    assert_eq!(counter(global(&v), "upstream_rq_total"), read, "{v}");
}
