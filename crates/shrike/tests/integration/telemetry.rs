//! Live telemetry through the real binary: interval reports, the stored series, the Prometheus
//! endpoint, statsd and the progress line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

/// The JSON interval reports on stderr (one object per line; other lines are logs).
fn jsonl_reports(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v| v["type"] == "interval")
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).expect("a count")
}

#[test]
fn jsonl_reports_come_at_the_cadence_and_sum_to_the_totals() {
    let server = Server::start(&[]);
    let (out, w) = run_witnessed(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "150",
            "--concurrency",
            "2",
            "--duration",
            "2",
            "--stats-interval",
            "400ms",
            "--output-format",
            "json",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let reports = jsonl_reports(&out.stderr);
    // 2 s / 0.4 s = 5 reports; a final sliver (drain) may add one.
    assert!((4..=6).contains(&reports.len()), "{} reports:\n{}", reports.len(), out.stderr);
    for (i, r) in reports.iter().enumerate() {
        assert_eq!(u(&r["index"]), i as u64);
        assert_eq!(r["last"], i + 1 == reports.len(), "{r}");
        if i + 1 < reports.len() {
            let d = r["duration_s"].as_f64().unwrap();
            assert!((d - 0.4).abs() < 1e-6, "interval {i} lasted {d}");
            let start = r["start_s"].as_f64().unwrap();
            assert!((start - 0.4 * i as f64).abs() < 1e-6, "interval {i} starts at {start}");
        }
        if i > 0 {
            assert!(r["change"]["rps"].is_number(), "{r}");
        }
    }
    let v = json(&out);
    let g = global(&v);
    let total = counter(g, "upstream_rq_total");
    assert!(total >= 550, "only {total} requests");
    // The server counted the same requests and answers the reports add up to.
    w.agrees(g);
    assert_eq!(w.count("/requests"), total);
    let sum = |f: &dyn Fn(&Value) -> u64| reports.iter().map(f).sum::<u64>();
    assert_eq!(sum(&|r| u(&r["requests"])), total);
    assert_eq!(u(&reports.last().unwrap()["requests_total"]), total);
    let sched = statistic(g, "benchmark_http_client.scheduled_to_response");
    assert_eq!(sum(&|r| u(&r["scheduled_to_response"]["count"])), u(&sched["count"]));
    assert_eq!(sum(&|r| u(&r["status_codes"]["200"])), counter(g, "benchmark.http_2xx"));
    // Each rate is its interval's count over its length, and together they show 300 rps.
    for r in &reports {
        let (n, d) = (u(&r["requests"]) as f64, r["duration_s"].as_f64().unwrap());
        assert!((r["rps"].as_f64().unwrap() - n / d).abs() < 1e-6, "{r}");
    }
    let secs: f64 = reports.iter().map(|r| r["duration_s"].as_f64().unwrap()).sum();
    let rate = total as f64 / secs;
    assert!((270.0..=330.0).contains(&rate), "{rate} rps overall");
}

#[test]
fn stored_intervals_sum_exactly_to_the_global_result() {
    // h2 keeps socket bytes outside the counters until flushed: they must still sum.
    let server = Server::start(&[]);
    for protocol in ["http1", "http2"] {
        stored_intervals_sum(&server, protocol);
    }
}

/// [`run_json_ok`] against `server`, checked against what the server counted (every request,
/// every status class).
fn agreed(server: &Server, args: &[&str]) -> (Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    (v, w)
}

fn stored_intervals_sum(server: &Server, protocol: &str) {
    let url = server.url("/");
    let (v, w) = agreed(
        server,
        &[
            "run",
            &url,
            "--protocol",
            protocol,
            "--rps",
            "200",
            "--concurrency",
            "2",
            "--duration",
            "1.3",
            "--stats-interval",
            "500ms",
        ],
    );
    let g = global(&v);
    let intervals = v["shrike"]["intervals"].as_array().expect("stored intervals");
    // 0–0.5, 0.5–1.0 and the partial 1.0–1.3 (with its true length).
    assert_eq!(intervals.len(), 3, "{intervals:?}");
    let last = intervals.last().unwrap();
    let last_len = secs(&last["duration"]);
    assert!((0.29..0.5).contains(&last_len), "last interval lasted {last_len}s");
    // The series spans the run: from the shared start to the last worker's end.
    let total_len: f64 = intervals.iter().map(|i| secs(&i["duration"])).sum();
    let run_len = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] != "global")
        .map(|r| secs(&r["execution_duration"]))
        .fold(0.0, f64::max);
    assert!((total_len - run_len).abs() < 1e-6, "{total_len} vs {run_len}");
    // Every counter, including connection and byte counters, sums exactly.
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for i in intervals {
        for c in i["counters"].as_array().unwrap() {
            *sums.entry(c["name"].as_str().unwrap().to_string()).or_default() += u(&c["value"]);
        }
    }
    let globals: BTreeMap<String, u64> = g["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), u(&c["value"])))
        .collect();
    assert_eq!(sums, globals);
    // And so to what the server counted: the intervals' requests and 2xx, its connections.
    let sum = |name: &str| sums.get(name).copied().unwrap_or(0);
    assert_eq!(sum("upstream_rq_total") + sum("upstream_rq_retry"), w.count("/requests"));
    assert_eq!(sum("benchmark.http_2xx"), w.count("/responses/2xx"));
    let opened = sum(&format!("upstream_cx_{protocol}_total"));
    assert_eq!(opened, w.count(&format!("/connections/{protocol}")), "{protocol}: {sums:?}");
    for id in
        ["benchmark_http_client.scheduled_to_response", "benchmark_http_client.request_to_response"]
    {
        let n: u64 = intervals
            .iter()
            .map(|i| {
                let s = i["statistics"].as_array().unwrap().iter().find(|s| s["id"] == id);
                u(&s.unwrap_or_else(|| panic!("{id} in {i}"))["count"])
            })
            .sum();
        assert_eq!(n, u(&statistic(g, id)["count"]), "{id}");
    }
}

