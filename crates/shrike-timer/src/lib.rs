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

/// Lowers the calling thread's scheduling priority to `nice` (on Linux the nice value is per
/// thread): a helper thread sharing a core with a pacing worker then runs when the worker
/// waits, rather than taking turns with it while a release is due. Best effort.
pub fn lower_thread_priority(nice: i32) {
    let _ = rustix::process::setpriority_process(None, nice);
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
            // The expiry is not read: the next `timerfd_settime` resets the expiry count, and
            // the clock, not the fd, says whether the deadline has come (so a stale readiness
            // from an abandoned arm can never release early). Epoll reports the timerfd
            // edge-triggered, so clearing tokio's readiness waits for the next expiry. That
            // saves a `read` per release: at 1k rps, 3 of 7 system calls per request were the
            // timer's.
            guard.clear_ready();
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

    /// What the unread expiries rest on: re-arming a timerfd whose expiry was never read
    /// resets its count, so the fd is not readable again until the new arm fires.
    #[test]
    fn rearming_resets_an_unread_expiry() {
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK).unwrap();
        let arm = |ns: i64| {
            let it_value = Timespec { tv_sec: 0, tv_nsec: ns as _ };
            let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
            let spec = Itimerspec { it_interval: zero, it_value };
            timerfd_settime(&fd, TimerfdTimerFlags::empty(), &spec).unwrap();
        };
        let mut buf = [0u8; 8];
        arm(10_000);
        std::thread::sleep(Duration::from_millis(2));
        arm(50_000_000);
        let read = rustix::io::read(&fd, &mut buf);
        assert_eq!(read, Err(rustix::io::Errno::AGAIN), "the old expiry survived the re-arm");
        // And timers still tick: a short arm is readable once it has fired.
        arm(10_000);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(rustix::io::read(&fd, &mut buf), Ok(8));
    }

    /// Many short sleeps in a row, each from an unread expiry: none returns early and none
    /// hangs (the test's own timeout would say so).
    #[tokio::test]
    async fn back_to_back_sleeps_neither_early_nor_stuck() {
        let t = PreciseTimer::new();
        let began = Instant::now();
        for i in 1..=200u64 {
            let deadline = began + Duration::from_micros(100 * i);
            t.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "sleep {i} returned early");
        }
        assert!(began.elapsed() < Duration::from_secs(5), "{:?}", began.elapsed());
    }
}
