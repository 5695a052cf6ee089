//! Microsecond-precise sleeps for delays, chunk pacing and stalls. tokio's timer wheel rounds
//! to whole milliseconds, so a 250 µs delay would become 1–2 ms; [`PreciseTimer`] (a timerfd)
//! does not.
//!
//! A timerfd holds one deadline. An HTTP/1.1 connection answers one request at a time and owns
//! one directly; HTTP/2 and HTTP/3 connections multiplex, so their streams share one timer per
//! connection through [`Sleeper`], a small task that keeps the deadlines in a heap and arms the
//! timerfd for the earliest. Both are created on first use: connections that never wait cost
//! no file descriptor.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use shrike_timer::PreciseTimer;
use tokio::sync::{mpsc, oneshot};

type Waiter = (Instant, oneshot::Sender<()>);

/// A connection's shared precise timer. Cheap to clone; the service task ends with the last
/// clone once its pending deadlines have fired.
#[derive(Debug, Clone)]
pub(crate) struct Sleeper(mpsc::UnboundedSender<Waiter>);

impl Sleeper {
    pub(crate) fn start() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(service(rx));
        Sleeper(tx)
    }

    pub(crate) async fn sleep(&self, duration: Duration) {
        if duration.is_zero() {
            return;
        }
        let deadline = Instant::now() + duration;
        let (tx, rx) = oneshot::channel();
        if self.0.send((deadline, tx)).is_err() || rx.await.is_err() {
            // The service is gone (runtime shutting down): still honour the delay.
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// A connection's [`Sleeper`], started by the first request that waits. Cheap to clone into
/// each request's task.
#[derive(Debug, Clone, Default)]
pub(crate) struct LazySleeper(Arc<OnceLock<Sleeper>>);

impl LazySleeper {
    pub(crate) fn get(&self) -> &Sleeper {
        self.0.get_or_init(Sleeper::start)
    }

    /// Sleeps `duration` on the shared timer; no timer is started for a zero duration.
    pub(crate) async fn sleep(&self, duration: Duration) {
        if !duration.is_zero() {
            self.get().sleep(duration).await;
        }
    }
}

struct Entry(Reverse<Instant>, u64, oneshot::Sender<()>);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

async fn service(mut rx: mpsc::UnboundedReceiver<Waiter>) {
    let timer = PreciseTimer::new();
    let mut heap = BinaryHeap::<Entry>::new();
    let mut seq = 0u64;
    let mut open = true;
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|e| e.0 .0 <= now) {
            if let Some(Entry(_, _, tx)) = heap.pop() {
                let _ = tx.send(());
            }
        }
        let next = heap.peek().map(|e| e.0 .0);
        if !open && next.is_none() {
            return;
        }
        tokio::select! {
            biased;
            waiter = rx.recv(), if open => match waiter {
                Some((deadline, tx)) => {
                    seq += 1;
                    heap.push(Entry(Reverse(deadline), seq, tx));
                }
                None => open = false,
            },
            () = timer.sleep_until(next.unwrap_or(now)), if next.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrent_sleeps_each_wake_on_time() {
        let sleeper = Sleeper::start();
        let start = Instant::now();
        let waits = [3000u64, 300, 1200, 300, 50];
        let tasks: Vec<_> = waits
            .iter()
            .map(|&us| {
                let s = sleeper.clone();
                tokio::spawn(async move {
                    let t = Instant::now();
                    s.sleep(Duration::from_micros(us)).await;
                    t.elapsed()
                })
            })
            .collect();
        for (task, us) in tasks.into_iter().zip(waits) {
            let took = task.await.unwrap();
            assert!(took >= Duration::from_micros(us), "{us}: {took:?}");
        }
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
