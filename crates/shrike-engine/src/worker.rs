//! The one worker loop. It is composed from policies and knows no modes:
//! the [`Pacer`] says when a request is due, the pool ([`crate::pool`], h1, h2 or h3) says which
//! connection carries it or that none can (then closed loop waits and open loop counts
//! overflow), and the
//! stop policy (deadline, predicates, signal) ends the loop. Then in-flight requests drain for
//! up to `timeout` and the worker hands back its statistics.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use shrike_stats::{Counter, Counters, StatId, Stats, StatusCodes, Termination, WorkerResult};
use tokio::sync::Notify;

use crate::config::EngineConfig;
use crate::idle::Idle;
use crate::pacer::{Pacer, RatePlan, Release};
use crate::pool::{self, Pool, PoolRequests};
use crate::requests::RequestCursor;
use crate::stop::StopHandle;
use shrike_spec::PredicateKind;

/// A request released by the pacer: when it was due, and when it was handed to the pool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub scheduled: Instant,
    pub released: Instant,
    /// Set once the request was re-dispatched after a connection refused it unprocessed
    /// (GOAWAY, h2 REFUSED_STREAM, h3 H3_REQUEST_REJECTED); a request is retried at most once.
    pub retried: bool,
    /// Which request-source entry it sends.
    pub request: u32,
}

/// Distinct error messages are kept (with counts) so a failed run can say what went wrong;
/// bounded so a misbehaving server cannot grow memory.
const MAX_DISTINCT_ERRORS: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct WorkerState {
    pub stats: Stats,
    pub counters: Counters,
    pub status_codes: StatusCodes,
    /// Released requests waiting for a connection (bounded by `max_pending_requests`).
    pub queue: VecDeque<Ticket>,
    /// Requests assigned or queued and not yet finished.
    pub outstanding: usize,
    pub errors: BTreeMap<String, u64>,
    /// The live-telemetry recorder; `None` (one untaken branch per response) without telemetry.
    pub interval: Option<Box<crate::telemetry::recorder::Recorder>>,
}

impl WorkerState {
    pub fn note_error(&mut self, msg: impl FnOnce() -> String) {
        let msg = msg();
        if self.errors.len() < MAX_DISTINCT_ERRORS || self.errors.contains_key(&msg) {
            *self.errors.entry(msg).or_default() += 1;
        } else {
            *self.errors.entry("(other errors)".into()).or_default() += 1;
        }
    }
}

/// Everything a worker's tasks share. Single-threaded: `Rc`, `RefCell` and `Cell`, never
/// locks. Borrows of `state` are never held across an `.await`.
pub(crate) struct WorkerCtx {
    pub cfg: Arc<EngineConfig>,
    /// The worker's walk over the request source (and its template state).
    pub requests: RequestCursor,
    pub state: RefCell<WorkerState>,
    /// The protocol policy, one pool per endpoint: which connection carries each request.
    pub pools: Box<[Pool]>,
    /// The worker's QUIC sockets (HTTP/3 runs), shared by all its pools' connections.
    pub quic: pool::h3::QuicEndpoints,
    /// The endpoint the next request tries first (round robin).
    pub next_pool: Cell<usize>,
    /// Signalled when a connection goes idle while the pacer is blocked (closed loop).
    pub capacity: Notify,
    pub pacer_blocked: Cell<bool>,
    /// Signalled when `outstanding` drops to zero.
    pub drained: Notify,
    /// Wakes the pacer when the run is stopping.
    pub wake: Notify,
    /// No new requests are released once set.
    pub stopping: Cell<bool>,
    pub stop: StopHandle,
}

impl WorkerCtx {
    /// Evaluates predicates after a counter changed; the first to fire stops the whole run.
    pub fn check_predicates(&self, counters: &mut Counters) {
        if self.stopping.get() {
            return;
        }
        let Some(p) = self.cfg.predicates.iter().find(|p| p.fired(counters)) else {
            return;
        };
        let reason = match p.kind {
            PredicateKind::Failure => {
                counters.inc(Counter::SequencerFailedTerminations);
                Termination::FailurePredicate(p.describe())
            }
            PredicateKind::Termination => {
                counters.inc(Counter::SequencerTerminations);
                Termination::TerminationPredicate(p.describe())
            }
        };
        self.stop.request(reason);
        self.begin_stopping();
    }

