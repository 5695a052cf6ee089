//! The one worker loop. It is composed from policies and knows no modes: the [`Schedule`]
//! says what is due next and when (the pacer's rate plan, or timed sessions), the pools
//! ([`crate::pool`]) say which connection carries it or that none can (then closed loop waits
//! and open loop counts overflow), and the stop policy (deadline, predicates, signal, a spent
//! schedule) ends the loop. Then in-flight requests drain for up to `timeout` and the worker
//! hands back its statistics.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use shrike_stats::{Counter, StatId, WorkerResult};

use crate::config::EngineConfig;
use crate::feed::{Admission, FedSession, Payloads};
use crate::idle::Idle;
use crate::pacer::Pacer;
use crate::pool::cx::{ConnectOptions, PoolCx};
use crate::pool::{self, PoolRequests, Pools};
use crate::requests::{Renderer, RequestCursor};
use crate::schedule::rate::RateSchedule;
use crate::schedule::remote::RemoteSchedule;
use crate::schedule::sessions::{SessionPlan, SessionSchedule};
use crate::schedule::{Due, Peek, Schedule, Ticket};
use crate::stop::StopHandle;
use crate::trace::TraceIds;

/// The longest a worker waits for its schedule to be primed before the clock starts.
const PRIME_LIMIT: Duration = Duration::from_secs(2);

/// How much longer than `timeout` the end-of-run drain waits for in-flight requests.
const DRAIN_MARGIN: Duration = Duration::from_millis(50);

/// What a worker plays.
#[derive(Debug)]
pub(crate) enum Workload {
    /// The run's rate plan over its request source.
    Rate,
    /// Its share of timed sessions.
    Sessions(Vec<SessionPlan>),
    /// Sessions fed while the run goes on (replay).
    Fed(tokio::sync::mpsc::Receiver<FedSession>, Arc<Admission>),
    /// The rate plan over requests streamed from a request source, each merged over `base`
    /// (the run's request) for `target`.
    Remote {
        stream: crate::requests::remote::RemoteStream,
        base: crate::config::RequestSpec,
        target: Arc<crate::target::Target>,
    },
}

/// What a worker returns: its result plus the errors it saw.
#[derive(Debug)]
pub struct WorkerOutput {
    pub result: WorkerResult,
    pub errors: BTreeMap<String, u64>,
    /// The canary diff's differences (replay).
    pub differences: BTreeMap<String, u64>,
}

/// What watches a worker's requests without changing them.
pub(crate) struct Watch {
    /// Live telemetry: the worker's link to the collector thread.
    pub telemetry: Option<crate::telemetry::Link>,
    /// Zipkin tracing: its sampler and channel to the span collector.
    pub tracing: Option<crate::trace::Tracing>,
}

/// Runs one worker to completion on the current (single-threaded) runtime, inside a LocalSet.
pub(crate) async fn run_worker(
    index: usize,
    cfg: Arc<EngineConfig>,
    requests: Vec<PoolRequests>,
    plan: Workload,
    stop: StopHandle,
    start_gate: impl FnOnce() -> Instant,
    watch: Watch,
) -> WorkerOutput {
    let Watch { telemetry, tracing } = watch;
    let connect = ConnectOptions {
        timeout: cfg.timeout,
        bind_address: cfg.bind_address,
        protocol: cfg.protocol,
        stamp_receives: cfg.read_coalesce.is_some(),
        tunnel: cfg.tunnel.clone(),
    };
    let renderer = Renderer::new(index, cfg.workers.get(), seed(index).rotate_left(17));
    let payloads: Rc<Payloads> = Rc::default();
    let mut cx = PoolCx::new(stop, connect, cfg.timeout, renderer, &cfg.predicates);
    cx.payloads = payloads.clone();
    cx.payload_requests = matches!(plan, Workload::Remote { .. });
    cx.tracing = tracing;
    let pools = Rc::new(Pools::new(cx, cfg.clone(), requests));
    let pacer = || {
        // Workers interleave: worker i is offset by i/N of a period, so N workers at R rps
        // look like one even stream at N×R rather than N simultaneous clumps. A shard's
        // workers take their places among every shard's workers, so the fleet does too.
        let (slot, slots) = match cfg.shard {
            Some(s) => s.global_worker(index, cfg.workers.get()),
            None => (index, cfg.workers.get()),
        };
        let phase = slot as f64 / slots as f64;
        Pacer::new(&cfg.plan, cfg.burst.get(), cfg.jitter, phase, seed(index))
            .ending_at(cfg.duration)
    };
    let follower = || crate::pacer::Follower::new(cfg.rate.clone());
    let share = cfg.per_worker_requests.as_ref().and_then(|v| v.get(index).copied());
    match plan {
        Workload::Rate => {
            let cursor = RequestCursor::new(index, &cfg.requests, share);
            let schedule = RateSchedule::new(pacer(), cursor, follower());
            drive(index, pools, schedule, start_gate, telemetry).await
        }
        Workload::Remote { stream, base, target } => {
            let schedule =
                RemoteSchedule::new(pacer(), stream, payloads, base, target, share, follower());
            drive(index, pools, schedule, start_gate, telemetry).await
        }
        Workload::Sessions(plans) => {
            let schedule = SessionSchedule::new(plans);
            drive(index, pools, schedule, start_gate, telemetry).await
        }
        Workload::Fed(rx, admission) => {
            let schedule = SessionSchedule::fed(rx, admission, payloads);
            drive(index, pools, schedule, start_gate, telemetry).await
        }
    }
}

