//! The figures both human reports are built from, derived once: what was sent and answered,
//! the window rates are measured over, and the load the run asked for. Rates are only stated
//! where they mean something: a run that failed in 200 µs has no per-second rate.

use std::time::Duration;

use serde_json::Value;
use shrike_stats::duration::format_human_ns;
use shrike_stats::{Counter, RunResult, StatId, WorkerResult};

use crate::options::Load;

/// Rates extrapolated from a shorter window say more about the clock than about the service.
pub(super) const MIN_RATE_WINDOW: Duration = Duration::from_millis(100);

pub(super) struct Facts<'a> {
    pub result: &'a RunResult,
    pub g: &'a WorkerResult,
    /// Requests sent (`upstream_rq_total`, or the responses for results without it).
    pub sent: u64,
    /// Responses received, whatever their status.
    pub answered: u64,
    /// The window the achieved rate is measured over (sending, without the drain).
    pub window: Duration,
    /// The paced load asked for; `None` when unpaced or unknown.
    pub load: Option<Load>,
}

impl<'a> Facts<'a> {
    pub fn of(result: &'a RunResult) -> Facts<'a> {
        let g = &result.global;
        // Exact codes, else status classes, else service-time samples (other tools' results
        // may hold only some of these).
        let answered = g
            .status_codes
            .total()
            .max(g.counters.responses())
            .max(g.stats.get(StatId::RequestToResponse).count());
        let sent = match g.counters.get(Counter::RqTotal) {
            0 => g.stats.get(StatId::RequestToResponse).count(),
            n => n,
        };
        Facts { result, g, sent, answered, window: g.rate_window(), load: Load::of(result) }
    }

    /// Whether per-second figures can be stated: something was answered, over a window long
    /// enough not to be an extrapolation from a blip.
    pub fn rates_mean_something(&self) -> bool {
        self.answered > 0 && self.window >= MIN_RATE_WINDOW
    }

    /// Requests sent per second over the sending window.
    pub fn achieved(&self) -> Option<f64> {
        self.rates_mean_something().then(|| self.sent as f64 / self.window.as_secs_f64())
    }

    /// The `Rate:` line: achieved against requested, or why there is no rate to state.
    pub fn rate_line(&self) -> String {
        let stopped_early =
            !matches!(self.result.termination, shrike_stats::Termination::Completed);
        let requested = self.load.as_ref().and_then(|l| l.requested_over(self.window));
        let over = if stopped_early && requested.is_some() {
            let at = format_human_ns(self.window.as_nanos() as f64);
            format!(", the plan's mean up to the stop at {at}")
        } else {
            String::new()
        };
        let Some(achieved) = self.achieved() else {
            let why = if self.answered == 0 {
                "no request completed".to_string()
            } else {
                format!(
                    "{} sent in {}, too short a window for a per-second rate",
                    self.sent,
                    format_human_ns(self.window.as_nanos() as f64)
                )
            };
            return match requested {
                Some(r) => format!("{} requested; none measured: {why}", rate(r)),
                None => format!("none measured: {why}"),
            };
        };
        let Some(load) = &self.load else {
            return match self.unpaced() {
                true => format!(
                    "{} achieved (unpaced: as fast as the connections allow)",
                    rate(achieved)
                ),
                false => format!("{} achieved", rate(achieved)),
            };
        };
        let Some(requested) = requested else { return format!("{} achieved", rate(achieved)) };
        if load.burst > 1 {
            // Bursts release whole groups at once: over a window that ends mid-period, a rate
            // overstates (or understates) the load. Compare counts instead.
            let planned = load.planned_releases(self.window);
            let pct = 100.0 * self.sent as f64 / planned.max(1) as f64;
            return format!(
                "{} requested in bursts of {}: {} of the {planned} requests released in {} were \
                 sent ({pct:.1}%)",
                rate(requested),
                load.burst,
                self.sent,
                format_human_ns(self.window.as_nanos() as f64),
            );
        }
        format!(
            "{} achieved of {} requested{over} ({:.1}%)",
            rate(achieved),
            rate(requested),
            100.0 * achieved / requested
        )
    }

    /// Whether the run was an unpaced closed loop (`--rps max`).
    pub(super) fn unpaced(&self) -> bool {
        self.result.options.get("requests_per_second").and_then(Value::as_str) == Some("max")
    }

    /// Workers the run had (each generator's, for a fleet).
    pub fn workers(&self) -> usize {
        if let Some(l) = &self.load {
            return l.workers;
        }
        let stated = self.result.options.get("workers").and_then(Value::as_u64);
        match self.generators() {
            // A fleet's result has an entry per generator, not per worker: its options say.
            Some(_) => stated.map_or(1, |w| w as usize),
            None => self.result.workers.len().max(1),
        }
    }

    /// How many generators a coordinated run had (`None` for any other run).
    pub fn generators(&self) -> Option<usize> {
        self.result.options.get("generators").and_then(Value::as_array).map(Vec::len)
    }
}

/// A rate as users write it: whole numbers plain, others with one decimal.
pub(super) fn rate(r: f64) -> String {
    // Rounded first: a plan's mean rate computes as 499.99999… for 500.
    let r = (r * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}/s")
    } else {
        format!("{r:.1}/s")
    }
}

/// Bytes in binary units, three significant digits: `512 B`, `1.21 KiB`, `34.5 MiB`.
pub(super) fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{v:.0} B"),
        _ if v >= 100.0 => format!("{v:.0} {}", UNITS[unit]),
        _ if v >= 10.0 => format!("{v:.1} {}", UNITS[unit]),
        _ => format!("{v:.2} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1023.0), "1023 B");
        assert_eq!(bytes(1024.0), "1.00 KiB");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(15.0 * 1024.0 * 1024.0), "15.0 MiB");
        assert_eq!(bytes(500.0 * 1024.0 * 1024.0 * 1024.0), "500 GiB");
    }
}
