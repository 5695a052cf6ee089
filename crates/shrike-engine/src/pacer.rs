//! Pacers decide when each request is *scheduled* to start, as an offset from the run start.
//!
//! The schedule is a pure function of the release number, which is what makes the engine's
//! coordinated-omission-free latency honest: a request's scheduled time never moves because the
//! previous one was late. If the worker falls behind (a slow server in closed loop, a descheduled
//! thread), the due times are already in the past and requests release back to back until the
//! schedule is caught up ("linear with catch-up", like Nighthawk's linear rate limiter and wrk2).

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

/// The linear pacer: release `i` is due at `phase + floor(i / burst) * burst / rate (+ jitter)`.
#[derive(Clone, Debug)]
pub struct Pacer {
    interval_ns: f64,
    burst: u64,
    phase_ns: f64,
    jitter_ns: u64,
    released: u64,
    rng: XorShift,
}

impl Pacer {
    /// `phase` in `[0, 1)` shifts this worker's releases by that fraction of a burst period, so
    /// N workers at R rps each interleave into one even stream at N×R.
    pub fn linear(rate: Rate, burst: u32, jitter: Duration, phase: f64, seed: u64) -> Pacer {
        let burst = u64::from(burst.max(1));
        let interval_ns = 1e9 / rate.per_second();
        Pacer {
            interval_ns,
            burst,
            phase_ns: phase.clamp(0.0, 1.0) * interval_ns * burst as f64,
            jitter_ns: u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX),
            released: 0,
            rng: XorShift::new(seed),
        }
    }

    /// The offset of the next release from the run start. Advances the pacer.
    pub fn next_offset(&mut self) -> Duration {
        let group = self.released / self.burst;
        self.released += 1;
        let base = self.phase_ns + (group * self.burst) as f64 * self.interval_ns;
        let jitter = if self.jitter_ns == 0 { 0 } else { self.rng.next() % (self.jitter_ns + 1) };
        Duration::from_nanos(base as u64 + jitter)
    }

    /// How many releases fall strictly before `horizon` (ignoring jitter): the planned count.
    pub fn planned_before(&self, horizon: Duration) -> u64 {
        let h = horizon.as_nanos() as f64 - self.phase_ns;
        if h <= 0.0 {
            return 0;
        }
        let period = self.interval_ns * self.burst as f64;
        let groups = (h / period).ceil() as u64;
        groups * self.burst
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
mod tests {
    use super::*;

    fn offsets(p: &mut Pacer, n: usize) -> Vec<u64> {
        (0..n).map(|_| p.next_offset().as_nanos() as u64).collect()
    }

    #[test]
    fn linear_spacing() {
        let mut p = Pacer::linear(Rate::try_new(1000.0).expect("rate"), 1, Duration::ZERO, 0.0, 1);
        assert_eq!(offsets(&mut p, 4), vec![0, 1_000_000, 2_000_000, 3_000_000]);
    }

    #[test]
    fn bursts_release_in_groups() {
        let mut p = Pacer::linear(Rate::try_new(100.0).expect("rate"), 3, Duration::ZERO, 0.0, 1);
        // 3 requests every 30 ms keeps the average at 100 rps.
        assert_eq!(
            offsets(&mut p, 7),
            vec![0, 0, 0, 30_000_000, 30_000_000, 30_000_000, 60_000_000]
        );
    }

    #[test]
    fn phase_interleaves_workers() {
        let r = Rate::try_new(100.0).expect("rate");
        let mut a = Pacer::linear(r, 1, Duration::ZERO, 0.0, 1);
        let mut b = Pacer::linear(r, 1, Duration::ZERO, 0.5, 1);
        assert_eq!(offsets(&mut a, 2), vec![0, 10_000_000]);
        assert_eq!(offsets(&mut b, 2), vec![5_000_000, 15_000_000]);
    }

    #[test]
    fn jitter_stays_in_bounds_and_varies() {
        let r = Rate::try_new(1000.0).expect("rate");
        let mut p = Pacer::linear(r, 1, Duration::from_micros(100), 0.0, 42);
        let v = offsets(&mut p, 1000);
        let mut distinct = std::collections::HashSet::new();
        for (i, o) in v.iter().enumerate() {
            let base = i as u64 * 1_000_000;
            assert!(*o >= base && *o <= base + 100_000, "release {i} at {o}");
            distinct.insert(o - base);
        }
        assert!(distinct.len() > 100);
    }

    #[test]
    fn planned_count_matches_rate_times_duration() {
        let p = Pacer::linear(Rate::try_new(250.0).expect("rate"), 1, Duration::ZERO, 0.0, 1);
        assert_eq!(p.planned_before(Duration::from_secs(2)), 500);
        let p = Pacer::linear(Rate::try_new(0.5).expect("rate"), 1, Duration::ZERO, 0.0, 1);
        assert_eq!(p.planned_before(Duration::from_secs(3)), 2);
    }

    #[test]
    fn rate_validation() {
        assert!(Rate::try_new(0.0).is_none());
        assert!(Rate::try_new(-1.0).is_none());
        assert!(Rate::try_new(f64::NAN).is_none());
        assert!(Rate::try_new(f64::INFINITY).is_none());
        assert!(Rate::try_new(0.25).is_some());
    }
}
