//! Request sources end to end: request files, templates, body files, JSON bodies, per-entry
//! expectations, the origin-latency header and Nighthawk's file-based request source, observed
//! by the server that received them (nginx's access log and kept request bodies, or Shrike's own
//! server).

use crate::support::nginx;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

/// (path, user agent) of every request in an nginx access log (combined format), in order.
fn access_log(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("access log");
    text.lines()
        .map(|l| {
            let q: Vec<&str> = l.split('"').collect();
            let request = q[1].split(' ').nth(1).expect("path").to_string();
            (request, q[5].to_string())
        })
        .collect()
}

fn query<'a>(path: &'a str, key: &str) -> &'a str {
    path.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("{key} in {path}"))
}

/// Two workers over a three-entry list: worker i starts at entry i and walks round robin, and
/// `{{seq}}` numbers worker i's k-th request k*2+i, so (seq, entry) pairs pin the order down
/// exactly. `{{choice}}` picks only from its list; `{{worker}}` names the sender.
fn round_robin_and_templates(listen: Listen, protocol: &str) {
    let dir = scratch(&format!("rr-{protocol}"));
    let log = dir.join("access.log");
    let nginx = Nginx::start_with(listen, &format!("access_log {};", log.display()));
    let list = write(
        &dir,
        "list.jsonl",
        concat!(
            "{\"path\": \"/file?e=0&s={{seq}}\", \"headers\": {\"user-agent\": \"ua-{{choice:red|blue}}-{{worker}}\"}}\n",
            "# a comment line\n",
            "{\"path\": \"/file?e=1&s={{seq}}\", \"headers\": [\"user-agent: ua-{{choice:red|blue}}-{{worker}}\"]}\n",
            "{\"url\": \"http://127.0.0.1:PORT/file?e=2&s={{seq}}\", \"headers\": {\"user-agent\": \"ua-{{choice:red|blue}}-{{worker}}\"}}\n",
        )
        .replace("PORT", &nginx.port.to_string())
        .as_str(),
    );
    let url = nginx.url("http", "127.0.0.1", "/");
    let v = run_json_ok(&[
        "run",
        &url,
        "--protocol",
        protocol,
        "--request-file",
        &list,
        "--concurrency",
        "2",
        "--rps",
        "40",
        "--duration",
        "1",
        "--connections",
        "1",
    ]);
    let g = global(&v);
    let sent = counter(g, "benchmark.http_2xx");
    assert!(sent >= 40, "{sent} responses");
    drop(nginx); // flushes the log
    let entries = access_log(&log);
    assert_eq!(entries.len() as u64, sent);
    let mut seqs = Vec::new();
    let mut colours = std::collections::BTreeSet::new();
    for (path, ua) in &entries {
        let e: u64 = query(path, "e").parse().expect("entry");
        let s: u64 = query(path, "s").parse().expect("seq");
        let (worker, k) = (s % 2, s / 2);
        assert_eq!(e, (worker + k) % 3, "{path}: worker {worker}'s request {k}");
        let (colour, w) = ua.strip_prefix("ua-").and_then(|u| u.split_once('-')).expect(ua);
        assert_eq!(w, worker.to_string(), "{ua} for seq {s}");
        colours.insert(colour.to_string());
        seqs.push(s);
    }
    seqs.sort_unstable();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "sequence numbers are unique");
    let expected: std::collections::BTreeSet<String> =
        ["blue".to_string(), "red".to_string()].into();
    assert_eq!(colours, expected, "choices come from the list, and both appear");
}

#[test]
fn round_robin_order_and_templates_http1() {
    round_robin_and_templates(Listen::Http1, "http1");
}

#[test]
fn round_robin_order_and_templates_h2c() {
    round_robin_and_templates(Listen::H2c, "http2");
}

