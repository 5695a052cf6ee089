//! Habits users bring from wrk, hey, oha and k6: short flags, an exact request count, a result
//! file beside the screen output, suggestions for mistyped flags, clean stderr streams, colour
//! only where wanted, and `report` refusing to pour HTML onto a terminal.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("shrike-habits-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

#[test]
fn n_sends_exactly_that_many_requests_over_all_workers() {
    let server = Server::start(&[]);
    // 37 over 2 workers (19 + 18), at a rate that would send far more in the default 5 s.
    let url = server.url("/n");
    let args = ["run", &url, "-n", "37", "-c", "3", "--concurrency", "2", "-r", "200"];
    let (out, w) =
        run_witnessed(&server, &[&args[..], &["--output-format", "json"]].concat(), LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 37);
    assert_eq!(counter(g, "upstream_rq_total"), 37);
    // The server counted the same 37, every one answered 2xx.
    w.agrees(g);
    assert_eq!(w.count("/requests"), 37);
    assert_eq!(v["options"]["total_requests"], "37");
    assert_eq!(v["options"]["no_duration"], true, "a count alone runs as long as it takes");
    // With a duration too, whichever ends first wins: 1000 requests cannot fit in 0.5 s at 40/s.
    let (g, w) =
        run_agreed(&server, &["run", &server.url("/n"), "-n", "1000", "-q", "40", "-z", "0.5"]);
    assert_eq!(counter(&g, "benchmark.http_2xx"), 20);
    assert_eq!(w.count("/responses/2xx"), 20);
    let (out, w) = run_witnessed(&server, &["run", &server.url("/n"), "-n", "0"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "a usage error sends nothing");
    assert!(out.stderr.contains("--requests must be at least 1"), "{}", out.stderr);
}

#[test]
fn o_saves_the_result_while_the_screen_gets_the_report() {
    let server = Server::start(&[]);
    let dir = tmpdir("o");
    let file = dir.join("result.json");
    let f = file.display().to_string();
    let url = server.url("/o");
    let (out, w) =
        run_witnessed(&server, &["run", &url, "-n", "12", "-H", "x-a: 1", "-o", &f], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stdout.contains("Shrike"), "human report on stdout: {}", out.stdout);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("saved")).expect("json");
    assert_eq!(counter(global(&saved), "benchmark.http_2xx"), 12);
    // The saved result is what the server counted.
    w.agrees(global(&saved));
    // No temporary file is left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // The format from a flag when the extension does not name one.
    let csv = dir.join("result.data").display().to_string();
    let out = run(
        &["run", &server.url("/o"), "-n", "3", "-o", &csv, "--output-file-format", "csv"],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(std::fs::read_to_string(&csv).unwrap().starts_with("result,kind,name,"), "tidy CSV");
    let out = run(
        &["run", &server.url("/o"), "-n", "3", "-o", &dir.join("r.bin").display().to_string()],
        LIMIT,
    );
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("--output-file-format"), "{}", out.stderr);
    // A file that cannot be created is refused before any load (exit 2): no run to report.
    std::fs::write(dir.join("plain"), "a file, not a directory").unwrap();
    let bad = dir.join("plain/r.json").display().to_string();
    let (out, w) = run_witnessed(&server, &["run", &url, "-n", "3", "-o", &bad], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "refused before any load");
    assert!(out.stderr.contains(&format!("--output {bad}: cannot be written")), "{}", out.stderr);
    assert!(!out.stdout.contains("Shrike"), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mistyped_flags_get_the_flag_meant() {
    let u = "http://127.0.0.1:9/";
    for (typed, meant) in [
        ("--rsp", "'--rps'"),
        ("--rate", "'--rps'"),
        ("--qps", "'--rps'"),
        ("--conections", "'--connections'"),
        ("--threads", "'--concurrency'"),
    ] {
        let out = run(&["run", u, typed, "5"], LIMIT);
        assert_eq!(out.code(), 2, "{typed}: {}", out.stderr);
        assert!(out.stderr.contains(meant), "{typed} should suggest {meant}: {}", out.stderr);
        assert!(!out.stderr.contains("max-requests-per-connection"), "{}", out.stderr);
    }
    let out = run(&["run", u, "--frobnicate"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("--frobnicate") && !out.stderr.contains("tip:"), "{}", out.stderr);
    let help = run(&["run", "--help"], LIMIT);
    assert!(
        // Every format named, whatever the wrapping.
        help.stdout.split_whitespace().collect::<Vec<_>>().join(" ").contains(
            "summary (the default: outcome, rates and latency on one screen), human (the summary \
             plus every statistic's table and the counters), json, yaml, dotted, fortio, csv or \
             prometheus"
        ),
        "{}",
        help.stdout
    );
}

#[test]
fn json_interval_lines_and_logs_share_one_parseable_stream() {
    let server = Server::start(&[]);
    let out = run(
        &[
            "run",
            &server.url("/j"),
            "-r",
            "50",
            "-d",
            "1",
            "--stats-interval",
            "250ms",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 4, "{}", out.stderr);
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {l}"));
        assert!(v["type"] == "interval" || v["log"].is_string(), "{l}");
    }
    assert!(lines.iter().any(|l| l.contains("\"log\":\"info\"")), "log lines kept, as JSON");
}

/// Runs `cmd` under a pseudo-terminal (script(1)), with extra environment, and returns what the
/// terminal showed.
fn on_a_terminal(cmd: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new("script");
    c.args(["-qec", cmd, "/dev/null"]).stdin(Stdio::null()).env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("script");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn colour_on_a_terminal_unless_no_color_and_no_html_on_a_terminal() {
    let bin = env!("CARGO_BIN_EXE_shrike");
    // A failed run (nothing listens on port 9): the error lines are red on a terminal.
    let cmd = format!("{bin} run http://127.0.0.1:9/ -n 1 --no-progress");
    let (_, shown) = on_a_terminal(&cmd, &[]);
    assert!(shown.contains("\x1b[31merror: run failed"), "{shown:?}");
    let (_, plain) = on_a_terminal(&cmd, &[("NO_COLOR", "1")]);
    assert!(plain.contains("error: run failed") && !plain.contains("\x1b[31m"), "{plain:?}");
    // And never when stderr is not a terminal.
    let out = run(&["run", "http://127.0.0.1:9/", "-n", "1"], LIMIT);
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);

    // `shrike report` with no -o on a terminal refuses and says what to do.
    let server = Server::start(&[]);
    let dir = tmpdir("report");
    let v = run_json_ok(&["run", &server.url("/r"), "-n", "5"]);
    let stored = dir.join("r.json");
    std::fs::write(&stored, v.to_string()).unwrap();
    let (ok, shown) = on_a_terminal(&format!("{bin} report {}", stored.display()), &[]);
    assert!(!ok, "{shown}");
    assert!(shown.contains("-o report.html") && !shown.contains("<html"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_where_every_request_timed_out_says_so_and_fails() {
    // Accepts connections, reads, never answers; counts the request heads it read (the
    // witness that each timed-out request was sent).
    use std::io::Read as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let heads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = heads.clone();
    std::thread::spawn(move || {
        for mut s in listener.incoming().take(16).flatten() {
            let counted = counted.clone();
            // Each thread holds its connection until the client closes it.
            std::thread::spawn(move || {
                let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
                while let Ok(n @ 1..) = s.read(&mut chunk) {
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    // What the server has read once it has read `want` heads (or 5 s have passed): its threads
    // may read a moment after the client gave up, on a busy machine.
    let seen = |want: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let n = heads.load(std::sync::atomic::Ordering::SeqCst);
            if n >= want || std::time::Instant::now() > deadline {
                break n;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let url = format!("http://{addr}/");
    let out = run(
        &["run", &url, "-n", "3", "--timeout", "0.3", "-r", "20", "--output-format", "json"],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "nothing completed: a failed run\n{}", out.stderr);
    assert!(out.stderr.contains("no request completed"), "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    // Each timed out; on a starved machine one the client could not even write within the
    // drain's grace is abandoned instead (and said so): never answered either way.
    let (timed_out, abandoned) =
        (counter(g, "upstream_rq_timeout"), counter(g, "upstream_rq_cancelled"));
    assert!(timed_out >= 1 && timed_out + abandoned == 3, "{g}");
    // The server read every request the client says it sent (a request may time out before
    // it is sent, on a busy machine: the timeouts are 3 either way).
    let sent = counter(g, "upstream_rq_total") + counter(g, "upstream_rq_retry");
    assert_eq!(seen(sent), sent, "the server's request heads against the client's: {g}");
    // What is known of a request that was never answered is still recorded.
    assert_eq!(statistic(g, "sequencer.send_lateness")["count"], "3");
    assert_eq!(statistic(g, "benchmark_http_client.queue_to_connect")["count"], "3");
    let saved = tmpdir("timed-out").join("r.json");
    let human =
        run(&["run", &url, "-n", "2", "--timeout", "0.3", "-o", saved.to_str().unwrap()], LIMIT);
    assert_eq!(human.code(), 1);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let g = global(&v);
    let more = sent + counter(g, "upstream_rq_total") + counter(g, "upstream_rq_retry");
    assert_eq!(seen(more), more, "and the second run's: {g}");
    assert!(
        human.stdout.contains("Outcome:     NO REQUEST COMPLETED: timed out × 2"),
        "{}",
        human.stdout
    );
}
