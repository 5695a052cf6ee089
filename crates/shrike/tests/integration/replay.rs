//! `shrike replay` end to end: a jobs file's sessions against nginx, whose access log says
//! what arrived on which connection and when; the captured timing kept at `--time-scale 1` and
//! halved at 2; raw TCP against a delimiter echo server; bad input and refused targets.

use crate::support::nginx;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use nginx::{Listen, LogEntry, Nginx};

const LIMIT: Duration = Duration::from_secs(60);

/// Three sessions: one keeping its connection (GET, a POST with a body, a 404), one opening a
/// connection per request, and a short one.
const JOBS: &str = r#"{"shrike_jobs": 1, "protocol": "http", "source": "hand-written"}
{"job": 1, "start": 0.0, "requests": [{"at": 0, "text": "GET /file HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: captured\r\n\r\n"}, {"at": 0.3, "method": "POST", "path": "/upload", "headers": {"host": "shop.example"}, "body": "hello"}, {"at": 0.6, "method": "GET", "path": "/missing"}]}
{"job": 2, "start": 0.1, "connection": "per_request", "requests": [{"at": 0, "method": "GET", "path": "/file?a=1"}, {"at": 0.4, "method": "HEAD", "path": "/file"}]}
{"job": 3, "start": 0.2, "requests": [{"at": 0, "method": "GET", "path": "/file"}]}
"#;

