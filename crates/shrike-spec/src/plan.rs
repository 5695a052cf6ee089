//! Rate plans: how the per-worker release rate evolves over a run.
//!
//! A [`RatePlan`] is a piecewise-linear rate over time: a constant rate, a linear ramp, or
//! k6-style stages. Its cumulative planned count `N(t) = ∫ rate` is what the engine's pacer
//! releases against (release `k` is due when `N(t)` reaches `k`), and what reports compare the
//! achieved rate with. Both read it from [`RatePlan::segments`], so the integral exists once.

use std::fmt::Write as _;
use std::time::Duration;

use shrike_stats::duration::parse_duration;

/// A validated request rate in requests per second (finite and > 0; fractional is fine).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate(f64);

impl Rate {
    pub fn try_new(per_second: f64) -> Option<Rate> {
        (per_second.is_finite() && per_second > 0.0).then_some(Rate(per_second))
    }
    pub fn per_second(self) -> f64 {
        self.0
    }
}

/// One stage: the rate moves linearly from the previous stage's target (0 before the first
/// stage) to `target` over `duration`. A zero duration is a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    /// Requests per second at the end of the stage (per worker, like `--rps`); may be 0.
    pub target: f64,
}

/// How the release rate evolves over the run (per worker).
#[derive(Clone, Debug, PartialEq)]
pub enum RatePlan {
    /// The same rate for the whole run.
    Constant(Rate),
    /// Piecewise-linear stages; after the last stage the rate holds at its target.
    Stages(Vec<Stage>),
    /// No schedule: closed loop as fast as the connections allow. A request is released the
    /// moment a connection can take it, so latency is pure service time and there is no
    /// unreachable schedule to fall behind.
    Unpaced,
}

/// Why a `--stages` list is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StagesError {
    #[error("stage {0:?}: expected DURATION:RATE, e.g. 10s:1000")]
    Syntax(String),
    #[error("stage {stage:?}: {reason}")]
    Duration { stage: String, reason: shrike_stats::duration::DurationError },
    #[error("stage {0:?}: the rate must be a number >= 0")]
    Rate(String),
    #[error("expected at least one DURATION:RATE stage")]
    Empty,
    #[error("every stage has rate 0: nothing would be sent")]
    AllZero,
    #[error("the stages last 0s in total")]
    ZeroLength,
}

impl RatePlan {
    /// The same plan at `factor` times the rate (a shard's share: `1/N`).
    pub fn scaled(self, factor: f64) -> RatePlan {
        match self {
            RatePlan::Constant(r) => {
                RatePlan::Constant(Rate::try_new(r.per_second() * factor).unwrap_or(r))
            }
            RatePlan::Stages(stages) => RatePlan::Stages(
                stages.into_iter().map(|s| Stage { target: s.target * factor, ..s }).collect(),
            ),
            RatePlan::Unpaced => RatePlan::Unpaced,
        }
    }

    /// A linear ramp from 0 to `rate` over `ramp`, then `rate`.
    pub fn ramp(rate: Rate, ramp: Duration) -> RatePlan {
        RatePlan::Stages(vec![
            Stage { duration: ramp, target: rate.per_second() },
            Stage { duration: Duration::MAX, target: rate.per_second() },
        ])
    }

