//! Load shaping through the real binary: bursts, stages and ramps, sub-1 rps, the unpaced
//! closed loop, idle strategies, warm-up, scheduled start, request timeouts, the source
//! address, and Google's published Nighthawk commands run verbatim.

use crate::support::nginx;

use std::time::{Duration, Instant, SystemTime};

use crate::support::{
    counter, global, json, options_but_id, percentile_secs, run, run_json_ok, run_witnessed,
    statistic, Server, Witness,
};
use nginx::{Listen, Nginx};

/// [`run_json_ok`] against `server`: the whole result, and what the server counted meanwhile,
/// already checked against its `global` result (every request sent, each status class).
fn run_doc(server: &Server, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    (v, w)
}

/// [`run_json_ok`] against `nginx`, whose access log must hold every request the run sent and
/// each status it counted: the result, and those log lines.
fn run_at(nginx: &Nginx, args: &[&str]) -> (serde_json::Value, Vec<nginx::LogEntry>) {
    let mark = nginx.mark();
    let v = run_json_ok(args);
    let lines = nginx.agrees(mark, global(&v));
    (v, lines)
}

/// Asserts `server` saw nothing since `before`: no connection, no request (a refused command
/// sends nothing).
fn nothing_sent(server: &Server, before: serde_json::Value) {
    let w = Witness::since(server, before);
    assert_eq!((w.count("/requests"), w.connections()), (0, 0), "the server saw something");
}

/// Splits sorted times into groups separated by gaps larger than `gap` seconds.
fn clusters(times: &[f64], gap: f64) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = Vec::new();
    for &t in times {
        match out.last_mut() {
            Some(c) if t - c[c.len() - 1] <= gap => c.push(t),
            _ => out.push(vec![t]),
        }
    }
    out
}

#[test]
fn bursts_release_in_groups_of_the_burst_size() {
    let nginx = Nginx::start_logged(Listen::Http1);
    let url = nginx.url("http", "127.0.0.1", "/file");
    // 20 rps in bursts of 5: a group every 250 ms, at 0, .25, .5, .75, 1.0 s.
    let (v, log) = run_at(
        &nginx,
        &[
            "run",
            &url,
            "--rps",
            "20",
            "--burst-size",
            "5",
            "--duration",
            "1.1",
            "--connections",
            "5",
        ],
    );
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 25);
    let mut times: Vec<f64> = log.iter().map(|e| e.secs).collect();
    times.sort_by(f64::total_cmp);
    let groups = clusters(&times, 0.1);
    let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![5; 5], "arrival times {times:?}");
    // The groups are a period apart (250 ms ± scheduling noise).
    for w in groups.windows(2) {
        let gap = w[1][0] - w[0][0];
        assert!((0.2..0.3).contains(&gap), "group gap {gap}s");
    }
}

#[test]
fn stages_produce_the_planned_per_stage_counts() {
    let nginx = Nginx::start_logged(Listen::Http1);
    let url = nginx.url("http", "127.0.0.1", "/file");
    // 0→100 rps over 1 s plans 50 requests; a step to 200 held for 0.5 s plans 100; then 0.
    let (v, log) = run_at(&nginx, &["run", &url, "--stages", "1s:100,0s:200,500ms:200,0s:0"]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 150);
    assert_eq!(v["options"]["stages"], "1s:100,0s:200,500ms:200,0s:0");
    assert_eq!(
        crate::support::secs(&g["execution_duration"]).round(),
        2.0,
        "the run lasts the stages"
    );
    let mut times: Vec<f64> = log.iter().map(|e| e.secs).collect();
    times.sort_by(f64::total_cmp);
    let t0 = times[0];
    let in_ramp = times.iter().filter(|t| **t - t0 < 1.0).count();
    // The ramp's releases thin out towards its start, so the boundary is sharp at 1 s; allow
    // a few for scheduling noise around it.
    assert!((46..=54).contains(&in_ramp), "{in_ramp} requests in the ramp stage");
    // Inside the ramp the rate grows: the second half holds three times the first.
    let first = times.iter().filter(|t| **t - t0 < 0.5).count();
    assert!((9..=16).contains(&first), "{first} requests in the first half second");
}

