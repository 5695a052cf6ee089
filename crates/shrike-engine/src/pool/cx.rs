//! What a pool and a protocol may touch of their worker: its recorder (statistics, counters,
//! status codes, errors), the queue of released requests and its capacity and drain
//! notifiers, the stop flag, the connect options and timeouts, and the template state. Not the
//! schedule, not the pacer, not the run's configuration: a protocol can be driven with a
//! `PoolCx` of its own, and the worker loop is the only one that knows how requests are timed.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use shrike_spec::{Predicate, PredicateKind};
use shrike_stats::{Counter, Counters, RecordingStats, StatId, StatusCodes, Termination};
use tokio::sync::Notify;

use crate::config::Protocol;
use crate::feed::{Payload, Payloads};
use crate::requests::Renderer;
use crate::schedule::{Due, Ticket};
use crate::stop::StopHandle;
use crate::trace::TraceIds;

/// Distinct error messages are kept (with counts) so a failed run can say what went wrong;
/// bounded so a misbehaving server cannot grow memory.
const MAX_DISTINCT_ERRORS: usize = 32;

/// A worker's measurements and its queue. Borrowed briefly, never across an `.await`.
#[derive(Debug, Default)]
pub(crate) struct WorkerState {
    pub stats: RecordingStats,
    pub counters: Counters,
    pub status_codes: StatusCodes,
    /// Released requests waiting for a connection (bounded by `max_pending_requests`, or by
    /// the number of live sessions for session requests).
    pub queue: VecDeque<Ticket>,
    /// Unpaced requests taken from the schedule before any connection was free, not yet
    /// released (see [`crate::pool::take_ahead`]); with a sampled trace, if any.
    pub ahead: VecDeque<(Due, Option<TraceIds>)>,
    /// Requests assigned or queued and not yet finished.
    pub outstanding: usize,
    pub errors: BTreeMap<String, u64>,
    /// How replayed answers differed from their captured ones, by what changed (bounded as
    /// `errors` are).
    pub differences: BTreeMap<String, u64>,
    /// The live-telemetry recorder; `None` (one untaken branch per response) without telemetry.
    pub interval: Option<Box<crate::telemetry::recorder::Recorder>>,
}

impl WorkerState {
    pub fn new() -> WorkerState {
        let mut state = WorkerState::default();
        // Usually equal value for value: an unpaced ticket is released when it is due (no
        // lateness before its release), and most answers are 2xx. Each pair is then recorded
        // once (see `RecordingStats::twin`), and apart from its first difference on.
        let twins = [
            (StatId::QueueToConnect, StatId::SendLateness),
            (StatId::SequencerCallback, StatId::ScheduledToResponse),
            (StatId::RequestToResponse, StatId::Latency2xx),
        ];
        for (a, b) in twins {
            state.stats.twin(a, b);
        }
        state
    }

    /// Counts an error by its message. The message is built only when the error is new or
    /// the summary has room, never for the 33rd distinct kind onward.
    pub fn note_error(&mut self, msg: impl FnOnce() -> String) {
        tally(&mut self.errors, msg, "(other errors)");
    }

    /// Counts a replayed answer's difference from its captured one, as errors are counted.
    pub fn note_difference(&mut self, what: impl FnOnce() -> String) {
        tally(&mut self.differences, what, "(other differences)");
    }
}

/// Counts `key` in `map`, which holds at most [`MAX_DISTINCT_ERRORS`] keys and `other`.
fn tally(map: &mut BTreeMap<String, u64>, key: impl FnOnce() -> String, other: &str) {
    if map.len() >= MAX_DISTINCT_ERRORS {
        let key = key();
        let key = if map.contains_key(&key) { key } else { other.into() };
        *map.entry(key).or_default() += 1;
        return;
    }
    *map.entry(key()).or_default() += 1;
}

/// How connections are opened.
#[derive(Clone, Debug)]
pub(crate) struct ConnectOptions {
    /// Connect (and TLS handshake) timeout.
    pub timeout: Duration,
    /// Source address for outgoing connections.
    pub bind_address: Option<IpAddr>,
    /// What ALPN must agree on over TLS.
    pub protocol: Protocol,
    /// Stamp receives with the kernel's arrival time (`--read-coalesce`).
    pub stamp_receives: bool,
    /// Every connection is a CONNECT tunnel through this proxy.
    pub tunnel: Option<std::sync::Arc<crate::tunnel::Tunnel>>,
}

