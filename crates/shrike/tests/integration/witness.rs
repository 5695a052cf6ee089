//! Every number against a witness: each scenario here once printed a count, rate or verdict
//! that disagreed with what someone else counted (the test server's own statistics, curl, the
//! process's exit status as a shell sees it). Each test reads that witness, never only
//! Shrike's own output.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const CONFIG: &str = "x-nighthawk-test-server-config";
const LIMIT: Duration = Duration::from_secs(60);

fn server() -> Server {
    Server::start(&["--stats-path", WITNESS_STATS])
}

fn line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label} in {text}"))
}

/// `run URL -n N --rps R -c 1` with the server config `config` and `extra`, as JSON.
fn faulty_run(
    s: &Server,
    protocol: &str,
    config: &str,
    extra: &[&str],
) -> (serde_json::Value, Witness) {
    let header = format!("{CONFIG}: {config}");
    let url = s.url("/");
    let mut args = vec![
        "run",
        &url,
        "--protocol",
        protocol,
        "-n",
        "200",
        "--rps",
        "400",
        "-c",
        "1",
        "--no-default-failure-predicates",
        "-H",
        &header,
        "--output-format",
        "json",
    ];
    args.extend(extra);
    let (out, w) = run_witnessed(s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    (json(&out), w)
}

/// A server that reads a request and then resets the connection, one time in ten: on a
/// reused connection the client cannot tell that from a keep-alive race. A GET is sent again,
/// counted; a POST never is. The server saw exactly what the client sent, retries included.
#[test]
fn an_h1_request_is_resent_only_if_idempotent_and_every_resend_is_counted() {
    let s = server();
    let reset = r#"{"reset":{"probability":0.1}}"#;
    let (doc, w) = faulty_run(&s, "http1", reset, &[]);
    let g = global(&doc);
    let (sent, retried) = (counter(g, "upstream_rq_total"), counter(g, "upstream_rq_retry"));
    assert_eq!(sent, 200);
    assert!(retried > 0, "a reused connection reset at least once in 200: {g}");
    assert_eq!(w.count("/requests"), sent + retried, "the server saw every send, resends too");
    assert_eq!(w.count("/faults/reset_stream"), counter(g, "benchmark.stream_resets") + retried);

    let (doc, w) = faulty_run(&s, "http1", reset, &["--request-method", "POST"]);
    let g = global(&doc);
    assert_eq!(counter(g, "upstream_rq_retry"), 0, "a POST is never sent twice: {g}");
    assert_eq!(w.count("/requests"), 200, "one send per POST");
    assert_eq!(w.count("/faults/reset_stream"), counter(g, "benchmark.stream_resets"));

    let (doc, w) = faulty_run(&s, "http1", reset, &["--retry-unanswered=false"]);
    let g = global(&doc);
    assert_eq!(counter(g, "upstream_rq_retry"), 0, "{g}");
    assert_eq!(w.count("/requests"), 200, "turned off, nothing is sent twice");
}

/// The summary says how many requests went out twice, beside the count the server can check.
#[test]
fn the_summary_shows_resends() {
    let s = server();
    let header = format!("{CONFIG}: {{\"reset\":{{\"probability\":0.1}}}}");
    let url = s.url("/");
    let args = [
        "run",
        &url,
        "-n",
        "200",
        "--rps",
        "400",
        "-c",
        "1",
        "--no-default-failure-predicates",
        "-H",
        &header,
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let requests = line(&out.stdout, "Requests:");
    let twice: u64 = requests
        .split(", ")
        .find_map(|p| {
            p.strip_suffix(" of them sent twice (no answer to the first send; upstream_rq_retry)")
        })
        .unwrap_or_else(|| panic!("resends in {requests:?}"))
        .parse()
        .unwrap();
    assert_eq!(w.count("/requests"), 200 + twice, "{requests}");
}

/// A GOAWAY with its last stream id covers the streams the server may have acted on: those
/// fail with the connection, never sent again, while those above it (refused unprocessed) go
/// to another connection. So the server processed every request exactly once or not at all:
/// its count is the client's 2xx plus the streams it cut off, each of which it counts as a
/// connection fault.
#[test]
fn h2_streams_a_goaway_covered_are_not_resent_unasked() {
    let s = server();
    let goaway = r#"{"reset":{"probability":0.1,"scope":"connection"}}"#;
    let (v, w) = faulty_run(&s, "http2", goaway, &[]);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_rq_total"), 200, "{g}");
    let cut_off: u64 = v["shrike"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["message"].as_str().unwrap().starts_with("HTTP/2 stream ended by the server's GOAWAY")
        })
        .map(|e| {
            e["count"].as_str().map_or_else(|| e["count"].as_u64().unwrap(), |c| c.parse().unwrap())
        })
        .sum();
    let ok = counter(g, "benchmark.http_2xx");
    assert_eq!(w.count("/responses/2xx"), ok);
    assert!(cut_off > 0, "{}", v["shrike"]["errors"]);
    assert_eq!(w.count("/faults/reset_connection"), cut_off, "{}", v["shrike"]["errors"]);
    assert_eq!(w.count("/requests"), ok + cut_off, "no request processed twice");
}

/// Jitter keeps releases in time order and inside the run: all 20 of a 2 s run at 10/s are
/// sent (the server counts them), and none waits behind a later one, so latency from the
/// schedule is service time plus a little, not the jitter.
#[test]
fn jittered_releases_are_all_sent_in_order() {
    let s = server();
    let url = s.url("/");
    let args = [
        "run",
        &url,
        "--rps",
        "10",
        "--jitter-uniform",
        "1s",
        "-d",
        "2",
        "--output-format",
        "json",
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 20);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "upstream_rq_total"), 20);
    let scheduled =
        percentile_secs(statistic(g, "benchmark_http_client.scheduled_to_response"), 0.5);
    let service = percentile_secs(statistic(g, "benchmark_http_client.request_to_response"), 0.5);
    assert!(scheduled - service < 0.005, "from schedule p50 {scheduled}s, service p50 {service}s");
}

