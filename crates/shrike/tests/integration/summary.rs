//! The default summary, end to end: the figures it states are the honest ones for bursts,
//! interrupted plans, failed runs, recycled connections and the wrong scheme, and what is
//! known of requests that got no answer is recorded.

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// The value of the summary line that starts with `label`.
fn line<'a>(out: &'a Output, label: &str) -> &'a str {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label} line in:\n{}", out.stdout))
        .trim()
}

#[test]
fn bursts_are_compared_by_count_not_by_an_inflated_rate() {
    let server = Server::start(&[]);
    // 20 rps in bursts of 10 for 1.2 s: bursts at 0, 0.5 s and 1.0 s, 30 requests. A rate
    // over 1.2 s would read 25/s, "125%" of what was asked.
    let url = server.url("/");
    let (out, w) = run_witnessed(
        &server,
        &["run", &url, "-r", "20", "--burst-size", "10", "-d", "1.2"],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(
        line(&out, "Rate:"),
        "20/s requested in bursts of 10: 30 of the 30 requests released in 1.200s were sent \
         (100.0%)"
    );
    // The server saw the 30 sent, and answered each.
    assert_eq!(w.count("/requests"), 30);
    assert_eq!(w.count("/responses/2xx"), 30);
}

/// The count at the start of the `Requests:` line (`N sent in ...`).
fn requests_sent(out: &Output) -> u64 {
    let requests = line(out, "Requests:");
    requests
        .split_once(" sent in ")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no count sent in {requests:?}"))
}

#[test]
fn an_interrupted_plan_is_judged_up_to_the_stop() {
    let server = Server::start(&[]);
    // A ramp from 0 to 400 rps over 20 s, stopped after about 1.5 s: the plan asked for a mean
    // of ~15/s by then, not the whole plan's 200/s (which would read as ~8%).
    let before = Witness::before(&server);
    let child = shrike()
        .args(["run", &server.url("/"), "--stages", "20s:400"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill");
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 130, "{}", out.stderr);
    let rate = line(&out, "Rate:");
    assert!(rate.contains(" requested, the plan's mean up to the stop at "), "{rate}");
    let pct: f64 = rate
        .rsplit('(')
        .next()
        .and_then(|p| p.strip_suffix("%)"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no percentage in {rate}"));
    // Discrete releases on a ramp: a few percent either way.
    assert!((85.0..=115.0).contains(&pct), "{rate}");
    assert_eq!(line(&out, "Termination:"), "interrupted by signal");
    // The achieved rate is of the requests the summary counts as sent: the server saw them.
    let w = Witness::since(&server, before);
    assert_eq!(w.count("/requests"), requests_sent(&out), "{}", out.stdout);
}

#[test]
fn plain_http_to_a_tls_port_says_so_and_states_no_rate() {
    let tls = TlsServer::start(&["--tls"]);
    let url = format!("http://127.0.0.1:{}/", tls.port);
    let (out, w) =
        run_witnessed(&tls, &["run", &url, "-d", "1", "--output-format", "human"], LIMIT);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    // The server saw one connection, whose plain-text request failed its TLS handshake: no
    // request, no answer, as the summary says.
    assert_eq!(w.count("/tls/handshake_failures"), 1);
    assert_eq!(w.count("/tls/handshakes"), 0);
    assert_eq!(w.count("/requests"), 0);
    assert!(out.stderr.contains("the server answered in TLS (is it an https:// port?)"));
    // The verdict first (the default predicate on resets fired), then what happened.
    assert_eq!(
        line(&out, "Outcome:"),
        "FAILED (failure predicate benchmark.stream_resets:0 fired): NO REQUEST COMPLETED: \
         reset or broken × 1"
    );
    // No rate extrapolated from a run that ended in well under a millisecond.
    assert_eq!(line(&out, "Rate:"), "5/s requested; none measured: no request completed");
    assert!(!out.stdout.contains('%'), "{}", out.stdout);
    // The counters have no per-second column either.
    assert!(out.stdout.contains("\nCounter "), "{}", out.stdout);
    assert!(!out.stdout.contains("Per second"), "{}", out.stdout);
    // What is known of the request is recorded: it queued and left.
    let (out, w) = run_witnessed(&tls, &["run", &url, "-d", "1", "--output-format", "json"], LIMIT);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(statistic(g, "benchmark_http_client.queue_to_connect")["count"], "1");
    assert_eq!(statistic(g, "sequencer.send_lateness")["count"], "1");
    // It left: the one connection, and its bytes, reached the server's TLS handshake.
    assert_eq!(counter(g, "upstream_cx_total"), 1);
    assert_eq!(w.count("/tls/handshake_failures"), counter(g, "upstream_cx_total"));
    assert_eq!(w.count("/requests"), 0);
}

#[test]
fn recycled_connections_are_explained() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let args = ["run", &url, "-c", "2", "-r", "20", "-n", "10"];
    let (out, w) = run_witnessed(
        &server,
        &[&args[..], &["--max-requests-per-connection", "1"]].concat(),
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(
        line(&out, "Connections:"),
        "10 opened (limit 2): each is replaced after 1 request (--max-requests-per-connection)"
    );
    // The server served the ten requests on ten connections.
    assert_eq!(w.count("/connections/http1"), 10);
    assert_eq!(w.count("/requests"), 10);
    // Within the limit, no explanation is needed (one connection, or two when a response
    // was slow enough for the next request to find the first busy, as on a loaded machine).
    let (out, w) = run_witnessed(&server, &args, LIMIT);
    let shown = line(&out, "Connections:");
    assert!(["1 opened (limit 2)", "2 opened (limit 2)"].contains(&shown), "{shown}");
    // As many as the server served.
    assert_eq!(shown, format!("{} opened (limit 2)", w.count("/connections/http1")));
}

#[test]
fn summary_is_one_screen_and_human_is_everything() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let (out, w) = run_witnessed(&server, &["run", &url, "-n", "25", "-r", "200"], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // The server saw the 25 and answered each with a 2xx.
    assert_eq!(w.count("/requests"), 25);
    assert_eq!(w.count("/responses/2xx"), 25);
    assert!(out.stdout.lines().count() <= 30, "{}", out.stdout);
    // Answer first: the outcome and the rate before any latency.
    let pos = |s: &str| out.stdout.find(s).unwrap_or_else(|| panic!("{s}:\n{}", out.stdout));
    assert!(pos("Outcome:") < pos("Rate:") && pos("Rate:") < pos("Latency "));
    assert_eq!(line(&out, "Outcome:"), "25 of 25 requests succeeded (100.0%); no errors");
    assert!(line(&out, "Requests:").starts_with("25 sent in "), "{}", out.stdout);
    assert!(!out.stdout.contains("Percentile"));

    let (full, w) = run_witnessed(
        &server,
        &["run", &url, "-n", "25", "-r", "200", "--output-format", "human"],
        LIMIT,
    );
    assert_eq!(full.code(), 0, "{}", full.stderr);
    // Every one 2xx, and 10 body bytes each, by the server's count.
    assert_eq!(w.count("/responses/2xx"), 25);
    assert_eq!(w.count("/requests"), 25);
    assert_eq!(w.count("/response_body_bytes"), 25 * 10);
    assert!(full.stdout.contains("\nDetails\n-------\n"));
    // Every response was 2xx: the 2xx latency says so instead of repeating the table.
    assert!(full.stdout.contains(
        "[benchmark_http_client.latency_2xx]: every response was 2xx, so the same samples as \
         service time"
    ));
    // The test server's body is 10 bytes every time: one line, not a table.
    assert!(full
        .stdout
        .contains("[benchmark_http_client.response_body_size]: 10 in all 25 samples"));
}
