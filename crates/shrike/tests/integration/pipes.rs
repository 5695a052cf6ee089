//! A reader that goes away early (`shrike run | head -1`): the command ends quietly with 141,
//! the status of a process SIGPIPE ended, never a panic (101); a file it was asked for is still
//! written; and a closed stderr costs log lines, never the run or its result.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// `shrike ARGS 2>&1 | head -1`: stdout and stderr on one pipe whose reader takes one line and
/// leaves. Returns the line and the exit status.
fn head_1(args: &[&str]) -> (String, Output) {
    let (reader, writer) = std::io::pipe().unwrap();
    let child = shrike()
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).unwrap();
    // The reader is gone: every later write to the pipe fails.
    (line, wait_unpiped(child, LIMIT))
}

/// A pipe whose reader is gone before the child starts: its first write to it fails, however
/// fast it writes (a reader closed after the spawn races with a quick command's output,
/// which fits the pipe's buffer).
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Waits for a child whose stdout is not ours to read (closed, or on a pipe of the test's),
/// collecting its stderr if it is piped.
fn wait_unpiped(mut child: std::process::Child, limit: Duration) -> Output {
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = stderr.map(|t| t.join().unwrap()).unwrap_or_default();
    Output { status, stdout: String::new(), stderr }
}

#[test]
fn run_and_replay_into_head_end_quietly_with_141() {
    let (line, out) = head_1(&["run", "-d", "1"]);
    assert!(line.contains("benchmarking the built-in test server"), "{line}");
    assert_eq!(out.code(), 141, "a closed pipe is no crash (101) and no success either");

    let dir = scratch("pipes-replay");
    let jobs = dir.join("one.jobs");
    let job = r#"{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/"}]}"#;
    std::fs::write(&jobs, format!("{{\"shrike_jobs\": 1, \"protocol\": \"http\"}}\n{job}\n"))
        .unwrap();
    let (line, out) = head_1(&["replay", jobs.to_str().unwrap()]);
    assert!(line.starts_with("[shrike]"), "{line}");
    assert_eq!(out.code(), 141);
}

#[test]
fn a_closed_stdout_keeps_the_result_file_and_says_nothing() {
    let server = Server::start(&[]);
    let dir = scratch("pipes-file");
    let file = dir.join("r.json");
    let before = Witness::before(&server);
    let child = shrike()
        .args(["run", &server.url("/"), "-n", "20", "--output-format", "json", "-o"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_unpiped(child, LIMIT);
    assert_eq!(out.code(), 141, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked") && !out.stderr.contains("error"), "{}", out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 20, "the file was written whole");
    // The 20 the file counts, as the server counted them.
    Witness::since(&server, before).agrees(global(&v));
}

#[test]
fn a_closed_stderr_loses_log_lines_not_the_result() {
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let mut child = shrike()
        .args(["run", &server.url("/"), "-n", "10", "--output-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut stdout = child.stdout.take().unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 10);
    // The 10 the result counts, as the server counted them.
    Witness::since(&server, before).agrees(global(&v));
}

#[test]
fn every_command_that_prints_data_ends_quietly_on_a_closed_stdout() {
    let dir = scratch("pipes-data");
    let jobs = dir.join("a.jobs");
    let job = r#"{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/"}]}"#;
    std::fs::write(&jobs, format!("{{\"shrike_jobs\": 1, \"protocol\": \"http\"}}\n{job}\n"))
        .unwrap();
    let result = dir.join("r.json");
    let server = Server::start(&[]);
    let out = run(&["run", &server.url("/"), "-n", "3", "-o", result.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let r = result.to_str().unwrap();
    let jobs = jobs.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["jobs", "stats", jobs],
        &["report", r],
        &["transform", "--merge", r, "--output-format", "human"],
        &["serve", "--listen", "127.0.0.1:0", "--tls"],
    ];
    for args in commands {
        let child = shrike()
            .args(args)
            .stdin(Stdio::null())
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_unpiped(child, LIMIT);
        assert_eq!(out.code(), 141, "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}
