//! Reading what a run asked for back out of its stored `options`, one way for every formatter.

use serde_json::Value;
use shrike_stats::duration::parse_duration;
use shrike_stats::RunResult;

/// Requests per second the run asked for, all workers together (`requests_per_second` is per
/// worker, as Nighthawk's `--rps`). A staged run asked for its plan's mean rate: the planned
/// count (each linear stage plans `(from + to) / 2 × duration`) over the plan's length. `None`
/// for unpaced runs (`"max"`) and for results that do not say.
pub fn requested_rate(result: &RunResult) -> Option<f64> {
    let o = &result.options;
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    let workers = o.get("workers").and_then(number).unwrap_or(result.workers.len().max(1) as f64);
    let per_worker = match o.get("requests_per_second").and_then(number) {
        Some(r) => r,
        None => o.get("stages").and_then(Value::as_str).and_then(stages_mean_rate)?,
    };
    (per_worker > 0.0 && workers > 0.0).then_some(per_worker * workers)
}

/// The mean rate of a `--stages` plan (`10s:1000,30s:5000,10s:0`).
fn stages_mean_rate(stages: &str) -> Option<f64> {
    let (mut planned, mut secs, mut prev) = (0.0, 0.0, 0.0);
    for part in stages.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (d, r) = part.rsplit_once(':')?;
        let d = parse_duration(d.trim()).ok()?.as_secs_f64();
        let r: f64 = r.trim().parse().ok()?;
        planned += (prev + r) / 2.0 * d;
        secs += d;
        prev = r;
    }
    (secs > 0.0).then(|| planned / secs)
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
    }
}
