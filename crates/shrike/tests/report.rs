//! `shrike report`: results from the real binary (and a fixture with a time series) rendered to
//! HTML, then drawn by headless Chromium. The report's script stamps what it drew on the DOM
//! (`<body data-render data-errors>`, per plot `data-series`, `data-paths`, `data-width`,
//! `data-height`); these tests read that back from Chromium's `--dump-dom`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::*;
use serde_json::{json, Value};
use shrike_stats::{
    Counter, Counters, Interval, IntervalStat, RunResult, StatId, Statistic, Termination,
    WorkerResult,
};

const CHROMIUM: &str = "/usr/bin/chromium";

/// Fails the test when Chromium is missing, naming the package: a browser check that quietly
/// does not run would pass without proving the report draws. `.ci/run` installs it.
fn require_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium; \
         .ci/run does)"
    );
}

/// The page as Chromium's DOM after its scripts ran. A profile directory of its own per call,
/// so concurrent tests do not fight over Chromium's profile lock.
fn render(html: &Path, dir: &Path) -> String {
    require_chromium();
    let profile = dir.join("chromium-profile");
    let child = std::process::Command::new(CHROMIUM)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    let out = wait_limited(child, Duration::from_secs(60));
    assert!(out.status.success(), "chromium failed:\n{}", out.stderr);
    assert!(out.stdout.contains("</html>"), "no DOM dumped:\n{}", out.stderr);
    out.stdout
}

/// The DOM without its scripts' source (which holds every message the page *can* show), so
/// text assertions only see what was rendered.
fn without_scripts(dom: &str) -> String {
    let mut out = String::new();
    let mut rest = dom;
    while let Some(at) = rest.find("<script") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("</script>").expect("script ends");
        rest = &rest[at + end + "</script>".len()..];
    }
    out.push_str(rest);
    out
}

/// The attributes of every `<tag …>` start tag in `html`, in document order.
fn tags(html: &str, tag: &str) -> Vec<HashMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let end = after.find('>').expect("tag ends");
        let mut attrs = HashMap::new();
        let mut s = &after[..end];
        while let Some(eq) = s.find("=\"") {
            let name = s[..eq].trim().to_string();
            let v = &s[eq + 2..];
            let close = v.find('"').expect("attribute ends");
            attrs.insert(name, v[..close].to_string());
            s = &v[close + 1..];
        }
        out.push(attrs);
        rest = &after[end..];
    }
    out
}

/// A drawn plot, as the report's script stamped it.
#[derive(Debug)]
struct Plot {
    series: usize,
    paths: usize,
    width: f64,
    height: f64,
    /// Top of the y-axis.
    ymax: f64,
}

/// Asserts the page drew without a script error and returns its plots by name.
fn drawn(dom: &str, files: usize) -> HashMap<String, Plot> {
    let body = tags(dom, "body").pop().expect("a body");
    let errors = dom.find("id=\"render-errors\"").map(|i| &dom[i..(i + 2000).min(dom.len())]);
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{errors:?}");
    assert_eq!(body.get("data-errors").map(String::as_str), Some("0"), "{errors:?}");
    assert_eq!(body.get("data-files"), Some(&files.to_string()));
    let num = |a: &HashMap<String, String>, k: &str| -> f64 {
        a.get(k).unwrap_or_else(|| panic!("{k} in {a:?}")).parse().unwrap()
    };
    tags(dom, "figure")
        .into_iter()
        .map(|a| {
            let plot = Plot {
                series: num(&a, "data-series") as usize,
                paths: num(&a, "data-paths") as usize,
                width: num(&a, "data-width"),
                height: num(&a, "data-height"),
                ymax: num(&a, "data-ymax"),
            };
            (a["data-plot"].clone(), plot)
        })
        .collect()
}

fn assert_plot(plots: &HashMap<String, Plot>, name: &str, series: usize, paths: usize) {
    let p = plots.get(name).unwrap_or_else(|| panic!("plot {name} missing; have {plots:?}"));
    assert_eq!((p.series, p.paths), (series, paths), "{name}: {p:?}");
    assert!(p.width > 100.0 && p.height > 50.0, "{name} has no size: {p:?}");
}

/// Nothing in the page reaches for the network: no external scripts, styles, fonts, images or
/// frames, and no fetch APIs. (URLs inside the data, like the benchmarked target, are text.)
fn assert_offline(page: &str) {
    let lower = page.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "src='http",
        "href=\"http",
        "href='http",
        "url(http",
        "url(\"http",
        "url('http",
        "url(//",
        "src=\"//",
        "href=\"//",
        "@import",
        "<link",
        "<img",
        "<iframe",
        "fetch(",
        "xmlhttprequest",
        "import(",
    ] {
        assert!(!lower.contains(bad), "report references the network: {bad:?}");
    }
}