fn write_jobs(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The log grouped by nginx connection, each in the order its requests came.
fn by_connection(log: &[LogEntry]) -> BTreeMap<u64, Vec<&LogEntry>> {
    let mut m: BTreeMap<u64, Vec<&LogEntry>> = BTreeMap::new();
    for e in log {
        m.entry(e.connection).or_default().push(e);
    }
    for v in m.values_mut() {
        v.sort_by_key(|e| e.connection_requests);
    }
    m
}

fn replay(jobs: &Path, target: &str, extra: &[&str]) -> Output {
    let mut args = vec!["replay", jobs.to_str().unwrap(), "--target", target];
    args.extend(extra);
    run(&args, LIMIT)
}

/// The gaps between a connection's requests as nginx logged them, in seconds.
fn gaps(entries: &[&LogEntry]) -> Vec<f64> {
    entries.windows(2).map(|w| w[1].secs - w[0].secs).collect()
}

#[test]
fn sessions_arrive_as_captured_on_their_own_connections() {
    let dir = scratch("replay-http");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Nginx::start_logged(Listen::Http1);
    let target = format!("127.0.0.1:{}", server.port);
    let mark = server.mark();
    let out = replay(&jobs, &target, &["--output-format", "json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_rq_total"), 6);
    assert_eq!(counter(g, "benchmark.http_4xx"), 1);
    assert_eq!(counter(g, "upstream_cx_total"), 4, "one per session, two for the per-request one");
    assert_eq!(v["options"]["replay"]["jobs"], 3);
    // nginx logged each request and status class the result counts, on as many connections.
    let log = server.agrees(mark, g);
    assert_eq!(log.len(), 6, "{log:?}");
    assert_eq!(by_connection(&log).len() as u64, counter(g, "upstream_cx_total"), "{log:?}");
    let conns: Vec<Vec<String>> = by_connection(&log)
        .values()
        .map(|c| c.iter().map(|e| e.request.clone()).collect())
        .collect();
    let one = |s: &str| vec![s.to_string()];
    let session = vec![
        "GET /file HTTP/1.1".to_string(),
        "POST /upload HTTP/1.1".into(),
        "GET /missing HTTP/1.1".into(),
    ];
    // nginx numbers connections in accept order: job 1's, then job 2's first, job 3's, and
    // job 2's second (at 0.5 s).
    assert_eq!(
        conns,
        vec![
            session,
            one("GET /file?a=1 HTTP/1.1"),
            one("GET /file HTTP/1.1"),
            one("HEAD /file HTTP/1.1")
        ]
    );
    // The Host header names the target, not the captured host.
    assert!(log.iter().all(|e| e.host == target), "{log:?}");
    // The POST's body arrived: its request is 5 bytes longer than its head.
    let post = log.iter().find(|e| e.request.starts_with("POST")).unwrap();
    let head = "POST /upload HTTP/1.1\r\nhost: \r\ncontent-length: 5\r\n\r\n".len() + target.len();
    assert_eq!(post.request_length as usize, head + 5, "{post:?}");
}

#[test]
fn the_summary_says_how_late_requests_left() {
    let dir = scratch("replay-summary");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Server::start(&[]);
    let out = replay(&jobs, &server.addr, &["--time-scale", "4"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let line = out.stdout.lines().find(|l| l.starts_with("Lateness:")).expect("a Lateness line");
    assert!(
        line.contains("p50 ")
            && line.contains("p99 ")
            && line.contains("after their captured time"),
        "{line}"
    );
    assert!(out.stdout.contains("replay at 4× speed"), "{}", out.stdout);
    // An unpaced run has no schedule to be late for: no such line. (A paced run shows it
    // when it matters: a p99 past 1 ms or past the service time.)
    let plain = run(&["run", &server.url("/"), "--rps", "max", "-n", "20"], LIMIT);
    assert!(!plain.stdout.contains("Lateness:"), "{}", plain.stdout);
}

#[test]
fn captured_gaps_are_kept_and_halved_at_twice_the_speed() {
    let dir = scratch("replay-timing");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    for (scale, factor) in [("1", 1.0), ("2", 0.5)] {
        let server = Nginx::start_logged(Listen::Http1);
        let target = format!("127.0.0.1:{}", server.port);
        let out = replay(&jobs, &target, &["--time-scale", scale]);
        assert_eq!(out.code(), 0, "{}", out.stderr);
        let log = server.access_log();
        let conns = by_connection(&log);
        let session = conns.values().find(|c| c.len() == 3).expect("job 1's connection");
        for (got, want) in gaps(session).iter().zip([0.3, 0.3]) {
            let want = want * factor;
            // nginx logs at millisecond resolution when each response ends.
            assert!((got - want).abs() < 0.05, "scale {scale}: gap {got} vs {want}");
        }
        // Between sessions too: job 3 started 0.2 s after job 1.
        let first = log.iter().map(|e| e.secs).fold(f64::MAX, f64::min);
        let job3 = log.iter().filter(|e| e.request == "GET /file HTTP/1.1").map(|e| e.secs);
        let job3 = job3.fold(f64::MIN, f64::max);
        assert!(((job3 - first) - 0.2 * factor).abs() < 0.05, "scale {scale}: {}", job3 - first);
    }
}

#[test]
fn keep_host_sends_the_captured_host() {
    let dir = scratch("replay-keep-host");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Nginx::start_logged(Listen::Http1);
    let target = format!("127.0.0.1:{}", server.port);
    let out = replay(&jobs, &target, &["--keep-host", "--time-scale", "4"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let hosts: Vec<String> = server.access_log().iter().map(|e| e.host.clone()).collect();
    assert_eq!(hosts.iter().filter(|h| *h == "shop.example").count(), 2, "{hosts:?}");
    assert!(!hosts.contains(&target), "{hosts:?}");
}

#[test]
fn the_targets_path_prefix_goes_before_every_replayed_path() {
    let dir = scratch("replay-prefix");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Nginx::start_logged(Listen::Http1);
    let target = format!("http://127.0.0.1:{}/prefix/", server.port);
    let out = replay(&jobs, &target, &["--time-scale", "4"]);
    // Nothing lives under /prefix: the 404s are the server's answer, not the test's concern.
    assert!(out.stdout.contains("every path under /prefix"), "{}", out.stdout);
    let mut paths: Vec<String> = server
        .access_log()
        .iter()
        .map(|e| e.request.split(' ').nth(1).unwrap_or_default().to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/prefix/file",
            "/prefix/file",
            "/prefix/file",
            "/prefix/file?a=1",
            "/prefix/missing",
            "/prefix/upload"
        ],
        "{}",
        out.stderr
    );
}

#[test]
fn rewrite_rules_change_paths_and_headers_as_sent() {
    let dir = scratch("replay-rewrite");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Nginx::start_b3_logged(Listen::Http1);
    let target = format!("http://127.0.0.1:{}/", server.port);
    // The file becomes /static/file (its query kept), the upload /up.
    let rules = ["--rewrite", r"path:^/file=>/static/file", "--rewrite", "path:^/upload$=>/up"];
    let out = replay(&jobs, &target, &[&rules[..], &["--time-scale", "4"]].concat());
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let log = server.raw_access_log();
    let mut paths: Vec<&str> = log.lines().filter_map(|l| l.split(' ').nth(4)).collect::<Vec<_>>();
    paths.sort();
    assert_eq!(
        paths,
        ["/missing", "/static/file", "/static/file", "/static/file", "/static/file?a=1", "/up"],
        "{log}"
    );
    // A header rule, with a capture: the captured Host (kept) becomes the canary's.
    let logged = Nginx::start_logged(Listen::Http1);
    let target = format!("http://127.0.0.1:{}/", logged.port);
    let rule = r"header:host:^(\w+)\.example$=>canary-$1.example";
    let out = replay(&jobs, &target, &["--keep-host", "--rewrite", rule, "--time-scale", "4"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let hosts: Vec<String> = logged.access_log().into_iter().map(|e| e.host).collect();
    assert_eq!(hosts.iter().filter(|h| *h == "canary-shop.example").count(), 2, "{hosts:?}");
    assert!(!hosts.iter().any(|h| h == "shop.example"), "{hosts:?}");
    // Looped: the file three times over, every request of each pass.
    let looped = Nginx::start_logged(Listen::Http1);
    let target = format!("http://127.0.0.1:{}/", looped.port);
    let out = replay(&jobs, &target, &["--loop", "3", "--time-scale", "4"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let log = looped.access_log();
    assert_eq!(log.len(), 3 * 6, "{}", out.stderr);
    assert_eq!(log.iter().filter(|e| e.request.starts_with("POST /upload")).count(), 3);
    // The passes follow one another: the last request is due 3 × 0.6 s / 4 after the first
    // (one pass alone spans 0.15 s).
    let span = log.last().unwrap().secs - log.first().unwrap().secs;
    assert!(span > 0.3 && span < 1.5, "{span}");
    let out = replay(&jobs, &target, &["--loop", "0"]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--loop 0"), "{}", out.stderr);
    // A fleet's generators read the file as it is streamed to them, once.
    let out = replay(&jobs, &target, &["--loop", "2", "--remote", "127.0.0.1:9"]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--loop with --remote"), "{}", out.stderr);
    // A bad rule is a usage error naming it; a rule for another protocol's jobs is refused.
    let out = replay(&jobs, &target, &["--rewrite", "path:(=>/x"]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--rewrite \"path:(=>/x\": not a regular expression"),
        "{}",
        out.stderr
    );
}

/// A delimiter echo server: answers each NUL-terminated message with `ok:` and the message;
/// counts the connections it accepted.
fn echo_server() -> (String, std::sync::mpsc::Receiver<Vec<u8>>, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let accepted = Arc::new(AtomicU64::new(0));
    let counted = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(8) {
            let Ok(conn) = conn else { return };
            counted.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                loop {
                    let mut msg = Vec::new();
                    if r.read_until(0, &mut msg).unwrap_or(0) == 0 {
                        return;
                    }
                    let _ = tx.send(msg.clone());
                    let mut answer = b"ok:".to_vec();
                    answer.extend_from_slice(&msg);
                    if w.write_all(&answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx, accepted)
}

#[test]
fn tcp_messages_are_sent_and_answers_read_to_the_delimiter() {
    let dir = scratch("replay-tcp");
    let jobs = write_jobs(
        &dir,
        "tcp.jobs",
        "{\"shrike_jobs\": 1, \"protocol\": \"tcp\"}\n\
         {\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"text\": \"one\\u0000\"}, {\"at\": 0.05, \"base64\": \"AQL/AA==\"}]}\n\
         {\"job\": 2, \"start\": 0.02, \"requests\": [{\"at\": 0, \"text\": \"two\\u0000\"}]}\n",
    );
    let (addr, seen, accepted) = echo_server();
    let out = replay(&jobs, &addr, &["--output-format", "json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_rq_total"), 3);
    assert_eq!(counter(g, "upstream_cx_tcp_total"), 2);
    // Every answer was read whole: "ok:" plus the message, delimiter included.
    assert_eq!(counter(g, "upstream_cx_rx_bytes_total"), 3 * (3 + 4));
    assert_eq!(counter(g, "benchmark.answers"), 3);
    let mut got: Vec<Vec<u8>> = seen.try_iter().collect();
    got.sort();
    assert_eq!(got, vec![vec![1, 2, 255, 0], b"one\0".to_vec(), b"two\0".to_vec()]);
    // The server's own counts: a message per request sent, a connection per one opened.
    assert_eq!(got.len() as u64, counter(g, "upstream_rq_total"));
    assert_eq!(accepted.load(Ordering::SeqCst), counter(g, "upstream_cx_tcp_total"));
}

#[test]
fn a_bad_line_plays_what_came_before_and_exits_2_naming_it() {
    let dir = scratch("replay-bad");
    let text =
        format!("{JOBS}{{\"job\": 4, \"start\": 0.3, \"requests\": [{{\"at\": \"soon\"}}]}}\n");
    let jobs = write_jobs(&dir, "bad.jobs", &text);
    let server = Nginx::start_logged(Listen::Http1);
    let out = replay(&jobs, &format!("127.0.0.1:{}", server.port), &["--time-scale", "4"]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("bad.jobs:5: requests[0].at:"), "{}", out.stderr);
    assert!(out.stdout.contains("Outcome:"), "the result is still written: {}", out.stdout);
    assert_eq!(server.access_log().len(), 6);
    // Flags and files that cannot work are usage errors.
    for (args, says) in [
        (vec!["--time-scale", "0"], "--time-scale"),
        (vec!["--shard", "3/2"], "--shard"),
        (vec!["--max-idle", "soon"], "--max-idle"),
    ] {
        let mut all = vec!["replay", jobs.to_str().unwrap(), "--target", "127.0.0.1:1"];
        all.extend(args.iter());
        let out = run(&all, LIMIT);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    let out = run(&["replay", "/nonexistent.jobs", "--target", "127.0.0.1:1"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("/nonexistent.jobs"), "{}", out.stderr);
}

#[test]
fn a_refused_target_counts_failures_per_job_and_fails_the_replay() {
    let dir = scratch("replay-refused");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = replay(
        &jobs,
        &format!("127.0.0.1:{port}"),
        &["--time-scale", "4", "--output-format", "json"],
    );
    assert_eq!(out.code(), 1, "nothing completed: {}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    // Every request of every job was tried (each job went on after its failures).
    assert_eq!(counter(g, "benchmark.pool_connection_failure"), 6, "{g}");
}

/// A 2 s session, and another that would start at 3 s.
const LONG: &str = r#"{"shrike_jobs": 1, "protocol": "http"}
{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/"}, {"at": 1.0, "method": "GET", "path": "/"}, {"at": 2.0, "method": "GET", "path": "/"}]}
{"job": 2, "start": 3.0, "requests": [{"at": 0, "method": "GET", "path": "/"}]}
"#;

/// Starts a replay of `jobs`, sends SIGINT at each of `at` (from the start), and waits.
fn interrupted(jobs: &Path, target: &str, at: &[u64]) -> (Output, Duration) {
    let child = shrike()
        .args(["replay", jobs.to_str().unwrap(), "--target", target, "--output-format", "json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    for &ms in at {
        std::thread::sleep(Duration::from_millis(ms).saturating_sub(t0.elapsed()));
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
    }
    let out = wait_limited(child, LIMIT);
    (out, t0.elapsed())
}

#[test]
fn the_first_ctrl_c_lets_running_jobs_finish_and_starts_no_more() {
    let dir = scratch("replay-soft-stop");
    let jobs = write_jobs(&dir, "long.jobs", LONG);
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let (out, took) = interrupted(&jobs, &server.addr, &[500]);
    let w = Witness::since(&server, before);
    assert_eq!(out.code(), 130, "{}", out.stderr);
    assert!(out.stderr.contains("starting no new job"), "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    // Job 1 ran to its end (its requests at 1 s and 2 s too); job 2 never started.
    assert_eq!(counter(g, "upstream_rq_total"), 3, "{g}");
    w.agrees(g);
    assert_eq!(w.count("/requests"), 3, "job 1's three, none of job 2's");
    assert_eq!(counter(g, "replay.jobs_started"), 1);
    assert_eq!(counter(g, "replay.jobs_completed"), 1);
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn a_second_ctrl_c_stops_the_running_jobs_and_still_writes_the_result() {
    let dir = scratch("replay-hard-stop");
    let jobs = write_jobs(&dir, "long.jobs", LONG);
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let (out, took) = interrupted(&jobs, &server.addr, &[300, 600]);
    let w = Witness::since(&server, before);
    assert_eq!(out.code(), 130, "{}", out.stderr);
    let v = json(&out);
    assert_eq!(counter(global(&v), "upstream_rq_total"), 1);
    w.agrees(global(&v));
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn interval_reports_count_jobs_started_done_and_running() {
    let dir = scratch("replay-intervals");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let out = replay(&jobs, &server.addr, &["--stats-interval", "0.25s"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // The three jobs the lines count as done sent all their six requests, by the server's
    // count.
    assert_eq!(Witness::since(&server, before).count("/requests"), 6);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("interval ")).collect();
    assert!(lines.len() >= 3, "{}", out.stderr);
    // The first interval saw jobs 1–3 start (at 0, 0.1 and 0.2 s) and none finish yet but job 3.
    assert!(lines[0].contains("jobs +3 started"), "{}", lines[0]);
    let last = lines.last().unwrap();
    assert!(last.contains("0 running (total 3 done)"), "{last}");
}

#[test]
fn captured_http1_sessions_replay_over_http2() {
    let dir = scratch("replay-h2");
    let jobs = write_jobs(&dir, "shop.jobs", JOBS);
    let server = Nginx::start_logged(Listen::H2c);
    let target = format!("127.0.0.1:{}", server.port);
    let mark = server.mark();
    let out = replay(
        &jobs,
        &target,
        &["--protocol", "http2", "--time-scale", "4", "--output-format", "json"],
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "upstream_rq_total"), 6);
    assert_eq!(counter(&g, "upstream_cx_http2_total"), 4, "one per session, two for job 2");
    let log = server.agrees(mark, &g);
    assert_eq!(by_connection(&log).len(), 4, "nginx's connections: {log:?}");
    let mut lines: Vec<String> = log.iter().map(|e| e.request.clone()).collect();
    lines.sort();
    assert!(lines.iter().all(|l| l.ends_with(" HTTP/2.0")), "{lines:?}");
    let post = log.iter().find(|e| e.request.starts_with("POST /upload")).expect("the POST");
    // Its body arrived (nginx reads it at /upload): more than the head alone.
    assert!(post.request_length > 5, "{post:?}");
    // The session's three requests on one connection, in order.
    let conns = by_connection(&log);
    let session = conns.values().find(|c| c.len() == 3).expect("job 1's connection");
    let order: Vec<&str> = session.iter().map(|e| e.request.split(' ').nth(1).unwrap()).collect();
    assert_eq!(order, ["/file", "/upload", "/missing"]);
    // TCP jobs have no HTTP version to choose.
    let tcp = write_jobs(&dir, "t.jobs", "{\"shrike_jobs\": 1, \"protocol\": \"tcp\"}\n");
    let out = replay(&tcp, "127.0.0.1:1", &["--protocol", "http2"]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
}

/// A server that answers only once two requests have arrived on a connection: a client that
/// waits for the first answer before sending the second never gets one. Counts the request
/// heads that arrived, as they arrive.
fn two_at_once_server() -> (String, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let heads = Arc::new(AtomicU64::new(0));
    let counted = heads.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(4) {
            let Ok(mut conn) = conn else { return };
            let counted = counted.clone();
            std::thread::spawn(move || {
                use std::io::Read;
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let ends = |seen: &[u8]| seen.windows(4).filter(|w| w == b"\r\n\r\n").count();
                while ends(&seen) < 2 {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            let had = ends(&seen);
                            seen.extend_from_slice(&buf[..n]);
                            counted.fetch_add((ends(&seen) - had) as u64, Ordering::SeqCst);
                        }
                    }
                }
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                let _ = conn.write_all(&[&ok[..], &ok[..]].concat());
            });
        }
    });
    (addr, heads)
}

#[test]
fn pipelined_requests_are_sent_before_the_previous_answer() {
    let dir = scratch("replay-pipelined");
    let job = |pipelined: bool| {
        format!(
            "{{\"shrike_jobs\": 1, \"protocol\": \"http\"}}\n{{\"job\": 1, \"start\": 0, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"/1\"}}, {{\"at\": 0, \"pipelined\": {pipelined}, \"method\": \"GET\", \"path\": \"/2\"}}]}}\n"
        )
    };
    let (server, heads) = two_at_once_server();
    let piped = write_jobs(&dir, "piped.jobs", &job(true));
    let out = replay(&piped, &server, &["--timeout", "2s", "--output-format", "json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 2, "both answered");
    assert_eq!(counter(&g, "upstream_rq_total"), 2);
    assert_eq!(heads.load(Ordering::SeqCst), 2, "the server read both");
    // The same two requests, the second waiting for the first's answer: it never comes.
    let waiting = write_jobs(&dir, "waiting.jobs", &job(false));
    let out = replay(&waiting, &server, &["--timeout", "1s", "--output-format", "json"]);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    // Each waits in vain (the second on a new connection, as the first's timed out).
    assert_eq!(counter(&g, "upstream_rq_timeout"), 2, "{}", out.stderr);
    // Both reached the server, one per connection, and waited there unanswered.
    assert_eq!(heads.load(Ordering::SeqCst), 2 + 2);
}
