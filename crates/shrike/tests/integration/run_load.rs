//! Shrike's client against Shrike's own server, through the real binaries.

use std::time::Duration;

use crate::support::*;

/// `shrike run ARGS --output-format json` against `server`, exit 0: the whole result, and
/// what the server counted meanwhile, already checked against its `global` result.
fn run_doc(server: &Server, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    (v, w)
}

#[test]
fn fixed_rate_count_matches_rps_times_duration_times_concurrency() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "100",
            "--duration",
            "2",
            "--concurrency",
            "2",
            "--connections",
            "4",
        ],
    );
    let g = global(&v);
    let ok = counter(g, "benchmark.http_2xx");
    // 100 rps × 2 s × 2 workers. The schedule is exact, so only a request whose response is
    // lost could make this differ; allow 1% for a pathological scheduler stall.
    assert!((396..=400).contains(&ok), "2xx = {ok}");
    assert_eq!(counter(g, "upstream_rq_total"), ok);
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 3, "two workers plus global");
    for w in &results[..2] {
        let n = counter(w, "benchmark.http_2xx");
        assert!((198..=200).contains(&n), "{} made {n}", w["name"]);
    }
    // Connections are reused: far fewer than requests. (How late the sends were is checked in
    // timing_precise.rs, where no other test competes for the CPU.)
    assert!(counter(g, "upstream_cx_total") <= 8);
    // The server served those requests (checked in `run_doc`) on as many connections.
    assert_eq!(w.count("/connections/http1"), counter(g, "upstream_cx_total"));
}

#[test]
fn closed_loop_scheduled_latency_exposes_queueing_that_service_time_hides() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "100",
            "--duration",
            "2",
            "--connections",
            "1",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"static_delay":"0.05s"}"#,
        ],
    );
    let g = global(&v);
    let service = statistic(g, "benchmark_http_client.request_to_response");
    let scheduled = statistic(g, "benchmark_http_client.scheduled_to_response");
    let p50 = percentile_secs(service, 0.5);
    assert!((0.050..0.080).contains(&p50), "service p50 {p50}");
    // One connection serves ≤ 20 rps against a 100 rps schedule: by the end the requests
    // are ~1.6 s behind schedule. Service time never shows it; scheduled-to-response does.
    let p99 = percentile_secs(scheduled, 0.99);
    assert!(p99 > 1.0, "scheduled p99 {p99}");
    assert!(p99 > 10.0 * p50);
    // The pacer was blocked waiting for the connection.
    let blocking = statistic(g, "sequencer.blocking");
    assert!(blocking["count"].as_str().expect("count").parse::<u64>().expect("n") > 10);
    // And it honestly sent fewer requests than scheduled (closed loop) — but still some.
    let ok = counter(g, "benchmark.http_2xx");
    assert!((30..=45).contains(&ok), "2xx = {ok}");
    // The server saw only those (checked in `run_doc`), on the one connection.
    assert_eq!(w.count("/requests"), ok);
    assert_eq!(w.count("/connections/http1"), 1);
}

#[test]
fn open_loop_counts_overflow_instead_of_waiting() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "200",
            "--duration",
            "1",
            "--connections",
            "2",
            "--open-loop",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"static_delay":"0.05s"}"#,
        ],
    );
    let g = global(&v);
    let ok = counter(g, "benchmark.http_2xx");
    let overflow = counter(g, "benchmark.pool_overflow");
    // 2 connections × 20 rps each can carry ~40 of the 200 scheduled requests.
    assert!((30..=50).contains(&ok), "2xx = {ok}");
    assert_eq!(ok + overflow, 200, "every scheduled request is either sent or counted");
    // The overflow never reached the server: it saw the answered requests only.
    assert_eq!(w.count("/requests"), ok);
    assert_eq!(w.count("/requests") + overflow, 200);
    // Open loop never blocks.
    assert_eq!(statistic(g, "sequencer.blocking")["count"], "0");
}

#[test]
fn termination_predicate_ends_run_successfully_at_threshold() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "200",
            "--duration",
            "10",
            "--connections",
            "1",
            "--termination-predicate",
            "benchmark.http_2xx:9",
        ],
    );
    let g = global(&v).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 10);
    assert!(secs(&g["execution_duration"]) < 5.0);
    // One connection, one request at a time: the server saw the ten and no eleventh.
    assert_eq!(w.count("/requests"), 10);
}

