//! `shrike jobs stats`, `shrike jobs filter` and `shrike jobs import har` through the real
//! binary: figures computed from a file whose answers are known, filters that partition a file
//! exactly, compressed files, HAR recordings, and bad input named by file, line and field.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// 40 jobs, one starting every 250 ms, each 1 s long (GET /api/N?x, then GET /home): four run
/// at once at the peak; job 7 is a POST.
fn write_file(dir: &Path) -> PathBuf {
    let mut text = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n");
    for i in 1..=40u32 {
        let first = if i == 7 {
            r#"{"at": 0, "method": "POST", "path": "/api/7", "body": "hello"}"#.to_string()
        } else {
            format!(r#"{{"at": 0, "method": "GET", "path": "/api/{i}?x=1"}}"#)
        };
        text.push_str(&format!(
            "{{\"job\": {i}, \"start\": {}, \"requests\": [{first}, {{\"at\": 1.0, \"method\": \"GET\", \"path\": \"/home\"}}]}}\n",
            f64::from(i - 1) * 0.25
        ));
    }
    let p = dir.join("all.jobs");
    std::fs::write(&p, text).unwrap();
    p
}

fn stats(path: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["jobs", "stats", path.to_str().unwrap(), "--output-format", "json"];
    args.extend(extra);
    let out = run(&args, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn ids(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["job"].as_u64().unwrap())
        .collect()
}

fn filter(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["jobs", "filter", input.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    run(&args, LIMIT)
}

#[test]
fn stats_count_jobs_peak_rate_and_paths() {
    let dir = scratch("jobs-stats");
    let file = write_file(&dir);
    let v = stats(&file, &["--bucket", "1s", "--top", "50"]);
    assert_eq!(v["jobs"], 40);
    assert_eq!(v["requests"], 80);
    // Job k runs [0.25(k−1), 0.25(k−1) + 1]: jobs start every 0.25 s and last 1 s, so five
    // overlap (a job ending at t still counts when another starts at t).
    assert_eq!(v["peak_concurrent_jobs"], 5);
    assert_eq!(v["peak_at_s"], 1.0);
    assert_eq!(v["duration_s"], 10.75);
    // Per second: 4 starts a second, and 4 /home a second from 1 s on.
    let rate: Vec<u64> =
        v["rate"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(rate.len(), 11);
    assert_eq!(rate[0], 4);
    assert!(rate[1..10].iter().all(|&n| n == 8), "{rate:?}");
    assert_eq!(v["top"][0]["key"], "GET /home");
    assert_eq!(v["top"][0]["requests"], 40);
    // Without --keep-query the query strings go; the POST is its own key.
    assert!(v["top"].as_array().unwrap().iter().any(|t| t["key"] == "POST /api/7"));
    assert!(v["top"].as_array().unwrap().iter().any(|t| t["key"] == "GET /api/1"));
    let human = run(&["jobs", "stats", file.to_str().unwrap()], LIMIT);
    assert!(human.stdout.contains("40 jobs, 80 requests"), "{}", human.stdout);
    assert!(human.stdout.contains("peak concurrent jobs: 5"), "{}", human.stdout);
}

#[test]
fn filter_matches_the_labels_stats_prints() {
    let dir = scratch("jobs-filter-labels");
    let file = write_file(&dir);
    let out_path = dir.join("l.jobs");
    // Every label `jobs stats` prints keeps the jobs it counts (the queries stats leaves out
    // included).
    let v = stats(&file, &["--top", "50"]);
    for t in v["top"].as_array().unwrap() {
        let label = t["key"].as_str().unwrap();
        let out = filter(&file, &out_path, &["--match", label]);
        assert_eq!(out.code(), 0, "{}", out.stderr);
        assert!(!ids(&out_path).is_empty(), "{label:?} kept nothing: {}", out.stderr);
    }
    // A pattern starting with / is the path alone.
    filter(&file, &out_path, &["--match", "/api/*"]);
    assert_eq!(ids(&out_path).len(), 40);
    // Keeping nothing says so, and how to find what would match.
    let out = filter(&file, &out_path, &["--match", "GET /nothing"]);
    assert_eq!(out.code(), 0);
    assert!(ids(&out_path).is_empty());
    assert!(
        out.stderr.contains("the filter kept nothing") && out.stderr.contains("jobs stats"),
        "{}",
        out.stderr
    );
}

#[test]
fn filters_select_and_shards_partition_exactly() {
    let dir = scratch("jobs-filter");
    let file = write_file(&dir);
    let all: Vec<u64> = ids(&file);
    let out_path = dir.join("w.jobs");
    let out = filter(&file, &out_path, &["--from", "2s", "--to", "3s"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(ids(&out_path), vec![9, 10, 11, 12]);
    assert!(out.stderr.contains("kept 4 of 40 job(s)"), "{}", out.stderr);
    filter(&file, &out_path, &["--job", "3", "--job", "30-32"]);
    assert_eq!(ids(&out_path), vec![3, 30, 31, 32]);
    filter(&file, &out_path, &["--match", "POST *"]);
    assert_eq!(ids(&out_path), vec![7]);
    // Only the matching requests: job 7 keeps its POST and loses /home.
    filter(&file, &out_path, &["--match", "GET /home", "--match-requests", "--job", "7"]);
    let line: Value =
        serde_json::from_str(std::fs::read_to_string(&out_path).unwrap().lines().nth(1).unwrap())
            .unwrap();
    assert_eq!(line["requests"].as_array().unwrap().len(), 1);
    assert_eq!(line["start"], 2.5, "the job starts with its first kept request");
    // A sample is the same every time.
    filter(&file, &out_path, &["--sample", "50%", "--seed", "3"]);
    let a = ids(&out_path);
    filter(&file, &out_path, &["--sample", "50%", "--seed", "3"]);
    assert_eq!(a, ids(&out_path));
    assert!(!a.is_empty() && a.len() < 40);
    // Three shards, compressed, partition the file.
    let mut union = BTreeSet::new();
    let mut total = 0;
    for i in 0..3 {
        let p = dir.join(format!("s{i}.jobs.zst"));
        let out = filter(&file, &p, &["--shard", &format!("{i}/3")]);
        assert_eq!(out.code(), 0, "{}", out.stderr);
        let v = stats(&p, &[]);
        total += v["jobs"].as_u64().unwrap();
        let plain = dir.join(format!("s{i}.jobs"));
        filter(&p, &plain, &[]);
        union.extend(ids(&plain));
    }
    assert_eq!(total, 40);
    assert_eq!(union.into_iter().collect::<Vec<_>>(), all);
}

#[test]
fn bad_files_and_flags_are_named() {
    let dir = scratch("jobs-bad");
    let bad = dir.join("bad.jobs");
    std::fs::write(&bad, "{\"job\": 1, \"start\": 0, \"requests\": []}\n{\"job\": 2, \"start\": 1, \"requests\": [{\"at\": 0, \"text\": 5}]}\n").unwrap();
    for args in [
        vec!["jobs", "stats", bad.to_str().unwrap()],
        vec!["jobs", "filter", bad.to_str().unwrap(), "-o", "/dev/null"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("bad.jobs:2: requests[0].text: expected a string"),
            "{}",
            out.stderr
        );
    }
    let out = run(&["jobs", "stats", "/nonexistent.jobs"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("/nonexistent.jobs"), "{}", out.stderr);
    let file = write_file(&dir);
    for (flag, value) in
        [("--job", "9-3"), ("--sample", "150%"), ("--shard", "2/2"), ("--from", "later")]
    {
        let out = filter(&file, &dir.join("x.jobs"), &[flag, value]);
        assert_eq!(out.code(), 2, "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{}", out.stderr);
    }
}

#[test]
fn a_har_recording_imports_into_jobs() {
    let dir = scratch("jobs-har");
    let har =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shrike-jobs/tests/fixtures/chrome.har");
    let out_path = dir.join("har.jobs");
    let out =
        run(&["jobs", "import", har.to_str().unwrap(), "-o", out_path.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("imported 3 job(s) (one per connection) with 4 request(s) from 5 entries"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("skipped 1 entry with data: URLs"), "{}", out.stderr);
    assert_eq!(ids(&out_path), vec![1, 2, 3]);
    let v = stats(&out_path, &[]);
    assert_eq!(v["requests"], 4);
    // It holds three hosts' requests: one target for them all must be asked for by name.
    let server = Server::start(&[]);
    let refused = run(&["replay", out_path.to_str().unwrap(), "--target", &server.addr], LIMIT);
    assert_eq!(refused.code(), 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("the jobs hold requests to 3 hosts"), "{}", refused.stderr);
    // And it replays, every host's (--host '*'): four requests to a local server.
    let out = run(
        &[
            "replay",
            "--host",
            "*",
            out_path.to_str().unwrap(),
            "--target",
            &server.addr,
            "--time-scale",
            "10",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 4);

    // One host of the recording's three (a glob, as for a CDN's many names): its two jobs.
    let shop = dir.join("shop.jobs");
    let imp = |hosts: &[&str], to: &Path| {
        let mut a = vec!["jobs", "import", har.to_str().unwrap(), "-o", to.to_str().unwrap()];
        for h in hosts {
            a.extend(["--host", h]);
        }
        run(&a, LIMIT)
    };
    let out = imp(&["shop.*"], &shop);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("skipped 1 entry with another host"), "{}", out.stderr);
    assert_eq!(stats(&shop, &[])["requests"], 3);
    let out = imp(&["nowhere.example"], &dir.join("none.jobs"));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("no entry to --host nowhere.example"), "{}", out.stderr);
    assert!(out.stderr.contains("https://login.example:8443"), "the hosts it has: {}", out.stderr);
    // A capture's server is picked by --port, not --host.
    let out = run(&["jobs", "import", "pcap", "x.pcap", "--host", "a", "-o", "y.jobs"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--port"), "{}", out.stderr);
}
