//! Waiting for the next release, per `--sequencer-idle-strategy` or a lateness budget
//! (`--max-lateness`): the pacer's only blocking point, so its policy decides both release
//! precision and the CPU a worker burns while idle.

use std::cell::Cell;
use std::time::{Duration, Instant};

use shrike_timer::PreciseTimer;

use crate::config::IdleStrategy;

pub(crate) enum Idle {
    Spin,
    Poll(Hybrid),
    Sleep,
    Budget(Budget),
}

impl Idle {
    /// Must be called inside the worker's runtime (the timerfd registers with its reactor).
    /// A lateness budget, when given, is the policy (the spec refuses it with spin or sleep).
    pub fn new(strategy: IdleStrategy, max_lateness: Option<Duration>) -> Idle {
        if let Some(budget) = max_lateness {
            return Idle::Budget(Budget::new(budget));
        }
        match strategy {
            IdleStrategy::Spin => Idle::Spin,
            IdleStrategy::Poll => Idle::Poll(Hybrid::new()),
            IdleStrategy::Sleep => Idle::Sleep,
        }
    }

    /// Returns at or after `deadline`, or early once `stopping` is set. `previous` is when
    /// the last release was due, if there was one (a budget learns the spacing from it).
    pub async fn until(&self, deadline: Instant, previous: Option<Instant>, stopping: &Cell<bool>) {
        match self {
            Idle::Poll(hybrid) => hybrid.until(deadline, stopping).await,
            Idle::Sleep => tokio::time::sleep_until(deadline.into()).await,
            Idle::Spin => spin_until(deadline, stopping).await,
            Idle::Budget(budget) => budget.until(deadline, previous).await,
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

/// The most a `poll` wake-up is armed ahead of its deadline. Past this the machine is
/// overloaded and spinning would only make it worse.
const MAX_AHEAD: Duration = Duration::from_micros(100);
/// How far one observation moves a lead.
const STEP_NS: f64 = 500.0;
/// `poll`: the share of wake-ups that should come before the deadline (and spin the rest).
const EARLY_SHARE: f64 = 0.2;
/// A budget: the share of wake-ups that should come within it (its p99 is the promise).
const WITHIN_BUDGET_SHARE: f64 = 0.99;

/// How far ahead of the moment it is wanted a timerfd is armed: a running estimate of a
/// quantile (`share`) of the observed wake-up delays (stochastic quantile tracking), learnt
/// per worker. On a VM a timerfd wake arrives tens of µs after its expiry (the halted vCPU
/// must be rescheduled).
struct Lead {
    ns: Cell<f64>,
    share: f64,
    max: Duration,
}

impl Lead {
    fn new(share: f64, max: Duration) -> Lead {
        Lead { ns: Cell::new(0.0), share, max }
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.ns.get() as u64)
    }

    /// One observation of how late a wake-up came after its arming time.
    fn learn(&self, delay: Duration) {
        let delay = delay.as_nanos() as f64;
        let ahead = self.ns.get();
        let next = if delay < ahead {
            ahead - STEP_NS * (1.0 - self.share)
        } else {
            ahead + STEP_NS * self.share
        };
        self.ns.set(next.clamp(0.0, self.max.as_nanos() as f64));
    }
}

/// `poll`: block on a timerfd armed a little *ahead* of the deadline, by what the kernel
/// typically takes to deliver the wake-up, then spin the last stretch. Arming at the expiry
/// itself made the wake-up's delay the release lateness. The lead is the `EARLY_SHARE`
/// quantile of wake delays, so a fifth of wake-ups land early and spin a few µs, the rest land
/// just after the deadline. Nothing is ever released early: the last stretch waits on the
/// clock.
pub(crate) struct Hybrid {
    timer: PreciseTimer,
    lead: Lead,
}

impl Hybrid {
    fn new() -> Hybrid {
        Hybrid { timer: PreciseTimer::new(), lead: Lead::new(EARLY_SHARE, MAX_AHEAD) }
    }

    async fn until(&self, deadline: Instant, stopping: &Cell<bool>) {
        let arm = deadline.checked_sub(self.lead.get()).unwrap_or(deadline);
        if arm > Instant::now() {
            self.timer.sleep_until(arm).await;
            self.lead.learn(Instant::now().saturating_duration_since(arm));
        }
        spin_until(deadline, stopping).await;
    }
}

/// `--max-lateness`: a release may be up to the budget late, and that is what pays for fewer
/// wake-ups. The worker wakes when the last release it can gather within the budget falls
/// due (the budget less the lead that lands 99 wake-ups in 100 within it, in whole spacings
/// of the releases) and releases everything due by then: at a rate above one per budget it
/// wakes about once per budget, not per release, and a release that no other would join
/// leaves on time rather than a budget late (2026-12-06: at 1k rps and a 1 ms budget every
/// release waited the whole budget for nothing, wire offsets p99 1.14 ms). Each request keeps
/// its own scheduled time (its lateness is measured, not hidden), and none is released early:
/// the arming is never before the deadline.
pub(crate) struct Budget {
    timer: PreciseTimer,
    budget: Duration,
    lead: Lead,
}

impl Budget {
    fn new(budget: Duration) -> Budget {
        Budget { timer: PreciseTimer::new(), budget, lead: Lead::new(WITHIN_BUDGET_SHARE, budget) }
    }

    async fn until(&self, deadline: Instant, previous: Option<Instant>) {
        if deadline <= Instant::now() {
            return;
        }
        let arm = deadline + self.gather(deadline, previous);
        self.timer.sleep_until(arm).await;
        self.lead.learn(Instant::now().saturating_duration_since(arm));
    }

    /// How long past `deadline` to wait: the whole spacings (the last gap between releases,
    /// `deadline − previous`) that fit in the budget less the lead, so the wake-up comes as
    /// the last release it gathers falls due. Without a spacing yet, the budget less the lead.
    fn gather(&self, deadline: Instant, previous: Option<Instant>) -> Duration {
        let room = self.budget.saturating_sub(self.lead.get()).as_nanos();
        let gap = previous.map_or(0, |p| deadline.saturating_duration_since(p).as_nanos());
        let span = room.checked_div(gap).map_or(room, |n| n * gap);
        Duration::from_nanos(u64::try_from(span).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lead_settles_at_its_share_of_wake_delays() {
        for (share, want) in [(EARLY_SHARE, 24_000.0), (WITHIN_BUDGET_SHARE, 39_800.0)] {
            let lead = Lead::new(share, MAX_AHEAD);
            // Delays spread evenly over 20..40 µs: the 20 % quantile is 24 µs, the 99 % 39.8.
            for i in 0..20_000u64 {
                lead.learn(Duration::from_nanos(20_000 + (i * 7919) % 20_000));
            }
            let ahead = lead.ns.get();
            assert!((want - 2_000.0..want + 2_000.0).contains(&ahead), "{share}: {ahead} ns");
        }
    }

    #[test]
    fn the_lead_stays_within_bounds() {
        let lead = Lead::new(EARLY_SHARE, MAX_AHEAD);
        for _ in 0..10_000 {
            lead.learn(Duration::ZERO);
        }
        assert_eq!(lead.ns.get(), 0.0, "punctual wake-ups need no lead");
        for _ in 0..100_000 {
            lead.learn(Duration::from_millis(5));
        }
        assert_eq!(lead.get(), MAX_AHEAD, "an overloaded machine");
    }

    /// A budget's wake-ups: never before the deadline, at most one per budget while releases
    /// come faster than that, and (on an idle enough machine) mostly within the budget.
    #[tokio::test]
    async fn a_budget_wakes_once_per_budget_and_never_early() {
        let b = Budget::new(Duration::from_millis(2));
        let began = Instant::now();
        let (mut wakes, mut now) = (0, began);
        // 400 releases due every 100 µs: 40 ms of them.
        for i in 1..=400u64 {
            let deadline = began + Duration::from_micros(100 * i);
            let previous = began + Duration::from_micros(100 * (i - 1));
            if deadline > now {
                b.until(deadline, Some(previous)).await;
                wakes += 1;
                now = Instant::now();
            }
            assert!(now >= deadline, "release {i} early");
        }
        // 40 ms at one wake-up per 2 ms budget: 20, give or take the machine.
        assert!((10..=40).contains(&wakes), "{wakes} wake-ups");
    }

    /// Releases further apart than the budget gather nothing by waiting: each leaves on time
    /// (late by the wake-up's own delay), not a budget late. And the wait is the whole
    /// spacings that fit in the budget: the wake-up comes as the last release it gathers is due.
    #[tokio::test]
    async fn a_budget_waits_only_to_gather_and_in_whole_spacings() {
        let b = Budget::new(Duration::from_millis(2));
        let at = Instant::now() + Duration::from_secs(1);
        let ms = Duration::from_millis;
        assert_eq!(b.gather(at, Some(at - ms(3))), Duration::ZERO);
        let us = Duration::from_micros;
        assert_eq!(b.gather(at, Some(at - us(600))), us(1800), "three spacings fit in 2 ms");
        assert_eq!(b.gather(at, None), ms(2));
        let began = Instant::now();
        let mut late = Vec::new();
        // 20 releases 3 ms apart.
        for i in 1..=20u64 {
            let deadline = began + ms(3 * i);
            b.until(deadline, Some(began + ms(3 * (i - 1)))).await;
            let now = Instant::now();
            assert!(now >= deadline, "release {i} early");
            late.push(now - deadline);
        }
        late.sort();
        // On time but for the wake-up's delay (tens of µs here; the old policy waited 2 ms).
        assert!(late[10] < ms(1), "median lateness {:?}", late[10]);
    }

    /// The lead moves the arming, never the release: with the timerfd armed up to 100 µs
    /// early, no wait returns before its deadline.
    #[tokio::test]
    async fn never_returns_before_the_deadline() {
        let h = Hybrid::new();
        h.lead.ns.set(MAX_AHEAD.as_nanos() as f64);
        let stopping = Cell::new(false);
        let began = Instant::now();
        for i in 1..=300u64 {
            let deadline = began + Duration::from_micros(150 * i);
            h.until(deadline, &stopping).await;
            assert!(Instant::now() >= deadline, "wait {i} returned early");
        }
    }
}
