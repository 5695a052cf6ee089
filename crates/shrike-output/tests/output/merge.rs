//! Merging stored results: exact statistics, worker names, option checks, time series.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;
use shrike_output::merge::{check_shards, merge, Input, MergeError, Waive};
use shrike_stats::{Counter, RunResult, StatId, Statistic, Termination, WorkerResult};

fn input(name: &str, r: RunResult) -> Input {
    Input { name: name.into(), result: r }
}

/// Latency-like samples with a long tail, deterministic.
fn samples(n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| 50_000 + (i * 7_919) % 90_000 + if i % 101 == 0 { i * 40_000 } else { 0 })
        .collect()
}

fn run_of(samples: &[u64], workers: usize, start_offset: Duration) -> RunResult {
    let ws: Vec<WorkerResult> = (0..workers)
        .map(|k| {
            let mut w =
                WorkerResult::new(format!("worker_{k}"), crate::common::t0() + start_offset);
            w.execution_duration = Duration::from_secs(1);
            for v in samples.iter().skip(k).step_by(workers) {
                w.stats.record(StatId::RequestToResponse, *v);
                w.counters.inc(Counter::RqTotal);
            }
            w
        })
        .collect();
    RunResult::new(
        json!({"uri": "http://127.0.0.1:1/", "requests_per_second": 100.0}),
        ws,
        Termination::Completed,
    )
}

#[test]
fn halves_merge_to_the_whole() {
    let all = samples(20_000);
    let (a, b) = all.split_at(7_321);
    let merged = merge(vec![
        input("a.json", run_of(a, 2, Duration::ZERO)),
        input("b.json", run_of(b, 1, Duration::from_secs(1))),
    ])
    .unwrap();
    let mut whole = Statistic::new();
    all.iter().for_each(|v| whole.record(*v));
    let got = merged.result.global.stats.get(StatId::RequestToResponse);
    assert_eq!(got.count(), 20_000);
    assert_eq!((got.min(), got.max()), (whole.min(), whole.max()));
    assert!((got.mean() - whole.mean()).abs() < 1e-6, "{} {}", got.mean(), whole.mean());
    assert!((got.pstdev() - whole.pstdev()).abs() / whole.pstdev() < 1e-9);
    for p in whole.spectrum() {
        assert_eq!(got.percentile(p.quantile), p, "q={}", p.quantile);
    }
    // Workers kept; b's worker_0 collides and takes the first free name, quietly: that is
    // what merging is.
    let names: Vec<&str> = merged.result.workers.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["worker_0", "worker_1", "worker_2"]);
    assert!(merged.warnings.iter().all(|w| !w.contains("renamed")), "{:?}", merged.warnings);
    assert_eq!(merged.result.global.counters.get(Counter::RqTotal), 20_000);
    // The window spans both runs: t0 .. t0 + 2s.
    assert_eq!(merged.result.global.execution_start, crate::common::t0());
    assert_eq!(merged.result.global.execution_duration, Duration::from_secs(2));

    // The merged result survives the JSON round trip with the same numbers.
    let back = shrike_output::from_json(&crate::common::json_text(&merged.result)).unwrap();
    assert_eq!(
        back.global.stats.get(StatId::RequestToResponse).percentile(0.999),
        whole.percentile(0.999)
    );
    assert_eq!(back.workers.len(), 3);
}

#[test]
fn merged_requested_rate_keeps_each_inputs_per_worker_rate() {
    // Two runs at 100 rps per worker, with 2 and 1 workers, side by side for the same second:
    // 300 rps were requested in all, 100 per worker. The merge must not spread the first
    // input's 200 over 3 workers.
    let a = run_of(&samples(200), 2, Duration::ZERO);
    let b = run_of(&samples(100), 1, Duration::ZERO);
    let merged = merge(vec![input("a.json", a), input("b.json", b)]).unwrap();
    assert_eq!(merged.result.options["workers"], 3);
    assert_eq!(shrike_output::options::requested_rate(&merged.result), Some(300.0));
    let text = crate::common::text(shrike_output::OutputFormat::Summary, &merged.result);
    let rate = text.lines().find(|l| l.starts_with("Rate:")).unwrap();
    assert_eq!(rate, "Rate:        300/s achieved of 300/s requested (100.0%)", "{text}");
}

