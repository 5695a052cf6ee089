//! One trial of a capacity search: what it offered, what came back, and whether the load
//! generator itself kept up. A trial the generator could not drive is *invalid*, never a
//! failure of the server: otherwise the search would report the client's limit as the
//! service's capacity.

use std::time::Duration;

use shrike_stats::{Counter, RunResult, StatId, Statistic};

use super::slo::{Latency, Metric, Slo};
use crate::cause::Cause;
use crate::trial::ClientLoad;

/// The client was saturated at this share of its workers' cores.
pub const CPU_SATURATED: f64 = 0.9;
/// A median send lateness above this means the pacer could not release on schedule.
pub const LATE_SENDS: Duration = Duration::from_millis(1);
/// Open-loop overflow above this share of the offered requests counts.
pub const OVERFLOW_SHARE: f64 = 0.005;
/// Achieved under this share of the offered rate, without errors or overflow, means the
/// client did not offer the load.
pub const SHORTFALL: f64 = 0.95;
/// A failure within this relative distance of a bound is narrow (reports say so).
pub const NARROW: f64 = 0.1;
/// A latency objective missed while the client's own send lateness at the same percentile
/// was at least this share of the bound: the client's stall, not the server, made the miss.
pub const LATE_TAIL: f64 = 0.5;

/// How one trial stood against one goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrialVerdict {
    Pass,
    /// `narrow`: every failed objective missed by less than [`NARROW`].
    Fail {
        narrow: bool,
    },
    /// The generator could not drive this trial: it says nothing about the server.
    Invalid,
}

impl TrialVerdict {
    /// How reports and streams say it.
    pub fn name(self) -> &'static str {
        match self {
            TrialVerdict::Pass => "pass",
            TrialVerdict::Fail { narrow: true } => "fail (narrowly)",
            TrialVerdict::Fail { narrow: false } => "fail",
            TrialVerdict::Invalid => "invalid",
        }
    }
}

/// One trial's figures, kept with the histograms the objectives are judged on.
#[derive(Clone, Debug)]
pub struct Trial {
    /// Offered load: requests per second (all workers) or concurrency.
    pub level: f64,
    pub duration: Duration,
    /// The full-length confirmation trial at an answer.
    pub confirmation: bool,
    /// Requests sent per second over the sending window.
    pub achieved_rps: f64,
    /// Responses received per second over the sending window.
    pub responses_rps: f64,
    /// Achieved over offered (rate search only).
    pub achieved_ratio: Option<f64>,
    /// Requests the server failed (statuses, timeouts, resets, connection failures) over the
    /// requests tried; client overflow is apart, in `overflow_share`.
    pub error_ratio: f64,
    /// Latency from the schedule, and service time, of the successful answers (what the
    /// latency objectives are judged on; errors are judged by the errors objective).
    pub scheduled: Statistic,
    pub service: Statistic,
    pub client_cpu_cores: Option<f64>,
    /// Why the generator could not drive this trial, if it could not.
    pub invalid: Option<String>,
    /// Invalid only because the client stalled for a moment (a transient of the host, not a
    /// limit of the generator): the level is tried again rather than capped.
    pub stalled: bool,
    /// Open-loop overflow share of the offered requests.
    pub overflow_share: f64,
    /// Why no request got a successful response, when none did.
    pub cause: Option<Cause>,
    pub verdicts: Vec<TrialVerdict>,
}

impl Trial {
    /// Judges `result`, a trial at `level` (a rate when `rate_search`), against `goals`.
    pub fn judge(
        level: f64,
        rate_search: bool,
        confirmation: bool,
        result: &RunResult,
        client: ClientLoad,
        goals: &[Vec<Slo>],
    ) -> Trial {
        let g = &result.global;
        let c = &g.counters;
        let window = g.rate_window().as_secs_f64();
        let sent = c.get(Counter::RqTotal);
        let responses = g.status_codes.total().max(c.responses());
        let overflow = crate::counts::overflow(c);
        let failed = crate::counts::server_errors(c);
        let tried = sent + c.get(Counter::PoolConnectionFailure);
        let per_sec = |n: u64| if window > 0.0 { n as f64 / window } else { 0.0 };
        let achieved_rps = per_sec(sent);
        let achieved_ratio = rate_search.then(|| achieved_rps / level.max(f64::MIN_POSITIVE));
        let overflow_share = overflow as f64 / (tried + overflow).max(1) as f64;
        let mut trial = Trial {
            level,
            duration: g.rate_window(),
            confirmation,
            achieved_rps,
            responses_rps: per_sec(responses),
            achieved_ratio,
            error_ratio: failed as f64 / tried.max(1) as f64,
            scheduled: successful(result, StatId::ScheduledToResponse),
            service: successful(result, StatId::RequestToResponse),
            client_cpu_cores: client.cpu_cores,
            invalid: None,
            stalled: false,
            overflow_share,
            cause: Cause::of(result),
            verdicts: Vec::new(),
        };
        trial.invalid = trial.self_check(result, client, rate_search);
        if trial.invalid.is_none() {
            trial.invalid = trial.late_tail(result, goals);
            trial.stalled = trial.invalid.is_some();
        }
        trial.verdicts = goals.iter().map(|goal| trial.verdict(goal)).collect();
        if trial.invalid.is_none()
            && !trial.verdicts.is_empty()
            && trial.verdicts.iter().all(|v| *v == TrialVerdict::Invalid)
        {
            // Only overflow makes a verdict invalid without a self-check reason: say so, so no
            // invalid trial goes unexplained.
            trial.invalid = Some(format!(
                "the client had too few connections for the rate: {:.1}% of requests were due \
                 with every connection busy while the server answered within the bounds",
                100.0 * trial.overflow_share
            ));
        }
        trial
    }