#[test]
fn ramp_duration_ramps_then_holds() {
    let server = Server::start(&[]);
    // 0→40 over 1 s (20 requests), then 40 rps for 0.5 s (20 more).
    let (v, w) = run_doc(
        &server,
        &["run", &server.url("/"), "--rps", "40", "--ramp-duration", "1s", "--duration", "1.5"],
    );
    let n = counter(global(&v), "benchmark.http_2xx");
    assert_eq!(n, 40, "ramp plus hold");
    assert_eq!(w.count("/requests"), n, "the server saw the 40");
    assert_eq!(v["options"]["ramp_duration"], "1s");
}

/// Nighthawk's linear-ramping rate limiter plugin, in the compact form its own tests write
/// (`ramp_time` as `{seconds, nanos}`).
const LINEAR_RAMP_1_5S: &str = "{name:\"nighthawk.linear-ramping-rate-limiter-plugin\",\
    typed_config:{\"@type\":\"type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig\",\
    ramp_time:{seconds:1,nanos:500000000}}}";

#[test]
fn the_linear_ramping_plugin_sends_its_integral_and_reruns_from_its_result() {
    let server = Server::start(&[]);
    let url = server.url("/");
    // 0→100 rps over 1.5 s (75 requests), then 100 rps for 1.5 s (150): 225, not the 300 of
    // the rate alone nor the 150 of a ramp over the whole run.
    let args = ["run", &url, "--rps", "100", "--duration", "3"];
    let (v, w) = run_doc(
        &server,
        &[&args[..], &["--rate-limiter-plugin-config", LINEAR_RAMP_1_5S]].concat(),
    );
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 225);
    assert_eq!(w.count("/requests"), 225, "the server saw the 225");
    let echoed = &v["options"]["rate_limiter_plugin_config"];
    assert_eq!(echoed["name"], "nighthawk.linear-ramping-rate-limiter-plugin", "{echoed}");
    assert_eq!(echoed["typed_config"]["ramp_time"], "1.500s", "{echoed}");
    assert!(v["options"]["ramp_duration"].is_null(), "{}", v["options"]);
    // The result's options are a spec that runs the same ramp.
    let dir = crate::support::scratch("linear-ramp");
    let stored = dir.join("first.json");
    std::fs::write(&stored, v.to_string()).unwrap();
    let (again, w) = run_doc(&server, &["run", "--spec", stored.to_str().unwrap()]);
    assert_eq!(options_but_id(&again), options_but_id(&v));
    assert_eq!(counter(global(&again), "benchmark.http_2xx"), 225);
    assert_eq!(w.count("/requests"), 225, "the server saw the rerun's 225");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_rate_limiter_plugin_refuses_what_nighthawk_refuses_by_name() {
    let url = "http://127.0.0.1:9/";
    let plugin = ["--rate-limiter-plugin-config", LINEAR_RAMP_1_5S];
    let cases: [(&[&str], &str); 8] = [
        (&["--burst-size", "5"], "cannot be used with --burst-size"),
        (&["--jitter-uniform", "1ms"], "cannot be used with --jitter-uniform"),
        (&["--ramp-duration", "1s"], "cannot be used with --ramp-duration"),
        (&["--rps", "max"], "needs a numeric --rps"),
        (&["--duration", "1.5"], "ramp_time (1.500s) must be shorter than the duration (1.500s)"),
        (
            &["--rate-limiter-plugin-config", "{name:\"nighthawk.stub-rate-limiter-plugin\"}"],
            "\"nighthawk.stub-rate-limiter-plugin\" is not supported",
        ),
        (
            &[
                "--rate-limiter-plugin-config",
                "{name:\"nighthawk.linear-ramping-rate-limiter-plugin\",typed_config:{\"@type\":\
                 \"type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig\"}}",
            ],
            "(typed_config.ramp_time) is missing",
        ),
        (&["--rate-limiter-plugin-config", "{name:"], "not JSON"),
    ];
    for (extra, why) in cases {
        let mut args = vec!["run", url];
        if !extra.contains(&plugin[0]) {
            args.extend(plugin);
        }
        if !extra.contains(&"--duration") {
            args.extend(["--duration", "5"]);
        }
        args.extend(extra);
        let out = run(&args, Duration::from_secs(20));
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains("--rate-limiter-plugin-config"), "{}", out.stderr);
    }
}

#[test]
fn sub_one_rps_and_fractional_rates() {
    let server = Server::start(&[]);
    // 0.5 rps for 4.5 s: releases at 0, 2 and 4 s.
    let url = server.url("/");
    let (v, w) = run_doc(&server, &["run", &url, "--rps", "0.5", "--duration", "4.5"]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 3);
    assert_eq!(w.count("/requests"), 3, "the server saw the 3");
    // 2.5 rps × 2 workers for 2 s: 10.
    let (v, w) =
        run_doc(&server, &["run", &url, "--rps", "2.5", "--concurrency", "2", "--duration", "2"]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 10);
    assert_eq!(w.count("/requests"), 10, "the server saw the 10");
}