#[test]
fn text_reports_are_one_line_per_interval() {
    // A 50 ms server delay at 100 rps keeps about 5 requests in flight (Little's law).
    let server = Server::start(&[]);
    let url = server.url("/");
    let (out, w) = run_witnessed(
        &server,
        &[
            "run",
            &url,
            "--rps",
            "100",
            "--duration",
            "1.5",
            "--stats-interval",
            "0.5s",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"static_delay":"0.05s"}"#,
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let lines: Vec<&str> =
        out.stderr.lines().filter(|l| l.starts_with("[shrike] interval ")).collect();
    assert!((3..=4).contains(&lines.len()), "{}", out.stderr);
    // `requests N (total T)`: T is the running sum of N.
    let mut running = 0;
    for l in &lines {
        let rest = l.split(": requests ").nth(1).expect("requests");
        let mut words = rest.split_whitespace();
        let n: u64 = words.next().unwrap().parse().unwrap();
        let total: u64 = words.nth(1).unwrap().trim_end_matches(')').parse().unwrap();
        running += n;
        assert_eq!(total, running, "{l}");
    }
    assert!((148..=150).contains(&running), "{running} requests");
    // The server answered every one the lines counted.
    assert_eq!(w.count("/requests"), running);
    assert_eq!(w.count("/responses/2xx"), running);
    assert!(lines[0].starts_with("[shrike] interval 0 0.000s+0.500s: "), "{}", lines[0]);
    assert!(!lines[0].contains("change:") && lines[1].contains("change: rps"), "{}", lines[1]);
    assert!(lines.iter().all(|l| l.contains("| latency p50 ") && l.contains(" | service p50 ")));
    let in_flight: u64 = lines[1]
        .split("in flight ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("in flight level");
    assert!((3..=8).contains(&in_flight), "{}", lines[1]);
    assert!(lines[1].contains("latency p50 5"), "50 ms delay not seen: {}", lines[1]);
    // The summary still goes to stdout, untouched.
    assert!(out.stdout.contains("\nOutcome:     "));
    assert!(!out.stdout.contains("[shrike] interval"));
}

/// Parses a scrape with prometheus_client's own parser: {sample name + labels: value}.
fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        out[s.name + ("{" + labels + "}" if labels else "")] = s.value
print(json.dumps(out))
"#;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "parser failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    v.into_iter().map(|(k, v)| (k, v.as_f64().unwrap_or(f64::NAN))).collect()
}

fn curl(url: &str) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-D", "-", url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}

#[test]
fn metrics_endpoint_is_live_during_the_run() {
    let server = Server::start(&[]);
    let stored = scratch("metrics-live").join("run.json");
    let before = Witness::before(&server);
    let mut child = shrike()
        .args(["run", &server.url("/"), "--rps", "200", "--duration", "3.5"])
        .args(["--metrics-listen", "127.0.0.1:0", "-o", stored.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let started = Instant::now();
    let url = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "stderr closed before the address");
        if let Some(i) = line.find("http://") {
            break line[i..].trim().to_string();
        }
    };
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"), "{url}");
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));

    let (head404, _) = curl(&url.replace("/metrics", "/nope"));
    assert!(head404.starts_with("HTTP/1.1 404"), "{head404}");
    std::thread::sleep(Duration::from_millis(1300).saturating_sub(started.elapsed()));
    let (head, first) = curl(&url);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"));
    let first = parse_prometheus(&first);
    std::thread::sleep(Duration::from_millis(700));
    let second = parse_prometheus(&curl(&url).1);
    // Every request the endpoint said was sent had reached the server by a later read of its
    // counts (which adds the run's later ones: at least, not equal).
    let seen = server.stats(WITNESS_STATS)["requests"].as_u64().unwrap()
        - before["requests"].as_u64().unwrap();
    let (a, b) = (first["shrike_upstream_rq_total"], second["shrike_upstream_rq_total"]);
    assert!(seen as f64 >= b, "the server saw {seen} by then, the endpoint said {b}");
    assert!(a >= 150.0 && b >= a + 80.0, "rq_total {a} then {b}");
    assert!(second["shrike_responses_total{code=200}"] >= b - 1.0);
    assert_eq!(second["shrike_run_finished"], 0.0);
    assert_eq!(second["shrike_run_duration_seconds"], 3.5);
    let elapsed = second["shrike_run_elapsed_seconds"];
    assert!((1.5..3.5).contains(&elapsed), "elapsed {elapsed}");
    // The last interval's quantiles (one interval completed by now) and cumulative count.
    let p99 = second["shrike_scheduled_to_response_seconds{quantile=0.99}"];
    assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99}");
    assert!(second["shrike_scheduled_to_response_seconds_count"] >= a);

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "run did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&stored).unwrap()).unwrap();
    Witness::since(&server, before).agrees(global(&v));
    // The endpoint ends with the run.
    let gone = Command::new("curl").args(["-sS", "--max-time", "2", &url]).output().unwrap();
    assert!(!gone.status.success(), "metrics still served after the run");
}