#[test]
fn expectations_count_mismatches_and_can_fail_the_run() {
    let dir = scratch("expect");
    let nginx = Nginx::start(Listen::Http1);
    let list = write(
        &dir,
        "list.yaml",
        "- path: /file\n  expect: {status: 200}\n- path: /missing\n  expect:\n    status: [404, 410]\n- path: /file\n  expect: {status: [201, 202]}\n",
    );
    let url = nginx.url("http", "127.0.0.1", "/");
    let args = [
        "run",
        &url,
        "--request-file",
        &list,
        "--rps",
        "30",
        "--duration",
        "1",
        "--connections",
        "1",
        "--no-default-failure-predicates",
    ];
    let mark = nginx.mark();
    let v = run_json_ok(&args);
    let g = global(&v);
    let total = counter(g, "upstream_rq_total");
    assert!(total >= 20, "{total}");
    // One worker starting at entry 0: request k uses entry k mod 3; only entry 2 mismatches.
    assert_eq!(counter(g, "benchmark.http_4xx"), (total + 1) / 3);
    // nginx answered each entry as logged: its 404s are the /missing entries, its 200s the
    // rest (entry 2's mismatches among them).
    let log = nginx.agrees(mark, g);
    let missing = log.iter().filter(|e| e.request.starts_with("GET /missing ")).count() as u64;
    assert_eq!(missing, (total + 1) / 3);
    assert_eq!(counter(g, "benchmark.expectation_mismatch"), total / 3);
    // Mismatches fail a run only when the user asks.
    let mut failing = args.to_vec();
    failing.extend(["--failure-predicate", "benchmark.expectation_mismatch:0"]);
    let out = run(&failing, Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("benchmark.expectation_mismatch"), "{}", out.stderr);
}

/// nginx keeps each request body in a file; the bodies must be exactly what was asked for.
fn kept_bodies(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("body dir").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).expect("body")).collect()
}

#[test]
fn body_file_and_json_body_arrive_byte_exact() {
    let dir = scratch("bodies");
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept).expect("mkdir");
    let nginx = Nginx::start_with(
        Listen::Http1,
        &format!(
            "location = /keep {{ if ($http_content_type != \"application/json\") {{ return 415; }} client_body_in_file_only on; client_body_temp_path {k}; echo_read_request_body; echo kept; }}\n    location = /raw {{ client_body_in_file_only on; client_body_temp_path {k}; echo_read_request_body; echo kept; }}",
            k = kept.display()
        ),
    );
    // Binary bytes plus text that looks like a placeholder: body files are never templated.
    let mut body: Vec<u8> = (0..=255u8).collect();
    body.extend_from_slice(b"{{seq}} {{nope}}\r\n\r\nend");
    let body_path = dir.join("body.bin");
    std::fs::write(&body_path, &body).expect("write");
    let url = nginx.url("http", "127.0.0.1", "/raw");
    let mark = nginx.mark();
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-method",
        "PUT",
        "--request-body-file",
        &body_path.display().to_string(),
        "--rps",
        "10",
        "--duration",
        "0.5",
    ]);
    let n = counter(global(&v), "benchmark.http_2xx");
    assert!(n >= 3, "{n}");
    let got = kept_bodies(&kept);
    assert_eq!(got.len() as u64, n);
    nginx.agrees(mark, global(&v));
    assert!(got.iter().all(|b| *b == body), "every body arrives byte for byte");
    for f in std::fs::read_dir(&kept).expect("dir") {
        std::fs::remove_file(f.expect("entry").path()).expect("rm");
    }

    // JSON bodies: validated, templated, content-type set (nginx answers 415 otherwise, which
    // the default failure predicates would turn into exit 1).
    let url = nginx.url("http", "127.0.0.1", "/keep");
    let mark = nginx.mark();
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-method",
        "POST",
        "--json-body",
        r#"{"id": "{{random_id}}", "seq": {{seq}}, "tag": "{{choice:a|b}}"}"#,
        "--rps",
        "10",
        "--duration",
        "0.5",
    ]);
    let n = counter(global(&v), "benchmark.http_2xx");
    assert!(n >= 3, "{n}");
    // nginx answered each 200, none 415: every one carried the JSON content type.
    nginx.agrees(mark, global(&v));
    let mut seqs = Vec::new();
    for b in kept_bodies(&kept) {
        let j: serde_json::Value = serde_json::from_slice(&b).expect("a JSON body");
        assert_eq!(j["id"].as_str().map(str::len), Some(32), "{j}");
        assert!(j["tag"] == "a" || j["tag"] == "b", "{j}");
        seqs.push(j["seq"].as_u64().expect("seq"));
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "one worker numbers its requests 0, 1, 2, …");
}