#[test]
fn server_errors_fire_default_failure_predicate_with_exit_1() {
    let server = Server::start(&[]);
    let args = |extra: &'static [&'static str]| {
        let mut a = vec![
            "run".to_string(),
            server.url("/"),
            "--rps".into(),
            "50".into(),
            "--duration".into(),
            "2".into(),
            "--request-header".into(),
            r#"x-nighthawk-test-server-config: {"response_status":503}"#.into(),
            "--output-format".into(),
            "json".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let a = args(&[]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (out, w) = run_witnessed(&server, &a, Duration::from_secs(30));
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("benchmark.http_5xx:0"), "{}", out.stderr);
    // The result is still written, with the 5xx that fired it.
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.http_5xx") >= 1);
    assert!(counter(&g, "benchmark.http_5xx") < 10, "stopped promptly");
    // The server answered 503 to every request it saw: each the client counted, and any
    // still in flight when the predicate stopped the run (counted cancelled).
    let (fives, cancelled) =
        (counter(&g, "benchmark.http_5xx"), counter(&g, "upstream_rq_cancelled"));
    assert_eq!(w.count("/responses/5xx"), w.count("/requests"));
    assert!((fives..=fives + cancelled).contains(&w.count("/responses/5xx")), "{g}");

    let a = args(&["--no-default-failure-predicates"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (out, w) = run_witnessed(&server, &a, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_5xx"), 100);
    w.agrees(&g);
}

#[test]
fn no_url_benchmarks_the_built_in_server() {
    let out = run(&["run", "--duration", "1", "--rps", "20"], Duration::from_secs(30));
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("built-in test server"), "{}", out.stderr);
    // The default summary: every scheduled request answered, over the 1 s sending window.
    assert!(out
        .stdout
        .contains("\nOutcome:     20 of 20 requests succeeded (100.0%); no errors\n"));
    assert!(
        out.stdout.contains("\nRate:        20/s achieved of 20/s requested (100.0%)\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("\nRequests:    20 sent in 1.000s"), "{}", out.stdout);
    let out =
        run(&["run", "-d", "1", "-r", "20", "--output-format", "human"], Duration::from_secs(30));
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    // The full report: the 2xx counter row shows all 20 scheduled requests.
    let row = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("benchmark.http_2xx"))
        .unwrap_or_else(|| panic!("no 2xx row in:\n{}", out.stdout));
    assert_eq!(row.split_whitespace().nth(1), Some("20"), "{row}");
    assert!(out.stdout.contains("benchmark_http_client.scheduled_to_response"));
}

#[test]
fn max_requests_per_connection_recycles_connections() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "100",
            "--duration",
            "1",
            "--connections",
            "1",
            "--max-requests-per-connection",
            "10",
        ],
    );
    let g = global(&v).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 100);
    assert_eq!(counter(&g, "upstream_cx_total"), 10);
    assert_eq!(counter(&g, "upstream_cx_destroy_local"), 10);
    // The server served the hundred (checked in `run_doc`) on ten connections.
    assert_eq!(w.count("/connections/http1"), 10);
}

#[test]
fn prefetch_opens_all_connections_and_body_sizes_are_recorded() {
    let server = Server::start(&["--response-body-size", "1234"]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "20",
            "--duration",
            "1",
            "--connections",
            "5",
            "--prefetch-connections",
            "--request-method",
            "POST",
            "--request-body-size",
            "100",
        ],
    );
    let g = global(&v).clone();
    assert_eq!(counter(&g, "upstream_cx_total"), 5);
    let body = statistic(&g, "benchmark_http_client.response_body_size");
    assert_eq!(body["raw_min"], "1234");
    assert_eq!(body["raw_max"], "1234");
    assert_eq!(body["count"], "20");
    // 20 requests of at least 100 body bytes each went out.
    assert!(counter(&g, "upstream_cx_tx_bytes_total") > 20 * 100);
    // The server read those bodies, and sent the 20 it was asked for.
    assert_eq!(w.count("/request_body_bytes"), 20 * 100);
    assert_eq!(w.count("/response_body_bytes"), 20 * 1234);
    // The server counts a connection once its first bytes say which protocol it speaks, so
    // a prefetched connection no request used is not among its connections: at most the 5.
    assert!((1..=5).contains(&w.count("/connections/http1")), "{}", w.connections());
    // Over TLS each prefetched connection makes its handshake at once, which the server
    // counts: it saw all 5 opened.
    let tls = TlsServer::start(&["--tls"]);
    let url = tls.url();
    let args = ["run", &url, "--tls-ca", &tls.ca, "--rps", "20", "--duration", "1"];
    let (g, w) =
        run_agreed(&tls, &[&args[..], &["--connections", "5", "--prefetch-connections"]].concat());
    assert_eq!(counter(&g, "upstream_cx_total"), 5);
    assert_eq!(counter(&g, "ssl.handshake"), 5);
    assert_eq!(w.count("/tls/handshakes"), 5);
}

/// Unpaced, a connection that finishes takes its next request itself, and the worker loop
/// only tops up the requests waiting for one. The counts stay exact: a count-limited run
/// sends exactly its count, every one answered and none cancelled (the last requests taken
/// ahead are all handed over before the run ends); a timed run's server saw exactly what the
/// client counted, and the requests taken ahead but never released by the deadline are
/// counted nowhere.
#[test]
fn unpaced_runs_hand_over_exactly_what_they_count() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let (g, w) = run_agreed(
        &server,
        &["run", &url, "--rps", "max", "-n", "3001", "--connections", "8", "--concurrency", "2"],
    );
    assert_eq!(counter(&g, "benchmark.http_2xx"), 3001);
    assert_eq!(counter(&g, "upstream_rq_total"), 3001);
    assert_eq!(counter(&g, "upstream_rq_cancelled"), 0);
    assert_eq!(w.count("/requests"), 3001);
    let (g, w) = run_agreed(
        &server,
        &["run", &url, "--rps", "max", "--duration", "1", "--connections", "8"],
    );
    let ok = counter(&g, "benchmark.http_2xx");
    assert!(ok > 100, "{ok} answered in a second");
    assert_eq!(counter(&g, "upstream_rq_total"), ok);
    assert_eq!(counter(&g, "upstream_rq_cancelled"), 0);
    assert_eq!(w.count("/requests"), ok);
}
