//! `shrike transform`: stored results to every format, lossless JSON, exact merges, fortio's Go
//! types, and clear errors for bad input. The results come from real runs of the binary
//! against its built-in server.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::*;
use serde_json::Value;
use shrike_stats::Statistic;

const LIMIT: Duration = Duration::from_secs(60);

/// `shrike transform <args>` with `input` on stdin.
fn transform(args: &[&str], input: &str) -> Output {
    let mut child = shrike()
        .arg("transform")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shrike");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    // A failing transform may exit before reading everything; a broken pipe is fine then.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = wait_limited(child, LIMIT);
    writer.join().unwrap();
    out
}

fn dir() -> PathBuf {
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("transform-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two short runs against one test server (2 workers each, 200/s per worker), as stored
/// files: the same target, so they merge.
fn runs() -> &'static (PathBuf, PathBuf) {
    static RUNS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let server = Server::start(&[]);
        let url = server.url("/");
        let one = |name: &str, label: &str| {
            let args = [
                "run",
                &url,
                "--rps",
                "200",
                "--duration",
                "1",
                "--concurrency",
                "2",
                "--connections",
                "3",
                "--output-format",
                "json",
                "--label",
                label,
            ];
            let out = run(&args, LIMIT);
            assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
            let path = dir().join(name);
            std::fs::write(&path, &out.stdout).unwrap();
            path
        };
        (one("a.json", "env=ci"), one("b.json", "second"))
    })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn doc(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn python(script: &str, input: &str) -> String {
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = wait_limited(child, LIMIT);
    writer.join().unwrap().unwrap();
    assert_eq!(out.code(), 0, "python: {}", out.stderr);
    out.stdout
}

#[test]
fn json_is_lossless_and_every_format_renders() {
    let (a, _) = runs();
    let input = read(a);
    let out = transform(&["--output-format", "json"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(doc(&out.stdout), doc(&input));

    let out = transform(&["--output-format", "yaml"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let from_yaml = python(
        "import sys,json,yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))",
        &out.stdout,
    );
    assert_eq!(doc(&from_yaml), doc(&input));

    let v = doc(&input);
    let global = global(&v);
    let count = statistic(global, "benchmark_http_client.request_to_response")["count"]
        .as_str()
        .unwrap()
        .to_string();
    let out = transform(&["--output-format", "dotted"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let line = format!("global.benchmark_http_client.request_to_response.samples: {count}\n");
    assert!(out.stdout.contains(&line), "{}", out.stdout);
    assert!(out
        .stdout
        .contains("global.benchmark_http_client.request_to_response.permilles-990.microseconds: "));

    let out = transform(&["--output-format", "human"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // 200/s per worker x 2 workers.
    assert!(out.stdout.contains(" of 400/s requested ("), "{}", out.stdout);
    assert!(out.stdout.contains("2 workers\n"), "{}", out.stdout);

    let out = transform(&["--output-format", "csv"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let want = format!(
        "global,statistic,benchmark_http_client.request_to_response,count,,{count},samples\r\n"
    );
    assert!(out.stdout.contains(&want), "{}", out.stdout);

    let out = transform(&["--output-format", "prometheus"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let want = format!(
        "shrike_benchmark_http_client_request_to_response_seconds_count{{worker=\"global\",env=\"ci\"}} {count}\n"
    );
    assert!(out.stdout.contains(&want), "{}", out.stdout);

    // The alias gives the same document as fortio.
    let f = transform(&["--output-format", "fortio"], &input);
    let p = transform(&["--output-format", "experimental_fortio_pedantic"], &input);
    assert_eq!((f.code(), p.code()), (0, 0));
    assert_eq!(f.stdout, p.stdout);
}

#[test]
fn run_writes_the_new_formats_directly() {
    let out = run(
        &[
            "run",
            "--rps",
            "50",
            "--duration",
            "0.5",
            "--output-format",
            "prometheus",
            "--label",
            "job=t",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out
        .stdout
        .contains("# TYPE shrike_benchmark_http_client_request_to_response_seconds summary\n"));
    assert!(
        out.stdout.contains("shrike_upstream_rq_total{worker=\"global\",job=\"t\"} "),
        "{}",
        out.stdout
    );
}

fn global_stat(v: &Value, id: &str) -> Statistic {
    let s = statistic(global(v), id);
    let h = Statistic::decode_histogram(s["shrike_histogram"].as_str().unwrap()).unwrap();
    Statistic::from_parts(h, s["count"].as_str().unwrap().parse().unwrap(), 0.0, 0.0, 0, 0)
}

#[test]
fn merge_is_exact_and_keeps_every_worker() {
    let (a, b) = runs();
    let (va, vb) = (doc(&read(a)), doc(&read(b)));
    let out = run(
        &[
            "transform",
            "--merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // Both runs named their workers worker_0 and worker_1: b's are renamed, which is what a
    // merge does (no warning: these runs differ only in their labels).
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let m = doc(&out.stdout);
    let names: Vec<&str> =
        m["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["worker_0", "worker_1", "worker_2", "worker_3", "global"]);
    assert_eq!(m["options"]["labels"], serde_json::json!(["env=ci", "second"]));

    for id in
        ["benchmark_http_client.request_to_response", "benchmark_http_client.scheduled_to_response"]
    {
        let mut want = global_stat(&va, id);
        want.merge(&global_stat(&vb, id));
        let got = global_stat(&m, id);
        assert!(want.count() > 200, "{id}: {}", want.count());
        assert_eq!(got.count(), want.count(), "{id}");
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(got.value_at_quantile(q), want.value_at_quantile(q), "{id} q={q}");
        }
        // Every printed percentile is the merged histogram's.
        let printed = statistic(global(&m), id)["percentiles"].as_array().unwrap();
        assert!(printed.len() > 20);
        for p in printed {
            let q = p["percentile"].as_f64().unwrap();
            let v = (secs(&p["duration"]) * 1e9).round() as u64;
            assert_eq!(v, want.value_at_quantile(q), "{id} q={q}");
        }
    }
    let sum = |v: &Value| counter(global(v), "upstream_rq_total");
    assert_eq!(sum(&m), sum(&va) + sum(&vb));
    // Reads back and renders in another format too.
    let human = run(
        &[
            "transform",
            "--merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--output-format",
            "human",
        ],
        LIMIT,
    );
    assert_eq!(human.code(), 0, "{}", human.stderr);
    assert!(human.stdout.contains("Workers:     4\n"), "{}", human.stdout);
}

/// Shards merge only as the whole run: each of 0/N … N-1/N once (`--allow-partial` merges what
/// there is, saying so), all of one run (a shard of another run is named), and no file twice.
#[test]
fn a_shard_merge_refuses_a_missing_or_repeated_shard() {
    let (a, b) = runs();
    // The two runs came one after the other; shards of one run ran together, so each shard
    // here starts when `a` did.
    let start = doc(&read(a))["results"][0]["execution_start"].clone();
    let shard = |from: &Path, name: &str, shard: &str, run: &str| {
        let mut v = doc(&read(from));
        v["options"]["shard"] = Value::from(shard);
        v["options"]["execution_id"] = Value::from(run);
        for r in v["results"].as_array_mut().unwrap() {
            r["execution_start"] = start.clone();
        }
        let path = dir().join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let s0 = shard(a, "s0.json", "0/2", "batch-2");
    let s1 = shard(b, "s1.json", "1/2", "batch-2");
    let again = shard(b, "s0-again.json", "0/2", "batch-2");
    // Last run's shard 1, left beside this run's.
    let stale = shard(b, "s1-stale.json", "1/2", "batch-1");
    let a = a.to_str().unwrap();
    let merge = |files: &[&str], extra: &[&str]| {
        let mut args = vec!["transform", "--merge"];
        args.extend_from_slice(files);
        args.extend_from_slice(&["--output-format", "json"]);
        args.extend_from_slice(extra);
        run(&args, LIMIT)
    };
    let whole = merge(&[&s0, &s1], &[]);
    assert_eq!(whole.code(), 0, "{}", whole.stderr);
    assert!(!whole.stderr.contains("warning"), "a whole set merges quietly: {}", whole.stderr);
    assert!(doc(&whole.stdout)["options"]["shard"].is_null());

    assert_eq!(doc(&whole.stdout)["options"]["execution_id"], "batch-2");

    let cases: [(&[&str], &str); 5] = [
        (&[&s0], "shard 1/2 missing: 1 of 2 given"),
        (&[&s0, &stale], "s1-stale.json is run batch-1"),
        (&[&s0, &again, &s1], "shard 0/2 is given 2 times"),
        (&[&s0, a], "has no shard, while"),
        (&[a, a], "is given twice"),
    ];
    for (files, says) in cases {
        let out = merge(files, &[]);
        assert_eq!(out.code(), 2, "{files:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{files:?}: {}", out.stderr);
        assert!(out.stdout.is_empty());
    }
    let partial = merge(&[&s0], &["--allow-partial"]);
    assert_eq!(partial.code(), 0, "{}", partial.stderr);
    assert!(partial.stderr.contains("partial merge: shard 1/2 missing"), "{}", partial.stderr);
}

#[test]
fn incompatible_merge_exits_2_naming_the_option() {
    let (a, b) = runs();
    let mut vb = doc(&read(b));
    vb["options"]["protocol"] = Value::from("http2");
    let c = dir().join("c-http2.json");
    std::fs::write(&c, vb.to_string()).unwrap();
    let out = run(&["transform", "--merge", a.to_str().unwrap(), c.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    let want = format!(
        "error: {}: cannot merge with {}: option protocol differs ({}: \"http1\", {}: \"http2\")",
        c.display(),
        a.display(),
        a.display(),
        c.display()
    );
    assert!(out.stderr.contains(&want), "{}\nwant: {want}", out.stderr);
}

#[test]
fn bad_input_names_the_source_and_field() {
    let out = transform(&[], "{not json");
    assert_eq!(out.code(), 2);
    assert!(out.stderr.starts_with("error: stdin: not valid JSON: "), "{}", out.stderr);

    let (a, _) = runs();
    let mut v = doc(&read(a));
    v["results"][1]["counters"][0]["value"] = Value::from("lots");
    let out = transform(&["--output-format", "csv"], &v.to_string());
    assert_eq!(out.code(), 2);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.contains(
            "error: stdin: results[1].counters[0].value: \"lots\" is not an unsigned integer"
        ),
        "{}",
        out.stderr
    );

    let bad = dir().join("bad.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = run(&["transform", "--merge", a.to_str().unwrap(), bad.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 2);
    let want = format!("error: {}: results[1].counters[0].value: ", bad.display());
    assert!(out.stderr.contains(&want), "{}", out.stderr);

    let missing = dir().join("missing.json");
    let out = run(&["transform", "--merge", missing.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(
        out.stderr.contains(&format!("error: {}: cannot read: ", missing.display())),
        "{}",
        out.stderr
    );

    v.as_object_mut().unwrap().remove("results");
    let out = transform(&[], &v.to_string());
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("error: stdin: results: missing"), "{}", out.stderr);

    let out = transform(&["--output-format", "xml"], "");
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("unknown output format \"xml\""), "{}", out.stderr);
}

/// Nighthawk's own output of a real run (`shrike-output`'s fixture), with the one trailing
/// comma protobuf's parser tolerates and strict JSON does not removed.
fn nighthawk_run() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shrike-output/tests/nighthawk/output_formatter.medium.proto.gold"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let fixed = text.replace("\"0.000000494s\",\n }", "\"0.000000494s\"\n }");
    assert_ne!(fixed, text, "the fixture's trailing comma moved");
    fixed
}

/// Nighthawk's JSON renders as a human report and as fortio's JSON with the numbers Nighthawk
/// printed; merging it is refused (exit 2, naming the statistic) because its statistics carry
/// printed percentiles, not histograms, and cannot be combined exactly.
#[test]
fn nighthawks_json_transforms_and_refuses_to_merge() {
    let text = nighthawk_run();
    let out = transform(&["--output-format", "human"], &text);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // Values Nighthawk wrote for the global queue_to_connect: 53 samples, p50 18.829us (27
    // samples), max 210.886655ms.
    let q2c = out
        .stdout
        .split("\n\n")
        .skip_while(|b| !b.contains("[benchmark_http_client.queue_to_connect]"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(q2c.contains("samples: 53"), "{q2c}");
    assert!(q2c.contains("max:     210.9ms"), "{q2c}");
    assert!(q2c.lines().any(|l| l.split_whitespace().eq(["0.5", "27", "18.83us"])), "{q2c}");
    assert!(out.stdout.contains("Termination: completed"), "{}", out.stdout);

    let out = transform(&["--output-format", "fortio"], &text);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let f = doc(&out.stdout);
    let h = &f["DurationHistogram"];
    // As in Nighthawk's own fortio file of this run (output_formatter.medium.fortio.gold).
    assert_eq!(h["Count"], 53);
    assert_eq!(h["Max"].as_f64(), Some(0.310886399));
    let p50 = h["Percentiles"].as_array().unwrap().iter().find(|p| p["Percentile"] == 50.0);
    assert_eq!(p50.unwrap()["Value"].as_f64(), Some(0.065077247));
    // Its buckets are the spans between printed points, as Nighthawk's own file has them
    // (which also lists spans that add no samples).
    let gold = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shrike-output/tests/nighthawk/output_formatter.medium.fortio.gold"
    );
    let gold = doc(&std::fs::read_to_string(gold).unwrap());
    let spans = |data: &Value| -> Vec<(f64, f64, u64)> {
        let count = |c: &Value| c.as_u64().or_else(|| c.as_str()?.parse().ok()).unwrap();
        let data = data.as_array().unwrap().iter();
        let spans = data.map(|b| {
            (b["Start"].as_f64().unwrap(), b["End"].as_f64().unwrap(), count(&b["Count"]))
        });
        spans.filter(|s| s.2 > 0).collect()
    };
    let want = spans(&gold["DurationHistogram"]["Data"]);
    assert_eq!(want.len(), 22);
    assert_eq!(spans(&h["Data"]), want);

    let a = dir().join("nighthawk-a.json");
    let b = dir().join("nighthawk-b.json");
    std::fs::write(&a, &text).unwrap();
    std::fs::write(&b, &text).unwrap();
    let out = run(&["transform", "--merge", a.to_str().unwrap(), b.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stdout.is_empty());
    let want = format!(
        "error: {}: cannot merge: statistic benchmark_http_client.queue_to_connect of result \
         worker_0 has no histogram",
        a.display()
    );
    assert!(out.stderr.contains(&want), "{}\nwant: {want}", out.stderr);
}

#[test]
fn fortio_output_decodes_into_fortios_go_types() {
    let go = go();
    let (a, _) = runs();
    let input = read(a);
    let v = doc(&input);
    let out = transform(&["--output-format", "fortio"], &input);
    assert_eq!(out.code(), 0, "{}", out.stderr);

    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fortio/decode.go");
    // Shared across test runs: Go's build cache is safe for concurrent use, and a fresh one
    // would rebuild the standard library every time.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gocache");
    let mut child = Command::new(go)
        .args(["run", program])
        .env("GOCACHE", &cache)
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let fortio = out.stdout.clone();
    let writer = std::thread::spawn(move || stdin.write_all(fortio.as_bytes()));
    let decoded = wait_limited(child, Duration::from_secs(300));
    writer.join().unwrap().unwrap();
    assert_eq!(decoded.code(), 0, "go decode failed:\n{}\n{}", decoded.stderr, out.stdout);
    let mut lines = decoded.stdout.lines();
    let r = doc(lines.next().unwrap());
    let derived = doc(lines.next().unwrap());

    let g = global(&v);
    let rtr = statistic(g, "benchmark_http_client.request_to_response");
    let n: i64 = rtr["count"].as_str().unwrap().parse().unwrap();
    assert_eq!(r["RunType"], "HTTP");
    assert_eq!(r["Labels"], "env=ci");
    assert_eq!(r["RequestedQPS"], "400");
    assert_eq!(r["RequestedDuration"], "1s");
    assert_eq!(r["NumThreads"], 6); // 3 connections x 2 workers
    assert_eq!(r["URL"], v["options"]["uri"]);
    assert_eq!(r["DurationHistogram"]["Count"], n);
    assert_eq!(derived["BucketSum"], n);
    let data = r["DurationHistogram"]["Data"].as_array().unwrap();
    assert_eq!(data.last().unwrap()["Percent"], 100.0);
    for w in data.windows(2) {
        assert!(w[0]["End"].as_f64() <= w[1]["Start"].as_f64().map(|s| s + 1e-12), "{w:?}");
    }
    let (min, max) = (secs(&rtr["min"]), secs(&rtr["max"]));
    assert!((r["DurationHistogram"]["Max"].as_f64().unwrap() - max).abs() < 1e-9);
    assert!((data[0]["Start"].as_f64().unwrap() - min).abs() < 1e-9, "{data:?}");
    assert!((data.last().unwrap()["End"].as_f64().unwrap() - max).abs() < 1e-9, "{data:?}");
    // The resolution follows the data: a loopback run spreads over several bars.
    assert!(data.len() >= 2 || min == max, "{data:?}");
    let pcts: Vec<f64> = r["DurationHistogram"]["Percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["Percentile"].as_f64().unwrap())
        .collect();
    assert_eq!(pcts, [50.0, 75.0, 90.0, 99.0, 99.9]);
    assert_eq!(derived["RetCode200"], counter(g, "benchmark.http_2xx"));
    let codes: i64 = r["RetCodes"].as_object().unwrap().values().map(|c| c.as_i64().unwrap()).sum();
    assert_eq!(codes, n);
    assert_eq!(r["SocketCount"], counter(g, "upstream_cx_total"));
    assert_eq!(r["BytesReceived"], counter(g, "upstream_cx_rx_bytes_total"));
    assert_eq!(r["BytesSent"], counter(g, "upstream_cx_tx_bytes_total"));
    let dur = secs(&g["execution_duration"]);
    assert!((derived["ActualDurationSecs"].as_f64().unwrap() - dur).abs() < 1e-9);
    assert!((r["ActualQPS"].as_f64().unwrap() - n as f64 / dur).abs() < 1e-6);
    // StartTime is the global execution start, to the nanosecond.
    let start =
        shrike_output::timestamp::parse_rfc3339(g["execution_start"].as_str().unwrap()).unwrap();
    let ns = start.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64;
    assert_eq!(derived["StartUnixNano"], ns);
    assert_eq!(r["Sizes"]["Count"], n);
    assert_eq!(r["HeaderSizes"]["Count"], n);
}