async fn drive<S: Schedule>(
    index: usize,
    pools: Rc<Pools>,
    mut schedule: S,
    start_gate: impl FnOnce() -> Instant,
    telemetry: Option<crate::telemetry::Link>,
) -> WorkerOutput {
    // The one cross-thread registration: a stop requested anywhere reaches this worker here.
    {
        let pools = pools.clone();
        tokio::task::spawn_local(async move {
            pools.cx.stop.stopped().await;
            pools.cx.begin_stopping();
        });
    }

    pools.start().await;
    // A streamed request is one of the run's: it is never spent on a warm-up.
    // A stop during the warm-up abandons it: its request is no part of the measurement, so
    // neither waiting for it nor counting it as a failure would be right.
    let abandoned = pools.cfg.warmup
        && !pools.cx.payload_requests
        && !warmup(&pools, schedule.warmup_request()).await;
    if abandoned {
        // The stop is known here; the task above that says so to the pacer may not have run
        // yet, and the pacer would release the first request after the stop.
        pools.cx.begin_stopping();
    }

    // A fed schedule's lead fills before the clock starts, never past a start time set for
    // the run (a fleet's `--start-at`).
    let within = match pools.cfg.start_at {
        Some(at) => at.duration_since(SystemTime::now()).unwrap_or_default().min(PRIME_LIMIT),
        None => PRIME_LIMIT,
    };
    schedule.primed(within).await;
    let start = start_gate();
    // With --start-at the start lies ahead; the wall clock must name it, not this moment.
    let wall_start = SystemTime::now() + start.saturating_duration_since(Instant::now());
    if let Some(link) = telemetry {
        crate::telemetry::attach(&pools, link, start);
    }
    pace(&pools, &mut schedule, start).await;
    // A request source that failed fails the run (as Nighthawk's default predicates do):
    // the load it was to send was not sent.
    if let Some(why) = schedule.failure() {
        pools.cx.state.borrow_mut().note_error(|| why);
        pools.cx.stop.request(shrike_stats::Termination::FailurePredicate(
            "request_source (the source failed)".into(),
        ));
    }
    // Nothing is released at or after the deadline: a sending window that ran past it only by
    // the timer's lateness in noticing would understate the achieved rate.
    // A paced schedule spent early (`-n`) sent its last request one spacing before its span
    // ended: the window runs to the release it would have made next, unless it ran late.
    let deadline = pools.cfg.duration.map(|d| start + d);
    let spent_at = schedule.spent_at().map(|at| start + at);
    let sending_end = spent_at.map_or(Instant::now(), |at| at.max(Instant::now()));
    let sending_end = deadline.map_or(sending_end, |d| sending_end.min(d));
    if abandoned {
        let mut st = pools.cx.state.borrow_mut();
        // Left as it is: the request may still finish (and decrement it) before the runtime
        // goes, after the result has been taken.
        let n = st.outstanding as u64;
        st.counters.add(Counter::RqCancelled, n);
    } else {
        drain(&pools).await;
    }
    let end = Instant::now();

    let out = {
        let mut st = pools.cx.state.borrow_mut();
        // Let idle connections exit and close their sockets.
        pools.close(&mut st.counters);
        crate::telemetry::finish(&mut st, end);
        let mut result = WorkerResult::new(format!("worker_{index}"), wall_start);
        result.execution_duration = end.saturating_duration_since(start);
        result.sending_duration = Some(sending_end.saturating_duration_since(start));
        result.stats = st.stats.take();
        result.counters = std::mem::take(&mut st.counters);
        result.status_codes = std::mem::take(&mut st.status_codes);
        let differences = std::mem::take(&mut st.differences);
        WorkerOutput { result, errors: std::mem::take(&mut st.errors), differences }
    };
    // QUIC has no FIN: without an explicit close the server would hold each connection
    // until its idle timeout.
    pools.quic.close().await;
    out
}