/// Collects statsd datagrams until the run ends; returns {metric: summed value} for counters
/// and the number of datagrams.
fn statsd_run(
    server: &Server,
    sink_args: &[&str],
    socket: &UdpSocket,
    prefix: &str,
) -> (BTreeMap<String, u64>, Value, usize, Witness) {
    socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let url = server.url("/");
    let mut args =
        vec!["run", &url, "--rps", "100", "--duration", "1.3", "--output-format", "json"];
    args.extend(sink_args);
    args.extend(["--stats-flush-interval", "400ms"]);
    let before = Witness::before(server);
    let child = shrike()
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let reader = {
        let socket = socket.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut packets = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(4);
            let mut buf = [0u8; 2048];
            while Instant::now() < deadline {
                if let Ok(n) = socket.recv(&mut buf) {
                    packets.push(String::from_utf8_lossy(&buf[..n]).to_string());
                }
            }
            packets
        })
    };
    let out = wait_limited(child, Duration::from_secs(20));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let w = Witness::since(server, before);
    let packets = reader.join().unwrap();
    let mut counters = BTreeMap::new();
    for p in &packets {
        assert!(p.len() <= 1400);
        for line in p.lines() {
            assert!(line.starts_with(&format!("{prefix}.")), "{line}");
            let (name, rest) = line.split_once(':').expect("name:value|type");
            let (value, kind) = rest.split_once('|').expect("value|type");
            match kind {
                "c" => {
                    *counters.entry(name.to_string()).or_default() += value.parse::<u64>().unwrap()
                }
                "g" => assert!(value.parse::<f64>().unwrap() >= 0.0, "{line}"),
                other => panic!("unexpected metric type {other} in {line}"),
            }
        }
    }
    (counters, json(&out), packets.len(), w)
}

#[test]
fn statsd_receives_counter_deltas_that_sum_to_the_totals() {
    let server = Server::start(&[]);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let (counters, v, n, w) = statsd_run(&server, &["--statsd", &addr], &socket, "shrike");
    // Flushes on the ticks past 0.4, 0.8 and 1.2 s, the last one at the end.
    assert!(n >= 3, "{n} datagrams");
    let g = global(&v);
    assert_eq!(counters["shrike.upstream_rq_total"], counter(g, "upstream_rq_total"));
    assert_eq!(counters["shrike.benchmark.http_2xx"], counter(g, "benchmark.http_2xx"));
    assert_eq!(counters["shrike.status_code.200"], counter(g, "benchmark.http_2xx"));
    // The datagrams' totals are what the server counted.
    w.agrees(g);
    assert_eq!(counters["shrike.upstream_rq_total"], w.count("/requests"));
    assert_eq!(counters["shrike.benchmark.http_2xx"], w.count("/responses/2xx"));

    // Nighthawk's --stats-sinks with an Envoy StatsdSink (bare keys, custom prefix).
    let sink = format!(
        r#"{{name:"envoy.stat_sinks.statsd",typed_config:{{"@type":"type.googleapis.com/envoy.config.metrics.v3.StatsdSink",address:{{socket_address:{{address:"127.0.0.1",port_value:{}}}}},prefix:"lt"}}}}"#,
        socket.local_addr().unwrap().port()
    );
    let (counters, v, _, w) = statsd_run(&server, &["--stats-sinks", &sink], &socket, "lt");
    assert_eq!(counters["lt.upstream_rq_total"], counter(global(&v), "upstream_rq_total"));
    w.agrees(global(&v));
    assert_eq!(counters["lt.upstream_rq_total"], w.count("/requests"));
}