    /// The generator self-check: CPU, pacing and (without errors to explain it) a shortfall.
    fn self_check(
        &self,
        result: &RunResult,
        client: ClientLoad,
        rate_search: bool,
    ) -> Option<String> {
        let workers = client.workers.max(1) as f64;
        if let Some(cores) = client.cpu_cores.filter(|c| *c >= CPU_SATURATED * workers) {
            return Some(format!(
                "the client's CPU was saturated ({cores:.2} of {workers} worker cores)"
            ));
        }
        if !rate_search {
            return None;
        }
        let late = result.global.stats.get(StatId::SendLateness);
        // Lateness within a budget the user chose (`--max-lateness`) is the pacing asked for.
        let allowed = LATE_SENDS + lateness_budget(result);
        if late.count() > 0 && late.clamped_quantile(0.5) as f64 >= allowed.as_nanos() as f64 {
            return Some(format!(
                "the client released requests late (send lateness p50 {:.2}ms)",
                late.clamped_quantile(0.5) as f64 / 1e6
            ));
        }
        let short = self.achieved_ratio.is_some_and(|r| r < SHORTFALL);
        if short && self.error_ratio == 0.0 && self.overflow_share == 0.0 {
            return Some(format!(
                "the client offered only {:.1}% of the rate, without errors or overflow to \
                 explain it",
                100.0 * self.achieved_ratio.unwrap_or_default()
            ));
        }
        None
    }

    /// The client's stalls: a latency objective missed while the client itself sent that
    /// late at the objective's percentile (a descheduled or stalled generator delays every
    /// request due meanwhile, and each one's latency from the schedule counts the delay).
    /// Only where sends never waited for a connection (open loop): in a closed loop the
    /// lateness is the wait for a busy server's connections, the server's doing.
    fn late_tail(&self, result: &RunResult, goals: &[Vec<Slo>]) -> Option<String> {
        let stats = &result.global.stats;
        let late = stats.get(StatId::SendLateness);
        if late.count() == 0 || stats.get(StatId::SequencerBlocking).count() > 0 {
            return None;
        }
        goals.iter().flatten().find_map(|slo| {
            let Metric::Latency { of: Latency::Scheduled, q } = slo.metric else { return None };
            let lateness = match q {
                Some(q) => late.clamped_quantile(q) as f64,
                None => late.mean(),
            };
            // A stall is lateness beyond what the user's budget allowed.
            let beyond = lateness - lateness_budget(result).as_nanos() as f64;
            let missed = !slo.met_by(self.value(slo.metric));
            (missed && beyond >= LATE_TAIL * slo.bound).then(|| {
                format!(
                    "the client stalled: its own send lateness {} was {} against {slo}",
                    slo.metric.name(),
                    shrike_stats::duration::format_human_ns(lateness)
                )
            })
        })
    }

    /// The percentile objectives this trial judged on too few samples for the percentile to
    /// differ from the maximum (p99.9 from 6 answers is the slowest of six): `p99.9 from 6
    /// answers (1000 needed)`. Such a verdict rests on the worst sample alone.
    pub fn thin(&self, slos: &[Slo]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in slos {
            let Metric::Latency { of, q: Some(q) } = s.metric else { continue };
            if q >= 1.0 {
                continue;
            }
            let n = match of {
                Latency::Scheduled => self.scheduled.count(),
                Latency::Service => self.service.count(),
            };
            let needed = (1.0 / (1.0 - q)).round() as u64;
            let note = format!("{} from {n} answers ({needed} needed)", s.metric.name());
            if n > 0 && n < needed && !out.contains(&note) {
                out.push(note);
            }
        }
        out
    }

    /// The measured value of `metric`, as reports print it (`12.30ms`, `0.12%`, `-`).
    pub fn shown(&self, metric: Metric) -> String {
        let v = self.value(metric);
        match metric {
            Metric::Latency { .. } if v.is_finite() => shrike_stats::duration::format_human_ns(v),
            Metric::Latency { .. } => "-".into(),
            Metric::Errors | Metric::Achieved => format!("{:.2}%", 100.0 * v),
        }
    }

