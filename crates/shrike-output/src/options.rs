//! Reading what a run asked for back out of its stored `options`, one way for every formatter:
//! through the run spec's own types ([`shrike_spec`]), so the rate plan and its integral are the
//! ones the engine paced by, never re-derived here.

use shrike_spec::RateSpec;
use shrike_stats::RunResult;

/// Requests per second the run asked for, all workers together (`requests_per_second` is per
/// worker, as Nighthawk's `--rps`). A staged run asked for its plan's mean rate over the whole
/// plan. `None` for unpaced runs (`"max"`) and for results that do not say.
pub fn requested_rate(result: &RunResult) -> Option<f64> {
    let rate = RateSpec::from_options(&result.options).ok().flatten()?;
    // The workers the run had (recorded with its options), else the results present.
    let workers = result
        .options
        .get("workers")
        .and_then(|w| w.as_u64().or_else(|| w.as_str()?.parse().ok()))
        .map_or(result.workers.len().max(1), |w| w as usize);
    let window = match &rate {
        RateSpec::Stages(s) => shrike_spec::RatePlan::stages_duration(s),
        _ => std::time::Duration::from_secs(1),
    };
    rate.requested_rate(workers, window).filter(|r| *r > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
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
    }
}