/// The narrow context pools and protocols work in. Single-threaded: cells, never locks.
pub struct PoolCx {
    pub(crate) state: RefCell<WorkerState>,
    /// Signalled when a connection goes idle while the pacer is blocked (closed loop).
    pub(crate) capacity: Notify,
    pub(crate) pacer_blocked: Cell<bool>,
    /// Signalled when `outstanding` drops to zero.
    pub(crate) drained: Notify,
    /// Sessions whose request finished since the worker loop last looked, and the signal
    /// that there are some.
    pub(crate) finished_sessions: RefCell<Vec<u32>>,
    pub(crate) session_finished: Notify,
    /// Wakes the worker loop when the run is stopping.
    pub(crate) wake: Notify,
    /// No new requests are released once set.
    pub(crate) stopping: Cell<bool>,
    /// Nor at or after this instant (the run's deadline), which the worker loop sets.
    pub(crate) release_until: Cell<Option<Instant>>,
    pub(crate) stop: StopHandle,
    pub(crate) connect: ConnectOptions,
    /// A request unanswered this long is abandoned (`upstream_rq_timeout`).
    pub(crate) request_timeout: Duration,
    /// Template state shared by every pool of the worker (sequence numbers stay unique).
    pub(crate) renderer: Renderer,
    /// Fed sessions' payloads (replay), keyed by their tickets' request numbers.
    pub(crate) payloads: Rc<Payloads>,
    /// Every ticket's request number is a key into `payloads` (requests streamed from a
    /// source), not a request-source entry.
    pub(crate) payload_requests: bool,
    /// Zipkin tracing: the worker's sampler and its channel to the span collector.
    pub(crate) tracing: Option<crate::trace::Tracing>,
    /// The worker's HTTP/2 connections to a tunnel's proxy (`--tunnel-protocol http2`).
    pub(crate) tunnel_conns: crate::tunnel::ProxyConns<crate::tunnel::h2::ProxyConn>,
    /// The worker's QUIC connections to a tunnel's proxy (`--tunnel-protocol http3`).
    pub(crate) tunnel_quic: crate::tunnel::ProxyConns<crate::tunnel::h3::QuicProxy>,
    predicates: Box<[Predicate]>,
}

/// What a [`crate::protocol::Protocol`] of the caller's may do with its context.
impl PoolCx {
    /// The fed payload of request `request` (a ticket's number), while its request is in
    /// flight.
    pub fn payload(&self, request: u32) -> Option<Payload> {
        self.payloads.get(request)
    }

    /// Adds `n` to `counter`.
    pub fn count(&self, counter: Counter, n: u64) {
        self.state.borrow_mut().counters.add(counter, n);
    }

    /// Counts an error by its message in the run's error summary (built only when needed).
    pub fn note_error(&self, msg: impl FnOnce() -> String) {
        self.state.borrow_mut().note_error(msg);
    }

    /// How long opening a connection (and its handshakes) may take.
    pub fn connect_timeout(&self) -> Duration {
        self.connect.timeout
    }
}

impl PoolCx {
    pub(crate) fn new(
        stop: StopHandle,
        connect: ConnectOptions,
        request_timeout: Duration,
        renderer: Renderer,
        predicates: &[Predicate],
    ) -> PoolCx {
        PoolCx {
            state: RefCell::new(WorkerState::new()),
            capacity: Notify::new(),
            pacer_blocked: Cell::new(false),
            drained: Notify::new(),
            finished_sessions: RefCell::new(Vec::new()),
            session_finished: Notify::new(),
            wake: Notify::new(),
            stopping: Cell::new(false),
            release_until: Cell::new(None),
            stop,
            connect,
            request_timeout,
            renderer,
            payloads: Rc::default(),
            payload_requests: false,
            tracing: None,
            tunnel_conns: Default::default(),
            tunnel_quic: Default::default(),
            predicates: predicates.into(),
        }
    }

    /// Evaluates predicates after a counter changed; the first to fire stops the whole run.
    /// Requests that fail while the run drains (after its deadline, or once a count is spent)
    /// still count: only a stop already requested (its reason wins) skips the check, so a run
    /// whose last requests all failed never reads as completed.
    #[inline]
    pub(crate) fn check_predicates(&self, counters: &mut Counters) {
        // Every response checks: the loop inline, the rest (a predicate fired) out of line.
        if let Some(p) = self.predicates.iter().find(|p| p.fired(counters)) {
            self.predicate_fired(p, counters);
        }
    }

    #[cold]
    #[inline(never)]
    fn predicate_fired(&self, p: &Predicate, counters: &mut Counters) {
        if self.stop.is_stopped() {
            return;
        }
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

    pub(crate) fn begin_stopping(&self) {
        if !self.stopping.replace(true) {
            self.wake.notify_one();
        }
    }

    /// A request left the pools (answered, failed or abandoned): its session may go on.
    #[inline]
    pub(crate) fn request_finished(&self, ticket: &Ticket) {
        if ticket.session.is_none() && self.payload_requests {
            self.payloads.remove(ticket.request);
        }
        if let Some(s) = ticket.session {
            if s.fed {
                self.payloads.remove(ticket.request);
            }
            self.finished_sessions.borrow_mut().push(s.id);
            self.session_finished.notify_one();
        }
        let mut st = self.state.borrow_mut();
        if ticket.session.is_some_and(|s| s.last) {
            st.counters.inc(Counter::JobsCompleted);
        }
        st.outstanding -= 1;
        if st.outstanding == 0 {
            self.drained.notify_one();
        }
    }
}
