//! The collector thread: merges the workers' parts of each tick exactly, in tick order, and
//! feeds the observers. A tick is complete once every worker has sent its part of it or has
//! finished before it; parts of one worker arrive in order (one sender per worker).

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use shrike_stats::Interval;

use super::recorder::{Msg, Part, TickStats};
use super::{Observer, Sample, TelemetryConfig};

struct Pending {
    sample: Sample,
    /// Some part of this tick came from a worker still running past it: the tick is full.
    full: bool,
    /// The latest end among workers whose last part this is.
    end: Duration,
}

struct Collector {
    cfg: TelemetryConfig,
    observers: Vec<Box<dyn Observer>>,
    /// Per worker: the next tick index it will send, and whether it is done.
    next: Vec<u64>,
    done: Vec<bool>,
    pending: BTreeMap<u64, Pending>,
    /// The next tick to emit.
    emit: u64,
    window: Option<Sample>,
    intervals: Vec<Interval>,
    /// Per worker: where its emptied tick sets go back to.
    returns: Vec<Sender<TickStats>>,
}

/// Runs until every worker is done; returns the stored intervals. `returns` has one sender
/// per worker, for its emptied tick sets.
pub(crate) fn run(
    rx: Receiver<Msg>,
    returns: Vec<Sender<TickStats>>,
    cfg: TelemetryConfig,
    observers: Vec<Box<dyn Observer>>,
) -> Vec<Interval> {
    let workers = returns.len();
    let mut c = Collector {
        cfg,
        observers,
        returns,
        next: vec![0; workers],
        done: vec![false; workers],
        pending: BTreeMap::new(),
        emit: 0,
        window: None,
        intervals: Vec::new(),
    };
    while c.done.iter().any(|d| !d) {
        match rx.recv() {
            Ok(Msg::Part(p)) => c.add(*p),
            Ok(Msg::Done(w)) => {
                if let Some(d) = c.done.get_mut(w) {
                    *d = true;
                }
            }
            // Every link is gone: nothing more can arrive.
            Err(_) => break,
        }
        c.emit_complete(false);
    }
    c.emit_complete(true);
    if let Some(w) = c.window.take() {
        c.close_window(w);
    }
    for o in &mut c.observers {
        o.finish();
    }
    c.intervals
}

