//! The `--timeout` bound on exchanges, for all of a pool's connections at once.
//!
//! A timer per connection moved at every request (`Sleep::reset`, then polling it beside the
//! exchange, which registers the task's waker with it on every poll) was a measurable share of
//! a saturating request's instructions (bench/results/hot-path-costs.md).
//! Here a connection only writes its exchange's deadline into its [`Watch`]; one task per
//! pool sleeps until the earliest deadline of any exchange in flight, marks what expired and
//! wakes its connections. Every exchange of a pool has the same bound, so a deadline set now
//! is never earlier than one set before: the sweeper, asleep until the earliest, never needs
//! waking for a new one, only when it had none to wait for. In a healthy run it wakes about
//! once per timeout, finds the exchange it waited for long answered, and sleeps again.
//!
//! (A `tokio::time::timeout` per request was worse still: a fresh timer that is the earliest
//! in the runtime's wheel makes tokio wake its own driver to shorten its sleep, a `write` to
//! its eventfd per request at 1k rps by `strace -c`.)

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// One connection's view: the deadline of its exchange in flight, and whether it passed.
#[derive(Default)]
pub(crate) struct Watch {
    deadline: Cell<Option<Instant>>,
    expired: Cell<bool>,
    waiter: Cell<Option<Waker>>,
}

impl Watch {
    /// Completes once the sweeper found this exchange's deadline passed. Cheap to poll beside
    /// the exchange on every wake-up: a flag, and the waker kept while it is the same task's.
    #[cfg(test)]
    pub fn expired(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(|cx| self.poll_expired(cx))
    }

    /// `exchange`, unless this watch expires first (`Err`). Polled by hand rather than
    /// through `tokio::select!`, whose branch bookkeeping costs on every request here
    /// (bench/results/hot-path-costs.md): the exchange first, then the flag. The caller pins the exchange in
    /// its own frame: moved into a helper's, an exchange future would be held twice (the
    /// argument and the pinned copy), and every connection task would carry both for life.
    pub fn bound<'a, F: Future>(
        &'a self,
        mut exchange: Pin<&'a mut F>,
    ) -> impl Future<Output = Result<F::Output, ()>> + 'a {
        poll_fn(move |cx| {
            if let Poll::Ready(out) = exchange.as_mut().poll(cx) {
                return Poll::Ready(Ok(out));
            }
            self.poll_expired(cx).map(Err)
        })
    }

    fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.expired.get() {
            return Poll::Ready(());
        }
        super::wait_here(&self.waiter, cx)
    }

    /// The exchange ended (answered, failed or expired): nothing left to watch.
    pub fn disarm(&self) {
        self.deadline.set(None);
    }
}

/// A pool's watches and the state of its sweeper.
#[derive(Default)]
pub(crate) struct Deadlines {
    watches: RefCell<Vec<Rc<Watch>>>,
    /// How many watches the last pass over them kept.
    live: Cell<usize>,
    /// The sweeper has no deadline to sleep until, and waits for one here.
    idle: Cell<bool>,
    sweeper: Cell<Option<Waker>>,
    closed: Cell<bool>,
}

impl Deadlines {
    /// A watch for a new connection. The watches of connections that ended are dropped here
    /// too, once the list has doubled since the last such pass: a replay opening a connection
    /// per session between two of the sweeper's wake-ups keeps no more than twice what lives.
    pub fn watch(&self) -> Rc<Watch> {
        let w = Rc::new(Watch::default());
        let mut watches = self.watches.borrow_mut();
        if watches.len() >= (2 * self.live.get()).max(64) {
            watches.retain(|w| Rc::strong_count(w) > 1);
            self.live.set(watches.len());
        }
        watches.push(w.clone());
        w
    }

    /// Starts the bound on `watch`'s exchange, begun at `start` (a clock reading of now).
    pub fn arm(&self, watch: &Watch, start: Instant, limit: Duration) {
        watch.expired.set(false);
        // An unbounded limit never expires.
        watch.deadline.set(start.checked_add(limit));
        if self.idle.replace(false) {
            self.wake_sweeper();
        }
    }

    /// Ends the sweeper (the pool closed).
    pub fn close(&self) {
        self.closed.set(true);
        self.wake_sweeper();
    }

    fn wake_sweeper(&self) {
        if let Some(w) = self.sweeper.take() {
            w.wake();
        }
    }

