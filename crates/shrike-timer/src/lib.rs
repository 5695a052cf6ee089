//! A precise, event-driven sleep: request release in the client, delays in the test server.
//!
//! tokio's timer wheel has 1 ms resolution: at 10k rps a pacer built on it releases requests in
//! clumps of ten, which is exactly the distortion a load tester must not add. Spinning would fix
//! that but burns a core the server under test may need. A `timerfd` armed for each release
//! wakes the worker's epoll with nanosecond resolution (typically within tens of µs) at no CPU
//! cost while idle. Where timerfd is unavailable we fall back to tokio's timer.

use std::os::fd::OwnedFd;
use std::time::Instant;

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;

/// Asks the kernel to fire this thread's timers on time. Linux lets a normal thread's timers
/// fire up to 50 µs late by default (`timer_slack_ns`) to batch wake-ups; that slack alone would
/// dominate release lateness and sub-millisecond delays. 1 ns is the smallest value (0 means
/// "reset to the default"). Best effort: an error leaves the default in place.
pub fn tighten_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

#[derive(Debug)]
pub enum PreciseTimer {
    TimerFd(AsyncFd<OwnedFd>),
    Tokio,
}

impl Default for PreciseTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl PreciseTimer {
    /// Must be called inside a tokio runtime with I/O enabled.
    pub fn new() -> PreciseTimer {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        );
        // `AsyncFd::new` is deprecated because a caller could close a borrowed fd while it is
        // registered. Here the AsyncFd owns the OwnedFd for its whole life, so that cannot
        // happen, and the replacement (`register`) is `unsafe`, which this crate forbids.
        #[allow(deprecated)]
        let registered = fd.map_err(std::io::Error::from).and_then(AsyncFd::new);
        match registered {
            Ok(fd) => PreciseTimer::TimerFd(fd),
            Err(_) => PreciseTimer::Tokio,
        }
    }

    /// Sleeps until `deadline` (returns at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        let fd = match self {
            PreciseTimer::TimerFd(fd) => fd,
            PreciseTimer::Tokio => {
                tokio::time::sleep_until(deadline.into()).await;
                return;
            }
        };
        // Loop until the clock agrees: a stale expiry from an earlier, abandoned arm must never
        // release a request early.
        loop {
            let now = Instant::now();
            if deadline <= now {
                return;
            }
            let d = deadline - now;
            let spec = Itimerspec {
                it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
                it_value: Timespec {
                    tv_sec: d.as_secs() as _,
                    // Never all-zero: a zero it_value disarms the timer instead of firing it.
                    tv_nsec: d.subsec_nanos().max(1) as _,
                },
            };
            if timerfd_settime(fd.get_ref(), TimerfdTimerFlags::empty(), &spec).is_err() {
                tokio::time::sleep_until(deadline.into()).await;
                return;
            }
            let Ok(mut guard) = fd.readable().await else {
                tokio::time::sleep_until(deadline.into()).await;
                return;
            };
            let mut buf = [0u8; 8];
            // WouldBlock (readiness left over from an abandoned arm) clears the readiness; the
            // loop then re-arms and waits again.
            match guard.try_io(|inner| {
                rustix::io::read(inner.get_ref(), &mut buf).map_err(std::io::Error::from)
            }) {
                // The expiry is consumed: clear readiness now, or the next sleep would see it,
                // pay a read that fails with EAGAIN, and re-arm the timer a second time.
                Ok(Ok(_)) => guard.clear_ready(),
                Ok(Err(_)) => {
                    tokio::time::sleep_until(deadline.into()).await;
                    return;
                }
                Err(_would_block) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn fires_at_or_after_deadline_with_sub_ms_resolution() {
        let t = PreciseTimer::new();
        assert!(matches!(t, PreciseTimer::TimerFd(_)));
        for us in [50u64, 200, 700, 1500] {
            let deadline = Instant::now() + Duration::from_micros(us);
            t.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline);
        }
        // A deadline in the past returns immediately.
        t.sleep_until(Instant::now() - Duration::from_millis(1)).await;
    }

    #[tokio::test]
    async fn abandoned_arm_does_not_fire_next_sleep_early() {
        let t = PreciseTimer::new();
        let _ = tokio::time::timeout(
            Duration::from_millis(1),
            t.sleep_until(Instant::now() + Duration::from_micros(500)),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(3)).await; // the old arm has expired by now
        let deadline = Instant::now() + Duration::from_millis(5);
        t.sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
    }
}
