//! Waiting for the next release, per `--sequencer-idle-strategy`: the pacer's only blocking
//! point, so its policy decides both release precision and the CPU a worker burns while idle.

use std::cell::Cell;
use std::time::Instant;

use shrike_timer::PreciseTimer;

use crate::config::IdleStrategy;

pub(crate) enum Idle {
    Spin,
    Poll(PreciseTimer),
    Sleep,
}

impl Idle {
    /// Must be called inside the worker's runtime (the timerfd registers with its reactor).
    pub fn new(strategy: IdleStrategy) -> Idle {
        match strategy {
            IdleStrategy::Spin => Idle::Spin,
            IdleStrategy::Poll => Idle::Poll(PreciseTimer::new()),
            IdleStrategy::Sleep => Idle::Sleep,
        }
    }

    /// Returns at or after `deadline`, or early once `stopping` is set.
    pub async fn until(&self, deadline: Instant, stopping: &Cell<bool>) {
        match self {
            Idle::Poll(timer) => timer.sleep_until(deadline).await,
            Idle::Sleep => tokio::time::sleep_until(deadline.into()).await,
            // Yield on every turn so the worker's connections keep being served: tokio runs
            // the I/O driver between yields, so a spinning pacer still reads responses.
            Idle::Spin => {
                while Instant::now() < deadline && !stopping.get() {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}
