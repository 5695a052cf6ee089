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
        max_level: None,
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
    // Both goals from one pass: fewer trials than two searches (each about 20, failures
    // tried twice).
    assert!(s.trials().len() < 36, "{} trials", s.trials().len());
    assert_eq!(s.trials().iter().filter(|t| t.confirmation).count(), 2);
}

#[test]
fn a_first_trial_that_fails_has_no_answer() {
    let (s, _) = search(&["p99<=500us"], f64::INFINITY);
    // The failure, and the re-test that confirms it.
    assert_eq!(s.trials().len(), 2);
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
fn a_failure_is_repeated_and_a_tie_is_never_a_verdict() {
    let goal = vec![vec![Slo::parse("p99<=10ms").unwrap()]];
    let mut s = Search::new(config(), 1);
    let client = ClientLoad { cpu_cores: None, workers: 1 };
    let judge = |level: f64, lat: f64| {
        Trial::judge(level, true, false, &result(level, lat, 0), client, &goal)
    };
    let next_level = |s: &Search| match s.next() {
        Next::Trial { level, .. } => level,
        Next::Done => f64::NAN,
    };
    s.record(judge(10.0, 1e6));
    assert_eq!(
        s.next(),
        Next::Trial { level: 20.0, duration: Duration::from_secs(1), confirmation: false }
    );
    // A failure, however wide, is tried again before anything is concluded from it.
    s.record(judge(20.0, 500e6));
    assert_eq!(next_level(&s), 20.0);
    s.record(judge(20.0, 5e6));
    // One pass, one fail: a tie is no verdict; a third trial decides.
    assert_eq!(next_level(&s), 20.0);
    s.record(judge(20.0, 5e6));
    // Two passes of three: 20/s passed; the ramp goes on.
    assert_eq!(next_level(&s), 40.0);
    // Two failures decide.
    s.record(judge(40.0, 50e6));
    s.record(judge(40.0, 60e6));
    assert_eq!(next_level(&s), 30.0);
}

/// Runs a search against the model with `stall(level, n)` saying whether the n-th trial at
/// a level is stalled (its latency 200 ms, as a descheduled server's or client's would be).
fn noisy_search(stall: &dyn Fn(f64, usize) -> bool) -> Search {
    let slos = [Slo::parse("p99<=10ms").unwrap()];
    let goals = goals(&slos);
    let mut s = Search::new(config(), goals.len());
    while let Next::Trial { level, confirmation, .. } = s.next() {
        let n = s.trials().iter().filter(|t| t.level == level).count();
        let latency = if stall(level, n) { 200e6 } else { latency_ns(level, 1e6, 1e-3) };
        let r = result(level, latency, 20_000);
        let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
        s.record(Trial::judge(level, true, confirmation, &r, client, &goals));
    }
    s
}

#[test]
fn one_stalled_trial_far_below_the_bound_does_not_pull_the_answer_down() {
    // The boundary is 900/s. The first trial at every level from 150/s to 700/s is stalled:
    // each is re-tried, passes, and the answer stays at the boundary.
    let s = noisy_search(&|level, n| n == 0 && (150.0..=700.0).contains(&level));
    let a = &s.answers()[0];
    assert_eq!(a.status, Status::Found, "{a:?}");
    let max = a.max.unwrap();
    assert!((900.0 * 0.95..=900.0 * 1.02).contains(&max), "{max}: {a:?}");
}

#[test]
fn a_contradiction_is_re_tested_and_one_that_stays_is_reported_not_answered() {
    // 320/s failed twice although 640/s passed: the history contradicts itself. (Bisection
    // alone never tries above a failure; a second goal's trials, or re-tests that flip a
    // level, make such histories.)
    let goal = vec![vec![Slo::parse("p99<=10ms").unwrap()]];
    let mut s = Search::new(config(), 1);
    let client = ClientLoad { cpu_cores: None, workers: 1 };
    let judge = |level: f64, lat: f64| {
        Trial::judge(level, true, false, &result(level, lat, 0), client, &goal)
    };
    let next_level = |s: &Search| match s.next() {
        Next::Trial { level, .. } => level,
        Next::Done => f64::NAN,
    };
    s.record(judge(10.0, 1e6));
    s.record(judge(320.0, 200e6));
    s.record(judge(320.0, 200e6));
    s.record(judge(640.0, 2e6));
    // The failure is re-tested first, up to the level's cap ...
    for _ in 2..config().level_cap() {
        assert_eq!(next_level(&s), 320.0);
        s.record(judge(320.0, 200e6));
    }
    // ... then the pass above it.
    for _ in 1..config().level_cap() {
        assert_eq!(next_level(&s), 640.0);
        s.record(judge(640.0, 2e6));
    }
    // Both stand: no answer, a range.
    assert_eq!(s.next(), Next::Done);
    let a = &s.answers()[0];
    assert_eq!(a.status, Status::Inconsistent { failed: 320.0, passed: 640.0 }, "{a:?}");
    assert!(!a.usable());
    // A re-test that flips the failure settles it: the search goes on above.
    let mut s = Search::new(config(), 1);
    s.record(judge(10.0, 1e6));
    s.record(judge(320.0, 200e6));
    s.record(judge(320.0, 200e6));
    s.record(judge(640.0, 2e6));
    for _ in 0..3 {
        s.record(judge(320.0, 2e6));
    }
    assert_eq!(next_level(&s), 1280.0);
}

#[test]
fn running_out_of_trials_leaves_the_answer_unsettled_with_its_range() {
    let mut cfg = config();
    cfg.max_trials = 9;
    let slos = [Slo::parse("p99<=10ms").unwrap()];
    let goals = goals(&slos);
    let mut s = Search::new(cfg, 1);
    while let Next::Trial { level, confirmation, .. } = s.next() {
        let r = result(level, latency_ns(level, 1e6, 1e-3), 20_000);
        let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
        s.record(Trial::judge(level, true, confirmation, &r, client, &goals));
    }
    let a = &s.answers()[0];
    assert_eq!(a.status, Status::Unfinished, "{a:?}");
    assert!(a.max.is_some() && a.failed_at.is_some(), "a range: {a:?}");
    assert!(!a.usable());
}

#[test]
fn a_stalled_client_invalidates_its_trial_instead_of_failing_it() {
    // Sends on time but for a stall: 2% of them 80 ms late, and their latency from the
    // schedule with them. The server answered in 1 ms throughout.
    let goal = vec![vec![Slo::parse("p99<=20ms").unwrap()]];
    let mut w = result(100.0, 1e6, 20_000).workers;
    for _ in 0..3 {
        w[0].stats.record(StatId::SendLateness, 80_000_000);
        w[0].stats.record(StatId::ScheduledToResponse, 81_000_000);
    }
    let r = RunResult::new(serde_json::json!({}), w, Termination::Completed);
    let client = ClientLoad { cpu_cores: Some(0.1), workers: 1 };
    let t = Trial::judge(100.0, true, false, &r, client, &goal);
    assert_eq!(t.verdicts, [TrialVerdict::Invalid], "{t:?}");
    assert!(t.invalid.as_deref().unwrap_or_default().contains("stalled"), "{t:?}");
    assert!(t.stalled);
    // A stall is a transient: the level is tried again, not taken for the generator's limit
    // (a CI run's first trial stalled, and the search answered "the load generator is the
    // bottleneck at 50/s").
    let mut s = Search::new(config(), 1);
    s.record(t.clone());
    assert!(matches!(s.next(), Next::Trial { level, .. } if level == 100.0), "{:?}", s.next());
    s.record(Trial::judge(100.0, true, false, &result(100.0, 1e6, 20_000), client, &goal));
    assert!(matches!(s.next(), Next::Trial { level, .. } if level == 200.0), "{:?}", s.next());
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

#[test]
fn a_goal_whose_bound_sits_in_noise_does_not_spend_every_trial() {
    // Goal 1 (p99 ≤ 10 ms, 900/s) never confirms: every full-length trial below 900/s sees
    // 30 ms (a slow leak a longer trial shows), so each answer it tries fails twice and it
    // walks down. Goal 2 (p99 ≤ 50 ms, 980/s) still gets its share of the 40 trials and an
    // answer; taking the lowest level first, goal 1 would have spent them all.
    let slos = [Slo::parse("p99<=10ms").unwrap(), Slo::parse("p99<=50ms").unwrap()];
    let goals = goals(&slos);
    let mut cfg = config();
    cfg.max_trials = 40;
    let mut s = Search::new(cfg, goals.len());
    while let Next::Trial { level, confirmation, .. } = s.next() {
        let stalled = confirmation && level < 900.0;
        let latency = if stalled { 30e6 } else { latency_ns(level, 1e6, 1e-3) };
        let r = result(level, latency, 20_000);
        let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
        s.record(Trial::judge(level, true, confirmation, &r, client, &goals));
    }
    let answers = s.answers();
    let second = &answers[1];
    assert_eq!(second.status, Status::Found, "{answers:?}");
    let max = second.max.unwrap();
    assert!((980.0 * 0.95..=980.0 * 1.02).contains(&max), "{max}: {answers:?}");
}

/// A run paced with a lateness budget (`--max-lateness 5ms`) sends up to that late by choice:
/// its trials are judged, not set aside as a client that could not keep up; lateness beyond
/// the budget still is.
#[test]
fn lateness_within_the_budget_chosen_is_not_the_clients_fault() {
    let goal = vec![vec![Slo::parse("p99<=50ms").unwrap()]];
    let client = ClientLoad { cpu_cores: Some(0.1), workers: 1 };
    let budgeted = |late_ns: u64, budget: Option<&str>| {
        let mut r = result(100.0, 1e6, late_ns);
        if let Some(b) = budget {
            r.options = serde_json::json!({ "max_lateness": b });
        }
        Trial::judge(100.0, true, false, &r, client, &goal)
    };
    // 3 ms late at the median: late for a precise pacer, within a 5 ms budget.
    let precise = budgeted(3_000_000, None);
    assert!(precise.invalid.as_deref().unwrap_or_default().contains("late"), "{precise:?}");
    let within = budgeted(3_000_000, Some("5ms"));
    assert_eq!(within.invalid, None, "{within:?}");
    assert_eq!(within.verdicts, [TrialVerdict::Pass]);
    let beyond = budgeted(9_000_000, Some("5ms"));
    assert!(beyond.invalid.is_some(), "{beyond:?}");
}

#[test]
fn a_max_rate_bounds_the_search_and_answers_at_least_it() {
    // The model holds p99 <= 50 ms up to ~980/s; a bound of 400 ends the search there.
    let slos: Vec<Slo> = vec![Slo::parse("p99<=50ms").unwrap()];
    let goals = goals(&slos);
    let mut s = Search::new(SearchConfig { max_level: Some(400.0), ..config() }, goals.len());
    let mut highest: f64 = 0.0;
    while let Next::Trial { level, confirmation, .. } = s.next() {
        highest = highest.max(level);
        let r = result(level, latency_ns(level, 1e6, 1e-3), 20_000);
        let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
        s.record(Trial::judge(level, true, confirmation, &r, client, &goals));
    }
    assert_eq!(highest, 400.0, "never above the bound");
    let a = &s.answers()[0];
    assert_eq!(a.status, Status::Bounded { limit: 400.0 }, "{a:?}");
    assert!(a.usable());
}

/// Answers that were errors are judged by the errors objective, not the latency one: 95 fast
/// successes and 5 slow 503s meet p99 <= 10 ms (the successes' p99 is 1 ms), with errors
/// within 10%; the same errors miss errors <= 1%.
#[test]
fn latency_is_judged_on_the_successful_answers() {
    let mut w = WorkerResult::new("worker_0", SystemTime::UNIX_EPOCH);
    w.execution_duration = Duration::from_secs(1);
    w.sending_duration = Some(Duration::from_secs(1));
    for i in 0..100u64 {
        let (v, status) = if i < 95 { (1_000_000, 200) } else { (100_000_000, 503) };
        w.stats.record(StatId::ScheduledToResponse, v);
        w.stats.record(StatId::RequestToResponse, v);
        w.stats.record(StatId::latency_for_status(status), v);
        if status >= 400 {
            w.stats.record(StatId::ScheduledToErrorResponse, v);
        }
        w.counters.inc(Counter::for_status(status));
        w.status_codes.add(status, 1);
    }
    w.counters.add(Counter::RqTotal, 100);
    let r = RunResult::new(serde_json::json!({}), vec![w], Termination::Completed);
    let client = ClientLoad { cpu_cores: Some(0.3), workers: 1 };
    let judge = |slos: &[&str]| {
        let slos: Vec<Slo> = slos.iter().map(|s| Slo::parse(s).unwrap()).collect();
        let goals = goals(&slos);
        Trial::judge(100.0, true, false, &r, client, &goals).verdicts[0]
    };
    assert_eq!(judge(&["p99<=10ms", "errors<=10%"]), TrialVerdict::Pass);
    assert_eq!(judge(&["service.p99<=10ms", "errors<=10%"]), TrialVerdict::Pass);
    assert!(matches!(judge(&["p99<=10ms", "errors<=1%"]), TrialVerdict::Fail { .. }));
    // 95 answers cannot tell a p99.9 apart from their slowest.
    let t =
        Trial::judge(100.0, true, false, &r, client, &goals(&[Slo::parse("p99.9<=1s").unwrap()]));
    assert_eq!(
        t.thin(&[Slo::parse("p99.9<=1s").unwrap()]),
        vec!["p99.9 from 95 answers (1000 needed)"]
    );
}
