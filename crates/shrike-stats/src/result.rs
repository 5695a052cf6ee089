//! What a run produced: one [`WorkerResult`] per worker and their exact merge.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::{Counters, Percentile, StatId, StatKind, Statistic, Stats, StatusCodes};

/// A statistic whose id this build has no [`StatId`] for: another tool's (Nighthawk's
/// formatter test writes `foo_latency`) or a newer Shrike's. Kept as read so a stored result
/// loses nothing.
#[derive(Clone, Debug)]
pub struct ForeignStatistic {
    pub id: String,
    pub kind: StatKind,
    pub stat: Statistic,
}

/// The result of one worker (or the merge of several, named `global`).
#[derive(Clone, Debug)]
pub struct WorkerResult {
    pub name: String,
    pub stats: Stats,
    pub counters: Counters,
    /// Responses per exact status code.
    pub status_codes: StatusCodes,
    pub execution_start: SystemTime,
    pub execution_duration: Duration,
    /// From the start to the moment the last request was released (the deadline, the stop, or
    /// the spent request budget): the window the achieved rate is measured over. The execution
    /// window also holds the drain, in which nothing is sent. `None` in results that do not
    /// record it (Nighthawk's, older Shrike's): readers fall back to the execution window.
    pub sending_duration: Option<Duration>,
    /// Statistics with ids this build does not know, in the order read; empty for a run.
    pub foreign: Vec<ForeignStatistic>,
}

impl WorkerResult {
    pub fn new(name: impl Into<String>, start: SystemTime) -> Self {
        WorkerResult {
            name: name.into(),
            stats: Stats::new(),
            counters: Counters::new(),
            status_codes: StatusCodes::new(),
            execution_start: start,
            execution_duration: Duration::ZERO,
            sending_duration: None,
            foreign: Vec::new(),
        }
    }

    /// Every statistic by id: the known ones in canonical order, then the foreign ones as
    /// read. What formats that print every statistic by name iterate.
    pub fn all_stats(&self) -> impl Iterator<Item = (&str, StatKind, &Statistic)> {
        let known = self.stats.iter().map(|(id, s)| (id.id(), id.kind(), s));
        known.chain(self.foreign.iter().map(|f| (f.id.as_str(), f.kind, &f.stat)))
    }

    /// The first statistic (by id) with samples but no histogram, known or foreign: what an
    /// exact merge cannot take.
    pub fn without_histogram(&self) -> Option<String> {
        if let Some(id) = self.stats.without_histogram() {
            return Some(id.id().to_string());
        }
        let f = self.foreign.iter().find(|f| f.stat.count() > 0 && !f.stat.has_histogram());
        f.map(|f| f.id.clone())
    }