/// The Outcome's share is of every request the schedule released: those the pool had no
/// room for failed too. The server's own 2xx count is the numerator.
#[test]
fn the_outcome_share_counts_requests_never_sent() {
    let s = server();
    let header = format!("{CONFIG}: {{\"static_delay\":\"0.05s\"}}");
    let url = s.url("/");
    let args = [
        "run",
        &url,
        "--rps",
        "200",
        "-d",
        "1",
        "--open-loop",
        "-c",
        "1",
        "--no-default-failure-predicates",
        "-H",
        &header,
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let outcome = line(&out.stdout, "Outcome:");
    let ok = w.count("/responses/2xx");
    assert!(ok > 0 && ok < 100, "{outcome}");
    assert!(
        outcome.contains(&format!("{ok} of 200 requests succeeded")),
        "{outcome} (server: {ok})"
    );
    assert!(outcome.contains("not sent (pool overflow) × "), "{outcome}");
}

/// `-n N --rps R` spans N/R: two requests at 1/s are 1/s, not 2/s over the one second between
/// them. The server saw the two.
#[test]
fn a_counted_run_rate_is_over_its_whole_span() {
    let s = server();
    let url = s.url("/");
    let (out, w) = run_witnessed(&s, &["run", &url, "-n", "2", "--rps", "1"], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 2);
    let rate = line(&out.stdout, "Rate:");
    assert!(rate.contains("1/s achieved of 1/s requested (100.0%)"), "{rate}");
}

/// A search against a service that answers only 503 passes no trial, however fast the 503s:
/// the default errors objective holds in every goal and the report says so. The server's own
/// count says every answer was an error.
#[test]
fn capacity_never_passes_a_service_that_only_fails() {
    let s = server();
    let header = format!("{CONFIG}: {{\"response_status\":503}}");
    let url = s.url("/");
    let args = [
        "capacity",
        &url,
        "--slo",
        "p99<=30ms",
        "-H",
        &header,
        "--rps",
        "100",
        "--trial-duration",
        "500ms",
        "--final-duration",
        "500ms",
        "--max-trials",
        "3",
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 1, "{}\n{}", out.stdout, out.stderr);
    assert!(w.count("/responses/5xx") > 0);
    assert_eq!(w.count("/responses/2xx"), 0);
    assert!(!out.stdout.contains("max 100/s"), "{}", out.stdout);
    assert!(out.stdout.contains("NO ANSWER"), "{}", out.stdout);
    assert!(out.stdout.contains("every goal also holds errors<=1%"), "{}", out.stdout);
}

/// A server that dies mid-search ends it, naming why, instead of failing every level that
/// had passed. The witness is the server's exit, caused here.
#[test]
fn capacity_stops_when_the_server_stops_accepting() {
    let mut s = server();
    let url = s.url("/");
    let args = [
        "capacity",
        &url,
        "--slo",
        "p99<=200ms",
        "--rps",
        "20",
        "--trial-duration",
        "1s",
        "--final-duration",
        "1s",
        "--max-trials",
        "12",
        "--output-format",
        "json",
    ];
    let child = spawn(&args);
    // The first trial passes against the live server; then it goes.
    std::thread::sleep(Duration::from_millis(2500));
    s.kill();
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let v = json(&out);
    let why = v["stopped_by"].as_str().unwrap_or_else(|| panic!("stopped_by in {v}"));
    assert!(why.starts_with("the server stopped accepting connections at trial "), "{why}");
    assert!(why.contains("Connection refused"), "{why}");
    let trials = v["capacity"]["trials"].as_array().unwrap();
    assert!(
        trials.len() < 6,
        "the search stopped at the first trial the dead server failed: {}",
        trials.len()
    );
    let summary = v["capacity"]["goals"][0]["summary"].as_str().unwrap();
    assert!(summary.starts_with("STOPPED — the server stopped accepting connections"), "{summary}");
}

/// A CONNECT proxy that only tunnels refuses a request to forward (curl's, k6's and Go's way
/// of sending http:// through a proxy) instead of answering it itself as if it were the host.
#[test]
fn a_tunnelling_proxy_refuses_to_pretend_it_forwarded() {
    let s = Server::start(&["--stats-path", WITNESS_STATS, "--connect-proxy"]);
    let before = s.stats(WITNESS_STATS);
    let out = Command::new("curl")
        .args([
            "-s",
            "-i",
            "--max-time",
            "5",
            "-x",
            &format!("http://{}", s.addr),
            "http://example.invalid/",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    assert!(text.to_ascii_lowercase().contains("allow: connect"), "{text}");
    assert!(text.contains("use CONNECT host:port"), "{text}");
    let after = s.stats(WITNESS_STATS);
    let refused = |v: &serde_json::Value| v["proxy"]["refused"].as_u64().unwrap();
    assert_eq!(refused(&after) - refused(&before), 1);
    // A server that is no proxy serves absolute-form, as an origin server must.
    let plain = server();
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
            "-x",
            &format!("http://{}", plain.addr),
            "http://example.invalid/",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
}

/// SIGTERM (a supervisor's stop) exits 143 as a shell reports it, with the result written;
/// the server counted every request the result says was sent.
#[test]
fn sigterm_exits_143_with_the_result() {
    let s = server();
    let url = s.url("/");
    let before = s.stats(WITNESS_STATS);
    let child = spawn(&["run", &url, "--rps", "50", "-d", "20", "--output-format", "json"]);
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 143, "{}", out.stderr);
    let v = json(&out);
    let sent = counter(global(&v), "upstream_rq_total");
    std::thread::sleep(Duration::from_millis(100));
    let after = s.stats(WITNESS_STATS);
    let requests = |v: &serde_json::Value| v["requests"].as_u64().unwrap();
    assert_eq!(requests(&after) - requests(&before), sent);
    assert!(sent > 10, "{sent}");
}

/// A stored result run again is a new run: its own execution id. A shard command run again
/// later derives the same id, and a merge refuses the pair as one run's shards.
#[test]
fn a_rerun_is_a_new_run_and_shards_of_other_starts_do_not_merge() {
    let s = server();
    let dir = scratch("witness-ids");
    let url = s.url("/");
    let stored = dir.join("first.json");
    let first =
        run(&["run", &url, "-n", "5", "--rps", "50", "-o", stored.to_str().unwrap()], LIMIT);
    assert_eq!(first.code(), 0, "{}", first.stderr);
    let again = run(&["run", "--spec", stored.to_str().unwrap(), "--output-format", "json"], LIMIT);
    assert_eq!(again.code(), 0, "{}", again.stderr);
    let id = |v: &serde_json::Value| v["options"]["execution_id"].as_str().unwrap().to_string();
    let stored_v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stored).unwrap()).unwrap();
    assert_ne!(id(&json(&again)), id(&stored_v));

    let shard = |i: u32| {
        let path = dir.join(format!("shard{i}.json"));
        let out = run(
            &[
                "run",
                &url,
                "--shard",
                &format!("{i}/2"),
                "--rps",
                "20",
                "-d",
                "1",
                "-o",
                path.to_str().unwrap(),
            ],
            LIMIT,
        );
        assert_eq!(out.code(), 0, "{}", out.stderr);
        path
    };
    let (a, b) = (shard(0), shard(1));
    let merged = run(&["transform", "--merge", a.to_str().unwrap(), b.to_str().unwrap()], LIMIT);
    assert_eq!(merged.code(), 2, "{}", merged.stdout);
    assert!(merged.stderr.contains("shards of different starts"), "{}", merged.stderr);
}

