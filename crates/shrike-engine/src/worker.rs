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

use shrike_stats::{Counter, Counters, StatId, Stats, Termination, WorkerResult};
use tokio::sync::Notify;

use crate::config::EngineConfig;
use crate::pacer::Pacer;
use crate::pool::{self, Pool, PoolRequests};
use crate::predicate::PredicateKind;
use crate::requests::RequestCursor;
use crate::stop::StopHandle;
use shrike_timer::PreciseTimer;

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
    /// Released requests waiting for a connection (bounded by `max_pending_requests`).
    pub queue: VecDeque<Ticket>,
    /// Requests assigned or queued and not yet finished.
    pub outstanding: usize,
    pub errors: BTreeMap<String, u64>,
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

    let start = start_gate();
    let wall_start = SystemTime::now();
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
        let mut result = WorkerResult::new(format!("worker_{index}"), wall_start);
        result.execution_duration = end.saturating_duration_since(start);
        result.stats = std::mem::take(&mut st.stats);
        result.counters = std::mem::take(&mut st.counters);
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
    let mut pacer = Pacer::linear(cfg.rate, cfg.burst.get(), cfg.jitter, phase, seed);
    let timer = PreciseTimer::new();
    loop {
        if ctx.stopping.get() {
            return;
        }
        let due = start + pacer.next_offset();
        let wait_until = match deadline {
            Some(d) if due >= d => d,
            _ => due,
        };
        tokio::select! {
            biased;
            _ = ctx.wake.notified() => {}
            _ = timer.sleep_until(wait_until) => {}
        }
        if ctx.stopping.get() || deadline.is_some_and(|d| due >= d) {
            return;
        }
        if !dispatch(ctx, due, deadline).await {
            return;
        }
    }
}

/// Hands one due request to the pool; in closed loop, waits for capacity and records the wait.
/// Returns false when the run ended (stop or deadline) while waiting: the request is not sent.
async fn dispatch(ctx: &Rc<WorkerCtx>, scheduled: Instant, deadline: Option<Instant>) -> bool {
    // A request source with a limit (`num_requests`) ends this worker's run once spent.
    let Some(request) = ctx.requests.next() else { return false };
    let released = Instant::now();
    if pool::try_dispatch(ctx, Ticket { scheduled, released, retried: false, request }).is_ok() {
        return true;
    }
    // Closed loop and no capacity: block. The request keeps its scheduled time, so the wait
    // shows up in scheduled_to_response; the blocked time itself goes to sequencer.blocking.
    // The run's end still applies: a pacer stuck behind a slow server must not keep catching
    // up past the deadline.
    let end = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(end);
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
        let blocked = nanos(now - released);
        if ended || ctx.stopping.get() {
            ctx.state.borrow_mut().stats.record(StatId::SequencerBlocking, blocked);
            return false;
        }
        let t = Ticket { scheduled, released: now, retried: false, request };
        if pool::try_dispatch(ctx, t).is_ok() {
            ctx.state.borrow_mut().stats.record(StatId::SequencerBlocking, blocked);
            return true;
        }
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