    /// Exact merge: histograms and counters add; the execution window spans from the earliest
    /// start to the latest end.
    pub fn merge_all<'a>(
        name: impl Into<String>,
        parts: impl IntoIterator<Item = &'a WorkerResult>,
    ) -> WorkerResult {
        let mut out: Option<WorkerResult> = None;
        let mut end = SystemTime::UNIX_EPOCH;
        // The merged sending window ends with the last part's; unknown if any part's is.
        let mut sending_end = Some(SystemTime::UNIX_EPOCH);
        for p in parts {
            end = end.max(p.execution_start + p.execution_duration);
            sending_end =
                sending_end.zip(p.sending_duration).map(|(e, d)| e.max(p.execution_start + d));
            match out.as_mut() {
                None => out = Some(p.clone()),
                Some(o) => {
                    o.stats.merge(&p.stats);
                    o.counters.merge(&p.counters);
                    o.status_codes.merge(&p.status_codes);
                    for f in &p.foreign {
                        match o.foreign.iter_mut().find(|have| have.id == f.id) {
                            Some(have) => have.stat.merge(&f.stat),
                            None => o.foreign.push(f.clone()),
                        }
                    }
                    o.execution_start = o.execution_start.min(p.execution_start);
                }
            }
        }
        let mut out = out.unwrap_or_else(|| WorkerResult::new("", SystemTime::now()));
        out.name = name.into();
        out.execution_duration = end.duration_since(out.execution_start).unwrap_or_default();
        out.sending_duration =
            sending_end.map(|e| e.duration_since(out.execution_start).unwrap_or_default());
        out
    }

    /// The window the achieved rate is measured over: the sending window where recorded, else
    /// the execution window.
    pub fn rate_window(&self) -> Duration {
        self.sending_duration.unwrap_or(self.execution_duration)
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Termination {
    /// The configured duration elapsed (or the request budget was spent).
    Completed,
    /// A termination predicate fired: a normal, successful end.
    TerminationPredicate(String),
    /// A failure predicate fired: the run failed (exit 1).
    FailurePredicate(String),
    /// The user interrupted the run (SIGINT/SIGTERM).
    Interrupted,
}

impl Termination {
    pub fn is_failure(&self) -> bool {
        matches!(self, Termination::FailurePredicate(_))
    }
    pub fn describe(&self) -> String {
        match self {
            Termination::Completed => "completed".into(),
            Termination::TerminationPredicate(p) => format!("termination predicate {p} fired"),
            Termination::FailurePredicate(p) => format!("failure predicate {p} fired"),
            Termination::Interrupted => "interrupted by signal".into(),
        }
    }
}

/// A whole run: options as given, per-worker results and their exact merge.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub timestamp: SystemTime,
    /// Every option as given, in Nighthawk's option names (the JSON `options` object).
    pub options: serde_json::Value,
    pub workers: Vec<WorkerResult>,
    pub global: WorkerResult,
    pub termination: Termination,
    /// The run's time series (`--stats-interval`), oldest first; empty when not sampled.
    pub intervals: Vec<Interval>,
    /// Distinct error messages seen by any worker, with how often each occurred (bounded per
    /// worker, so a misbehaving server cannot grow it).
    pub errors: BTreeMap<String, u64>,
    /// A replay's canary diff: how its answers differed from the captured ones, grouped by
    /// what changed (`GET /x: 200 → 404`), with counts (bounded as `errors` are).
    pub differences: BTreeMap<String, u64>,
    /// Whether it succeeded, failed or was interrupted ([`RunResult::judge`] decides it where
    /// the result is made; until then, what its termination alone says).
    pub verdict: crate::Verdict,
}

impl RunResult {
    pub fn new(
        options: serde_json::Value,
        workers: Vec<WorkerResult>,
        termination: Termination,
    ) -> Self {
        let global = WorkerResult::merge_all("global", &workers);
        let mut r = RunResult {
            timestamp: SystemTime::now(),
            options,
            workers,
            global,
            termination,
            intervals: Vec::new(),
            errors: BTreeMap::new(),
            differences: BTreeMap::new(),
            verdict: crate::Verdict::Succeeded,
        };
        r.judge(crate::Unanswered::Tolerated);
        r
    }
}

/// What happened during one interval of a run, summed exactly over workers: the series behind
/// periodic reports, live telemetry and the report's over-time plots.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Start of the interval, as an offset from the run's (global) execution start.
    pub start: Duration,
    pub duration: Duration,
    /// Counter increments during the interval (not running totals).
    pub counters: Counters,
    /// Latency statistics of the requests that completed during the interval.
    pub stats: Vec<IntervalStat>,
}

/// One statistic of an [`Interval`], kept small: a run of hours at 1 s intervals must not hold
/// thousands of full-range histograms (~270 KB each) in memory. The summary answers plots and
/// reports directly; the encoded histogram keeps the interval exact, so any window of
/// intervals can be re-aggregated without error.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalStat {
    pub id: StatId,
    pub count: u64,
    pub mean: f64,
    pub min: u64,
    pub max: u64,
    /// The values at [`IntervalStat::QUANTILES`].
    pub percentiles: Vec<Percentile>,
    /// The interval's histogram, HdrHistogram V2+deflate, base64 ([`Statistic::encode_histogram`]).
    pub histogram: String,
}