    pub fn begin_stopping(&self) {
        if !self.stopping.replace(true) {
            self.wake.notify_one();
        }
    }
}

/// What a worker returns: its result plus the errors it saw.
#[derive(Debug)]
pub struct WorkerOutput {
    pub result: WorkerResult,
    pub errors: BTreeMap<String, u64>,
}

/// Runs one worker to completion on the current (single-threaded) runtime, inside a LocalSet.
pub(crate) async fn run_worker(
    index: usize,
    cfg: Arc<EngineConfig>,
    requests: Vec<PoolRequests>,
    stop: StopHandle,
    start_gate: impl FnOnce() -> Instant,
    telemetry: Option<crate::telemetry::Link>,
) -> WorkerOutput {
    let ctx = Rc::new(WorkerCtx {
        requests: RequestCursor::new(index, &cfg, seed(index).rotate_left(17)),
        state: RefCell::new(WorkerState::default()),
        pools: requests.into_iter().enumerate().map(|(i, r)| Pool::new(&cfg, i, r)).collect(),
        quic: pool::h3::QuicEndpoints::default(),
        next_pool: Cell::new(0),
        capacity: Notify::new(),
        pacer_blocked: Cell::new(false),
        drained: Notify::new(),
        wake: Notify::new(),
        stopping: Cell::new(false),
        stop: stop.clone(),
        cfg,
    });

    // The one cross-thread registration: a stop requested anywhere reaches this worker here.
    {
        let ctx = ctx.clone();
        tokio::task::spawn_local(async move {
            ctx.stop.stopped().await;
            ctx.begin_stopping();
        });
    }

    Pool::start(&ctx).await;
    if ctx.cfg.warmup {
        warmup(&ctx).await;
    }

    let start = start_gate();
    // With --start-at the start lies ahead; the wall clock must name it, not this moment.
    let wall_start = SystemTime::now() + start.saturating_duration_since(Instant::now());
    if let Some(link) = telemetry {
        crate::telemetry::attach(&ctx, link, start);
    }
    pace(&ctx, index, start).await;
    drain(&ctx).await;
    let end = Instant::now();

    // Let idle connections exit and close their sockets.
    let out = {
        let mut st = ctx.state.borrow_mut();
        for p in ctx.pools.iter() {
            p.close();
            p.flush_counters(&mut st.counters);
        }
        crate::telemetry::finish(&mut st, end);
        let mut result = WorkerResult::new(format!("worker_{index}"), wall_start);
        result.execution_duration = end.saturating_duration_since(start);
        result.stats = std::mem::take(&mut st.stats);
        result.counters = std::mem::take(&mut st.counters);
        result.status_codes = std::mem::take(&mut st.status_codes);
        WorkerOutput { result, errors: std::mem::take(&mut st.errors) }
    };
    // QUIC has no FIN: without an explicit close the server would hold each connection
    // until its idle timeout.
    ctx.quic.close().await;
    out
}

/// The release loop: wait for each due time, hand the request to the pool, until stopped.
async fn pace(ctx: &Rc<WorkerCtx>, index: usize, start: Instant) {
    let cfg = ctx.cfg.clone();
    let deadline = cfg.duration.map(|d| start + d);
    let workers = cfg.workers.get();
    // Workers interleave: worker i is offset by i/N of a period, so N workers at R rps look
    // like one even stream at N×R rather than N simultaneous clumps.
    let phase = index as f64 / workers as f64;
    let seed = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos()
            as u64;
    let mut pacer = Pacer::new(&cfg.plan, cfg.burst.get(), cfg.jitter, phase, seed);
    let idle = Idle::new(cfg.idle);
    // Unpaced runs start with the others, not before: wait for the (possibly --start-at) start.
    if matches!(cfg.plan, RatePlan::Unpaced) {
        tokio::select! {
            biased;
            _ = ctx.wake.notified() => return,
            _ = idle.until(start, &ctx.stopping) => {}
        }
    }
    loop {
        if ctx.stopping.get() {
            return;
        }
        let scheduled = match pacer.next_release() {
            Release::At(offset) => {
                let due = start + offset;
                let wait_until = match deadline {
                    Some(d) if due >= d => d,
                    _ => due,
                };
                tokio::select! {
                    biased;
                    _ = ctx.wake.notified() => {}
                    _ = idle.until(wait_until, &ctx.stopping) => {}
                }
                if deadline.is_some_and(|d| due >= d) {
                    return;
                }
                Some(due)
            }
            Release::Now if deadline.is_some_and(|d| Instant::now() >= d) => return,
            Release::Now => None,
            // The plan ended at rate 0: idle until the run ends.
            Release::Never => {
                tokio::select! {
                    _ = ctx.wake.notified() => {}
                    _ = run_end(deadline) => {}
                }
                return;
            }
        };
        if ctx.stopping.get() || !dispatch(ctx, scheduled, deadline).await {
            return;
        }
    }
}

