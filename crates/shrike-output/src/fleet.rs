//! A coordinated run's generators, one row each, for every view (the summary, the JSON, the
//! HTML page): what each sent, at what rate, with how many errors and what p99, and whether it
//! finished or was lost. A sick generator must be visible, not averaged away.
//!
//! The coordinator records the fleet in the result's options (`options.generators`: each
//! generator's name, address and state); each generator's figures are its own entry in the
//! results, named as it is there.

use serde_json::{json, Value};
use shrike_stats::{Counter, RunResult, StatId, WorkerResult};

/// One generator's part of a coordinated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    pub name: String,
    pub address: String,
    /// `completed`, or `lost` (its stream ended without a final result: what it streamed is
    /// its figures).
    pub state: String,
    /// Why it was lost.
    pub why: Option<String>,
    pub requests: u64,
    /// Requests per second over its sending window; `None` when it sent nothing to time.
    pub rate: Option<f64>,
    /// Requests that got no success: error statuses, failures, timeouts.
    pub errors: u64,
    /// Latency from the schedule, p99, in ns; `None` with no sample.
    pub p99_ns: Option<u64>,
    /// When it was found lost (seconds from the start).
    pub lost_at: Option<f64>,
    /// Over how many generators still running its share was re-spread, and the factor each
    /// multiplied its rate by.
    pub respread: Option<(u64, f64)>,
    /// Why its share was not re-spread.
    pub not_respread: Option<String>,
}

impl Generator {
    /// What became of a lost generator's share, in words: `lost at 3.2 s, its share
    /// re-spread over 2 generators (×1.50 each)`; `None` for one that completed.
    pub fn fate(&self) -> Option<String> {
        if self.state == "completed" {
            return None;
        }
        let mut s = self.name.clone();
        if let Some(at) = self.lost_at {
            s.push_str(&format!(" lost at {at:.1} s"));
        } else {
            s.push_str(" lost");
        }
        match (&self.respread, &self.not_respread) {
            (Some((n, f)), _) => s.push_str(&format!(
                ", its share re-spread over {n} generator{} (×{f:.2} each)",
                if *n == 1 { "" } else { "s" }
            )),
            (None, Some(why)) => s.push_str(&format!(", its share unsent from then on ({why})")),
            (None, None) => s.push_str(", its share unsent from then on"),
        }
        Some(s)
    }
}

/// The generators of a coordinated run (`None` for any other result).
pub fn generators(result: &RunResult) -> Option<Vec<Generator>> {
    let listed = result.options.get("generators")?.as_array()?;
    let rows = listed
        .iter()
        .map(|g| {
            let text = |k: &str| g.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let name = text("name");
            let state = text("state");
            // A lost generator's figures are its partial entry.
            let entry = result.workers.iter().find(|w| {
                w.name == name || w.name.strip_suffix(" (partial)") == Some(name.as_str())
            });
            let (requests, rate, errors, p99_ns) = entry.map_or((0, None, 0, None), figures);
            let why = g.get("why").and_then(Value::as_str).map(str::to_string);
            let respread = g
                .get("respread_over")
                .and_then(Value::as_u64)
                .map(|n| (n, g.get("respread_factor").and_then(Value::as_f64).unwrap_or(f64::NAN)));
            Generator {
                name,
                address: text("address"),
                state,
                why,
                requests,
                rate,
                errors,
                p99_ns,
                lost_at: g.get("lost_at").and_then(Value::as_f64),
                respread,
                not_respread: g.get("not_respread").and_then(Value::as_str).map(str::to_string),
            }
        })
        .collect();
    Some(rows)
}

fn figures(w: &WorkerResult) -> (u64, Option<f64>, u64, Option<u64>) {
    let c = &w.counters;
    let requests = c.get(Counter::RqTotal);
    let window = w.rate_window().as_secs_f64();
    let rate = (window > 0.0 && requests > 0).then(|| requests as f64 / window);
    let ok = w
        .status_codes
        .non_zero()
        .iter()
        .filter(|(s, _)| (100..400).contains(s))
        .map(|(_, n)| *n)
        .sum::<u64>();
    let errors = requests.saturating_sub(ok.max(c.get(Counter::Answered)));
    let s = w.stats.get(StatId::ScheduledToResponse);
    let p99 = (s.count() > 0).then(|| s.clamped_quantile(0.99));
    (requests, rate, errors, p99)
}

/// The rows as the JSON output writes them (`shrike.generators`).
pub fn to_json(rows: &[Generator]) -> Value {
    Value::Array(
        rows.iter()
            .map(|g| {
                json!({
                    "name": g.name,
                    "address": g.address,
                    "state": g.state,
                    "why": g.why,
                    "requests": g.requests,
                    "rate": g.rate,
                    "errors": g.errors,
                    "p99": g.p99_ns.map(|ns| shrike_stats::duration::format_proto(
                        std::time::Duration::from_nanos(ns))),
                    "lost_at": g.lost_at,
                    "respread_over": g.respread.map(|r| r.0),
                    "respread_factor": g.respread.map(|r| r.1),
                    "not_respread": g.not_respread,
                    "fate": g.fate(),
                })
            })
            .collect(),
    )
}
