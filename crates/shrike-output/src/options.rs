//! Reading what a run asked for back out of its stored `options`, one way for every formatter:
//! through the run spec's own types ([`shrike_spec`]), so the rate plan and its integral are the
//! ones the engine paced by, never re-derived here.

use std::time::Duration;

use serde_json::Value;
use shrike_spec::plan::{releases_before, Segment};
use shrike_spec::{RatePlan, RateSpec};
use shrike_stats::RunResult;

/// The paced load a run asked for, as read from its options: what its achieved figures are
/// judged against.
#[derive(Clone, Debug)]
pub struct Load {
    /// The per-worker plan the pacers followed.
    pub plan: RatePlan,
    pub workers: usize,
    /// Requests released together (1: no bursts).
    pub burst: u64,
    segments: Vec<Segment>,
}

impl Load {
    /// The paced load `result` asked for; `None` for unpaced runs and results that do not say.
    pub fn of(result: &RunResult) -> Option<Load> {
        if is_replay(result) {
            return None;
        }
        let plan = RateSpec::from_options(&result.options).ok().flatten()?.plan();
        if matches!(plan, RatePlan::Unpaced) {
            return None;
        }
        let burst = result.options.get("burst_size").and_then(uint).unwrap_or(1).max(1);
        let segments = plan.segments();
        Some(Load { plan, workers: workers(result), burst, segments })
    }

    /// The mean rate the plan asked for over its first `window`, all workers together: for an
    /// interrupted or staged run, the plan up to the stop, not the whole plan's mean.
    pub fn requested_over(&self, window: Duration) -> Option<f64> {
        self.plan.mean_rate(window).map(|r| r * self.workers as f64).filter(|r| *r > 0.0)
    }

    /// Releases the workers' pacers planned strictly before `window`, bursts and the workers'
    /// interleaving phases included: with bursts, what a run should have sent is a whole
    /// number of bursts, which a rate over a short window misstates.
    pub fn planned_releases(&self, window: Duration) -> u64 {
        let n = self.workers.max(1);
        (0..n)
            .map(|i| releases_before(&self.segments, window, self.burst, i as f64 / n as f64))
            .sum()
    }
}

/// Whether the run replayed sessions (`shrike replay` records how in `options.replay`): its
/// timing came from them, not from a rate plan.
pub fn is_replay(result: &RunResult) -> bool {
    result.options.get("replay").is_some()
}

/// A uint64 option as proto3 JSON writes it: a number or a decimal string.
fn uint(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// The workers the run had (recorded with its options), else the results present.
fn workers(result: &RunResult) -> usize {
    result.options.get("workers").and_then(uint).map_or(result.workers.len().max(1), |w| w as usize)
}

/// Requests per second the run asked for, all workers together (`requests_per_second` is per
/// worker, as Nighthawk's `--rps`). A staged run asked for its plan's mean rate over the whole
/// plan. `None` for unpaced runs (`"max"`) and for results that do not say.
pub fn requested_rate(result: &RunResult) -> Option<f64> {
    if is_replay(result) {
        return None;
    }
    let rate = RateSpec::from_options(&result.options).ok().flatten()?;
    let workers = workers(result);
    let window = match &rate {
        RateSpec::Stages(s) => shrike_spec::RatePlan::stages_duration(s),
        _ => std::time::Duration::from_secs(1),
    };
    // A shard asked for its share of the run's rate.
    let shards = result.options.get("shard").and_then(Value::as_str);
    let shards = shards.and_then(|s| shrike_spec::Shard::parse(s).ok()).map_or(1, |s| s.count());
    rate.requested_rate(workers, window).map(|r| r / f64::from(shards)).filter(|r| *r > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shrike_stats::{Termination, WorkerResult};

    fn result(options: Value, workers: usize) -> RunResult {
        let w = (0..workers)
            .map(|i| WorkerResult::new(format!("worker_{i}"), std::time::SystemTime::UNIX_EPOCH))
            .collect();
        RunResult::new(options, w, Termination::Completed)
    }

    #[test]
    fn fixed_staged_and_unpaced() {
        assert_eq!(requested_rate(&result(json!({"requests_per_second": 100.0}), 2)), Some(200.0));
        assert_eq!(requested_rate(&result(json!({"requests_per_second": "25"}), 1)), Some(25.0));
        assert_eq!(requested_rate(&result(json!({"requests_per_second": "max"}), 1)), None);
        // 0→1000 over 10 s, 1000→5000 over 30 s, 5000→0 over 10 s: 120000 planned in 50 s.
        let staged = json!({"requests_per_second": null, "stages": "10s:1000,30s:5000,10s:0",
                            "workers": 2});
        assert_eq!(requested_rate(&result(staged, 2)), Some(4800.0));
        assert_eq!(requested_rate(&result(json!({}), 1)), None);
        let shard = json!({"requests_per_second": 90, "shard": "1/3"});
        assert_eq!(requested_rate(&result(shard, 2)), Some(60.0));
    }

    #[test]
    fn load_over_a_window_and_in_bursts() {
        let secs = Duration::from_secs;
        // 1000 rps per worker, 2 workers, interrupted after 3 s of a 0→1000 over 10 s stage:
        // the plan up to the stop asked for 3 s × 150/s mean per worker.
        let staged = json!({"stages": "10s:1000", "workers": 2});
        let load = Load::of(&result(staged, 2)).unwrap();
        let got = load.requested_over(secs(3)).unwrap();
        assert!((got - 300.0).abs() < 1e-9, "{got}");
        assert_eq!(load.requested_over(Duration::ZERO), None);
        // 5 rps in bursts of 10 for 3 s: bursts at 0 s and 2 s, 20 requests, not 15.
        let bursts = json!({"requests_per_second": 5, "burst_size": 10, "workers": 1});
        let load = Load::of(&result(bursts, 1)).unwrap();
        assert_eq!(load.planned_releases(secs(3)), 20);
        assert_eq!(load.planned_releases(secs(2)), 10);
        // Two workers at 5 rps interleave: worker 1 is half a period behind.
        let two = json!({"requests_per_second": 5, "workers": 2});
        assert_eq!(Load::of(&result(two, 2)).unwrap().planned_releases(secs(1)), 10);
        assert!(Load::of(&result(json!({"requests_per_second": "max"}), 1)).is_none());
        assert!(Load::of(&result(json!({}), 1)).is_none());
    }
}