/// The test server emits the previous request's arrival delta in nanoseconds; the client reads
/// the same unit. Every response but the server's first carries it, and at a steady 50 rps
/// from one connection the deltas are about 20 ms.
fn origin_latency(protocol: &str) {
    let server = Server::start(&[]);
    let (g, w) = run_agreed(
        &server,
        &[
            "run",
            &server.url("/"),
            "--protocol",
            protocol,
            "--rps",
            "50",
            "--duration",
            "1",
            "--connections",
            "1",
            "--latency-response-header-name",
            "x-origin-delta",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"emit_previous_request_delta_in_response_header": "x-origin-delta"}"#,
        ],
    );
    let g = &g;
    let responses = counter(g, "benchmark.http_2xx");
    let s = statistic(g, "benchmark_http_client.origin_latency_statistic");
    let count: u64 = s["count"].as_str().expect("count").parse().expect("number");
    assert_eq!(count, responses - 1, "all but the server's first response carry a delta");
    // A fresh server: its first request is this run's first.
    assert_eq!(count, w.count("/requests") - 1, "by the server's count");
    let mean = secs(&s["mean"]);
    assert!((0.012..0.030).contains(&mean), "mean delta {mean}s at 50 rps");
}

#[test]
fn origin_latency_header_http1() {
    origin_latency("http1");
}

#[test]
fn origin_latency_header_h2c() {
    origin_latency("http2");
}