impl Collector {
    fn add(&mut self, mut p: Part) {
        if let Some(n) = self.next.get_mut(p.worker) {
            *n = p.index + 1;
        }
        // A worker's last part is its end: knowing it here (not at the later `Done`) lets the
        // run's last tick be marked as such.
        if p.end.is_some() {
            if let Some(d) = self.done.get_mut(p.worker) {
                *d = true;
            }
        }
        let tick = self.cfg.tick;
        let start = Duration::from_nanos(
            u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).saturating_mul(p.index),
        );
        let e = self.pending.entry(p.index).or_insert_with(|| Pending {
            sample: Sample::empty(start, tick),
            full: false,
            end: Duration::ZERO,
        });
        let s = &mut e.sample;
        s.counters.merge(&p.counters);
        s.status_codes.merge(&p.status_codes);
        s.scheduled_to_response.merge(&p.stats.scheduled_to_response);
        s.request_to_response.merge(&p.stats.request_to_response);
        s.send_lateness.merge(&p.stats.send_lateness);
        s.in_flight += p.in_flight;
        s.in_flight_max = s.in_flight;
        match p.end {
            Some(end) => e.end = e.end.max(end),
            None => e.full = true,
        }
        // Back to the worker for a later tick (a worker that has finished is gone: dropped).
        if let Some(back) = self.returns.get(p.worker) {
            p.stats.reset();
            let _ = back.send(p.stats);
        }
    }

    /// Emits ticks in order while they are complete (all of them once every worker is done).
    fn emit_complete(&mut self, force: bool) {
        let all_done = force || self.done.iter().all(|&d| d);
        loop {
            let complete =
                all_done || self.next.iter().zip(&self.done).all(|(&n, &d)| d || n > self.emit);
            if !complete {
                return;
            }
            let Some(p) = self.pending.remove(&self.emit) else {
                // No part at all: every worker ended before this tick.
                if self.pending.is_empty() {
                    return;
                }
                self.emit += 1;
                continue;
            };
            let index = self.emit;
            self.emit += 1;
            let mut s = p.sample;
            let last = all_done && self.pending.is_empty();
            if !p.full {
                s.duration = p.end.saturating_sub(s.start);
            }
            s.last = last;
            // A run stopped exactly on a boundary leaves an empty zero-length tick: nothing
            // happened in it, so it is no sample. (Runs with a deadline never do: the
            // recorder lets the last tick run to the true end.)
            if s.duration.is_zero() && s.counters.non_zero().is_empty() {
                if last {
                    if let Some(mut w) = self.window.take() {
                        w.last = true;
                        self.close_window(w);
                    }
                }
                continue;
            }
            for o in &mut self.observers {
                o.tick(&s);
            }
            let closes = (index + 1).is_multiple_of(u64::from(self.cfg.ticks_per_interval.get()));
            match self.window.as_mut() {
                Some(w) => w.absorb(&s),
                None => self.window = Some(s),
            }
            if closes || last {
                if let Some(w) = self.window.take() {
                    self.close_window(w);
                }
            }
        }
    }

    fn close_window(&mut self, w: Sample) {
        self.intervals.push(w.to_interval());
        for o in &mut self.observers {
            o.interval(&w);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::sync::{mpsc, Arc, Mutex};

    use shrike_stats::{Counter, Counters, Statistic, StatusCodes};

    use super::*;

    fn part(worker: usize, index: u64, requests: u64, latency: u64, end: Option<u64>) -> Msg {
        let mut counters = Counters::new();
        counters.add(Counter::RqTotal, requests);
        let mut sched = Statistic::new();
        for _ in 0..requests {
            sched.record(latency);
        }
        let mut status_codes = StatusCodes::new();
        status_codes.add(200, requests);
        Msg::Part(Box::new(Part {
            worker,
            index,
            counters,
            status_codes,
            stats: TickStats {
                scheduled_to_response: sched,
                request_to_response: Statistic::new(),
                send_lateness: Statistic::new(),
            },
            in_flight: requests,
            end: end.map(Duration::from_millis),
        }))
    }

    fn returns(workers: usize) -> (Vec<Sender<TickStats>>, Vec<mpsc::Receiver<TickStats>>) {
        (0..workers).map(|_| mpsc::channel()).unzip()
    }

    /// Records what observers see: (start ms, duration ms, requests, last) per tick/interval.
    #[derive(Default)]
    struct Seen {
        ticks: Vec<(u128, u128, u64, bool)>,
        intervals: Vec<(u128, u128, u64, bool)>,
        finished: bool,
    }
    struct Spy(Arc<Mutex<Seen>>);
    fn row(s: &Sample) -> (u128, u128, u64, bool) {
        (s.start.as_millis(), s.duration.as_millis(), s.counters.get(Counter::RqTotal), s.last)
    }
    impl Observer for Spy {
        fn tick(&mut self, t: &Sample) {
            self.0.lock().unwrap().ticks.push(row(t));
        }
        fn interval(&mut self, i: &Sample) {
            self.0.lock().unwrap().intervals.push(row(i));
        }
        fn finish(&mut self) {
            self.0.lock().unwrap().finished = true;
        }
    }

    #[test]
    fn merges_workers_in_tick_order_and_groups_intervals() {
        let (tx, rx) = mpsc::channel();
        // Worker 1 runs ahead; worker 0 ends first, in tick 2; worker 1 ends in tick 3.
        for m in [
            part(1, 0, 3, 1_000, None),
            part(1, 1, 4, 2_000, None),
            part(0, 0, 5, 3_000, None),
            part(1, 2, 1, 4_000, None),
            part(0, 1, 6, 5_000, None),
            part(0, 2, 2, 6_000, Some(250)),
            Msg::Done(0),
            part(1, 3, 7, 7_000, Some(320)),
            Msg::Done(1),
        ] {
            tx.send(m).unwrap();
        }
        drop(tx);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let cfg = TelemetryConfig {
            tick: Duration::from_millis(100),
            ticks_per_interval: NonZeroU32::new(2).unwrap(),
        };
        let (returns, spares) = returns(2);
        let intervals = run(rx, returns, cfg, vec![Box::new(Spy(seen.clone()))]);
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.ticks,
            vec![
                (0, 100, 8, false),
                (100, 100, 10, false),
                (200, 100, 3, false),
                (300, 20, 7, true)
            ]
        );
        assert_eq!(seen.intervals, vec![(0, 200, 18, false), (200, 120, 10, true)]);
        assert!(seen.finished);
        assert_eq!(intervals.len(), 2);
        let sched = &intervals[0].stats[0];
        assert_eq!(sched.count, 18);
        assert_eq!((sched.min, sched.max), (1_000, 5_000));
        assert_eq!(intervals[1].duration, Duration::from_millis(120));
        assert_eq!(intervals[1].counters.get(Counter::RqTotal), 10);
        // Every shipped tick set went back to its own worker, emptied, for reuse: a worker
        // never makes a new one at a boundary while these come back.
        for (worker, parts) in [(0, 3), (1, 4)] {
            let back: Vec<TickStats> = spares[worker].try_iter().collect();
            assert_eq!(back.len(), parts, "worker {worker}");
            for mut t in back {
                let stats = [&t.scheduled_to_response, &t.request_to_response, &t.send_lateness];
                assert!(stats.iter().all(|s| s.count() == 0), "worker {worker}: not emptied");
                // The histogram's counts went too, not only the moments.
                t.scheduled_to_response.record(9);
                assert_eq!(t.scheduled_to_response.value_at_quantile(1.0), 9, "counts left");
            }
        }
    }

    #[test]
    fn a_worker_that_never_started_does_not_stall_the_series() {
        let (tx, rx) = mpsc::channel();
        tx.send(Msg::Done(1)).unwrap();
        tx.send(part(0, 0, 2, 1_000, Some(50))).unwrap();
        drop(tx);
        let cfg = TelemetryConfig {
            tick: Duration::from_millis(100),
            ticks_per_interval: NonZeroU32::new(1).unwrap(),
        };
        let intervals = run(rx, returns(2).0, cfg, Vec::new());
        assert_eq!(intervals.len(), 1);
        assert_eq!(intervals[0].duration, Duration::from_millis(50));
    }
}