/// A partial merge says so in every output.
#[test]
fn a_partial_merge_says_so() {
    let s = server();
    let dir = scratch("witness-partial");
    let url = s.url("/");
    let path = dir.join("shard0.json");
    let out = run(
        &["run", &url, "--shard", "0/3", "--rps", "30", "-d", "1", "-o", path.to_str().unwrap()],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let p = path.to_str().unwrap();
    let human =
        run(&["transform", "--merge", p, "--allow-partial", "--output-format", "human"], LIMIT);
    assert_eq!(human.code(), 0, "{}", human.stderr);
    assert!(
        line(&human.stdout, "Outcome:").ends_with("; PARTIAL: 1 of 3 shards"),
        "{}",
        human.stdout
    );
    let merged = run(&["transform", "--merge", p, "--allow-partial"], LIMIT);
    assert_eq!(json(&merged)["options"]["partial"], "1 of 3 shards");
}

/// A bad line in the middle of a jobs file ends the replay as failed, in the JSON too; the
/// server saw only the jobs before it.
#[test]
fn a_bad_jobs_line_fails_the_replay() {
    let s = server();
    let dir = scratch("witness-jobs");
    let mut text = String::from(
        "{\"shrike_jobs\": 1, \"protocol\": \"http\", \"source\": \"hand-written\"}\n",
    );
    for k in 0..5 {
        text.push_str(&format!(
            "{{\"job\": {k}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"/\"}}]}}\n",
            f64::from(k) * 0.01
        ));
    }
    text.push_str("this is not JSON\n");
    text.push_str("{\"job\": 9, \"start\": 0.2, \"requests\": [{\"at\": 0, \"method\": \"GET\", \"path\": \"/\"}]}\n");
    let jobs = dir.join("bad.jobs");
    std::fs::write(&jobs, text).unwrap();
    let args = ["replay", jobs.to_str().unwrap(), "--target", &s.addr, "--output-format", "json"];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 5);
    let v = json(&out);
    assert_eq!(v["shrike"]["verdict"]["outcome"], "failed", "{}", v["shrike"]["verdict"]);
    let why = v["shrike"]["verdict"]["description"].as_str().unwrap();
    assert!(
        why.contains("the jobs file stopped the replay") && why.contains("bad.jobs:7"),
        "{why}"
    );
}