    /// Parses `--stages`: `DURATION:RATE[,DURATION:RATE…]`, e.g. `10s:1000,30s:5000,10s:0`.
    pub fn parse_stages(s: &str) -> Result<Vec<Stage>, StagesError> {
        let mut stages = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (d, r) = part.rsplit_once(':').ok_or_else(|| StagesError::Syntax(part.into()))?;
            let duration = parse_duration(d.trim())
                .map_err(|reason| StagesError::Duration { stage: part.into(), reason })?;
            let target: f64 = r.trim().parse().map_err(|_| StagesError::Rate(part.into()))?;
            if !(target.is_finite() && target >= 0.0) {
                return Err(StagesError::Rate(part.into()));
            }
            stages.push(Stage { duration, target });
        }
        Self::check_stages(&stages)?;
        Ok(stages)
    }

    /// Whether `stages` make a plan: at least one, some rate above 0, some time in all, and no
    /// rate below 0 or not finite.
    pub fn check_stages(stages: &[Stage]) -> Result<(), StagesError> {
        if let Some(s) = stages.iter().find(|s| !(s.target.is_finite() && s.target >= 0.0)) {
            return Err(StagesError::Rate(format!("{}:{}", format_short(s.duration), s.target)));
        }
        if stages.is_empty() {
            return Err(StagesError::Empty);
        }
        if stages.iter().all(|s| s.target == 0.0) {
            return Err(StagesError::AllZero);
        }
        if Self::stages_duration(stages).is_zero() {
            return Err(StagesError::ZeroLength);
        }
        Ok(())
    }

    /// The stages as `--stages` takes them, in the shortest exact units (`1s:100,500ms:200`).
    pub fn format_stages(stages: &[Stage]) -> String {
        let mut out = String::new();
        for (i, s) in stages.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{}", format_short(s.duration), s.target);
        }
        out
    }

    /// The total length of a staged plan (ramps with a hold are unbounded).
    pub fn stages_duration(stages: &[Stage]) -> Duration {
        stages.iter().fold(Duration::ZERO, |a, s| a.saturating_add(s.duration))
    }

    /// The rate at the start of the plan and its peak (what a log line reports).
    pub fn peak(&self) -> Option<f64> {
        match self {
            RatePlan::Constant(r) => Some(r.per_second()),
            RatePlan::Stages(s) => s.iter().map(|s| s.target).reduce(f64::max),
            RatePlan::Unpaced => None,
        }
    }

    /// The plan as linear pieces in nanoseconds, the last one unbounded (empty when unpaced).
    pub fn segments(&self) -> Vec<Segment> {
        let mut segments = Vec::new();
        match self {
            RatePlan::Constant(r) => segments.push(Segment {
                start: 0.0,
                len: f64::INFINITY,
                r0: r.per_second() / 1e9,
                a: 0.0,
                n0: 0.0,
            }),
            RatePlan::Stages(stages) => {
                let (mut start, mut n0, mut prev) = (0.0f64, 0.0f64, 0.0f64);
                for s in stages {
                    let len = if s.duration == Duration::MAX {
                        f64::INFINITY
                    } else {
                        s.duration.as_nanos() as f64
                    };
                    let (r0, r1) = (prev / 1e9, s.target / 1e9);
                    let a = if len.is_finite() && len > 0.0 { (r1 - r0) / len } else { 0.0 };
                    // A zero-length stage is a step: it plans nothing and moves the rate.
                    if len > 0.0 {
                        let seg = Segment { start, len, r0, a, n0 };
                        n0 += seg.count();
                        start += len;
                        segments.push(seg);
                    }
                    prev = s.target;
                }
                // After the last stage the rate holds.
                if start.is_finite() {
                    segments.push(Segment {
                        start,
                        len: f64::INFINITY,
                        r0: prev / 1e9,
                        a: 0.0,
                        n0,
                    });
                }
            }
            RatePlan::Unpaced => {}
        }
        segments
    }

    /// Requests the plan schedules in its first `t` (per worker, before bursts and phase).
    pub fn planned_count(&self, t: Duration) -> f64 {
        count_at(&self.segments(), t.as_nanos() as f64)
    }

    /// The mean planned rate over the first `t` (per worker); `None` when unpaced or `t` is 0.
    pub fn mean_rate(&self, t: Duration) -> Option<f64> {
        if matches!(self, RatePlan::Unpaced) || t.is_zero() {
            return None;
        }
        Some(self.planned_count(t) / t.as_secs_f64())
    }
}