#[test]
fn every_shard_of_a_run_merges_into_that_run() {
    // Three shards of a 2-worker run at 150 rps per worker: each sent 100 rps (1/3 of 300).
    let shard = |i: u32| {
        let mut r = run_of(&samples(100), 2, Duration::ZERO);
        r.options["shard"] = json!(format!("{i}/3"));
        r.options["workers"] = json!(2);
        r.options["requests_per_second"] = json!(150.0);
        r
    };
    assert_eq!(shrike_output::options::requested_rate(&shard(0)), Some(100.0));
    let all: Vec<_> = (0..3).map(|i| input(&format!("s{i}.json"), shard(i))).collect();
    let merged = merge(all).unwrap().result;
    assert_eq!(merged.options.get("shard"), None);
    assert_eq!(merged.options["workers"], 2);
    assert_eq!(shrike_output::options::requested_rate(&merged), Some(300.0));
    // Two of the three are two thirds of the run, still marked as a shard.
    let part = merge(vec![input("a", shard(0)), input("b", shard(2))]).unwrap().result;
    assert_eq!(part.options["shard"], "0/3");
    assert_eq!(part.options["partial"], "2 of 3 shards");
    assert_eq!(shrike_output::options::requested_rate(&part), Some(200.0));

    // Whether shards are the run whole is the caller's to ask, and said precisely.
    let check = |inputs: Vec<Input>| {
        check_shards(&inputs, Waive::default()).map(|w| w.len()).map_err(|e| e.to_string())
    };
    assert_eq!(check((0..3).map(|i| input(&format!("s{i}"), shard(i))).collect()), Ok(0));
    // Waived, a partial set passes and says what was waived.
    let waive = Waive { partial: true, disjoint: false };
    let waived = check_shards(&[input("a", shard(0)), input("b", shard(2))], waive).unwrap();
    assert_eq!(waived.len(), 1);
    assert_eq!(waived[0].to_string(), "shard 1/3 missing: 2 of 3 given");
    // The same shard command run again later derives the same id: a start 4 s after the
    // other's is another run, not a shard of this one.
    let derived = |i: u32, late: u64| {
        let mut r = shard(i);
        r.options["execution_id"] = json!("shards-00000000000000aa");
        for w in r.workers.iter_mut().chain(std::iter::once(&mut r.global)) {
            w.execution_start += Duration::from_secs(late);
        }
        r
    };
    let late =
        vec![input("a", derived(0, 0)), input("b", derived(1, 0)), input("c", derived(2, 4))];
    assert_eq!(
        check(late),
        Err("shards of different starts: c started 4.0s after a, and neither has an \
             --execution-id (shards of one run start together with --start-at, or share one)"
            .into())
    );
    // With a shared id, shards that never overlapped are refused unless waived.
    let mut apart = derived(2, 4);
    apart.options["execution_id"] = json!("job-1");
    let mut first = shard(0);
    first.options["execution_id"] = json!("job-1");
    let mut second = shard(1);
    second.options["execution_id"] = json!("job-1");
    let disjoint =
        || vec![input("a", first.clone()), input("b", second.clone()), input("c", apart.clone())];
    assert!(check(disjoint()).unwrap_err().starts_with("shards that never ran together: "));
    let waive = Waive { partial: false, disjoint: true };
    assert_eq!(check_shards(&disjoint(), waive).unwrap().len(), 1);
    assert_eq!(
        check(vec![input("a", shard(0)), input("b", shard(2))]),
        Err("shard 1/3 missing: 2 of 3 given".into())
    );
    assert_eq!(
        check(vec![input("a", shard(0)), input("b", shard(0)), input("c", shard(1))]),
        Err("shard 0/3 is given 2 times: a, b".into())
    );
    let mut other = shard(1);
    other.options["shard"] = json!("1/2");
    assert_eq!(
        check(vec![input("a", shard(0)), input("b", other)]),
        Err("b is shard 1/2, a is shard 0/3: not one run".into())
    );
    let plain = run_of(&samples(10), 1, Duration::ZERO);
    assert_eq!(
        check(vec![input("a", shard(0)), input("p", plain.clone())]),
        Err("p has no shard, while a is shard 0/3".into())
    );
    // Runs without shards (a fleet's, or merged by choice) are not shards to check.
    assert_eq!(check(vec![input("p", plain.clone()), input("q", plain)]), Ok(0));
}

