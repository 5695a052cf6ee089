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

use shrike_spec::plan::{count_at, releases_before, Segment};

mod handle;
pub use handle::RateHandle;
pub(crate) use handle::{scaled_limit, Follower};
pub use shrike_spec::plan::{Rate, RatePlan, Stage};

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
///
/// Jitter moves a release (a whole burst: its requests stay together) later by a uniform
/// draw from `[0, J)`, but never to or past the next planned release, nor past the run's end:
/// releases stay in the order of their jittered times, so none waits behind one that drew a
/// later time (which would charge that wait to the request's from-schedule latency), and every
/// planned release is sent within the run. Where the spacing is shorter than `J`, a release is
/// jittered within its own slot.
#[derive(Clone, Debug)]
pub struct Pacer {
    segments: Vec<Segment>,
    unpaced: bool,
    burst: u64,
    phase: f64,
    jitter_ns: u64,
    /// The current group's jitter (ns), drawn at its first release.
    group_jitter: u64,
    /// Where the run ends (ns from the start), if it has a duration: jitter stops short of it.
    horizon: Option<f64>,
    /// The last release's jittered time (ns): a rescale never releases before it.
    last_at: u64,
    released: u64,
    /// When the last release was planned (ns, before jitter): a rescale starts there.
    last: f64,
    /// Index of the segment the last release fell in: releases only move forward.
    cursor: usize,
    rng: XorShift,
}

impl Pacer {
    /// `phase` in `[0, 1)` shifts this worker's releases by that fraction of a burst period, so
    /// N workers at R rps each interleave into one even stream at N×R.
    pub fn new(plan: &RatePlan, burst: u32, jitter: Duration, phase: f64, seed: u64) -> Pacer {
        let segments = plan.segments();
        Pacer {
            segments,
            unpaced: matches!(plan, RatePlan::Unpaced),
            burst: u64::from(burst.max(1)),
            phase: phase.clamp(0.0, 1.0),
            jitter_ns: u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX),
            group_jitter: 0,
            horizon: None,
            last_at: 0,
            released: 0,
            last: 0.0,
            cursor: 0,
            rng: XorShift::new(seed),
        }
    }

    /// Jitter never takes a release to or past `duration` from the start (the run's end).
    pub fn ending_at(mut self, duration: Option<Duration>) -> Pacer {
        self.horizon = duration.map(|d| d.as_nanos() as f64);
        self
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
        if self.jitter_ns > 0 && self.released.is_multiple_of(self.burst) {
            self.group_jitter = self.draw_jitter(t, target);
        }
        self.released += 1;
        self.last = t;
        // Rounded, not truncated: 1e9 / 0.25 computes as 3999999999.99…
        let at = (t.round() as u64).saturating_add(self.group_jitter).max(self.last_at);
        self.last_at = at;
        Release::At(Duration::from_nanos(at))
    }

    /// A group planned at `t` (count `target`) is jittered by a uniform draw below `J`, the
    /// room before the next group's planned time, and the room before the run's end.
    fn draw_jitter(&mut self, t: f64, target: f64) -> u64 {
        // The cursor only moves forward, and the next group's count is where it goes next.
        let next = self.time_of_count(target + self.burst as f64);
        let room =
            [next, self.horizon].into_iter().flatten().map(|end| end - t).fold(f64::MAX, f64::min);
        let span =
            if room >= self.jitter_ns as f64 { self.jitter_ns } else { room.max(0.0) as u64 };
        match span {
            0 => 0,
            span => self.rng.next() % span,
        }
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

    /// Multiplies the plan's rate by `factor` from the last release on (the start, before any):
    /// what was planned up to then stays, so the releases already made keep their times and
    /// the next comes at the new rate.
    pub fn rescale(&mut self, factor: f64) {
        if self.unpaced || !(factor.is_finite() && factor > 0.0) {
            return;
        }
        let from = self.last;
        let mut out = Vec::with_capacity(self.segments.len() + 1);
        let mut n0 = 0.0;
        for seg in &self.segments {
            let end = seg.start + seg.len;
            if end <= from {
                out.push(*seg);
                n0 = seg.n0 + seg.count();
                continue;
            }
            // The part before `from` as it was, the rest scaled.
            let (start, r0) = if seg.start < from {
                let x = from - seg.start;
                let head = Segment { len: x, ..*seg };
                out.push(head);
                n0 = count_at(&self.segments, from);
                (from, seg.r0 + seg.a * x)
            } else {
                (seg.start, seg.r0)
            };
            let tail = Segment { start, len: end - start, r0: r0 * factor, a: seg.a * factor, n0 };
            n0 += if tail.len.is_finite() { tail.count() } else { 0.0 };
            out.push(tail);
        }
        self.segments = out;
        self.cursor = 0;
    }

    /// When the next release is planned (before jitter), without making it: `None` when
    /// unpaced or when the plan makes no more.
    pub fn next_planned(&self) -> Option<Duration> {
        if self.unpaced {
            return None;
        }
        let mut ahead = self.clone();
        let target = ahead.burst as f64 * ((ahead.released / ahead.burst) as f64 + ahead.phase);
        ahead.time_of_count(target).map(|t| Duration::from_nanos(t.round() as u64))
    }

    /// How many releases fall strictly before `horizon` (ignoring jitter): the planned count.
    pub fn planned_before(&self, horizon: Duration) -> u64 {
        if self.unpaced {
            return 0;
        }
        releases_before(&self.segments, horizon, self.burst, self.phase)
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