/// The release loop: wait for what is due, hand it to the pools, until stopped, past the
/// deadline, or the schedule is spent.
async fn pace<S: Schedule>(pools: &Rc<Pools>, schedule: &mut S, start: Instant) {
    let cx = &pools.cx;
    let deadline = pools.cfg.duration.map(|d| start + d);
    let idle = Idle::new(pools.cfg.idle, pools.cfg.max_lateness);
    cx.release_until.set(deadline);
    // When the last paced release was due: a lateness budget gathers in its spacings.
    let mut last_due = None;
    // Unpaced runs start with the others, not before: wait for the (possibly --start-at) start.
    if schedule.peek() == Peek::Now {
        tokio::select! {
            biased;
            _ = cx.wake.notified() => return,
            _ = idle.until(start, None, &cx.stopping) => {}
        }
    }
    loop {
        if cx.stopping.get() {
            return;
        }
        // Sessions whose request finished may have their next one due.
        if S::HAS_SESSIONS {
            let finished = std::mem::take(&mut *cx.finished_sessions.borrow_mut());
            for id in finished {
                schedule.finished(id);
            }
        }
        let scheduled = match schedule.peek() {
            Peek::At(offset) => {
                let due = start + offset;
                let wait_until = deadline.map_or(due, |d| due.min(d));
                let changed = tokio::select! {
                    biased;
                    _ = cx.wake.notified() => false,
                    _ = cx.session_finished.notified(), if S::HAS_SESSIONS => true,
                    _ = schedule.arrival(), if S::HAS_SESSIONS => true,
                    _ = idle.until(wait_until, last_due, &cx.stopping) => false,
                };
                if deadline.is_some_and(|d| due >= d && Instant::now() >= d) {
                    return;
                }
                // A session finished while waiting: what is due next may be earlier.
                if changed || cx.stopping.get() {
                    continue;
                }
                Some(due)
            }
            // Every connection is busy and unpaced requests wait for them: these join them
            // here while there is room, without a dispatch or a clock read (a full wait
            // blocks in dispatch).
            Peek::Now if pool::waiting_ahead(pools) => {
                while let Some(due) = schedule.take() {
                    let trace = cx.tracing.as_ref().and_then(crate::trace::Tracing::sample);
                    if !pool::put_ahead(pools, due, trace) {
                        if !dispatch(pools, None, due, trace, deadline).await {
                            return;
                        }
                        break;
                    }
                    if schedule.peek() != Peek::Now {
                        break;
                    }
                }
                continue;
            }
            Peek::Now if deadline.is_some_and(|d| Instant::now() >= d) => return,
            Peek::Now => None,
            // Nothing is due until a request finishes (or, for a plan that ended at rate 0,
            // ever): idle until then or the run's end.
            Peek::Wait => {
                tokio::select! {
                    biased;
                    _ = cx.wake.notified() => {}
                    _ = cx.session_finished.notified() => continue,
                    _ = schedule.arrival() => continue,
                    _ = run_end(deadline) => return,
                }
                continue;
            }
            Peek::End => return hand_over_ahead(pools, deadline).await,
        };
        let taken = match scheduled {
            // Sessions: what matters most of what is due by now, with its own due time.
            Some(_) if S::HAS_SESSIONS => {
                let now = Instant::now().saturating_duration_since(start);
                schedule.take_by(now).map(|(due, at)| (due, Some(start + at)))
            }
            _ => schedule.take().map(|due| (due, scheduled)),
        };
        let Some((due, scheduled)) = taken else { continue };
        last_due = scheduled.or(last_due);
        if let Some(s) = due.session.filter(|s| s.opening) {
            pool::open_ahead(pools, s.id, due.request);
            // Its connect runs before anything more is taken, so a worker that fell behind
            // chooses again among the requests that fell due meanwhile.
            tokio::task::yield_now().await;
            continue;
        }
        let trace = cx.tracing.as_ref().and_then(crate::trace::Tracing::sample);
        if !dispatch(pools, scheduled, due, trace, deadline).await {
            return;
        }
    }
}

/// Nighthawk's `--simple-warmup`: one request per worker before the clock starts, so the first
/// measured request does not pay for connection setup and cold caches. Its counters stay (as
/// Nighthawk documents); its latency samples are discarded. False when a stop came first and
/// the warm-up request was left in flight.
async fn warmup(pools: &Rc<Pools>, request: u32) -> bool {
    let ticket = Ticket::release(Due { request, session: None }, None, None, Instant::now());
    if pool::try_dispatch(pools, ticket).is_err() {
        return true;
    }
    let cx = &pools.cx;
    let wait = async {
        while cx.state.borrow().outstanding > 0 {
            cx.drained.notified().await;
        }
    };
    let finished = tokio::select! {
        biased;
        _ = cx.stop.stopped() => false,
        waited = tokio::time::timeout(pools.cfg.timeout, wait) => {
            if waited.is_err() {
                cx.state.borrow_mut().note_error(|| "the warm-up request timed out".into());
            }
            true
        }
    };
    cx.state.borrow_mut().stats.clear();
    finished
}