    /// Each objective's metric and its value in this trial, once per metric (`p95 12.30ms,
    /// errors 0.00%`): what a progress line shows, so a p99.9 objective is judged in sight.
    pub fn figures(&self, slos: &[Slo]) -> String {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for s in slos {
            let name = s.metric.name();
            if !seen.contains(&name) {
                out.push(format!("{name} {}", self.shown(s.metric)));
                seen.push(name);
            }
        }
        out.join(", ")
    }

    /// The objectives of `goal` this trial missed, with what it measured (`p99 812.00ms >
    /// 50.00ms`).
    pub fn misses(&self, goal: &[Slo]) -> String {
        let missed: Vec<String> = goal
            .iter()
            .filter(|s| !s.met_by(self.value(s.metric)))
            .map(|s| {
                let bound = match s.metric {
                    Metric::Latency { .. } => shrike_stats::duration::format_human_ns(s.bound),
                    _ => format!("{}%", 100.0 * s.bound),
                };
                let op = if s.at_most { ">" } else { "<" };
                format!("{} {} {op} {bound}", s.metric.name(), self.shown(s.metric))
            })
            .collect();
        missed.join(", ")
    }

    /// The value of `metric` in this trial (ns for latency, a ratio otherwise).
    pub fn value(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Latency { of, q } => {
                let s = match of {
                    Latency::Scheduled => &self.scheduled,
                    Latency::Service => &self.service,
                };
                if s.count() == 0 {
                    // Nothing answered: no latency can be said to meet a bound.
                    return f64::INFINITY;
                }
                match q {
                    Some(q) => s.clamped_quantile(q) as f64,
                    None => s.mean(),
                }
            }
            Metric::Errors => self.error_ratio,
            Metric::Achieved => self.achieved_ratio.unwrap_or(1.0),
        }
    }

    fn verdict(&self, goal: &[Slo]) -> TrialVerdict {
        if self.invalid.is_some() {
            return TrialVerdict::Invalid;
        }
        // Errors past their objective fail the trial whatever else held: answers that were
        // errors say nothing about the service's latency, and too few connections for the
        // rate do not excuse them.
        let errors_missed = goal
            .iter()
            .filter(|s| s.metric == Metric::Errors && !s.met_by(self.error_ratio))
            .map(|s| s.margin(self.error_ratio))
            .collect::<Vec<f64>>();
        if !errors_missed.is_empty() {
            return TrialVerdict::Fail { narrow: errors_missed.iter().all(|m| *m < NARROW) };
        }
        // Open-loop overflow: requests due with every connection busy. If the server answered
        // within every latency bound, the connections were too few for the rate (Little's law),
        // the client's limit; if it did not, its slowness is the failure.
        if self.overflow_share > OVERFLOW_SHARE {
            let server_fast = goal.iter().all(|s| match s.metric {
                Metric::Latency { q, .. } => {
                    s.met_by(self.value(Metric::Latency { of: Latency::Service, q }))
                }
                _ => true,
            });
            if server_fast {
                return TrialVerdict::Invalid;
            }
        }
        let misses: Vec<f64> = goal
            .iter()
            .filter(|s| !s.met_by(self.value(s.metric)))
            .map(|s| s.margin(self.value(s.metric)))
            .collect();
        match misses.is_empty() {
            true => TrialVerdict::Pass,
            false => TrialVerdict::Fail { narrow: misses.iter().all(|m| *m < NARROW) },
        }
    }
}

/// Latency statistic `id` of the successful answers only: errors answered fast (a 503 from an
/// overloaded service) would otherwise make its latency look good. Every answer's, less the
/// errors': from the schedule, their own statistic; service time, the 4xx, 5xx and other
/// status classes'. A result without them (another tool's) is taken whole.
fn successful(result: &RunResult, id: StatId) -> Statistic {
    let stats = &result.global.stats;
    let all = stats.get(id);
    let errors = match id {
        StatId::ScheduledToResponse => stats.get(StatId::ScheduledToErrorResponse).clone(),
        _ => {
            let mut e = stats.get(StatId::Latency4xx).clone();
            e.merge(stats.get(StatId::Latency5xx));
            e.merge(stats.get(StatId::LatencyXxx));
            e
        }
    };
    all.without(&errors).unwrap_or_else(|| all.clone())
}

/// The lateness budget the run was given (`max_lateness`), zero without one.
fn lateness_budget(result: &RunResult) -> Duration {
    let budget = result.options.get("max_lateness").and_then(serde_json::Value::as_str);
    budget.and_then(|b| shrike_stats::duration::parse_duration(b).ok()).unwrap_or_default()
}