#[test]
fn unpaced_closed_loop_measures_service_time_where_an_unreachable_rate_degrades() {
    // 4 connections to a server that takes 20 ms per request: at most ~200 rps.
    let server = Server::start(&["--static-delay", "20ms"]);
    let url = server.url("/");
    let (max, w) =
        run_doc(&server, &["run", &url, "--rps", "max", "--connections", "4", "--duration", "1"]);
    let g = global(&max);
    let n = counter(g, "benchmark.http_2xx");
    assert!((150..=204).contains(&n), "{n} requests: 4 connections × ~50/s");
    // The server saw those (checked in `run_doc`) on at most the 4 connections.
    assert_eq!(w.count("/requests"), n);
    assert!(w.count("/connections/http1") <= 4, "{} connections", w.connections());
    assert_eq!(max["options"]["requests_per_second"], "max");
    let sched = percentile_secs(statistic(g, "benchmark_http_client.scheduled_to_response"), 0.99);
    let service = percentile_secs(statistic(g, "benchmark_http_client.request_to_response"), 0.99);
    // Unpaced: a request is due when a connection frees up, so no phantom queue builds.
    assert!(sched < service * 1.5 + 0.002, "scheduled p99 {sched}s vs service p99 {service}s");
    assert!(
        g["statistics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["id"] != "sequencer.blocking" || s["count"] == "0"),
        "unpaced runs do not report blocking"
    );

    // The same load asked for as an absurd fixed rate: the schedule runs away from the server
    // and scheduled-to-response measures a queue that grows for the whole run.
    let (paced, _) = run_doc(
        &server,
        &["run", &url, "--rps", "100000", "--connections", "4", "--duration", "1"],
    );
    let g = global(&paced);
    let sched_paced =
        percentile_secs(statistic(g, "benchmark_http_client.scheduled_to_response"), 0.5);
    assert!(sched_paced > 0.2, "the coordinated-omission-corrected latency exposes the backlog");
}

#[test]
fn unpaced_open_loop_is_a_usage_error() {
    let out = run(
        &["run", "http://127.0.0.1:1/", "--rps", "max", "--open-loop"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--open-loop needs a rate"), "{}", out.stderr);
}

#[test]
fn every_idle_strategy_keeps_the_rate() {
    let server = Server::start(&[]);
    for strategy in ["spin", "poll", "sleep"] {
        let (v, w) = run_doc(
            &server,
            &[
                "run",
                &server.url("/"),
                "--rps",
                "200",
                "--duration",
                "1",
                "--sequencer-idle-strategy",
                strategy,
            ],
        );
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{strategy}");
        assert_eq!(v["options"]["sequencer_idle_strategy"], strategy);
        let late = statistic(g, "sequencer.send_lateness");
        assert_eq!(late["count"], "200", "{strategy}");
        // As many sends as the server saw.
        assert_eq!(w.count("/requests"), 200, "{strategy}");
    }
    let before = Witness::before(&server);
    let out = run(
        &["run", &server.url("/"), "--sequencer-idle-strategy", "nap"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("spin, poll or sleep"), "{}", out.stderr);
    nothing_sent(&server, before);
}

/// A lateness budget (`--max-lateness`): requests leave in one wake-up per budget, up to the
/// budget late, each still timed from its own scheduled time; what cannot use one is refused.
#[test]
fn a_lateness_budget_batches_releases_and_times_each_from_its_schedule() {
    let nginx = Nginx::start_logged(Listen::Http1);
    let url = nginx.url("http", "127.0.0.1", "/file");
    // 200/s is a release every 5 ms; a 20 ms budget sends them about four at a time.
    let args = ["run", &url, "--rps", "200", "--duration", "1", "--connections", "8"];
    let (v, log) = run_at(&nginx, &[&args[..], &["--max-lateness", "20ms"]].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200);
    assert_eq!(v["options"]["max_lateness"], "20ms");
    let mut times: Vec<f64> = log.iter().map(|e| e.secs).collect();
    times.sort_by(f64::total_cmp);
    let groups = clusters(&times, 0.002).len();
    // Precise releases arrive 5 ms apart (200 groups); a budget's in about 50.
    assert!(groups <= 100, "{groups} groups of arrivals: {times:?}");
    // Timed from the schedule: the batch's first waited most of the budget, its last little.
    let late = statistic(g, "sequencer.send_lateness");
    assert_eq!(late["count"], "200");
    let p50 = percentile_secs(late, 0.5);
    assert!(p50 > 0.004, "p50 lateness {p50}s: releases were not batched");
    // The summary says what the budget allowed.
    let out = run(&[&args[..], &["--max-lateness", "20ms"]].concat(), Duration::from_secs(30));
    assert!(
        out.stdout.lines().any(|l| l.starts_with("Lateness:")
            && l.contains("after their scheduled time (--max-lateness 20ms)")),
        "{}",
        out.stdout
    );

    let unpaced = ["run", &url, "--rps", "max", "-n", "10"];
    let mark = nginx.mark();
    for (base, extra, says) in [
        (&args[..], &["--max-lateness", "2s"][..], "at most 1s"),
        (&unpaced[..], &["--max-lateness", "1ms"][..], "needs a paced run"),
        (
            &args[..],
            &["--max-lateness", "1ms", "--sequencer-idle-strategy", "spin"][..],
            "replaces",
        ),
    ] {
        let out = run(&[base, extra].concat(), Duration::from_secs(10));
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("--max-lateness") && out.stderr.contains(says),
            "{}",
            out.stderr
        );
    }
    // The refused commands sent nothing.
    assert_eq!(nginx.mark(), mark, "nginx logged requests of a refused command");
}

#[test]
fn simple_warmup_counts_but_does_not_measure() {
    let server = Server::start(&[]);
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "10",
            "--duration",
            "1",
            "--concurrency",
            "2",
            "--simple-warmup",
        ],
    );
    let g = global(&v);
    // One warm-up request per worker, in the counters as Nighthawk documents...
    assert_eq!(counter(g, "benchmark.http_2xx"), 22);
    // ...and sent: the server saw the 22.
    assert_eq!(w.count("/requests"), 22);
    // ...but not in the latency statistics.
    assert_eq!(statistic(g, "benchmark_http_client.request_to_response")["count"], "20");
    assert_eq!(v["options"]["simple_warmup"], true);
}

#[test]
fn start_at_waits_for_the_wall_clock() {
    let server = Server::start(&[]);
    let asked = SystemTime::now() + Duration::from_millis(1500);
    let unix = asked.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let t = Instant::now();
    let (v, w) = run_doc(
        &server,
        &[
            "run",
            &server.url("/"),
            "--rps",
            "10",
            "--duration",
            "0.5",
            "--concurrency",
            "2",
            "--start-at",
            &format!("@{unix:.3}"),
        ],
    );
    assert!(t.elapsed() >= Duration::from_millis(1900), "started early: {:?}", t.elapsed());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 10);
    assert_eq!(w.count("/requests"), 10, "the server saw the 10");
    // The recorded start is the scheduled one (to the millisecond), not the launch.
    let start = g["execution_start"].as_str().unwrap();
    let start = shrike_output::timestamp::parse_rfc3339(start).unwrap();
    let skew = match start.duration_since(asked) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    assert!(skew < Duration::from_millis(20), "execution_start off by {skew:?}");

    let before = Witness::before(&server);
    let out = run(
        &["run", &server.url("/"), "--start-at", "2001-01-01T00:00:00Z"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), 2, "a start in the past is refused");
    assert!(out.stderr.contains("in the past"), "{}", out.stderr);
    nothing_sent(&server, before);
}

