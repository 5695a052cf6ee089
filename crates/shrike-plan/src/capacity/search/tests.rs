//! The search against a model server whose latency follows Little's law, through the same
//! judging real trials go through.

use std::time::{Duration, SystemTime};

use shrike_stats::{Counter, RunResult, StatId, Termination, WorkerResult};

use super::*;
use crate::capacity::slo::{goals, Slo};
use crate::trial::ClientLoad;

/// A queue with service time `m + c·f` at concurrency `c`: latency `m / (1 − λf)`.
fn latency_ns(rate: f64, m: f64, f: f64) -> f64 {
    let load = rate * f;
    if load >= 1.0 {
        10e9
    } else {
        m / (1.0 - load)
    }
}

/// A one-second trial at `rate` with every response taking `latency`; `jitter` spreads the
/// samples ±2% so percentiles are not all one bucket.
fn result(rate: f64, latency: f64, late_sends_ns: u64) -> RunResult {
    let mut w = WorkerResult::new("worker_0", SystemTime::UNIX_EPOCH);
    w.execution_duration = Duration::from_secs(1);
    w.sending_duration = Some(Duration::from_secs(1));
    let n = rate.round() as u64;
    for i in 0..n {
        let v = (latency * (0.98 + 0.04 * (i as f64 / n.max(1) as f64))) as u64;
        w.stats.record(StatId::ScheduledToResponse, v);
        w.stats.record(StatId::RequestToResponse, v);
        w.stats.record(StatId::SendLateness, late_sends_ns);
    }
    w.counters.add(Counter::RqTotal, n);
    w.counters.add(Counter::Http2xx, n);
    w.status_codes.add(200, n);
    RunResult::new(serde_json::json!({}), vec![w], Termination::Completed)
}

fn config() -> SearchConfig {
    SearchConfig {
        start: 10.0,
        precision: 0.02,
        integer: false,
        repeats: 1,
        trial_duration: Duration::from_secs(1),
        final_duration: Duration::from_secs(5),
        max_trials: 60,
    }
}

/// Runs the search to the end against the model; `generator_max` is the fastest the model
/// client can send (above it, sends are late).
fn search(slos: &[&str], generator_max: f64) -> (Search, Vec<Vec<Slo>>) {
    let slos: Vec<Slo> = slos.iter().map(|s| Slo::parse(s).unwrap()).collect();
    let goals = goals(&slos);
    let mut s = Search::new(config(), goals.len());
    while let Next::Trial { level, confirmation, .. } = s.next() {
        let late = if level > generator_max { 5_000_000 } else { 20_000 };
        let r = result(level, latency_ns(level, 1e6, 1e-3), late);
        let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
        s.record(Trial::judge(level, true, confirmation, &r, client, &goals));
    }
    (s, goals)
}

#[test]
fn finds_the_analytic_boundary_for_each_goal_sharing_trials() {
    // m = 1 ms, f = 1 ms: latency ≤ L holds up to λ* = (1 − m/L)/f: 900/s for 10 ms, 980/s
    // for 50 ms.
    let (s, _) = search(&["p99<=10ms", "p99<=50ms"], f64::INFINITY);
    let answers = s.answers();
    for (a, want) in answers.iter().zip([900.0, 980.0]) {
        assert_eq!(a.status, Status::Found, "{a:?}");
        let max = a.max.unwrap();
        // Within the precision, from below (the answer passed), allowing the ±2% spread.
        assert!(max <= want * 1.02 && max >= want * 0.95, "{max} vs {want}: {a:?}");
        assert!(a.failed_at.unwrap() > max);
        assert!(a.trials >= 2, "a short trial and the confirmation: {a:?}");
    }
    // Both goals from one pass: far fewer trials than two searches.
    assert!(s.trials().len() < 30, "{} trials", s.trials().len());
    assert_eq!(s.trials().iter().filter(|t| t.confirmation).count(), 2);
}

#[test]
fn a_first_trial_that_fails_has_no_answer() {
    let (s, _) = search(&["p99<=500us"], f64::INFINITY);
    assert_eq!(s.trials().len(), 1);
    let a = &s.answers()[0];
    assert_eq!(a.status, Status::FirstTrialFailed);
    assert_eq!(a.max, None);
}

#[test]
fn the_generators_limit_is_never_the_servers() {
    // The model client cannot send above 300/s; the server would do 900/s.
    let (s, _) = search(&["p99<=10ms"], 300.0);
    let invalid: Vec<f64> =
        s.trials().iter().filter(|t| t.invalid.is_some()).map(|t| t.level).collect();
    assert!(!invalid.is_empty());
    assert!(s
        .trials()
        .iter()
        .all(|t| t.invalid.is_none() || t.verdicts == [TrialVerdict::Invalid]));
    let a = &s.answers()[0];
    match a.status {
        Status::GeneratorBound { limit } => assert!(limit > 300.0 && limit <= 640.0, "{limit}"),
        ref other => panic!("{other:?}"),
    }
    assert!(a.max.unwrap() <= 300.0 && a.max.unwrap() >= 290.0, "{a:?}");
    assert_eq!(a.failed_at, None);
}

#[test]
fn narrow_failures_are_repeated_and_decided_by_majority() {
    let goal = vec![vec![Slo::parse("p99<=10ms").unwrap()]];
    let mut s = Search::new(config(), 1);
    let client = ClientLoad { cpu_cores: None, workers: 1 };
    let judge = |level: f64, lat: f64| {
        Trial::judge(level, true, false, &result(level, lat, 0), client, &goal)
    };
    s.record(judge(10.0, 1e6));
    assert_eq!(
        s.next(),
        Next::Trial { level: 20.0, duration: Duration::from_secs(1), confirmation: false }
    );
    // Misses by ~3%: narrow, so 20/s is tried again before anything is concluded.
    s.record(judge(20.0, 10.1e6));
    assert!(matches!(s.next(), Next::Trial { level, .. } if level == 20.0));
    s.record(judge(20.0, 5e6));
    // One pass, one narrow fail: a tie is a fail; the search bisects below it.
    assert!(matches!(s.next(), Next::Trial { level, .. } if level == 15.0), "{:?}", s.next());
}

#[test]
fn overflow_with_a_fast_server_is_invalid_and_says_why() {
    let goals = vec![vec![Slo::parse("p99<=10ms").unwrap()]];
    let client = ClientLoad { cpu_cores: None, workers: 1 };
    // Every send was on time, but 10% of the rate found every connection busy while the
    // server answered in 1 ms: the connections were the limit, not the server.
    let mut workers = result(1000.0, 1e6, 0).workers;
    workers[0].counters.add(Counter::PoolOverflow, 100);
    let r = RunResult::new(serde_json::json!({}), workers, Termination::Completed);
    let t = Trial::judge(1000.0, true, false, &r, client, &goals);
    assert_eq!(t.verdicts, [TrialVerdict::Invalid]);
    let why = t.invalid.expect("an invalid trial says why");
    assert!(why.contains("too few connections") && why.contains("9.1%"), "{why}");
}
