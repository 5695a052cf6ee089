//! Ctrl-C mid-run still writes what was measured.

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

#[test]
fn sigint_mid_run_still_writes_the_result() {
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let child = shrike()
        .args(["run", &server.url("/"), "--no-duration", "--rps", "50", "--output-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = wait_limited(child, Duration::from_secs(20));
    // 130, as shells report Ctrl-C: the result is written, and scripts can still tell the
    // run was cut short.
    assert_eq!(out.code(), 130, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    let ok = counter(g, "benchmark.http_2xx");
    // ~1.5 s at 50 rps; generous bounds for process start-up on a busy machine.
    assert!((20..=100).contains(&ok), "2xx = {ok}");
    assert_eq!(v["shrike"]["termination"]["kind"], "interrupted");
    // The server saw every request the result counts, and answered each as it says.
    Witness::since(&server, before).agrees(g);
}

#[test]
fn second_sigint_exits_at_once_even_with_requests_stuck() {
    let server = Server::start(&[]);
    let child = shrike()
        .args([
            "run",
            &server.url("/"),
            "--no-duration",
            "--rps",
            "10",
            "--timeout",
            "60",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"static_delay":"30s"}"#,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1000));
    let pid = child.id().to_string();
    for _ in 0..2 {
        std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Without the second signal it would wait up to 60 s for the stuck requests.
    let out = wait_limited(child, Duration::from_secs(10));
    assert_eq!(out.code(), 130, "stderr:\n{}", out.stderr);
}
