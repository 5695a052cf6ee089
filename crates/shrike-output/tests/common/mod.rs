//! Deterministic run results shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::time::{Duration, SystemTime};

use serde_json::json;
use shrike_stats::{
    Counter, Counters, Interval, IntervalStat, RunResult, StatId, Statistic, Termination,
    WorkerResult,
};

/// 2026-11-21T05:27:52.123456789Z
pub fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::new(1_795_238_872, 123_456_789)
}

/// A small deterministic generator, so samples look like real latencies without a rand dep.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn worker(name: &str, start: SystemTime, dur: Duration, seed: u64, n: u64) -> WorkerResult {
    let mut w = WorkerResult::new(name, start);
    w.execution_duration = dur;
    let mut rng = Lcg(seed);
    for i in 0..n {
        // Mostly ~100us with a long tail up to ~50ms, and one 5s outlier per worker.
        let base = 60_000 + rng.next() % 80_000;
        let latency = if i % 97 == 0 { base * (1 + rng.next() % 400) } else { base };
        let latency = if i == n / 2 { 5_000_000_000 } else { latency };
        w.stats.record(StatId::RequestToResponse, latency);
        w.stats.record(StatId::ScheduledToResponse, latency + rng.next() % 5_000);
        w.stats.record(StatId::Latency2xx, latency);
        w.stats.record(StatId::QueueToConnect, 1_000 + rng.next() % 3_000);
        w.stats.record(StatId::ResponseHeaderSize, 150);
        w.stats.record(StatId::ResponseBodySize, 100 + rng.next() % 1_100);
    }
    w
}

/// Two workers over exactly two seconds, 1000 2xx responses in total, no skew.
pub fn sample() -> RunResult {
    let mut w0 = worker("worker_0", t0(), Duration::from_secs(2), 1, 600);
    let mut w1 = worker(
        "worker_1",
        t0() + Duration::from_millis(1),
        Duration::from_secs(2) - Duration::from_millis(1),
        2,
        400,
    );
    w0.counters.add(Counter::Http2xx, 600);
    w1.counters.add(Counter::Http2xx, 400);
    w0.counters.add(Counter::RqTotal, 600);
    w1.counters.add(Counter::RqTotal, 400);
    w0.counters.add(Counter::CxTotal, 4);
    w1.counters.add(Counter::CxTotal, 3);
    w0.counters.add(Counter::CxRxBytesTotal, 987_654);
    w0.status_codes.add(200, 598);
    w0.status_codes.add(204, 2);
    w1.status_codes.add(200, 400);
    let mut r = RunResult::new(
        json!({
            "uri": "http://127.0.0.1:8080/", "concurrency": "2", "duration": "2s",
            "connections": 4, "requests_per_second": 250.0, "labels": ["nightly", "env=ci"]
        }),
        vec![w0, w1],
        Termination::Completed,
    );
    r.timestamp = t0() + Duration::from_secs(3);
    r.intervals = intervals(4, Duration::from_millis(500));
    r
}

/// A time series of `n` intervals whose latency and rate change over time (a server that slows
/// down), as `--stats-interval` stores it.
pub fn intervals(n: u64, every: Duration) -> Vec<Interval> {
    (0..n)
        .map(|i| {
            let mut counters = Counters::new();
            counters.add(Counter::Http2xx, 250 - 20 * i);
            counters.add(Counter::RqTotal, 250 - 20 * i);
            let mut service = Statistic::new();
            let mut scheduled = Statistic::new();
            for k in 0..(250 - 20 * i) {
                service.record(100_000 * (i + 1) + k * 100);
                scheduled.record(120_000 * (i + 1) + k * 150);
            }
            Interval {
                start: every * i as u32,
                duration: every,
                counters,
                stats: vec![
                    IntervalStat::summarize(StatId::ScheduledToResponse, &scheduled),
                    IntervalStat::summarize(StatId::RequestToResponse, &service),
                ],
            }
        })
        .collect()
}

/// Like [`sample`], but the closed loop blocked and the open loop overflowed.
pub fn skewed() -> RunResult {
    let mut r = sample();
    for w in &mut r.workers {
        for v in [2_000_000u64, 3_000_000, 5_000_000] {
            w.stats.record(StatId::SequencerBlocking, v);
        }
        w.counters.add(Counter::PoolOverflow, 21);
    }
    r.global = WorkerResult::merge_all("global", &r.workers);
    r.termination = Termination::FailurePredicate("benchmark.pool_overflow:10".into());
    r
}

/// One worker, one statistic with a handful of samples: small enough to mutate exhaustively.
pub fn tiny() -> RunResult {
    let mut w = WorkerResult::new("worker_0", t0());
    w.execution_duration = Duration::from_millis(1500);
    for v in [90_000u64, 100_000, 110_000, 120_000, 4_000_000] {
        w.stats.record(StatId::RequestToResponse, v);
    }
    for v in [120u64, 128, 128, 4096] {
        w.stats.record(StatId::ResponseBodySize, v);
    }
    w.counters.add(Counter::Http2xx, 5);
    w.counters.add(Counter::Http5xx, 1);
    w.counters.add(Counter::RqTotal, 6);
    w.counters.add(Counter::CxTotal, 2);
    let options =
        json!({"uri": "http://127.0.0.1:1/", "requests_per_second": 5.0, "connections": 2});
    let mut r = RunResult::new(options, vec![w], Termination::Completed);
    r.timestamp = t0();
    r
}

pub fn json_text(r: &RunResult) -> String {
    let mut buf = Vec::new();
    shrike_output::write(shrike_output::OutputFormat::Json, r, &mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

pub fn human_text(r: &RunResult) -> String {
    let mut buf = Vec::new();
    shrike_output::write(shrike_output::OutputFormat::Human, r, &mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

pub fn text(format: shrike_output::OutputFormat, r: &RunResult) -> String {
    let mut buf = Vec::new();
    shrike_output::write(format, r, &mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

/// Runs `script` with Debian's Python (which has python3-yaml and python3-prometheus-client),
/// `input` on stdin; returns stdout, panicking with stderr if the script fails.
pub fn python(script: &str, input: &str) -> String {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (Debian's python3; .ci/run installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "python failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
