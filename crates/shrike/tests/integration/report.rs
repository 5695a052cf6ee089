//! `shrike report`: results from the real binary (and a fixture with a time series) rendered to
//! HTML, then drawn by headless Chromium. The report's script stamps what it drew on the DOM
//! (`<body data-render data-errors>`, per plot `data-series`, `data-paths`, `data-width`,
//! `data-height`); these tests read that back from Chromium's `--dump-dom`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::page::*;
use crate::support::*;
use serde_json::{json, Value};
use shrike_stats::{
    Counter, Counters, Interval, IntervalStat, RunResult, StatId, Statistic, Termination,
    WorkerResult,
};

#[test]
fn two_real_runs_overlay_in_one_report() {
    let dir = scratch("real");
    let server = Server::start(&[]);
    let url = server.url("/");
    let mut files = Vec::new();
    let mut witnessed = Vec::new();
    for (name, rps) in [("base", "200"), ("cand", "400")] {
        let args = [
            "run",
            &url,
            "--output-format",
            "json",
            "--duration",
            "1",
            "--rps",
            rps,
            "--stats-interval",
            "200ms",
        ];
        let (out, w) = run_witnessed(&server, &args, Duration::from_secs(30));
        assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
        witnessed.push(w);
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, &out.stdout).unwrap();
        files.push((path, json(&out)));
    }
    let html = dir.join("report.html");
    let base = format!("baseline={}", files[0].0.display());
    let out = report(&[&base, path_str(&files[1].0), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    assert!(out.stdout.is_empty(), "the report went to the file, not stdout");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    assert!(page.contains("<title>Shrike report: baseline vs cand</title>"));

    // The embedded numbers are the results' own, exactly.
    let data = embedded_data(&page);
    let df = data["files"].as_array().unwrap();
    assert_eq!(df.len(), 2);
    assert_eq!(
        (df[0]["label"].as_str(), df[1]["label"].as_str()),
        (Some("baseline"), Some("cand"))
    );
    assert_eq!(df[0]["requested_rps"], 200.0);
    assert_eq!(df[1]["requested_rps"], 400.0);
    for ((f, (_, v)), w) in df.iter().zip(&files).zip(&witnessed) {
        let g = global(v);
        assert_eq!(f["responses"], counter(g, "benchmark.http_2xx"));
        assert_eq!(f["requests"], counter(g, "upstream_rq_total"));
        // And what the page says each run sent and got is what the server counted.
        assert_eq!(f["requests"], w.count("/requests"));
        assert_eq!(f["responses"], w.count("/responses/2xx"));
        assert_eq!(f["errors"], 0);
        let stat = statistic(g, "benchmark_http_client.scheduled_to_response");
        let count: u64 = stat["count"].as_str().unwrap().parse().unwrap();
        assert_eq!(f["latency"]["scheduled"]["count"], count);
        let binned: u64 = f["latency"]["scheduled"]["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(binned, count, "every sample lands in a histogram bin");
        // 1 s in 200 ms intervals: five, plus possibly a short tail after the last tick.
        let intervals = f["intervals"].as_array().map_or(0, Vec::len);
        assert!((5..=6).contains(&intervals), "{intervals} intervals embedded");
    }
    // 1 s at 200 and 400 rps: the candidate answered about twice as many (loose: shared VM).
    let (a, b) = (df[0]["responses"].as_f64().unwrap(), df[1]["responses"].as_f64().unwrap());
    assert!(a >= 150.0 && b >= 300.0 && b / a > 1.5, "responses {a} and {b}");

    let dom = render(&html, &dir);
    assert_offline(&dom);
    let dom = without_scripts(&dom);
    let plots = drawn(&dom, 2);
    assert_plot(&plots, "spectrum", 2, 4);
    assert_plot(&plots, "histogram", 2, 2);
    // Both runs stored a time series (--stats-interval), so its plots are drawn.
    assert_plot(&plots, "throughput", 2, 2);
    assert_plot(&plots, "latency-time", 2, 4);
    assert!(!dom.contains("data-empty=\"timeseries\""), "time series drawn, not a note");
    // No errors against the built-in server: a note instead of a flat plot.
    assert!(dom.contains("data-empty=\"errors\""));
    // One column per file plus the candidate/baseline ratio; the requested rate doubled.
    assert!(dom.contains("<th>cand / baseline</th>"), "ratio column");
    assert!(dom.contains("<td>2.00×</td>"), "requested-rate ratio");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose service time grows over `n` intervals of 500 ms, with errors in the last one.
fn fixture(slowdown: u64, with_intervals: bool) -> RunResult {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_238_872);
    let mut w = WorkerResult::new("worker_0", t0);
    w.execution_duration = Duration::from_secs(2);
    let mut intervals = Vec::new();
    for i in 0..4u64 {
        let n = 200 - 20 * i;
        let mut counters = Counters::new();
        counters.add(Counter::Http2xx, n - i);
        counters.add(Counter::Http5xx, i);
        counters.add(Counter::RqTotal, n);
        let (mut sched, mut service) = (Statistic::new(), Statistic::new());
        for k in 0..n {
            let v = 100_000 * (1 + i * slowdown) + k * 200;
            service.record(v);
            sched.record(v + 30_000);
            w.stats.record(StatId::RequestToResponse, v);
            w.stats.record(StatId::ScheduledToResponse, v + 30_000);
        }
        w.counters.merge(&counters);
        w.status_codes.add(200, n - i);
        w.status_codes.add(503, i);
        intervals.push(Interval {
            start: Duration::from_millis(500 * i),
            duration: Duration::from_millis(500),
            counters,
            stats: vec![
                IntervalStat::summarize(StatId::ScheduledToResponse, &sched),
                IntervalStat::summarize(StatId::RequestToResponse, &service),
            ],
        });
    }
    // The tail after the last tick: 1 ms holding 2 responses. As a rate (2000/s) it would
    // dwarf the real ones, so the report plots no rate for it.
    let mut tail = Counters::new();
    tail.add(Counter::Http2xx, 2);
    tail.add(Counter::RqTotal, 2);
    let mut tail_stat = Statistic::new();
    for v in [90_000, 95_000] {
        tail_stat.record(v);
        w.stats.record(StatId::RequestToResponse, v);
        w.stats.record(StatId::ScheduledToResponse, v);
    }
    w.counters.merge(&tail);
    w.status_codes.add(200, 2);
    intervals.push(Interval {
        start: Duration::from_secs(2),
        duration: Duration::from_millis(1),
        counters: tail,
        stats: vec![
            IntervalStat::summarize(StatId::ScheduledToResponse, &tail_stat),
            IntervalStat::summarize(StatId::RequestToResponse, &tail_stat),
        ],
    });
    let opts = json!({"uri": "http://127.0.0.1:8080/", "requests_per_second": 380,
                      "workers": 1, "protocol": "http1", "slowdown": slowdown});
    let mut r = RunResult::new(opts, vec![w], Termination::Completed);
    if with_intervals {
        r.intervals = intervals;
    }
    r
}

fn write_result(r: &RunResult, path: &Path) {
    let mut buf = Vec::new();
    shrike_output::json::write(r, &mut buf).unwrap();
    std::fs::write(path, buf).unwrap();
}

#[test]
fn time_series_fixture_draws_every_plot_and_escapes_labels() {
    let dir = scratch("series");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    write_result(&fixture(1, true), &a);
    write_result(&fixture(3, true), &b);
    let html = dir.join("series.html");
    // A hostile label and title must reach the page as text, never as markup.
    // (A label cannot hold `=`: NAME=FILE splits at the first one.)
    let evil = "<b>bold</b></script><img src>";
    let label = format!("{evil}={}", b.display());
    let title = "</script><script>document.body.dataset.render='pwned'</script>";
    let out = report(&[path_str(&a), &label, "--title", title, "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let data = embedded_data(&page);
    assert_eq!(data["title"], title);
    assert_eq!(data["files"][1]["label"], evil);
    let iv = &data["files"][1]["intervals"];
    assert_eq!(iv.as_array().unwrap().len(), 5);
    assert_eq!((iv[3]["responses"].as_u64(), iv[3]["errors"].as_u64()), (Some(140), Some(3)));
    // The interval's p99 is the stored summary's value: slowdown 3 puts interval 3 at ~1 ms.
    let p99 = iv[3]["latency"]["service"]["percentiles"][2].clone();
    assert_eq!(p99[0], 0.99);
    let p99 = p99[1].as_u64().unwrap();
    assert!((1_000_000..1_030_000).contains(&p99), "{p99}");

    let dom = render(&html, &dir);
    assert_offline(&dom);
    let dom = without_scripts(&dom);
    let plots = drawn(&dom, 2);
    assert_plot(&plots, "spectrum", 2, 4);
    assert_plot(&plots, "histogram", 2, 2);
    assert_plot(&plots, "throughput", 2, 2);
    // The highest plotted rate is the first interval's 400/s (+10% headroom), not the tail's.
    let top = plots["throughput"].ymax;
    assert!((400.0..500.0).contains(&top), "throughput axis tops at {top}");
    assert_plot(&plots, "errors", 2, 2);
    assert_plot(&plots, "latency-time", 2, 4);
    assert!(!dom.contains("No time series recorded"));
    assert!(dom.contains("&lt;b&gt;bold&lt;/b&gt;&lt;/script&gt;&lt;img src&gt;"), "label as text");
    assert!(!dom.contains("<b>bold</b>"), "label not parsed as markup");
    assert!(dom.contains("&lt;/script&gt;&lt;script&gt;"), "title shown as text");

    // The plot controls redraw in place: click every radio button (spectrum to a linear axis,
    // histogram to service time) and the page still draws, one SVG per plot. Then hover over
    // the spectrum: the tooltip lists every line's value; errors in the handlers are stamped.
    let clicked = dir.join("clicked.html");
    let script = "<script>document.querySelectorAll('input[type=radio]')\
                  .forEach(function (r) { r.click(); });\
                  var a = document.querySelector('#plot-spectrum rect[fill=transparent]');\
                  var b = a.getBoundingClientRect();\
                  a.dispatchEvent(new MouseEvent('mousemove', {clientX: b.left + b.width * 0.9,\
                    clientY: b.top + b.height / 2, bubbles: true}));\
                  document.body.setAttribute('data-errors', renderErrors.length);\
                  if (renderErrors.length) document.body.setAttribute('data-render', \
                    'error: ' + renderErrors.join('; '));</script></body>";
    std::fs::write(&clicked, page.replace("</body>", script)).unwrap();
    let dom = without_scripts(&render(&clicked, &dir));
    let plots = drawn(&dom, 2);
    assert_plot(&plots, "spectrum", 2, 4);
    assert_plot(&plots, "histogram", 2, 2);
    assert_eq!(dom.matches("<svg ").count(), plots.len(), "one SVG per plot after redraws");
    let top = plots["spectrum"].ymax;
    let decade = 10f64.powf(top.log10().round());
    assert!((top - decade).abs() / decade > 0.01, "linear axis tops at the max, not {top}");
    assert!(dom.contains(">service time</text>"), "histogram redrawn for service time");
    let tip = &dom[dom.find("class=\"tip\" style=\"display: block;").expect("tooltip shown")..];
    let tip = &tip[..tip.find("</div></figure>").expect("tooltip ends")];
    for line in ["a scheduled-to-response: ", "a service time: ", "&lt;/b&gt;"] {
        assert!(tip.contains(line), "tooltip lacks {line:?}: {tip}");
    }
    assert_eq!(tip.matches("class=\"swatch").count(), 4, "one tooltip row per line: {tip}");

    // One result without a time series: the other still plots, and the page says which lacks it.
    let c = dir.join("plain.json");
    write_result(&fixture(2, false), &c);
    let html = dir.join("mixed.html");
    let out = report(&[path_str(&a), path_str(&c), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let dom = without_scripts(&render(&html, &dir));
    let plots = drawn(&dom, 2);
    assert_plot(&plots, "spectrum", 2, 4);
    assert_plot(&plots, "throughput", 1, 1);
    assert_plot(&plots, "latency-time", 1, 2);
    assert!(dom.contains("No time series recorded for plain (run with --stats-interval)."));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_run_reports_its_errors_without_latency_plots() {
    let dir = scratch("failed");
    // A port nothing listens on: every connection is refused and the run fails (exit 1), but
    // its result is still written and must still make a report.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(
        &["run", &url, "--duration", "1", "--rps", "20", "--output-format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    let result = dir.join("refused.json");
    std::fs::write(&result, &out.stdout).unwrap();
    let html = dir.join("refused.html");
    let out = report(&[path_str(&result), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    let data = embedded_data(&page);
    let f = &data["files"][0];
    assert!(f["errors"].as_u64().unwrap() >= 1, "{f}");
    assert!(f["error_counters"]["benchmark.pool_connection_failure"].as_u64().unwrap() >= 1);
    assert_eq!(f["responses"], 0);
    assert_eq!(f["termination"]["failure"], true);

    let dom = without_scripts(&render(&html, &dir));
    let plots = drawn(&dom, 1);
    assert!(plots.is_empty(), "no latency to plot: {plots:?}");
    assert_eq!(dom.matches("No latency samples recorded.").count(), 2, "spectrum and histogram");
    assert!(dom.contains("No responses received."));
    assert!(dom.contains("failure predicate benchmark.pool_connection_failure:0 fired"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_to_stdout_with_one_file() {
    let dir = scratch("stdout");
    let a = dir.join("only.json");
    write_result(&fixture(1, false), &a);
    let out = report(&[path_str(&a)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    assert!(out.stdout.starts_with("<!DOCTYPE html>"));
    assert!(out.stdout.contains("<title>Shrike report: only</title>"));
    assert_eq!(embedded_data(&out.stdout)["files"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_inputs_exit_2_naming_the_file_and_field() {
    let dir = scratch("bad");
    let good = dir.join("good.json");
    write_result(&fixture(1, true), &good);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    v["results"][0]["counters"][0]["value"] = json!("many");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, v.to_string()).unwrap();
    let text = dir.join("text.json");
    std::fs::write(&text, "Requests/sec: 1000").unwrap();
    let missing = dir.join("missing.json");
    let out_path = dir.join("never.html");
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec![good.display().to_string(), broken.display().to_string()],
            vec![broken.display().to_string(), "results[0].counters[0].value".into()],
        ),
        (
            vec![text.display().to_string()],
            vec![text.display().to_string(), "not valid JSON".into()],
        ),
        (vec![missing.display().to_string()], vec![format!("cannot read {}", missing.display())]),
        (
            vec![format!("x={}", good.display()), format!("x={}", good.display())],
            vec!["label \"x\" is used for more than one file".into()],
        ),
        (vec![], vec!["required".into()]),
    ];
    for (args, expect) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["-o", path_str(&out_path)]);
        let out = report(&all);
        assert_eq!(out.code(), 2, "{args:?}: stderr:\n{}", out.stderr);
        for e in expect {
            assert!(out.stderr.contains(&e), "{args:?}: expected {e:?} in:\n{}", out.stderr);
        }
        assert!(!out_path.exists(), "{args:?}: no report is written for bad input");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep's JSON draws on its own page: throughput and server CPU against connections, one
/// line per instance with error bars, latency at each peak, and the findings.
#[test]
fn a_sweep_draws_throughput_and_server_cpu_against_connections() {
    let dir = scratch("sweep");
    let bin = env!("CARGO_BIN_EXE_shrike");
    let base = format!("{bin} serve --listen 127.0.0.1:0");
    let cand = format!("{bin} serve --listen 127.0.0.1:0 --static-delay 1ms");
    let json = dir.join("sweep.json");
    let out = run(
        &[
            "sweep",
            "--connections",
            "1,2,4",
            "--iterations",
            "2",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--server-cmd",
            &base,
            "--server-cmd",
            &cand,
            "-o",
            path_str(&json),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let html = dir.join("sweep.html");
    let out = report(&[path_str(&json), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let dom = render(&html, &dir);
    let body = tags(&dom, "body").pop().unwrap();
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{dom}");
    assert_eq!(body.get("data-points").map(String::as_str), Some("6"));
    let figs = tags(&dom, "figure");
    // Three levels are too few for a USL fit: no curve. p50 and p99 per instance.
    for (plot, series) in [("throughput", "2"), ("server-cpu", "2"), ("latency-load", "4")] {
        let f = figs.iter().find(|f| f["data-plot"] == plot).unwrap_or_else(|| panic!("{plot}"));
        assert_eq!(f["data-series"], series, "{plot}: {f:?}");
        assert!(f["data-width"].parse::<f64>().unwrap() > 100.0, "{plot}");
    }
    // Server CPU is drawn against the cores the server may use, with the 90% line.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cores = doc["sweep"]["server_cores"].as_f64().unwrap();
    let cpu = figs.iter().find(|f| f["data-plot"] == "server-cpu").unwrap();
    assert!(cpu["data-ymax"].parse::<f64>().unwrap() >= cores, "{cpu:?} vs {cores} cores");
    let text = without_scripts(&dom);
    assert!(text.contains(&format!("90% of {cores} cores")), "{text}");
    // The candidate is dashed, so the baseline stays visible where they overlap.
    let dashed = tags(&dom, "path")
        .into_iter()
        .filter(|p| p.get("data-file").map(String::as_str) == Some("candidate"))
        .all(|p| p.contains_key("stroke-dasharray"));
    assert!(dashed, "{dom}");
    // The axis is the grid: its own levels, not decades.
    let throughput = svg_of(&dom, "throughput");
    for tick in [">1</text>", ">2</text>", ">4</text>"] {
        assert!(throughput.contains(tick), "{tick}: {throughput}");
    }
    assert!(!throughput.contains(">10</text>"), "{throughput}");
    assert!(text.contains("<title>baseline vs candidate over connections 1–4</title>"), "{text}");
    assert!(
        text.contains("baseline: peak ") && text.contains("candidate throughput at "),
        "{text}"
    );
    assert!(text.contains("USL: no fit, no predicted peak: too few points"), "{text}");
    assert!(!text.contains("none connections"), "{text}");
    // A table row per point.
    assert!(
        text.contains("Every point") && text.matches("<tr>").count() > 6,
        "a header and six points: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `<svg>` of the figure `plot`.
fn svg_of(dom: &str, plot: &str) -> String {
    let at = dom.find(&format!("data-plot=\"{plot}\"")).unwrap_or_else(|| panic!("{plot}"));
    let rest = &dom[at..];
    rest[..rest.find("</svg>").unwrap()].to_string()
}

/// A rate sweep answers with latency against the offered rate and the achieved rate beside
/// y = x, not a throughput line that only repeats the grid.
#[test]
fn a_rate_sweep_draws_latency_and_achieved_against_the_offered_rate() {
    let dir = scratch("sweep-rates");
    let server = Server::start(&[]);
    let json = dir.join("rates.json");
    let out = run(
        &[
            "sweep",
            &server.url("/"),
            "--rates",
            "50,100,200",
            "--iterations",
            "1",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "-o",
            path_str(&json),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let html = dir.join("rates.html");
    let out = report(&[path_str(&json), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let dom = render(&html, &dir);
    let body = tags(&dom, "body").pop().unwrap();
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{dom}");
    let plots: Vec<String> = tags(&dom, "figure").iter().map(|f| f["data-plot"].clone()).collect();
    assert_eq!(plots, ["latency-load", "achieved", "server-cpu"], "{dom}");
    let lat = tags(&dom, "figure").into_iter().find(|f| f["data-plot"] == "latency-load").unwrap();
    assert_eq!(lat["data-series"], "2", "p50 and p99: {lat:?}");
    assert!(without_scripts(&dom).contains("y = x"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replay_draws_its_rate_and_lateness_over_time() {
    let dir = scratch("report-replay");
    let mut jobs = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n");
    for i in 0..25 {
        jobs.push_str(&format!(
            // The first request was answered as the server will answer; the second, captured
            // elsewhere, was a 404: the canary diff's finding.
            "{{\"job\": {}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"/\", \"response\": {{\"status\": 200}}}}, {{\"at\": 0.05, \"method\": \"GET\", \"path\": \"/\", \"response\": {{\"status\": 404}}}}]}}\n",
            i + 1,
            f64::from(i) * 0.1
        ));
    }
    let jobs_path = dir.join("r.jobs");
    std::fs::write(&jobs_path, jobs).unwrap();
    let server = Server::start(&[]);
    let result = dir.join("replay.json");
    let out = run(
        &["replay", path_str(&jobs_path), "--target", &server.addr, "-o", path_str(&result)],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let html = dir.join("replay.html");
    let out = report(&[path_str(&result), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let dom = without_scripts(&render(&html, &dir));
    let plots = drawn(&dom, 1);
    // Recorded without --stats-interval: a replay always keeps its series.
    assert_plot(&plots, "throughput", 1, 1);
    assert_plot(&plots, "lateness-time", 1, 3);
    assert!(!dom.contains("No send lateness recorded"));
    // It leads with its jobs and its speed, and shows what answered otherwise than captured.
    assert!(dom.contains("as captured, at 1× speed"), "{dom}");
    assert!(dom.contains("Jobs completed"), "{dom}");
    assert!(dom.contains("Send lateness p99"), "{dom}");
    assert!(dom.contains("Canary diff"), "{dom}");
    assert!(dom.contains("GET /: 404 → 200"), "{dom}");
    // The page leads with the canary verdict, before any table.
    let verdict = dom.find("25 of 50 compared answers differ from the captured ones (50.0%)");
    let first_table = dom.find("<table");
    assert!(verdict.is_some() && verdict < first_table, "{dom}");
    // No legend entry for a line that is not drawn: a replay has no requested rate.
    assert!(!dom.contains("dotted: requested rate"), "{dom}");
    let data = embedded_data(&std::fs::read_to_string(&html).unwrap());
    let replay = &data["files"][0]["replay"];
    assert_eq!(replay["canary_matched"], 25, "{replay}");
    assert_eq!(replay["canary_differed"], 25, "{replay}");
    // Lateness at p50, p99 and max, nanoseconds, from the replay's own statistic.
    let late = replay["lateness"].as_array().unwrap();
    assert_eq!(late.len(), 5, "{replay}");
    assert!(late.iter().all(|p| p[1].as_u64().is_some()), "{replay}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two sweeps side by side are one sweep with their two instances: the second compared with
/// the first at the first's peak, from the iterations each file recorded.
#[test]
fn two_sweeps_compare_side_by_side() {
    let dir = scratch("sweep-side-by-side");
    let bin = env!("CARGO_BIN_EXE_shrike");
    let mut docs = Vec::new();
    for (name, extra) in [("fast", ""), ("slow", " --static-delay 2ms")] {
        let json = dir.join(format!("{name}.json"));
        let cmd = format!("{bin} serve --listen 127.0.0.1:0{extra}");
        let args = [
            "sweep",
            "--connections",
            "1,2,4",
            "--iterations",
            "2",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--server-cmd",
            &cmd,
            "-o",
            path_str(&json),
        ];
        let out = run(&args, Duration::from_secs(60));
        assert_eq!(out.code(), 0, "{}", out.stderr);
        docs.push((
            json.clone(),
            serde_json::from_str::<Value>(&std::fs::read_to_string(&json).unwrap()).unwrap(),
        ));
    }
    let html = dir.join("both.html");
    let (a, b) =
        (format!("fast={}", path_str(&docs[0].0)), format!("slow={}", path_str(&docs[1].0)));
    let out = report(&[&a, &b, "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    let data = embedded_data(&page);
    assert_eq!(data["sweep"]["instances"], json!(["fast", "slow"]));
    // The comparison's level is the first's peak, and its change is the geometric means'
    // ratio of the two files' own iterations there.
    let level = docs[0].1["peak"]["connections"].as_u64().unwrap();
    assert_eq!(data["comparison"]["level"], level);
    let geomean = |d: &Value| {
        let p =
            d["sweep"]["points"].as_array().unwrap().iter().find(|p| p["level"] == level).unwrap();
        let tps: Vec<f64> = p["iterations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["throughput_rps"].as_f64().unwrap())
            .collect();
        (tps.iter().map(|t| t.ln()).sum::<f64>() / tps.len() as f64).exp()
    };
    let expect = geomean(&docs[1].1) / geomean(&docs[0].1) - 1.0;
    let got = data["comparison"]["throughput"]["relative"].as_f64().unwrap();
    assert!((got - expect).abs() < 1e-9, "{got} vs {expect}");
    let dom = render(&html, &dir);
    let body = tags(&dom, "body").pop().unwrap();
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{dom}");
    assert_eq!(body.get("data-points").map(String::as_str), Some("6"));
    let text = without_scripts(&dom);
    assert!(text.contains(&format!("slow throughput at {level}: ")), "{text}");
    // A sweep beside something else is refused, naming both.
    let out = report(&[path_str(&docs[0].0), "notes.txt", "-o", path_str(&html)]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("is a sweep and notes.txt is not readable JSON"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