/// Hands one request to the pools; in closed loop, waits for capacity and records the wait.
/// `scheduled` is the due time, or `None` for an unpaced run, where a request is due the
/// moment a connection can take it (so waiting for one is neither latency nor blocking).
/// Returns false when the run ended (stop or deadline) while waiting: the request is not sent.
async fn dispatch(
    pools: &Rc<Pools>,
    scheduled: Option<Instant>,
    due: Due,
    trace: Option<TraceIds>,
    deadline: Option<Instant>,
) -> bool {
    let cx = &pools.cx;
    if due.session.is_some_and(|s| s.first) {
        cx.state.borrow_mut().counters.inc(Counter::JobsStarted);
    }
    // Unpaced, a request no connection is free for waits for the first that finishes,
    // which releases it then (`pool::take_ahead`); the loop goes on taking while there is room.
    let ahead = |pools: &Pools| scheduled.is_none() && pool::put_ahead(pools, due, trace);
    let released = Instant::now();
    let ticket = |at: Instant| Ticket::release(due, trace, scheduled, at);
    if pool::try_dispatch(pools, ticket(released)).is_ok() || ahead(pools) {
        return true;
    }
    // Closed loop and no capacity: block. The request keeps its scheduled time, so the wait
    // shows up in scheduled_to_response; the blocked time itself goes to sequencer.blocking.
    // The run's end still applies: a pacer stuck behind a slow server must not keep catching
    // up past the deadline.
    let end = run_end(deadline);
    tokio::pin!(end);
    let record_blocking = |now: Instant| {
        if scheduled.is_some() {
            cx.state.borrow_mut().stats.record(StatId::SequencerBlocking, nanos(now - released));
        }
    };
    loop {
        let ended = wait_for_capacity(cx, end.as_mut()).await;
        let now = Instant::now();
        if ended || cx.stopping.get() {
            record_blocking(now);
            return false;
        }
        if pool::try_dispatch(pools, ticket(now)).is_ok() || ahead(pools) {
            record_blocking(now);
            return true;
        }
    }
}

/// Waits until connections have taken every request taken ahead of them (a spent schedule's
/// last ones), or the run ends.
async fn hand_over_ahead(pools: &Rc<Pools>, deadline: Option<Instant>) {
    let cx = &pools.cx;
    let end = run_end(deadline);
    tokio::pin!(end);
    while !cx.stopping.get() && !cx.state.borrow().ahead.is_empty() {
        if wait_for_capacity(cx, end.as_mut()).await {
            return;
        }
    }
}

/// Blocks the worker loop until a pool reports capacity, the run is stopping (`wake`) or
/// `end` completes; true for the end.
async fn wait_for_capacity(cx: &PoolCx, end: Pin<&mut impl Future<Output = ()>>) -> bool {
    cx.pacer_blocked.set(true);
    let ended = tokio::select! {
        biased;
        _ = cx.wake.notified() => false,
        _ = end => true,
        _ = cx.capacity.notified() => false,
    };
    cx.pacer_blocked.set(false);
    ended
}

/// Completes when the run's deadline passes; never, for a run without one.
async fn run_end(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Stop releasing, cancel what never left the pool queue, and wait up to `timeout` for
/// in-flight requests.
async fn drain(pools: &Rc<Pools>) {
    let cx = &pools.cx;
    cx.stopping.set(true);
    {
        let mut st = cx.state.borrow_mut();
        let queued = st.queue.len();
        st.queue.clear();
        // Taken ahead but never released: not requests of this run.
        st.ahead.clear();
        st.outstanding -= queued;
        st.counters.add(Counter::RqCancelled, queued as u64);
    }
    let wait = async {
        while cx.state.borrow().outstanding > 0 {
            cx.drained.notified().await;
        }
    };
    // A request released just before the end started its own timeout about when this grace
    // period did; the margin lets it be counted as what it is (timed out) rather than abandoned.
    if tokio::time::timeout(pools.cfg.timeout + DRAIN_MARGIN, wait).await.is_err() {
        let mut st = cx.state.borrow_mut();
        let abandoned = st.outstanding as u64;
        st.counters.add(Counter::RqCancelled, abandoned);
        st.note_error(|| {
            format!(
                "{abandoned} in-flight request(s) abandoned after the {}s grace period",
                pools.cfg.timeout.as_secs_f64()
            )
        });
    }
}

/// A per-worker seed: distinct across workers and runs.
fn seed(index: usize) -> u64 {
    (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos()
            as u64
}

#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