#[test]
fn request_timeouts_are_counted_and_the_run_ends_on_time() {
    let server = Server::start(&["--static-delay", "3s"]);
    for protocol in ["http1", "http2"] {
        let t = Instant::now();
        let url = server.url("/");
        let (out, w) = run_witnessed(
            &server,
            &[
                "run",
                &url,
                "--protocol",
                protocol,
                "--rps",
                "10",
                "--duration",
                "0.5",
                "--timeout",
                "0.3",
                "--no-default-failure-predicates",
                "--output-format",
                "json",
            ],
            Duration::from_secs(30),
        );
        assert!(t.elapsed() < Duration::from_millis(2500), "{protocol}: took {:?}", t.elapsed());
        assert_eq!(out.code(), 0, "{protocol}: {}", out.stderr);
        let v = json(&out);
        let g = global(&v);
        assert_eq!(counter(g, "upstream_rq_timeout"), 5, "{protocol}");
        assert_eq!(counter(g, "benchmark.http_2xx"), 0, "{protocol}");
        // The server got the 5 that timed out. It counts a response when it plans it, on
        // arrival: the 5 planned 200s, which the 3 s delay kept past the client's timeout.
        assert_eq!(w.count("/requests"), 5, "{protocol}");
        assert_eq!(w.count("/responses/2xx"), 5, "{protocol}");
    }
    // A failure predicate on the timeout counter fails the run.
    let before = Witness::before(&server);
    let out = run(
        &[
            "run",
            &server.url("/"),
            "--rps",
            "10",
            "--duration",
            "1",
            "--timeout",
            "0.2",
            "--failure-predicate",
            "upstream_rq_timeout:0",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("upstream_rq_timeout:0"), "{}", out.stderr);
    // A request was sent, and timed out, before the predicate fired.
    assert!(Witness::since(&server, before).count("/requests") >= 1);
}

#[test]
fn bind_address_sets_the_source_address() {
    let nginx = Nginx::start_logged(Listen::Http1);
    let url = nginx.url("http", "127.0.0.1", "/file");
    run_at(
        &nginx,
        &["run", &url, "--rps", "20", "--duration", "0.5", "--bind-address", "127.0.0.2"],
    );
    run_at(
        &nginx,
        &[
            "run",
            &url,
            "--rps",
            "20",
            "--duration",
            "0.5",
            "--upstream-bind-config",
            r#"{source_address:{address:"127.0.0.3",port_value:0}}"#,
        ],
    );
    let addrs: Vec<String> = nginx.access_log().into_iter().map(|e| e.remote_addr).collect();
    assert_eq!(addrs.len(), 20);
    assert!(addrs[..10].iter().all(|a| a == "127.0.0.2"), "{addrs:?}");
    assert!(addrs[10..].iter().all(|a| a == "127.0.0.3"), "{addrs:?}");
    let out = run(&["run", &url, "--bind-address", "::1"], Duration::from_secs(10));
    assert_eq!(out.code(), 1, "an IPv6 source cannot reach an IPv4 target: {}", out.stderr);
    assert!(out.stderr.contains("other IP family"), "{}", out.stderr);
    let out = run(&["run", &url, "--bind-address", "nope"], Duration::from_secs(10));
    assert_eq!(out.code(), 2);
    // Neither reached nginx.
    assert_eq!(nginx.access_log().len(), 20);
}

/// Google's published load-testing commands, run verbatim with `shrike run` in place of
/// `nighthawk_client` (loopback URL, shorter duration, small rates for a 2-core machine).
#[test]
fn googles_published_commands_run_verbatim() {
    let nginx = Nginx::start_logged(Listen::Http1);
    let uri = nginx.url("http", "127.0.0.1", "/upload");
    let (d, c, r, n) = ("2", "2", "25", "4");
    let cmd = format!(
        "run {uri} --duration {d} --open-loop --no-default-failure-predicates --protocol http1 \
         --request-body-size 5000 --concurrency {c} --rps {r} --connections {n} --output-format json"
    );
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let mark = nginx.mark();
    let out = run(&args, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = crate::support::json(&out);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 100);
    let log = nginx.agrees(mark, global(&v));
    assert_eq!(log.len(), 100);
    assert!(log.iter().all(|e| e.request_length > 5000 && e.request.starts_with("GET /upload")));

    let h2 = Nginx::start_logged(Listen::H2c);
    let uri = h2.url("http", "127.0.0.1", "/upload");
    let cmd = format!(
        "run {uri} --duration {d} --open-loop --no-default-failure-predicates --protocol http2 \
         --request-body-size 5000 --concurrency {c} --rps {r} --max-active-requests 200 \
         --max-concurrent-streams 1 --output-format json"
    );
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let mark = h2.mark();
    let out = run(&args, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = crate::support::json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 100);
    assert!(counter(g, "upstream_cx_http2_total") >= 2, "one stream per connection");
    assert_eq!(v["options"]["max_concurrent_streams"], 1);
    let log = h2.agrees(mark, g);
    assert_eq!(log.len(), 100);
    // nginx served them on the connections the client counted.
    let served_on: std::collections::BTreeSet<u64> = log.iter().map(|e| e.connection).collect();
    assert_eq!(served_on.len() as u64, counter(g, "upstream_cx_http2_total"));
}