#[test]
fn incompatible_options_are_refused_naming_option_and_values() {
    let a = crate::common::sample();
    let mut b = crate::common::sample();
    b.options["request_options"] = json!({"request_method": "POST"});
    let err = merge(vec![input("a.json", a.clone()), input("b.json", b)]).unwrap_err();
    assert!(matches!(err, MergeError::Incompatible { .. }));
    assert_eq!(
        err.to_string(),
        "b.json: cannot merge with a.json: option request_options.request_method differs \
         (a.json: absent, b.json: \"POST\")"
    );
    let mut c = crate::common::sample();
    c.options["uri"] = json!("http://127.0.0.1:9/");
    let err = merge(vec![input("a.json", a.clone()), input("c.json", c)]).unwrap_err().to_string();
    assert!(err.contains("option uri differs (a.json: \"http://127.0.0.1:8080/\", c.json: \"http://127.0.0.1:9/\")"), "{err}");

    // A different rate is allowed, with a warning; labels are unioned.
    let mut d = crate::common::sample();
    d.options["requests_per_second"] = json!(100.0);
    d.options["labels"] = json!(["other"]);
    let m = merge(vec![input("a.json", a), input("d.json", d)]).unwrap();
    assert!(
        m.warnings
            .iter()
            .any(|w| w
                .starts_with("option requests_per_second differs (a.json: 250.0, d.json: 100.0)")),
        "{:?}",
        m.warnings
    );
    assert_eq!(m.result.options["labels"], json!(["nightly", "env=ci", "other"]));
    assert_eq!(m.result.workers.len(), 4);
    assert_eq!(m.result.global.counters.get(Counter::Http2xx), 2000);
}

#[test]
fn termination_keeps_the_most_serious() {
    let a = crate::common::sample();
    let b = crate::common::skewed();
    let m = merge(vec![input("a", a), input("b", b)]).unwrap();
    assert_eq!(
        m.result.termination,
        Termination::FailurePredicate("benchmark.pool_overflow:10".into())
    );
}

#[test]
fn intervals_align_on_wall_clock_or_are_dropped() {
    // b starts 1 s after a: its intervals land two 500 ms slots later.
    let a = crate::common::sample();
    let mut b = crate::common::sample();
    for w in b.workers.iter_mut().chain(std::iter::once(&mut b.global)) {
        w.execution_start += Duration::from_secs(1);
    }
    let m = merge(vec![input("a", a.clone()), input("b", b.clone())]).unwrap();
    assert!(m.warnings.iter().all(|w| !w.contains("interval")), "{:?}", m.warnings);
    let iv = &m.result.intervals;
    let starts: Vec<u128> = iv.iter().map(|i| i.start.as_millis()).collect();
    assert_eq!(starts, [0, 500, 1000, 1500, 2000, 2500]);
    // Slot 2 holds a's third interval and b's first: counts add, histograms merge exactly.
    let rq = |i: &shrike_stats::Interval| i.counters.get(Counter::RqTotal);
    assert_eq!(rq(&iv[2]), rq(&a.intervals[2]) + rq(&b.intervals[0]));
    assert_eq!(rq(&iv[5]), rq(&a.intervals[3]));
    let stat = |i: &shrike_stats::Interval| {
        i.stats.iter().find(|s| s.id == StatId::RequestToResponse).unwrap().clone()
    };
    let mut want = Statistic::new();
    for s in [stat(&a.intervals[2]), stat(&b.intervals[0])] {
        let h = Statistic::decode_histogram(&s.histogram).unwrap();
        want.merge(&Statistic::from_parts(h, s.count, s.mean, 0.0, s.min, s.max));
    }
    let got = stat(&iv[2]);
    assert_eq!(got.count, want.count());
    assert_eq!(got.at(0.99), Some(want.value_at_quantile(0.99)));
    assert_eq!((got.min, got.max), (want.min(), want.max()));
    assert!((got.mean - want.mean()).abs() < 1e-6);

    // A different period cannot be aligned: dropped, with a warning.
    let mut c = crate::common::sample();
    c.intervals = crate::common::intervals(2, Duration::from_secs(1));
    let m = merge(vec![input("a", a.clone()), input("c", c)]).unwrap();
    assert!(m.result.intervals.is_empty());
    assert!(
        m.warnings
            .iter()
            .any(|w| w.starts_with("intervals dropped: a samples every 500ms but c every 1s")),
        "{:?}",
        m.warnings
    );

    // An input without a series: dropped too.
    let mut d = crate::common::sample();
    d.intervals.clear();
    let m = merge(vec![input("a", a), input("d", d)]).unwrap();
    assert!(m.result.intervals.is_empty());
    assert!(m.warnings.iter().any(|w| w.contains("d has no time series")), "{:?}", m.warnings);
}
