//! The `--timeout` bound on one exchange, kept by its connection across requests.
//!
//! `tokio::time::timeout` registers a new timer for every request. When that timer is the
//! earliest in the runtime's wheel (a lightly loaded worker has no other), tokio wakes its own
//! driver to shorten the coming sleep: a `write` to the runtime's eventfd, and an `epoll_wait`
//! that returns at once, on every request. A connection's requests have deadlines that only
//! move later, so one timer moved forward never becomes earlier than the wheel's next
//! wake-up, and the driver is left alone. Measured with `strace -c` at 1k rps: one `write` per
//! request before, none after.

use std::pin::Pin;
use std::time::Duration;

use tokio::task::Unconstrained;
use tokio::time::{Instant, Sleep};

pub(crate) struct RequestTimer {
    sleep: Pin<Box<Sleep>>,
}

/// Past every deadline a run can have, as tokio's own `timeout` uses for an unbounded one.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

impl RequestTimer {
    pub fn new() -> RequestTimer {
        RequestTimer { sleep: Box::pin(tokio::time::sleep_until(far_future())) }
    }

    /// Starts the bound on an exchange beginning now.
    pub fn arm(&mut self, limit: Duration) {
        let deadline = Instant::now().checked_add(limit).unwrap_or_else(far_future);
        self.sleep.as_mut().reset(deadline);
    }

    /// Completes when the armed bound is reached. The caller selects on it beside the
    /// exchange, building the exchange inside the `select!`: passed to a helper instead, the
    /// exchange future would be held twice (the argument and the select's copy), and every
    /// connection task would carry both for its whole life.
    ///
    /// Polled outside tokio's cooperative budget, as `tokio::time::timeout` polls its own
    /// delay: an exchange reading a flood spends the whole budget on every poll, and a budgeted
    /// timer polled after it would never see its deadline (a CI run's endless-trailers server
    /// kept two requests past a 0.5 s timeout for the whole run).
    pub fn expired(&mut self) -> Unconstrained<Pin<&mut Sleep>> {
        tokio::task::unconstrained(self.sleep.as_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn bound<F: std::future::Future>(
        t: &mut RequestTimer,
        limit: Duration,
        f: F,
    ) -> Option<F::Output> {
        t.arm(limit);
        tokio::select! {
            biased;
            out = f => Some(out),
            _ = t.expired() => None,
        }
    }

    #[tokio::test]
    async fn fires_beside_an_exchange_that_spends_the_whole_budget() {
        let mut t = RequestTimer::new();
        let flood = async {
            loop {
                tokio::task::consume_budget().await;
            }
        };
        let limit = Duration::from_millis(50);
        let guard = Duration::from_secs(5);
        let out = tokio::time::timeout(guard, bound(&mut t, limit, flood)).await;
        assert_eq!(out, Ok(None), "the bound never fired");
    }

    #[tokio::test(start_paused = true)]
    async fn bounds_each_exchange_from_its_own_start() {
        let mut t = RequestTimer::new();
        let limit = Duration::from_millis(100);
        assert_eq!(bound(&mut t, limit, async { 7 }).await, Some(7));
        // A slow exchange is cut at the limit, measured from when it began.
        let began = Instant::now();
        let slow = tokio::time::sleep(Duration::from_secs(5));
        assert_eq!(bound(&mut t, limit, slow).await, None);
        assert_eq!(Instant::now() - began, limit);
        // The timer is re-armed for the next exchange, not left expired.
        let quick = tokio::time::sleep(Duration::from_millis(90));
        assert_eq!(bound(&mut t, limit, quick).await, Some(()));
        // An unbounded limit never fires.
        let long = tokio::time::sleep(Duration::from_secs(3600));
        assert_eq!(bound(&mut t, Duration::MAX, long).await, Some(()));
    }
}
