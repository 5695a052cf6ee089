//! Pacers decide when each request is *scheduled* to start, as an offset from the run start.
//!
//! The schedule is a pure function of the release number, which is what makes the engine's
//! coordinated-omission-free latency honest: a request's scheduled time never moves because the
//! previous one was late. If the worker falls behind (a slow server in closed loop, a descheduled
//! thread), the due times are already in the past and requests release back to back until the
//! schedule is caught up ("linear with catch-up", like Nighthawk's linear rate limiter and wrk2).
//!
//! A [`RatePlan`] is a piecewise-linear rate over time: a constant rate, a linear ramp, or k6-style
//! stages. Release `k` is due when the plan's cumulative request count `N(t) = ∫ rate` reaches
//! `k` (shifted by the worker's phase and grouped into bursts), so every stage gets exactly its
//! planned count however fast or slow, fractional, or below 1 rps the rates are.

use std::time::Duration;

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

impl RatePlan {
    /// A linear ramp from 0 to `rate` over `ramp`, then `rate`.
    pub fn ramp(rate: Rate, ramp: Duration) -> RatePlan {
        RatePlan::Stages(vec![
            Stage { duration: ramp, target: rate.per_second() },
            Stage { duration: Duration::MAX, target: rate.per_second() },
        ])
    }

    /// Parses `--stages`: `DURATION:RATE[,DURATION:RATE…]`, e.g. `10s:1000,30s:5000,10s:0`.
    pub fn parse_stages(s: &str) -> Result<Vec<Stage>, String> {
        let mut stages = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (d, r) = part
                .rsplit_once(':')
                .ok_or_else(|| format!("stage {part:?}: expected DURATION:RATE, e.g. 10s:1000"))?;
            let duration = shrike_stats::duration::parse_duration(d.trim())
                .map_err(|e| format!("stage {part:?}: {e}"))?;
            let target: f64 =
                r.trim().parse().map_err(|_| format!("stage {part:?}: {r:?} is not a rate"))?;
            if !(target.is_finite() && target >= 0.0) {
                return Err(format!("stage {part:?}: the rate must be a number >= 0"));
            }
            stages.push(Stage { duration, target });
        }
        if stages.is_empty() {
            return Err("expected at least one DURATION:RATE stage".into());
        }
        if stages.iter().all(|s| s.target == 0.0) {
            return Err("every stage has rate 0: nothing would be sent".into());
        }
        Ok(stages)
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
}

/// One linear piece of the plan in nanoseconds: rate `r0 + a·t` (per ns) from `start`, with
/// `n0` requests planned before it.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: f64,
    len: f64,
    r0: f64,
    a: f64,
    n0: f64,
}

impl Segment {
    fn count(&self) -> f64 {
        self.r0 * self.len + 0.5 * self.a * self.len * self.len
    }
    /// Local time at which `x` requests of this segment have been planned: the root of
    /// `r0·t + a·t²/2 = x`, in the form that stays exact for tiny `a` and for `r0 = 0`.
    fn time_of(&self, x: f64) -> f64 {
        let d = (self.r0 * self.r0 + 2.0 * self.a * x).max(0.0);
        let den = self.r0 + d.sqrt();
        if den <= 0.0 {
            0.0
        } else {
            2.0 * x / den
        }
    }
}

/// What the pacer says about the next release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Due at this offset from the run start.
    At(Duration),
    /// Due as soon as a connection can take it (unpaced plans).
    Now,
    /// The plan sends nothing more (it ended at rate 0).
    Never,
}

/// The pacer: release `k` of a worker is due when `N(t) = burst · (⌊k / burst⌋ + phase)`,
/// plus uniform jitter.
#[derive(Clone, Debug)]
pub struct Pacer {
    segments: Vec<Segment>,
    unpaced: bool,
    burst: u64,
    phase: f64,
    jitter_ns: u64,
    released: u64,
    /// Index of the segment the last release fell in: releases only move forward.
    cursor: usize,
    rng: XorShift,
}

impl Pacer {
    /// `phase` in `[0, 1)` shifts this worker's releases by that fraction of a burst period, so
    /// N workers at R rps each interleave into one even stream at N×R.
    pub fn new(plan: &RatePlan, burst: u32, jitter: Duration, phase: f64, seed: u64) -> Pacer {
        let mut segments = Vec::new();
        match plan {
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
        Pacer {
            segments,
            unpaced: matches!(plan, RatePlan::Unpaced),
            burst: u64::from(burst.max(1)),
            phase: phase.clamp(0.0, 1.0),
            jitter_ns: u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX),
            released: 0,
            cursor: 0,
            rng: XorShift::new(seed),
        }
    }

    /// A constant-rate pacer.
    pub fn linear(rate: Rate, burst: u32, jitter: Duration, phase: f64, seed: u64) -> Pacer {
        Pacer::new(&RatePlan::Constant(rate), burst, jitter, phase, seed)
    }

    /// The next release. Advances the pacer.
    pub fn next_release(&mut self) -> Release {
        if self.unpaced {
            return Release::Now;
        }
        let group = self.released / self.burst;
        let target = self.burst as f64 * (group as f64 + self.phase);
        let Some(t) = self.time_of_count(target) else {
            return Release::Never;
        };
        self.released += 1;
        let jitter = if self.jitter_ns == 0 { 0 } else { self.rng.next() % (self.jitter_ns + 1) };
        // Rounded, not truncated: 1e9 / 0.25 computes as 3999999999.99…
        Release::At(Duration::from_nanos((t.round() as u64).saturating_add(jitter)))
    }

    /// When the plan's cumulative count reaches `c` (ns from the start), if it ever does.
    fn time_of_count(&mut self, c: f64) -> Option<f64> {
        while let Some(seg) = self.segments.get(self.cursor) {
            let end = if seg.len.is_finite() { seg.n0 + seg.count() } else { f64::INFINITY };
            if c < end {
                if seg.r0 <= 0.0 && seg.a <= 0.0 {
                    return None;
                }
                return Some(seg.start + seg.time_of(c - seg.n0));
            }
            self.cursor += 1;
        }
        None
    }

    /// The plan's cumulative count at `t` ns.
    fn count_at(&self, t: f64) -> f64 {
        for seg in &self.segments {
            if t < seg.start + seg.len {
                let x = (t - seg.start).max(0.0);
                return seg.n0 + seg.r0 * x + 0.5 * seg.a * x * x;
            }
        }
        self.segments.last().map_or(0.0, |s| s.n0 + s.count())
    }

    /// How many releases fall strictly before `horizon` (ignoring jitter): the planned count.
    pub fn planned_before(&self, horizon: Duration) -> u64 {
        if self.unpaced {
            return 0;
        }
        let n = self.count_at(horizon.as_nanos() as f64);
        let groups = (n / self.burst as f64 - self.phase).ceil();
        if groups <= 0.0 {
            0
        } else {
            groups as u64 * self.burst
        }
    }
}

/// xorshift64*: a tiny, fast, seedable generator for jitter. Statistical quality is plenty for
/// spreading release times; no need for a crypto RNG dependency on the hot path.
#[derive(Clone, Debug)]
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests;