#[test]
fn bad_telemetry_flags_are_usage_errors() {
    for (args, needle) in [
        (vec!["--stats-sinks", "udp://127.0.0.1:8125"], "--stats-sinks"),
        (
            vec![
                "--stats-sinks",
                r#"{name:"envoy.stat_sinks.statsd",typed_config:{tcp_cluster_name:"statsd"}}"#,
            ],
            "tcp_cluster_name",
        ),
        (vec!["--stats-interval", "0"], "--stats-interval"),
        (vec!["--stats-interval", "10ms"], "at least 100ms"),
        (vec!["--stats-interval", "soon"], "--stats-interval"),
        (vec!["--stats-flush-interval", "0"], "--stats-flush-interval"),
        (vec!["--metrics-listen", "not-an-address"], "--metrics-listen"),
        (vec!["--statsd", "nohostport"], "--statsd"),
    ] {
        let mut all = vec!["run", "--duration", "1"];
        all.extend(&args);
        let out = run(&all, Duration::from_secs(10));
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("starting"), "{args:?} started a run");
    }
}

#[test]
fn progress_only_on_a_terminal() {
    // Not a terminal: no progress, and without any telemetry flag no series is stored.
    let out = run(&["run", "--rps", "50", "--duration", "0.6"], Duration::from_secs(10));
    assert_eq!(out.code(), 0);
    assert!(!out.stderr.contains('\r') && !out.stderr.contains("rps  p50"), "{}", out.stderr);
    let v = run_json_ok(&["run", "--rps", "50", "--duration", "0.3"]);
    assert!(v["shrike"]["intervals"].as_array().is_none_or(|a| a.is_empty()), "{v}");

    // Under a pty (script(1)): the line is drawn, redrawn in place and cleared at the end.
    let bin = env!("CARGO_BIN_EXE_shrike");
    let pty = |extra: &str| {
        let cmd = format!("{bin} run --rps 100 --duration 1.2 -v warn {extra}");
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .expect("script");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let shown = pty("");
    let draws = shown.matches("\r\x1b[2K[shrike] ").count();
    assert!((2..=7).contains(&draws), "{draws} redraws in {shown:?}");
    assert!(shown.contains("s left)") && shown.contains(" rps  p50 "), "{shown:?}");
    // Cleared before the report: the line erase comes right before the result.
    let report = shown.find("Outcome:").expect("report");
    let last_clear = shown.rfind("\r\x1b[2K").unwrap();
    assert!(last_clear < report);
    assert!(!shown[last_clear..report].contains("[shrike] "), "progress left on screen");
    let quiet = pty("--no-progress");
    assert!(!quiet.contains("\x1b[2K"), "{quiet:?}");
}

#[test]
fn an_interrupted_run_ends_its_series_with_a_true_partial_interval() {
    let server = Server::start(&[]);
    let before = Witness::before(&server);
    let child = shrike()
        .args(["run", &server.url("/"), "--no-duration", "--rps", "100"])
        .args(["--stats-interval", "500ms"])
        .args(["--output-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1300));
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = wait_limited(child, Duration::from_secs(20));
    // 130: interrupted, with its result written.
    assert_eq!(out.code(), 130, "{}", out.stderr);
    let reports = jsonl_reports(&out.stderr);
    let v = json(&out);
    let stored = v["shrike"]["intervals"].as_array().expect("intervals");
    assert_eq!(reports.len(), stored.len());
    assert!(reports.len() >= 2, "{}", out.stderr);
    let last = reports.last().unwrap();
    assert_eq!(last["last"], true);
    // Stopped between boundaries: the last interval is shorter than the period (unless the
    // signal landed within a hair of a boundary) and the series covers the whole run.
    let d = last["duration_s"].as_f64().unwrap();
    assert!(d > 0.0 && d <= 0.5, "last interval lasted {d}s");
    let covered: f64 = reports.iter().map(|r| r["duration_s"].as_f64().unwrap()).sum();
    let run_len = secs(&v["results"][0]["execution_duration"]);
    assert!((covered - run_len).abs() < 1e-6, "{covered} vs {run_len}");
    let total: u64 = reports.iter().map(|r| u(&r["requests"])).sum();
    assert_eq!(total, counter(global(&v), "upstream_rq_total"));
    // The server counted what the series did, the interrupted interval's too.
    let w = Witness::since(&server, before);
    w.agrees(global(&v));
    assert_eq!(w.count("/requests"), total);
}
