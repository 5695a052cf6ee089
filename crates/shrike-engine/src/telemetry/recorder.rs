//! The worker side: per-tick histograms next to the cumulative ones, swapped out and shipped at
//! each tick boundary. Everything here runs on the worker's thread and never blocks: parts go
//! over an unbounded channel whose send is a pointer push.
//!
//! The tick's histograms are recycled, as HdrHistogram's interval recorders recycle theirs: the
//! collector empties each shipped set and hands it back, and a boundary swaps in a returned one.
//! A fresh set is 792 KiB of counts that must be written. Made at each boundary, on the
//! worker's thread (four times a second whenever progress is shown), it stalled the worker:
//! 0.3–0.8 ms while glibc still mapped each histogram fresh and it was faulted in page by page,
//! about 25 µs of writing once glibc's mmap threshold had adapted. Every response that arrived
//! meanwhile was timed late by that much.

use std::rc::Rc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use shrike_stats::{Counter, Counters, Statistic, StatusCodes};

use crate::pool::cx::WorkerState;
use crate::pool::{Exchange, Pool, Pools};
use crate::worker::nanos;

/// One worker's contribution to one tick.
#[derive(Debug)]
pub(crate) struct Part {
    pub worker: usize,
    pub index: u64,
    pub counters: Counters,
    pub status_codes: StatusCodes,
    pub stats: TickStats,
    /// Requests released and not yet finished (in flight or queued) at the part's end.
    pub in_flight: u64,
    /// Set on the worker's last part: where the worker's run ended (offset from the start).
    pub end: Option<Duration>,
}

/// What each answered request records in its tick.
#[derive(Debug)]
pub(crate) struct TickStats {
    pub scheduled_to_response: Statistic,
    pub request_to_response: Statistic,
    pub send_lateness: Statistic,
}

impl TickStats {
    /// Sized so recording never allocates (see [`Statistic::presized`]).
    pub fn presized() -> TickStats {
        TickStats {
            scheduled_to_response: Statistic::presized(),
            request_to_response: Statistic::presized(),
            send_lateness: Statistic::presized(),
        }
    }

    /// Empty again, memory kept: what the collector does before handing a set back.
    pub fn reset(&mut self) {
        self.scheduled_to_response.reset();
        self.request_to_response.reset();
        self.send_lateness.reset();
    }
}

#[derive(Debug)]
pub(crate) enum Msg {
    Part(Box<Part>),
    /// The worker sends nothing more (sent on drop, so a failed worker cannot stall the
    /// collector).
    Done(usize),
}

/// A worker's end of the collector channel.
#[derive(Debug)]
pub(crate) struct Link {
    pub worker: usize,
    pub tick: Duration,
    pub tx: Sender<Msg>,
    /// Emptied tick sets handed back by the collector (the first ones made before the run).
    spares: Receiver<TickStats>,
}

impl Link {
    /// Worker `worker`'s link, and the collector's way back to it for emptied tick sets. Two
    /// sets are made (and faulted in) here, before the run: the one the worker records into
    /// first, and the one it swaps in at the first boundary. From then on the collector hands
    /// back each set it has merged.
    pub fn new(worker: usize, tick: Duration, tx: Sender<Msg>) -> (Link, Sender<TickStats>) {
        let (back, spares) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let _ = back.send(TickStats::presized());
        }
        (Link { worker, tick, tx, spares }, back)
    }

    /// An empty tick set: a returned one, or (only if none is back yet) a new one.
    fn spare(&self) -> TickStats {
        self.spares.try_recv().unwrap_or_else(|_| TickStats::presized())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Done(self.worker));
    }
}

/// Per-worker interval state, held in [`WorkerState::interval`] while telemetry is on.
#[derive(Debug)]
pub(crate) struct Recorder {
    link: Link,
    start: Instant,
    index: u64,
    next_boundary: Instant,
    /// Boundaries at or past this are not rolled: a run with a deadline would otherwise end
    /// with a sliver of a tick holding only the drain. The last tick runs to the true end.
    no_roll_from: Option<Instant>,
    stats: TickStats,
    /// Cumulative values at the last boundary; a part carries the difference.
    last_counters: Counters,
    last_codes: StatusCodes,
}

impl Recorder {
    /// Ships every tick that ended at or before `now`.
    fn rolls_at(&self, boundary: Instant) -> bool {
        self.no_roll_from.is_none_or(|t| boundary < t)
    }

