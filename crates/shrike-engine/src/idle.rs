//! Waiting for the next release, per `--sequencer-idle-strategy`: the pacer's only blocking
//! point, so its policy decides both release precision and the CPU a worker burns while idle.

use std::cell::Cell;
use std::time::{Duration, Instant};

use shrike_timer::PreciseTimer;

use crate::config::IdleStrategy;

pub(crate) enum Idle {
    Spin,
    Poll(Hybrid),
    Sleep,
}

impl Idle {
    /// Must be called inside the worker's runtime (the timerfd registers with its reactor).
    pub fn new(strategy: IdleStrategy) -> Idle {
        match strategy {
            IdleStrategy::Spin => Idle::Spin,
            IdleStrategy::Poll => Idle::Poll(Hybrid::new()),
            IdleStrategy::Sleep => Idle::Sleep,
        }
    }

    /// Returns at or after `deadline`, or early once `stopping` is set.
    pub async fn until(&self, deadline: Instant, stopping: &Cell<bool>) {
        match self {
            Idle::Poll(hybrid) => hybrid.until(deadline, stopping).await,
            Idle::Sleep => tokio::time::sleep_until(deadline.into()).await,
            Idle::Spin => spin_until(deadline, stopping).await,
        }
    }
}

/// Yields on every turn so the worker's connections keep being served: tokio polls the I/O
/// driver between yields, so a spinning pacer still reads (and timestamps) responses promptly.
async fn spin_until(deadline: Instant, stopping: &Cell<bool>) {
    while Instant::now() < deadline && !stopping.get() {
        tokio::task::yield_now().await;
    }
}

/// The most a wake-up is armed ahead of its deadline. Past this the machine is overloaded
/// and spinning would only make it worse.
const MAX_AHEAD: Duration = Duration::from_micros(100);
/// How far one observation moves the estimate.
const STEP_NS: f64 = 500.0;
/// The share of wake-ups that should come before the deadline (and spin the rest).
const EARLY_SHARE: f64 = 0.2;

/// `poll`: block on a timerfd armed a little *ahead* of the deadline, by what the kernel
/// typically takes to deliver the wake-up, then spin the last stretch. On a VM a timerfd wake
/// arrives tens of µs after its expiry (the halted vCPU must be rescheduled); arming at the
/// expiry itself made that the release lateness. The lead is learnt per worker: a running
/// estimate of the `EARLY_SHARE` quantile of observed wake delays (stochastic quantile
/// tracking), so a fifth of wake-ups land early and spin a few µs, the rest land just after
/// the deadline. Nothing is ever released early: the last stretch waits on the clock.
pub(crate) struct Hybrid {
    timer: PreciseTimer,
    /// The current lead, ns.
    ahead_ns: Cell<f64>,
}

impl Hybrid {
    fn new() -> Hybrid {
        Hybrid { timer: PreciseTimer::new(), ahead_ns: Cell::new(0.0) }
    }

    async fn until(&self, deadline: Instant, stopping: &Cell<bool>) {
        let ahead = Duration::from_nanos(self.ahead_ns.get() as u64);
        let arm = deadline.checked_sub(ahead).unwrap_or(deadline);
        if arm > Instant::now() {
            self.timer.sleep_until(arm).await;
            self.learn(Instant::now().saturating_duration_since(arm));
        }
        spin_until(deadline, stopping).await;
    }

    /// One observation of how late a wake-up came after its arming time.
    fn learn(&self, delay: Duration) {
        let delay = delay.as_nanos() as f64;
        let ahead = self.ahead_ns.get();
        let next = if delay < ahead {
            ahead - STEP_NS * (1.0 - EARLY_SHARE)
        } else {
            ahead + STEP_NS * EARLY_SHARE
        };
        self.ahead_ns.set(next.clamp(0.0, MAX_AHEAD.as_nanos() as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hybrid() -> Hybrid {
        Hybrid { timer: PreciseTimer::Tokio, ahead_ns: Cell::new(0.0) }
    }

    #[test]
    fn the_lead_settles_at_the_early_share_of_wake_delays() {
        let h = hybrid();
        // Delays spread evenly over 20..40 µs: the 20 % quantile is 24 µs.
        for i in 0..20_000u64 {
            h.learn(Duration::from_nanos(20_000 + (i * 7919) % 20_000));
        }
        let ahead = h.ahead_ns.get();
        assert!((22_000.0..26_000.0).contains(&ahead), "lead {ahead} ns");
    }

    #[test]
    fn the_lead_stays_within_bounds() {
        let h = hybrid();
        for _ in 0..10_000 {
            h.learn(Duration::ZERO);
        }
        assert_eq!(h.ahead_ns.get(), 0.0, "punctual wake-ups need no lead");
        for _ in 0..100_000 {
            h.learn(Duration::from_millis(5));
        }
        assert_eq!(h.ahead_ns.get(), MAX_AHEAD.as_nanos() as f64, "an overloaded machine");
    }

    /// The lead moves the arming, never the release: with the timerfd armed up to 100 µs
    /// early, no wait returns before its deadline.
    #[tokio::test]
    async fn never_returns_before_the_deadline() {
        let h = Hybrid::new();
        h.ahead_ns.set(MAX_AHEAD.as_nanos() as f64);
        let stopping = Cell::new(false);
        let began = Instant::now();
        for i in 1..=300u64 {
            let deadline = began + Duration::from_micros(150 * i);
            h.until(deadline, &stopping).await;
            assert!(Instant::now() >= deadline, "wait {i} returned early");
        }
    }
}
