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
pub struct Lcg(pub u64);
impl Lcg {
    /// 31 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn worker(name: &str, start: SystemTime, dur: Duration, seed: u64, n: u64) -> WorkerResult {
    let mut w = WorkerResult::new(name, start);
    w.execution_duration = dur;
    // Sending stopped a little before the end: the rest is the drain.
    w.sending_duration = Some(dur.saturating_sub(Duration::from_millis(7)));
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

/// `n` values spread evenly on a log scale from `low` to `high` (inclusive, rounded to whole
/// units) by a fixed-seed generator: for durations in ns, µs to s exercises every unit a format
/// prints and every magnitude of HdrHistogram's buckets.
pub fn log_spread(seed: u64, n: usize, low: f64, high: f64) -> Vec<u64> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|_| {
            let u = rng.next() as f64 / (1u64 << 31) as f64;
            (low * (high / low).powf(u)).round() as u64
        })
        .collect()
}

/// Known raw samples and the result built from them: request-to-response times from 1 µs to
/// 10 s and body sizes from 1 B to 1 MB, dealt alternately to two workers (so `global` is a
/// merge). Tests compute the true statistics from `latency`/`body` themselves.
pub struct Known {
    pub result: RunResult,
    /// Per result name (`worker_0`, `worker_1`, `global`): its raw latency samples in ns.
    pub latency: Vec<(String, Vec<u64>)>,
    /// Per result name: its raw body sizes in bytes.
    pub body: Vec<(String, Vec<u64>)>,
}

pub fn known_samples() -> Known {
    const N: usize = 3001;
    let latency = log_spread(0x5eed, N, 1e3, 1e10);
    let body = log_spread(0xb0d1, N, 1.0, 1e6);
    let mut workers =
        vec![WorkerResult::new("worker_0", t0()), WorkerResult::new("worker_1", t0())];
    let mut per: Vec<(Vec<u64>, Vec<u64>)> = vec![(Vec::new(), Vec::new()); 2];
    for (i, (&l, &b)) in latency.iter().zip(&body).enumerate() {
        workers[i % 2].stats.record(StatId::RequestToResponse, l);
        workers[i % 2].stats.record(StatId::ResponseBodySize, b);
        per[i % 2].0.push(l);
        per[i % 2].1.push(b);
    }
    for w in &mut workers {
        w.execution_duration = Duration::from_secs(10);
        let n = w.stats.get(StatId::RequestToResponse).count();
        w.counters.add(Counter::Http2xx, n);
        w.counters.add(Counter::RqTotal, n);
    }
    let options = json!({"uri": "http://127.0.0.1:1/", "requests_per_second": 150.0});
    let mut result = RunResult::new(options, workers, Termination::Completed);
    result.timestamp = t0();
    let names = ["worker_0", "worker_1", "global"].map(String::from);
    let (w0, w1) = (per[0].clone(), per[1].clone());
    Known {
        result,
        latency: names.iter().cloned().zip([w0.0, w1.0, latency]).collect(),
        body: names.iter().cloned().zip([w0.1, w1.1, body]).collect(),
    }
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