/// The data block the report embeds.
fn embedded_data(page: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"shrike-data\">";
    let start = page.find(open).expect("data block") + open.len();
    let len = page[start..].find("</script>").expect("data block ends");
    serde_json::from_str(&page[start..start + len]).expect("data block is JSON")
}

fn report(args: &[&str]) -> Output {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    run(&all, Duration::from_secs(30))
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn two_real_runs_overlay_in_one_report() {
    let dir = scratch("real");
    let mut files = Vec::new();
    for (name, rps) in [("base", "200"), ("cand", "400")] {
        let args = [
            "run",
            "--output-format",
            "json",
            "--duration",
            "1",
            "--rps",
            rps,
            "--stats-interval",
            "200ms",
        ];
        let out = run(&args, Duration::from_secs(30));
        assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
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
    for (f, (_, v)) in df.iter().zip(&files) {
        let g = global(v);
        assert_eq!(f["responses"], counter(g, "benchmark.http_2xx"));
        assert_eq!(f["requests"], counter(g, "upstream_rq_total"));
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

/// A capacity search's JSON draws on its own page: latency against offered load (three
/// percentiles and service p99; the objective and the answer as reference lines), the answers
/// and every trial.
#[test]
fn a_capacity_search_draws_latency_against_offered_load() {
    let dir = scratch("capacity");
    let server = Server::start(&[]);
    let json = dir.join("capacity.json");
    let out = run(
        &[
            "capacity",
            &server.url("/"),
            "--slo",
            "p99<=30ms",
            "--start",
            "50",
            "--precision",
            "10%",
            "--trial-duration",
            "0.3s",
            "--final-duration",
            "0.5s",
            "-H",
            r#"x-nighthawk-test-server-config: {"concurrency_based_linear_delay": {"minimal_delay": "0.010s", "concurrency_delay_factor": "0.002s"}}"#,
            "-o",
            path_str(&json),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let trials = doc["capacity"]["trials"].as_array().unwrap().len();
    let html = dir.join("capacity.html");
    let out = report(&[path_str(&json), "-o", path_str(&html)]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    // The trials' full results stay in the JSON file, not in the page.
    assert!(embedded_data(&page)["capacity"]["trials"][0].get("result").is_none());
    let dom = render(&html, &dir);
    let body = tags(&dom, "body").pop().unwrap();
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{dom}");
    assert_eq!(body.get("data-trials"), Some(&trials.to_string()));
    let fig = tags(&dom, "figure").into_iter().find(|f| f["data-plot"] == "latency-load").unwrap();
    assert_eq!(fig["data-series"], "4", "{fig:?}");
    assert_eq!(fig["data-paths"], "4", "{fig:?}");
    assert!(fig["data-width"].parse::<f64>().unwrap() > 100.0);
    let text = without_scripts(&dom);
    let answer = doc["max_rps"]["p99<=30.00ms"].as_f64().unwrap();
    // On a busy CI machine the (debug) client can fall behind its schedule near the top (a CI
    // run saw send lateness p50 1.8 ms at 250/s); the search's self-check then reports a floor
    // rather than a maximum, and the page must say which.
    let said = match doc["capacity"]["goals"][0]["status"].as_str() {
        Some("generator_bound") => "at least",
        _ => "max",
    };
    assert!(text.contains(&format!("p99&lt;=30.00ms: {said} {answer:.0}/s")), "{text}");
    // Reference lines: the objective and the answer.
    assert_eq!(dom.matches("class=\"ref\"").count(), 2, "{dom}");

    // With another file it is refused: it has a page of its own.
    let (a, b) = (format!("a={}", path_str(&json)), format!("b={}", path_str(&json)));
    let out = report(&[&a, &b, "-o", path_str(&html)]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("a capacity search or sweep is reported on its own"),
        "{}",
        out.stderr
    );
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
    for (plot, series) in [("throughput", "2"), ("server-cpu", "2"), ("latency-peak", "2")] {
        let f = figs.iter().find(|f| f["data-plot"] == plot).unwrap_or_else(|| panic!("{plot}"));
        assert_eq!(f["data-series"], series, "{plot}: {f:?}");
        assert!(f["data-width"].parse::<f64>().unwrap() > 100.0, "{plot}");
    }
    let text = without_scripts(&dom);
    assert!(
        text.contains("baseline: peak ") && text.contains("candidate throughput at "),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replay_draws_its_rate_and_lateness_over_time() {
    let dir = scratch("report-replay");
    let mut jobs = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n");
    for i in 0..25 {
        jobs.push_str(&format!(
            "{{\"job\": {}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"/\"}}, {{\"at\": 0.05, \"method\": \"GET\", \"path\": \"/\"}}]}}\n",
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
    let _ = std::fs::remove_dir_all(&dir);
}