/// Nighthawk's `--simple-warmup`: one request per worker before the clock starts, so the first
/// measured request does not pay for connection setup and cold caches. Its counters stay (as
/// Nighthawk documents); its latency samples are discarded.
async fn warmup(ctx: &Rc<WorkerCtx>) {
    let now = Instant::now();
    // The entry this worker would send first, without spending it (or a `num_requests` slot).
    let request = ctx.requests.peek();
    let ticket = Ticket { scheduled: now, released: now, retried: false, request };
    if pool::try_dispatch(ctx, ticket).is_err() {
        return;
    }
    let wait = async {
        while ctx.state.borrow().outstanding > 0 {
            ctx.drained.notified().await;
        }
    };
    if tokio::time::timeout(ctx.cfg.timeout, wait).await.is_err() {
        ctx.state.borrow_mut().note_error(|| "the warm-up request timed out".into());
    }
    ctx.state.borrow_mut().stats = Stats::new();
}

/// Hands one request to the pool; in closed loop, waits for capacity and records the wait.
/// `scheduled` is the pacer's due time, or `None` for an unpaced run, where a request is due
/// the moment a connection can take it (so waiting for one is neither latency nor blocking).
/// Returns false when the run ended (stop or deadline) while waiting: the request is not sent.
async fn dispatch(
    ctx: &Rc<WorkerCtx>,
    scheduled: Option<Instant>,
    deadline: Option<Instant>,
) -> bool {
    // A request source with a limit (`num_requests`) ends this worker's run once spent.
    let Some(request) = ctx.requests.next() else { return false };
    let released = Instant::now();
    let ticket = |at: Instant| Ticket {
        scheduled: scheduled.unwrap_or(at),
        released: at,
        retried: false,
        request,
    };
    if pool::try_dispatch(ctx, ticket(released)).is_ok() {
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
            ctx.state.borrow_mut().stats.record(StatId::SequencerBlocking, nanos(now - released));
        }
    };
    loop {
        ctx.pacer_blocked.set(true);
        let ended = tokio::select! {
            biased;
            _ = ctx.wake.notified() => false,
            _ = &mut end => true,
            _ = ctx.capacity.notified() => false,
        };
        ctx.pacer_blocked.set(false);
        let now = Instant::now();
        if ended || ctx.stopping.get() {
            record_blocking(now);
            return false;
        }
        if pool::try_dispatch(ctx, ticket(now)).is_ok() {
            record_blocking(now);
            return true;
        }
    }
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
async fn drain(ctx: &Rc<WorkerCtx>) {
    ctx.stopping.set(true);
    {
        let mut st = ctx.state.borrow_mut();
        let queued = st.queue.len();
        st.queue.clear();
        st.outstanding -= queued;
        st.counters.add(Counter::RqCancelled, queued as u64);
    }
    let wait = async {
        while ctx.state.borrow().outstanding > 0 {
            ctx.drained.notified().await;
        }
    };
    if tokio::time::timeout(ctx.cfg.timeout, wait).await.is_err() {
        let mut st = ctx.state.borrow_mut();
        let abandoned = st.outstanding as u64;
        st.counters.add(Counter::RqCancelled, abandoned);
        st.note_error(|| {
            format!(
                "{abandoned} in-flight request(s) abandoned after the {}s grace period",
                ctx.cfg.timeout.as_secs_f64()
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