    fn roll(&mut self, now: Instant, counters: &Counters, codes: &StatusCodes, in_flight: usize) {
        while now >= self.next_boundary && self.rolls_at(self.next_boundary) {
            self.ship(counters, codes, in_flight, None);
            self.index += 1;
            self.next_boundary += self.link.tick;
        }
    }

    fn ship(
        &mut self,
        counters: &Counters,
        codes: &StatusCodes,
        in_flight: usize,
        end: Option<Duration>,
    ) {
        let mut delta = Counters::new();
        for &c in Counter::ALL {
            delta.set(c, counters.get(c).saturating_sub(self.last_counters.get(c)));
        }
        self.last_counters = counters.clone();
        let mut code_delta = StatusCodes::new();
        for (code, n) in codes.non_zero() {
            code_delta.add(code, n.saturating_sub(self.last_codes.get(code)));
        }
        self.last_codes = codes.clone();
        let part = Part {
            worker: self.link.worker,
            index: self.index,
            counters: delta,
            status_codes: code_delta,
            stats: std::mem::replace(&mut self.stats, self.link.spare()),
            in_flight: in_flight as u64,
            end,
        };
        // A gone collector (it only leaves when the run is over) loses nothing measured: the
        // cumulative statistics are untouched.
        let _ = self.link.tx.send(Msg::Part(Box::new(part)));
    }
}

/// Starts sampling on this worker: `start` is the run start every worker shares. Counters
/// counted before it (prefetched connections) go to the first tick, so the series sums to the
/// totals.
pub(crate) fn attach(pools: &Rc<Pools>, link: Link, start: Instant) {
    let tick = link.tick;
    let no_roll_from = pools.cfg.duration.map(|d| start + d.saturating_sub(tick / 20));
    let stats = link.spare();
    pools.cx.state.borrow_mut().interval = Some(Box::new(Recorder {
        link,
        start,
        index: 0,
        next_boundary: start + tick,
        no_roll_from,
        stats,
        last_counters: Counters::new(),
        last_codes: StatusCodes::new(),
    }));
    // Ships ticks in which no response completed (an idle or stalled target still gets its
    // zero rows). Dropped with the worker's LocalSet.
    let pools = pools.clone();
    tokio::task::spawn_local(async move {
        let mut boundary = start + tick;
        loop {
            tokio::time::sleep_until(boundary.into()).await;
            let now = Instant::now();
            let mut st = pools.cx.state.borrow_mut();
            let st = &mut *st;
            let Some(r) = st.interval.as_deref_mut() else { return };
            // h2 socket bytes are kept outside the counters; fold them in per tick.
            for p in pools.list.iter() {
                if let Pool::H2(p) = p {
                    p.flush_counters(&mut st.counters);
                }
            }
            r.roll(now, &st.counters, &st.status_codes, st.outstanding);
            if !r.rolls_at(r.next_boundary) {
                // The rest is the last tick, shipped by `finish`.
                return;
            }
            boundary = r.next_boundary;
        }
    });
}

/// Records one response into the current tick (rolling over first if it completed past the
/// boundary). An untaken branch when telemetry is off.
#[inline]
pub(crate) fn record_response(st: &mut WorkerState, x: &Exchange<'_>) {
    if let Some(r) = st.interval.as_deref_mut() {
        r.roll(x.done, &st.counters, &st.status_codes, st.outstanding);
        r.stats.scheduled_to_response.record(nanos(x.done - x.ticket.scheduled));
        r.stats.request_to_response.record(nanos(x.done - x.sent));
        r.stats.send_lateness.record(nanos(x.sent.saturating_duration_since(x.ticket.scheduled)));
    }
}

/// A failure is counted in the tick it happened in.
#[inline]
pub(crate) fn record_failure(st: &mut WorkerState) {
    if let Some(r) = st.interval.as_deref_mut() {
        r.roll(Instant::now(), &st.counters, &st.status_codes, st.outstanding);
    }
}

/// The run is over for this worker (after the drain and the pools' final counter flush): ship
/// the full ticks left and the partial last one with its true length.
pub(crate) fn finish(st: &mut WorkerState, end: Instant) {
    if let Some(mut r) = st.interval.take() {
        r.roll(end, &st.counters, &st.status_codes, st.outstanding);
        let offset = end.saturating_duration_since(r.start);
        r.ship(&st.counters, &st.status_codes, st.outstanding, Some(offset));
    }
}