/// Usage errors that used to pass: a bare number for a sub-second duration, a search with no
/// trials.
#[test]
fn misleading_flags_are_refused() {
    let out = run(&["run", "http://127.0.0.1:9/", "--jitter-uniform", "10", "--dry-run"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("10 has no unit: give one, e.g. 10ms"), "{}", out.stderr);
    let out =
        run(&["capacity", "http://127.0.0.1:9/", "--slo", "p99<=10ms", "--max-trials", "0"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--max-trials"), "{}", out.stderr);
    // A run placed on a fleet and a Nighthawk service at once is refused, as capacity's and
    // sweep's are (it once went to the fleet and ignored the service), with nothing sent.
    let s = server();
    let url = s.url("/");
    for cmd in [&["run", &url, "-d", "1"][..], &["capacity", &url, "--slo", "p99<=10ms"]] {
        let both = ["--remote", "127.0.0.1:1", "--nighthawk-service", "grpc://127.0.0.1:2"];
        let (out, w) = run_witnessed(&s, &[cmd, &both[..]].concat(), LIMIT);
        assert_eq!(out.code(), 2, "{cmd:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("--nighthawk-service cannot be used with --remote"),
            "{cmd:?}: {}",
            out.stderr
        );
        assert_eq!(w.count("/requests"), 0);
    }
}

/// Options of one protocol given for another are refused by name, not ignored.
#[test]
fn protocol_options_on_the_wrong_protocol_are_refused() {
    let cases: [(&[&str], &str); 4] = [
        (&["--max-concurrent-streams", "5"], "--max-concurrent-streams"),
        (&["--max-active-requests", "5"], "--max-active-requests"),
        (&["--protocol", "http2", "--prefetch-connections"], "--prefetch-connections"),
        (
            &["--protocol", "http2", "--experimental-h1-connection-reuse-strategy", "lru"],
            "--experimental-h1-connection-reuse-strategy",
        ),
    ];
    for (extra, flag) in cases {
        let args = [&["run", "http://127.0.0.1:9/", "--dry-run"][..], extra].concat();
        let out = run(&args, LIMIT);
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(flag) && out.stderr.contains("only"),
            "{extra:?}: {}",
            out.stderr
        );
    }
    let ok = run(
        &[
            "run",
            "http://127.0.0.1:9/",
            "--protocol",
            "http2",
            "--max-concurrent-streams",
            "5",
            "--dry-run",
        ],
        LIMIT,
    );
    assert_eq!(ok.code(), 0, "{}", ok.stderr);
}

/// `transform -o x.csv` writes CSV, as `run -o x.csv` does; fortio's JSON read back is
/// refused by name.
#[test]
fn transform_picks_its_format_from_the_file_and_names_what_it_cannot_read() {
    let s = server();
    let dir = scratch("witness-transform");
    let url = s.url("/");
    let stored = dir.join("r.json");
    let out = run(&["run", &url, "-n", "5", "--rps", "50", "-o", stored.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let csv = dir.join("r.csv");
    let t = Command::new(env!("CARGO_BIN_EXE_shrike"))
        .args(["transform", "--merge", stored.to_str().unwrap(), "-o", csv.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(!text.trim_start().starts_with('{'), "CSV, not JSON: {text}");
    assert!(text.lines().next().unwrap().contains(','), "{text}");

    let fortio = run(&["run", &url, "-n", "5", "--rps", "50", "--output-format", "fortio"], LIMIT);
    assert_eq!(fortio.code(), 0, "{}", fortio.stderr);
    let mut child = Command::new(env!("CARGO_BIN_EXE_shrike"))
        .args(["transform", "--output-format", "human"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(fortio.stdout.as_bytes()).unwrap();
    let back = child.wait_with_output().unwrap();
    assert_eq!(back.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&back.stderr).contains("this is fortio's JSON"),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
}

/// HTTP/3 to a port where no QUIC listener answers fails within the handshake bound, not the
/// 30 s request timeout. The witness is the wall clock.
#[test]
fn http3_to_a_silent_port_fails_within_the_handshake_bound() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("https://127.0.0.1:{port}/");
    let started = std::time::Instant::now();
    let out = run(
        &["run", &url, "--protocol", "http3", "--tls-insecure", "-d", "1", "--rps", "5"],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("QUIC handshake with 127.0.0.1"), "{}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
}

/// Every status class is in the Outcome: redirects are successes, named as what they are. The
/// server counted them.
#[test]
fn redirects_are_named_among_the_successes() {
    let s = server();
    let header = format!("{CONFIG}: {{\"response_status\":301}}");
    let url = s.url("/");
    let (out, w) =
        run_witnessed(&s, &["run", &url, "-n", "10", "--rps", "100", "-H", &header], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/responses/3xx"), 10);
    let outcome = line(&out.stdout, "Outcome:");
    assert!(
        outcome.contains("10 of 10 requests succeeded (100.0%, 301 × 10 among them)"),
        "{outcome}"
    );
}

/// A lateness budget that drops requests (open loop, more releases per wake-up than the
/// connections take) is warned of before the run; the server saw exactly what was sent.
#[test]
fn a_lateness_budget_that_would_overflow_is_warned_of() {
    let s = server();
    let url = s.url("/");
    let args = [
        "run",
        &url,
        "--rps",
        "2000",
        "-d",
        "1",
        "--open-loop",
        "-c",
        "2",
        "--max-lateness",
        "10ms",
        "--no-default-failure-predicates",
        "--output-format",
        "json",
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("--max-lateness gathers up to 20 releases per wake-up"),
        "{}",
        out.stderr
    );
    let v = json(&out);
    assert_eq!(w.count("/requests"), counter(global(&v), "upstream_rq_total"));
}

/// Jobs whose captured answers were 404 six times in ten, against a server that answers 200.
fn canary_jobs(dir: &std::path::Path, path: &str, hosts: Option<&str>) -> std::path::PathBuf {
    let header = match hosts {
        Some(h) => format!("{{\"shrike_jobs\": 1, \"protocol\": \"http\", \"hosts\": {h}}}\n"),
        None => "{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n".to_string(),
    };
    let mut text = header;
    for k in 0..10u32 {
        let status = if k < 6 { 404 } else { 200 };
        text.push_str(&format!(
            "{{\"job\": {}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"{path}\", \"response\": {{\"status\": {status}}}}}]}}\n",
            k + 1,
            f64::from(k) * 0.01
        ));
    }
    let p = dir.join("canary.jobs");
    std::fs::write(&p, text).unwrap();
    p
}

/// The canary gate replays everything, then fails above its bound; the server saw every
/// request either way.
#[test]
fn the_canary_gate_replays_everything_then_judges() {
    let s = server();
    let dir = scratch("witness-canary");
    let jobs = canary_jobs(&dir, "/", None);
    let gate = |n: &str| {
        let args = [
            "replay",
            jobs.to_str().unwrap(),
            "--target",
            &s.addr,
            "--canary-max-differences",
            n,
            "--output-format",
            "json",
        ];
        run_witnessed(&s, &args, LIMIT)
    };
    let (out, w) = gate("5");
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 10, "every job replayed, not stopped at the first");
    let v = json(&out);
    assert_eq!(counter(global(&v), "replay.canary_differed"), 6);
    let why = v["shrike"]["verdict"]["description"].as_str().unwrap();
    assert!(why.contains("6 of 10 compared answers differ from the captured ones, above --canary-max-differences 5"), "{why}");
    let (out, w) = gate("6");
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 10);
}

/// Rewrite rules are checked: a group the expression lacks is refused, a rule that never
/// matched is reported, and the canary diff shows what was sent beside what was captured.
#[test]
fn rewrite_rules_are_checked_and_counted() {
    let s = server();
    let dir = scratch("witness-rewrite");
    let jobs = canary_jobs(&dir, "/api/a", None);
    let j = jobs.to_str().unwrap();
    let out =
        run(&["replay", j, "--target", &s.addr, "--rewrite", "path:^/api/(.*)=>/v2/$2"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("$2: the expression has 1 group ($1)"), "{}", out.stderr);
    let args = [
        "replay",
        j,
        "--target",
        &s.addr,
        "--rewrite",
        "path:^/api/=>/v2/",
        "--rewrite",
        "path:^/never/=>/x/",
        "--output-format",
        "json",
    ];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 10);
    assert!(
        out.stderr.contains("--rewrite \"path:^/never/=>/x/\" matched no request"),
        "{}",
        out.stderr
    );
    let v = json(&out);
    let matched = &v["options"]["replay"]["rewrite_matched"];
    assert_eq!(matched[0]["changed"], 10, "{matched}");
    assert_eq!(matched[1]["changed"], 0, "{matched}");
    let diffs = v["shrike"]["canary_differences"].as_array().unwrap();
    assert_eq!(diffs[0]["message"], "GET /v2/a (captured GET /api/a): 404 → 200", "{diffs:?}");
}

/// A jobs file holding requests to two hosts is refused without --host; with it, only that
/// host's requests are sent (the server counts them).
#[test]
fn a_multi_host_recording_needs_host() {
    let s = server();
    let dir = scratch("witness-hosts");
    let mut text = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\", \"hosts\": [\"https://shop.example:443\", \"https://cdn.example:443\"]}\n");
    for (k, host) in ["shop.example", "cdn.example", "shop.example", "cdn.example", "cdn.example"]
        .iter()
        .enumerate()
    {
        text.push_str(&format!(
            "{{\"job\": {}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"/\", \"headers\": {{\"host\": \"{host}\"}}}}]}}\n",
            k + 1,
            k as f64 * 0.01
        ));
    }
    let jobs = dir.join("two.jobs");
    std::fs::write(&jobs, text).unwrap();
    let j = jobs.to_str().unwrap();
    let out = run(&["replay", j, "--target", &s.addr], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("the jobs hold requests to 2 hosts"), "{}", out.stderr);
    assert!(out.stderr.contains("--host"), "{}", out.stderr);
    let args = ["replay", j, "--target", &s.addr, "--host", "shop.*", "--output-format", "json"];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 2);
    assert_eq!(json(&out)["options"]["replay"]["requests_to_other_hosts"], 3);
}

/// A capacity search's and a sweep's results say what they tested (the load's options, the
/// target among them, and the search's or the grid's, the sweep's server command), and run
/// again with --spec as a run's result does.
#[test]
fn planner_results_say_what_they_tested_and_run_again() {
    let s = server();
    let dir = scratch("witness-planners");
    let url = s.url("/cap");
    let cap = dir.join("capacity.json");
    let out = run(
        &[
            "capacity",
            &url,
            "--slo",
            "p99<=200ms",
            "--rps",
            "20",
            "--trial-duration",
            "300ms",
            "--final-duration",
            "300ms",
            "--max-trials",
            "2",
            "-o",
            cap.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.stdout.starts_with("Shrike capacity"), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("Target: {url}")), "{}", out.stdout);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
    assert_eq!(doc["options"]["uri"], url.as_str(), "{}", doc["options"]);
    assert_eq!(doc["search"]["max_trials"], 2, "{}", doc["search"]);
    let again =
        run(&["capacity", "--spec", cap.to_str().unwrap(), "--slo", "p99<=1s", "--dry-run"], LIMIT);
    assert_eq!(again.code(), 0, "{}", again.stderr);
    assert_eq!(json(&again)["spec"]["uri"], url.as_str());
    assert_eq!(json(&again)["search"]["slos"], serde_json::json!(["p99<=1.000s", "errors<=1%"]));
    // Without --slo, the stored search is searched again as it was: its objectives (the
    // default errors one implied again, not given) and its options.
    let same = run(&["capacity", "--spec", cap.to_str().unwrap(), "--dry-run"], LIMIT);
    assert_eq!(same.code(), 0, "{}", same.stderr);
    let plan = json(&same);
    assert_eq!(plan["search"]["slos"], serde_json::json!(["p99<=200.0ms", "errors<=1%"]), "{plan}");
    assert_eq!(plan["search"]["max_trials"], 2, "{plan}");
    assert_eq!(plan["search"]["trial_duration"], "0.300s", "{plan}");
    assert_eq!(plan["spec"]["uri"], url.as_str());
    // Without either, the search has nothing to judge by: said so.
    let none = run(&["capacity", &url, "--dry-run"], LIMIT);
    assert_eq!(none.code(), 2, "{}", none.stderr);
    assert!(none.stderr.contains("give at least one --slo"), "{}", none.stderr);

    let sw = dir.join("sweep.json");
    let sweep_url = s.url("/sweep");
    let out = run(
        &[
            "sweep",
            &sweep_url,
            "--connections",
            "1,2",
            "--iterations",
            "1",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--output-format",
            "json",
            "-o",
            sw.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sw).unwrap()).unwrap();
    assert_eq!(doc["options"]["uri"], sweep_url.as_str());
    assert_eq!(doc["grid"]["levels"], serde_json::json!([1, 2]));
    assert_eq!(doc["instances"]["instances"][0]["url"], sweep_url.as_str(), "{}", doc["instances"]);
    let again =
        run(&["sweep", "--spec", sw.to_str().unwrap(), "--connections", "1", "--dry-run"], LIMIT);
    assert_eq!(again.code(), 0, "{}", again.stderr);
    assert_eq!(json(&again)["spec"]["uri"], sweep_url.as_str());
    assert_eq!(json(&again)["sweep"]["levels"], serde_json::json!([1]));
    // Without a grid, the stored one is swept again, with its iterations and wait.
    let same = run(&["sweep", "--spec", sw.to_str().unwrap(), "--dry-run"], LIMIT);
    assert_eq!(same.code(), 0, "{}", same.stderr);
    let plan = json(&same);
    assert_eq!(plan["sweep"]["levels"], serde_json::json!([1, 2]), "{plan}");
    assert_eq!(plan["sweep"]["iterations"], 1, "{plan}");
    assert_eq!(plan["sweep"]["wait"], "0s", "{plan}");
    assert_eq!(plan["spec"]["uri"], sweep_url.as_str());
}

/// The new flags' wrong paths: a bound below the first level, a bound for a search with no
/// rate, a canary gate for jobs with no HTTP answers to compare, and a --host that matches
/// nothing (the server saw nothing, and the replay says it sent nothing).
#[test]
fn the_new_flags_wrong_paths_are_named() {
    let cases: [(&[&str], &str); 2] = [
        (&["--rps", "100", "--max-rate", "50"], "--max-rate must be at least the first level"),
        (&["--search", "concurrency", "--max-rate", "50"], "--max-rate"),
    ];
    for (extra, says) in cases {
        let args =
            [&["capacity", "http://127.0.0.1:9/", "--slo", "p99<=10ms", "--dry-run"][..], extra]
                .concat();
        let out = run(&args, LIMIT);
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{extra:?}: {}", out.stderr);
    }
    let dir = scratch("witness-wrong-paths");
    let tcp = dir.join("tcp.jobs");
    std::fs::write(&tcp, "{\"shrike_jobs\": 1, \"protocol\": \"tcp\"}\n").unwrap();
    let out = run(
        &[
            "replay",
            tcp.to_str().unwrap(),
            "--target",
            "127.0.0.1:9",
            "--canary-max-differences",
            "1",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--canary-max-differences"), "{}", out.stderr);

    let s = server();
    let jobs =
        canary_jobs(&dir, "/", Some("[\"http://shop.example:80\", \"http://cdn.example:80\"]"));
    let args = ["replay", jobs.to_str().unwrap(), "--target", &s.addr, "--host", "nowhere.example"];
    let (out, w) = run_witnessed(&s, &args, LIMIT);
    assert_eq!(w.count("/requests"), 0);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(line(&out.stdout, "Outcome:").contains("NO REQUEST WAS SENT"), "{}", out.stdout);
}