impl IntervalStat {
    /// The quantiles every interval summary carries.
    pub const QUANTILES: [f64; 6] = [0.5, 0.75, 0.9, 0.99, 0.999, 1.0];

    pub fn summarize(id: StatId, s: &Statistic) -> IntervalStat {
        IntervalStat {
            id,
            count: s.count(),
            mean: s.mean(),
            min: if s.count() == 0 { 0 } else { s.min() },
            max: s.max(),
            percentiles: Self::QUANTILES.iter().map(|&q| s.percentile(q)).collect(),
            histogram: s.encode_histogram(),
        }
    }

    /// The summary's value at quantile `q`, if `q` is one of [`IntervalStat::QUANTILES`].
    pub fn at(&self, q: f64) -> Option<u64> {
        self.percentiles.iter().find(|p| (p.quantile - q).abs() < 1e-9).map(|p| p.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Counter, StatId};

    #[test]
    fn merge_spans_window_and_sums() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let mut a = WorkerResult::new("worker_0", t0);
        a.execution_duration = Duration::from_secs(5);
        a.counters.add(Counter::Http2xx, 10);
        a.stats.record(StatId::RequestToResponse, 1000);
        let mut b = WorkerResult::new("worker_1", t0 + Duration::from_secs(1));
        b.execution_duration = Duration::from_secs(5);
        b.counters.add(Counter::Http2xx, 5);
        b.stats.record(StatId::RequestToResponse, 3000);
        a.status_codes.add(200, 9);
        a.status_codes.inc(503);
        b.status_codes.add(200, 5);
        let g = WorkerResult::merge_all("global", [&a, &b]);
        assert_eq!(g.name, "global");
        assert_eq!(g.execution_start, t0);
        assert_eq!(g.execution_duration, Duration::from_secs(6));
        assert_eq!(g.counters.get(Counter::Http2xx), 15);
        assert_eq!(g.stats.get(StatId::RequestToResponse).count(), 2);
        assert_eq!(g.stats.get(StatId::RequestToResponse).mean(), 2000.0);
        assert_eq!(g.status_codes.non_zero(), vec![(200, 14), (503, 1)]);
        assert_eq!(g.status_codes.total(), 15);
        // Neither part recorded its sending window: the merge cannot know it either.
        assert_eq!(g.sending_duration, None);
        assert_eq!(g.rate_window(), Duration::from_secs(6));
    }

    #[test]
    fn merged_sending_window_ends_with_the_last_sender() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let mut a = WorkerResult::new("worker_0", t0);
        a.execution_duration = Duration::from_secs(5);
        a.sending_duration = Some(Duration::from_secs(4));
        let mut b = WorkerResult::new("worker_1", t0 + Duration::from_secs(1));
        b.execution_duration = Duration::from_secs(5);
        b.sending_duration = Some(Duration::from_millis(4500));
        let g = WorkerResult::merge_all("global", [&a, &b]);
        assert_eq!(g.sending_duration, Some(Duration::from_millis(5500)));
        assert_eq!(g.rate_window(), Duration::from_millis(5500));
        b.sending_duration = None;
        assert_eq!(WorkerResult::merge_all("global", [&a, &b]).sending_duration, None);
    }

    #[test]
    fn interval_summary_matches_the_histogram() {
        let mut s = Statistic::new();
        for v in 1..=1000u64 {
            s.record(v * 1000);
        }
        let i = IntervalStat::summarize(StatId::RequestToResponse, &s);
        assert_eq!(i.count, 1000);
        assert_eq!(i.min, 1000);
        assert_eq!(i.max, 1_000_000);
        assert_eq!(i.at(0.5), Some(s.value_at_quantile(0.5)));
        assert_eq!(i.at(0.99), Some(s.value_at_quantile(0.99)));
        assert_eq!(i.at(0.3), None);
        let back = Statistic::decode_histogram(&i.histogram).expect("decodes");
        assert_eq!(back.len(), 1000);
        let empty = IntervalStat::summarize(StatId::RequestToResponse, &Statistic::new());
        assert_eq!((empty.count, empty.min, empty.max), (0, 0, 0));
    }
}