    /// Marks every watch whose deadline is at or before `now` expired and wakes its
    /// connection; drops the watches of connections that ended. Returns the earliest
    /// deadline still ahead.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        self.watches.borrow_mut().retain(|w| {
            match w.deadline.get() {
                Some(d) if d <= now => {
                    w.deadline.set(None);
                    w.expired.set(true);
                    if let Some(waiter) = w.waiter.take() {
                        waiter.wake();
                    }
                }
                Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                None => {}
            }
            // Only this list holds the watch of a connection whose task ended.
            Rc::strong_count(w) > 1
        });
        self.live.set(self.watches.borrow().len());
        next
    }

    /// The sweeper: sleeps until the earliest deadline in flight (or, with none, until one is
    /// armed), expires what passed, until the pool closes.
    pub async fn sweep(self: Rc<Self>) {
        let mut sleep = Box::pin(tokio::time::sleep(Duration::ZERO));
        while !self.closed.get() {
            let next = self.expire(Instant::now());
            if let Some(at) = next {
                sleep.as_mut().reset(at.into());
            }
            self.idle.set(next.is_none());
            poll_fn(|cx| {
                if self.closed.get() || next.is_some_and(|_| sleep.as_mut().poll(cx).is_ready()) {
                    return Poll::Ready(());
                }
                if next.is_none() && !self.idle.get() {
                    return Poll::Ready(());
                }
                self.sweeper.set(Some(cx.waker().clone()));
                Poll::Pending
            })
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn bound<F: Future>(
        d: &Deadlines,
        w: &Watch,
        limit: Duration,
        f: F,
    ) -> Option<F::Output> {
        d.arm(w, Instant::now(), limit);
        let out = w.bound(std::pin::pin!(f)).await.ok();
        w.disarm();
        out
    }

    fn local<F: Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.expect("a test runtime");
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// Watches of ended connections do not pile up between wake-ups of the sweeper.
    #[test]
    fn ended_connections_watches_are_dropped() {
        let d = Deadlines::default();
        let live: Vec<_> = (0..10).map(|_| d.watch()).collect();
        for _ in 0..10_000 {
            drop(d.watch());
        }
        assert!(d.watches.borrow().len() <= 128, "{}", d.watches.borrow().len());
        assert_eq!(live.iter().filter(|w| Rc::strong_count(w) == 2).count(), 10);
    }

    /// The bound fires beside an exchange that never yields on its own budget's account.
    #[test]
    fn fires_beside_an_exchange_that_spends_the_whole_budget() {
        local(async {
            let d = Rc::new(Deadlines::default());
            tokio::task::spawn_local(d.clone().sweep());
            let w = d.watch();
            let flood = async {
                loop {
                    tokio::task::consume_budget().await;
                }
            };
            let limit = Duration::from_millis(50);
            let guard = Duration::from_secs(5);
            let out = tokio::time::timeout(guard, bound(&d, &w, limit, flood)).await;
            assert_eq!(out, Ok(None), "the bound never fired");
            d.close();
        });
    }

    /// Each exchange is bounded from its own start, never before its deadline; a quick one
    /// leaves no expiry behind for the next; an idle sweeper wakes for a new deadline; an
    /// unbounded limit never fires.
    #[test]
    fn bounds_each_exchange_from_its_own_start() {
        local(async {
            let d = Rc::new(Deadlines::default());
            tokio::task::spawn_local(d.clone().sweep());
            let (a, b) = (d.watch(), d.watch());
            let limit = Duration::from_millis(100);
            assert_eq!(bound(&d, &a, limit, async { 7 }).await, Some(7));
            // Let the sweeper find nothing in flight and go idle.
            tokio::time::sleep(Duration::from_millis(150)).await;
            let began = Instant::now();
            let slow = tokio::time::sleep(Duration::from_secs(5));
            assert_eq!(bound(&d, &a, limit, slow).await, None);
            let took = began.elapsed();
            assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
            // Two connections: b's later deadline is kept while a's earlier one expires.
            d.arm(&b, Instant::now(), Duration::from_millis(400));
            let quick = tokio::time::sleep(Duration::from_millis(60));
            assert_eq!(bound(&d, &a, limit, quick).await, Some(()));
            let began = Instant::now();
            tokio::select! {
                _ = b.expired() => {}
                _ = tokio::time::sleep(Duration::from_secs(5)) => panic!("b never expired"),
            }
            assert!(began.elapsed() >= Duration::from_millis(300), "{:?}", began.elapsed());
            let long = tokio::time::sleep(Duration::from_millis(300));
            assert_eq!(bound(&d, &a, Duration::MAX, long).await, Some(()));
            d.close();
        });
    }
}