/// How many releases a worker's pacer makes strictly before `t` (ignoring jitter): release `k`
/// is due when the plan's count reaches `burst · (⌊k / burst⌋ + phase)`, so releases come in
/// whole bursts, the first at `phase` of a burst period. The pacer and the reports that compare
/// what was sent with what was planned count the same way.
pub fn releases_before(segments: &[Segment], t: Duration, burst: u64, phase: f64) -> u64 {
    let burst = burst.max(1);
    let n = count_at(segments, t.as_nanos() as f64);
    let groups = (n / burst as f64 - phase).ceil();
    if groups <= 0.0 {
        0
    } else {
        groups as u64 * burst
    }
}

/// The cumulative count of `segments` at `t` ns.
pub fn count_at(segments: &[Segment], t: f64) -> f64 {
    for seg in segments {
        if t < seg.start + seg.len {
            let x = (t - seg.start).max(0.0);
            return seg.n0 + seg.r0 * x + 0.5 * seg.a * x * x;
        }
    }
    segments.last().map_or(0.0, |s| s.n0 + s.count())
}

/// One linear piece of the plan in nanoseconds: rate `r0 + a·t` (per ns) from `start`, with
/// `n0` requests planned before it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    pub start: f64,
    pub len: f64,
    pub r0: f64,
    pub a: f64,
    pub n0: f64,
}

impl Segment {
    /// Requests planned within the segment (infinite for the unbounded last one).
    pub fn count(&self) -> f64 {
        self.r0 * self.len + 0.5 * self.a * self.len * self.len
    }
    /// Local time at which `x` requests of this segment have been planned: the root of
    /// `r0·t + a·t²/2 = x`, in the form that stays exact for tiny `a` and for `r0 = 0`.
    pub fn time_of(&self, x: f64) -> f64 {
        let d = (self.r0 * self.r0 + 2.0 * self.a * x).max(0.0);
        let den = self.r0 + d.sqrt();
        if den <= 0.0 {
            0.0
        } else {
            2.0 * x / den
        }
    }
}

/// A duration in the shortest unit that states it exactly: `1s`, `500ms`, `250us`, `7ns`.
pub fn format_short(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    for (unit, per) in [("h", 3_600_000_000_000u128), ("m", 60_000_000_000), ("s", 1_000_000_000)] {
        if ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_in_short_units() {
        let s = RatePlan::parse_stages("1s:100,0s:200,500ms:200,0s:0").expect("stages");
        assert_eq!(RatePlan::format_stages(&s), "1s:100,0s:200,500ms:200,0s:0");
        let s = RatePlan::parse_stages("1.5:10").expect("stages");
        assert_eq!(RatePlan::format_stages(&s), "1500ms:10");
        assert_eq!(RatePlan::parse_stages("0s:0,1s:0"), Err(StagesError::AllZero));
        assert_eq!(RatePlan::parse_stages("0s:5"), Err(StagesError::ZeroLength));
    }

    #[test]
    fn mean_rate_of_a_staged_plan() {
        // 0→1000 over 10 s, 1000→5000 over 30 s, 5000→0 over 10 s: 120000 planned in 50 s.
        let s = RatePlan::parse_stages("10s:1000,30s:5000,10s:0").expect("stages");
        let plan = RatePlan::Stages(s);
        let mean = plan.mean_rate(Duration::from_secs(50)).expect("paced");
        assert!((mean - 2400.0).abs() < 1e-6, "{mean}");
        // Up to 10 s only the ramp counts: 5000 planned.
        assert!((plan.planned_count(Duration::from_secs(10)) - 5000.0).abs() < 1e-6);
        assert_eq!(RatePlan::Unpaced.mean_rate(Duration::from_secs(1)), None);
    }

    #[test]
    fn short_durations() {
        assert_eq!(format_short(Duration::from_secs(90)), "90s");
        assert_eq!(format_short(Duration::from_secs(120)), "2m");
        assert_eq!(format_short(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_short(Duration::from_micros(10)), "10us");
        assert_eq!(format_short(Duration::ZERO), "0s");
    }
}