#[test]
fn unparseable_origin_latency_is_noted_not_fatal() {
    let nginx = Nginx::start_with(Listen::Http1, "add_header x-origin 12ms always;");
    let url = nginx.url("http", "127.0.0.1", "/file");
    let out = run(
        &[
            "run",
            &url,
            "--rps",
            "10",
            "--duration",
            "0.5",
            "--latency-response-header-name",
            "X-Origin",
            "--output-format",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("x-origin is no integer of nanoseconds"), "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    let recorded = g["statistics"]
        .as_array()
        .expect("stats")
        .iter()
        .find(|s| s["id"] == "benchmark_http_client.origin_latency_statistic")
        .map_or(0, |s| s["count"].as_str().unwrap_or("0").parse::<u64>().unwrap_or(0));
    assert_eq!(recorded, 0);
}

#[test]
fn nighthawk_file_based_request_source_with_num_requests() {
    let dir = scratch("nighthawk");
    let log = dir.join("access.log");
    let nginx = Nginx::start_with(Listen::Http1, &format!("access_log {};", log.display()));
    let options = write(
        &dir,
        "options.yaml",
        "options:\n  - request_method: GET\n    request_headers:\n      - header: {key: \":path\", value: \"/file?nh=a\"}\n  - request_method: GET\n    request_headers:\n      - header: {key: \":path\", value: \"/file?nh=b\"}\n",
    );
    let cfg = format!(
        "{{name:\"nighthawk.file-based-request-source-plugin\",typed_config:{{\"@type\":\"type.googleapis.com/nighthawk.request_source.FileBasedOptionsListRequestSourceConfig\",file_path:\"{options}\",num_requests:7}}}}"
    );
    let url = nginx.url("http", "127.0.0.1", "/");
    let started = std::time::Instant::now();
    let v = run_json_ok(&[
        "run",
        &url,
        "--request-source-plugin-config",
        &cfg,
        "--concurrency",
        "2",
        "--rps",
        "100",
        "--duration",
        "10",
    ]);
    assert!(started.elapsed() < Duration::from_secs(8), "num_requests ends the run early");
    let g = global(&v);
    assert_eq!(counter(g, "upstream_rq_total"), 14, "7 requests per worker");
    drop(nginx);
    let paths: Vec<String> = access_log(&log).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths.iter().filter(|p| *p == "/file?nh=a").count(), 7);
    assert_eq!(paths.iter().filter(|p| *p == "/file?nh=b").count(), 7);
}

#[test]
fn bad_request_files_are_usage_errors_naming_file_line_and_problem() {
    let dir = scratch("bad");
    let cases: &[(&str, &str, &str)] = &[
        ("a.jsonl", "{\"path\": \"/\"}\n{\"pth\": \"/x\"}\n", "a.jsonl:2: unknown field `pth`"),
        (
            "b.jsonl",
            "{\"path\": \"/{{sequence}}\"}\n",
            "b.jsonl:1: in \"/{{sequence}}\": unknown placeholder {{sequence}}",
        ),
        (
            "c.yaml",
            "- path: /\n- url: http://127.0.0.1:2/x\n",
            "c.yaml:2: url http://127.0.0.1:2/x is not one of the run's endpoints",
        ),
        ("d.jsonl", "{\"body_file\": \"missing.bin\"}\n", "d.jsonl:1: cannot read body_file"),
        (
            "e.jsonl",
            "{\"json\": {\"a\": 1}, \"body\": \"x\"}\n",
            "e.jsonl:1: give one of body, body_file and json",
        ),
        ("f.txt", "{}\n", "f.txt: unknown format"),
        ("g.jsonl", "{\"path\": \"no-slash\"}\n", "g.jsonl:1: invalid request path"),
        ("h.yml", "- expect: {status: 42}\n", "h.yml:1: expected status 42"),
    ];
    for (name, text, want) in cases {
        let path = write(&dir, name, text);
        let out =
            run(&["run", "http://127.0.0.1:1/", "--request-file", &path], Duration::from_secs(10));
        assert_eq!(out.code(), 2, "{name}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{name}: want {want:?} in\n{}", out.stderr);
    }
    let flag_cases: &[(&[&str], &str)] = &[
        (&["--json-body", "{\"a\": }"], "--json-body: the JSON body is not valid JSON"),
        (
            &["--request-body-size", "3", "--request-body-file", "/etc/hostname"],
            "cannot be used with",
        ),
        (&["--request-file", "x.jsonl", "--request-method", "POST"], "cannot be used with"),
        (
            &["--request-body-file", "/nonexistent/body"],
            "--request-body-file: cannot read /nonexistent/body",
        ),
        (&["--request-header", "x-a: {{bogus}}"], "unknown placeholder {{bogus}}"),
        (&["--latency-response-header-name", "bad name"], "--latency-response-header-name"),
    ];
    for (extra, want) in flag_cases {
        let mut args = vec!["run", "http://127.0.0.1:1/"];
        args.extend_from_slice(extra);
        let out = run(&args, Duration::from_secs(10));
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{extra:?}: want {want:?} in\n{}", out.stderr);
    }
}

/// HTTP/3 takes the same request list, templates, expectations and origin-latency header.
#[test]
fn request_list_over_http3() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    let dir = scratch("h3");
    let list = write(
        &dir,
        "list.jsonl",
        concat!(
            "{\"path\": \"/a?s={{seq}}\", \"expect\": {\"status\": 200}}\n",
            "{\"method\": \"POST\", \"path\": \"/b\", \"json\": {\"s\": \"{{seq}}\"}, \"expect\": {\"status\": 201}}\n",
        ),
    );
    let (g, w) = run_agreed(
        &server,
        &[
            "run",
            &server.url(),
            "--protocol",
            "http3",
            "--tls-ca",
            &server.ca,
            "--request-file",
            &list,
            "--rps",
            "40",
            "--duration",
            "1",
            "--latency-response-header-name",
            "x-d",
            "--request-header",
            r#"x-nighthawk-test-server-config: {"emit_previous_request_delta_in_response_header": "x-d"}"#,
        ],
    );
    let g = &g;
    let total = counter(g, "upstream_rq_total");
    assert!(total >= 30, "{total}");
    assert_eq!(counter(g, "benchmark.http_2xx"), total);
    // The server answered every one 200, the POSTs expecting 201 too, on one QUIC connection.
    assert_eq!(w.count("/responses/2xx"), total);
    assert_eq!(w.count("/connections/http3"), counter(g, "upstream_cx_http3_total"));
    assert_eq!(counter(g, "benchmark.expectation_mismatch"), total / 2, "entry 2 expects 201");
    let s = statistic(g, "benchmark_http_client.origin_latency_statistic");
    assert_eq!(s["count"], (total - 1).to_string());
}
