//! Starts one OS thread per worker, each with its own single-threaded runtime, releases them
//! together, and merges nothing but the final results.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Instant, SystemTime};

use shrike_stats::{Interval, Termination, WorkerResult};

use crate::config::{EngineConfig, IdleStrategy, IoBackend, Protocol};
use crate::feed::{FedProtocol, Feed};
use crate::h1;
use crate::pool::h2::RequestTemplate;
use crate::pool::PoolRequests;
use crate::requests::{H1Entry, H1Request, H1Template};
use crate::schedule::sessions::SessionPlan;
use crate::stop::StopHandle;
use crate::target::Scheme;
use crate::telemetry::{self, recorder::Msg, Link, Telemetry};
use crate::worker::{run_worker, WorkerOutput, Workload};

/// What a run produced.
#[derive(Debug)]
pub(crate) struct RunOutput {
    pub workers: Vec<WorkerResult>,
    pub termination: Termination,
    /// Distinct error messages seen by any worker, with counts.
    pub errors: BTreeMap<String, u64>,
    /// How replayed answers differed from the captured ones, with counts.
    pub differences: BTreeMap<String, u64>,
    /// The run's time series, merged over workers; empty without telemetry.
    pub intervals: Vec<Interval>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("cannot start worker thread: {0}")]
    Spawn(std::io::Error),
    #[error("cannot start worker runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot set up the worker's io_uring: {0} (use --io-backend epoll)")]
    IoUring(std::io::Error),
    #[error("worker {0} crashed; its results are lost")]
    WorkerPanicked(usize),
    #[error("the engine thread crashed; the run's results are lost")]
    Crashed,
    #[error("invalid request for HTTP/2 or HTTP/3: {0}")]
    Request(String),
    #[error("{0} is an https:// target but the run has no TLS configuration")]
    NoTls(String),
    #[error("{0}: HTTP/3 runs over QUIC, which needs TLS: use an https:// URL")]
    Http3NeedsTls(String),
    #[error("the run has no target endpoint")]
    NoEndpoint,
    #[error("the replay feed deals to {feed} workers but the run has {workers}")]
    FeedWorkers { feed: usize, workers: usize },
    #[error("--read-coalesce cannot be used with sessions, replays or a request source: their releases are scheduled, and a coalescing worker would wake late for them")]
    CoalesceScheduled,
}

/// Sessions a run plays instead of its rate plan.
#[derive(Debug)]
pub(crate) enum Sessions {
    /// Known up front, each request a request-source entry.
    Planned(Vec<SessionPlan>),
    /// Fed while the run goes on, each request with its own payload in this protocol.
    Fed(Feed, FedProtocol),
    /// The rate plan over requests a source streams to each worker.
    Streamed(Vec<crate::requests::remote::RemoteStream>),
}

/// All workers pass this together, so every pacer counts from the same instant (interleaving
/// depends on it) and prefetched connections are all open before the clock starts.
struct StartGate {
    barrier: Barrier,
    start: OnceLock<Instant>,
    /// `--start-at`: the wall-clock start, mapped onto the monotonic clock once, by the leader.
    at: Option<SystemTime>,
}

impl StartGate {
    fn wait(&self) -> Instant {
        if self.barrier.wait().is_leader() {
            let now = Instant::now();
            let ahead = self.at.and_then(|t| t.duration_since(SystemTime::now()).ok());
            let _ = self.start.set(now + ahead.unwrap_or_default());
        }
        self.barrier.wait();
        self.start.get().copied().unwrap_or_else(Instant::now)
    }
}

/// Runs the prepared benchmark until it completes or `stop` is requested, blocking the calling
/// thread. With telemetry, the observers see every tick and interval on a collector thread, and
/// the intervals are returned in [`RunOutput::intervals`].
pub(crate) fn execute(
    cfg: EngineConfig,
    requests: Vec<EncodedRequests>,
    sessions: Option<Sessions>,
    stop: StopHandle,
    telemetry: Option<Telemetry>,
) -> Result<RunOutput, EngineError> {
    let requests = Arc::new(requests);
    let cfg = Arc::new(cfg);
    let n = cfg.workers.get();
    let (links, collector) = match telemetry {
        None => ((0..n).map(|_| None).collect::<Vec<_>>(), None),
        Some(t) => {
            let (tx, rx) = std::sync::mpsc::channel::<Msg>();
            let tick = t.config.tick;
            let (links, returns): (Vec<_>, Vec<_>) = (0..n)
                .map(|worker| {
                    let (link, back) = Link::new(worker, tick, tx.clone());
                    (Some(link), back)
                })
                .unzip();
            let collector = std::thread::Builder::new()
                .name("shrike-telemetry".into())
                .spawn(move || telemetry::collector::run(rx, returns, t.config, t.observers))
                .map_err(EngineError::Spawn)?;
            (links, Some(collector))
        }
    };
    let mut links = links.into_iter();
    let gate =
        Arc::new(StartGate { barrier: Barrier::new(n), start: OnceLock::new(), at: cfg.start_at });
    if sessions.is_some() && cfg.read_coalesce.is_some() {
        return Err(EngineError::CoalesceScheduled);
    }
    // Sessions are dealt to the workers in turn: session k plays on worker k mod N (a feed
    // deals them so as it sends).
    let mut replay = None;
    let plans: Vec<Workload> = match sessions {
        None => (0..n).map(|_| Workload::Rate).collect(),
        Some(Sessions::Planned(all)) => {
            let mut shares: Vec<Vec<SessionPlan>> = (0..n).map(|_| Vec::new()).collect();
            for (k, s) in all.into_iter().enumerate() {
                shares[k % n].push(s);
            }
            shares.into_iter().map(Workload::Sessions).collect()
        }
        Some(Sessions::Streamed(streams)) => {
            if streams.len() != n {
                return Err(EngineError::FeedWorkers { feed: streams.len(), workers: n });
            }
            let base = cfg.requests.entries().first().cloned().ok_or(EngineError::NoEndpoint)?;
            let target =
                Arc::new(cfg.endpoints.first().ok_or(EngineError::NoEndpoint)?.target.clone());
            // Streamed requests bring their own bytes, as replayed ones do.
            replay = Some(FedProtocol::Http);
            streams
                .into_iter()
                .map(|stream| Workload::Remote {
                    stream,
                    base: base.clone(),
                    target: target.clone(),
                })
                .collect()
        }
        Some(Sessions::Fed(feed, protocol)) => {
            if feed.receivers.len() != n {
                return Err(EngineError::FeedWorkers { feed: feed.receivers.len(), workers: n });
            }
            replay = Some(protocol);
            let admission = feed.admission;
            feed.receivers.into_iter().map(|rx| Workload::Fed(rx, admission.clone())).collect()
        }
    };
    let replay = Arc::new(replay);
    let tracer = match &cfg.trace {
        None => None,
        Some(t) => {
            let names = span_names(&cfg);
            Some(crate::trace::Collector::start(t, names).map_err(EngineError::Spawn)?)
        }
    };
    let mut handles = Vec::with_capacity(n);
    for (index, w_plan) in plans.into_iter().enumerate() {
        let (w_cfg, w_stop, w_gate, w_requests, w_replay) =
            (cfg.clone(), stop.clone(), gate.clone(), requests.clone(), replay.clone());
        let w_link = links.next().flatten();
        let w_tracing =
            tracer.as_ref().and_then(|t| t.tracing(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1)));
        let h = std::thread::Builder::new()
            .name(format!("shrike-worker-{index}"))
            .spawn(move || -> Result<WorkerOutput, EngineError> {
                if w_cfg.idle != IdleStrategy::Sleep {
                    shrike_timer::tighten_timer_slack();
                }
                let mut rt = tokio::runtime::Builder::new_current_thread();
                rt.enable_all();
                if let Some(window) = w_cfg.read_coalesce {
                    // Nothing is ready: wait before parking, so the park finds every response
                    // that arrived meanwhile and one wake-up reads them all, rather than a
                    // wake-up each. On io_uring the wait is in the ring, and ends once every
                    // receive in flight has completed. Unpaced HTTP/1.1 and HTTP/2 only (the
                    // spec checks it): there a late read delays no release, and the kernel's
                    // receive stamps time each response as it arrived (`stamped.rs`, and the
                    // ring's stamped receives).
                    rt.on_thread_park(move || {
                        if !shrike_uring::park(window) {
                            std::thread::sleep(window);
                        }
                    });
                    // One reading of both clocks per wake-up converts the batch's receive
                    // stamps, on either backend.
                    rt.on_thread_unpark(shrike_uring::read_clocks);
                }
                let rt = rt.build().map_err(EngineError::Runtime);
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        // Release the others rather than leave them waiting at the gate.
                        w_stop.request(Termination::Interrupted);
                        w_gate.wait();
                        return Err(e);
                    }
                };
                let local = tokio::task::LocalSet::new();
                if w_cfg.io_backend == IoBackend::IoUring {
                    // The ring's task submits each loop turn's sends and receives, and
                    // collects completions, in one system call (see shrike-uring).
                    match local.block_on(&rt, async { shrike_uring::install() }) {
                        Ok(ring) => {
                            if w_cfg.read_coalesce.is_some() {
                                ring.coalesce();
                            }
                            if frugal(&w_cfg) {
                                ring.frugal();
                            }
                            drop(local.spawn_local(shrike_uring::drive(ring)));
                        }
                        Err(e) => {
                            w_stop.request(Termination::Interrupted);
                            w_gate.wait();
                            return Err(EngineError::IoUring(e));
                        }
                    }
                }
                // Worker-local copies: the hot path reads them without touching shared memory.
                let requests: Vec<PoolRequests> = match &*w_replay {
                    // Replayed requests bring their own bytes; one pool per endpoint still.
                    Some(p) => w_requests.iter().map(|_| PoolRequests::Fed(p.clone())).collect(),
                    None => w_requests.iter().map(EncodedRequests::for_worker).collect(),
                };
                let out = local.block_on(
                    &rt,
                    run_worker(
                        index,
                        w_cfg,
                        requests,
                        w_plan,
                        w_stop,
                        move || w_gate.wait(),
                        crate::worker::Watch { telemetry: w_link, tracing: w_tracing },
                    ),
                );
                // Connections close with the tasks that hold them; then whatever the ring
                // still has in flight is cancelled before its buffers go.
                drop(local);
                shrike_uring::uninstall();
                Ok(out)
            })
            .map_err(EngineError::Spawn);
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                // Threads already started wait at the gate for `n`; stop them and let them go.
                stop.request(Termination::Interrupted);
                for _ in handles.len()..n {
                    let g = gate.clone();
                    std::thread::spawn(move || g.wait());
                }
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    let mut workers = Vec::with_capacity(n);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut differences: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_err = None;
    for (index, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(out)) => {
                workers.push(out.result);
                for (k, v) in out.errors {
                    *errors.entry(k).or_default() += v;
                }
                for (k, v) in out.differences {
                    *differences.entry(k).or_default() += v;
                }
            }
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(EngineError::WorkerPanicked(index))),
        }
    }
    if let Some(e) = first_err {
        if workers.is_empty() {
            return Err(e);
        }
        errors.insert(e.to_string(), 1);
    }
    drop(links);
    // Every worker's channel is gone: the collector posts what is left, then reports.
    if let Some(t) = tracer {
        for (k, v) in t.finish() {
            *errors.entry(k).or_default() += v;
        }
    }
    // Every link is dropped with its worker, so the collector ends; a crashed collector
    // (an observer panicked) costs the series, not the result.
    let intervals = collector.and_then(|c| c.join().ok()).unwrap_or_default();
    let termination = stop.reason().unwrap_or(Termination::Completed);
    Ok(RunOutput { workers, termination, errors, differences, intervals })
}

/// Each request-source entry's method and path, as its spans name it.
fn span_names(cfg: &EngineConfig) -> Vec<(String, String)> {
    let default_path = cfg.endpoints.first().map_or("/", |e| e.target.path.as_str());
    cfg.requests
        .entries()
        .iter()
        .map(|e| (e.method().to_string(), e.path().unwrap_or(default_path).to_string()))
        .collect()
}

/// One endpoint's requests (one per request-source entry), encoded for the run's protocol;
/// shared by the workers, which each take their own copy.
pub(crate) enum EncodedRequests {
    /// HTTP/1.1: the fixed bytes, or the template of a request with placeholders; whether it
    /// is a HEAD request, and whether its method is idempotent.
    H1(Vec<(PreparedH1, bool, bool)>),
    H2(Vec<RequestTemplate>),
}

/// Fixed bytes (`Ok`) or the template of a request with placeholders (`Err`).
type PreparedH1 = Result<Arc<[u8]>, H1Template>;

impl EncodedRequests {
    fn for_worker(&self) -> PoolRequests {
        match self {
            EncodedRequests::H1(entries) => PoolRequests::H1(
                entries
                    .iter()
                    .map(|(r, head, idempotent)| H1Entry {
                        request: match r {
                            // Worker-local copies: the hot path reads them without touching
                            // shared memory.
                            Ok(bytes) => H1Request::Fixed(Rc::from(&bytes[..])),
                            Err(t) => H1Request::Templated(Rc::new(t.clone())),
                        },
                        head: *head,
                        idempotent: *idempotent,
                    })
                    .collect(),
            ),
            EncodedRequests::H2(t) => PoolRequests::H2(t.clone().into_boxed_slice()),
        }
    }
}

/// Encodes every endpoint's requests for the run's protocol, once.
pub(crate) fn encode(cfg: &EngineConfig) -> Result<Vec<EncodedRequests>, EngineError> {
    if cfg.endpoints.is_empty() {
        return Err(EngineError::NoEndpoint);
    }
    let entries = cfg.requests.entries();
    if let Some(e) = entries.iter().find(|e| e.endpoint().is_some_and(|i| i >= cfg.endpoints.len()))
    {
        return Err(EngineError::Request(format!(
            "{}: the request names endpoint {} of {}",
            e.origin().unwrap_or("request"),
            e.endpoint().unwrap_or_default(),
            cfg.endpoints.len()
        )));
    }
    let mut requests = Vec::with_capacity(cfg.endpoints.len());
    for ep in &cfg.endpoints {
        if ep.target.scheme == Scheme::Https && ep.tls.is_none() {
            return Err(EngineError::NoTls(ep.target.url()));
        }
        if cfg.protocol == Protocol::Http3
            && ep.tls.as_ref().and_then(|t| t.quic.as_ref()).is_none()
        {
            return Err(EngineError::Http3NeedsTls(ep.target.url()));
        }
        // Encoded once per run, per endpoint (the host header / :authority differ).
        requests.push(match cfg.protocol {
            Protocol::Http1 => EncodedRequests::H1(
                entries
                    .iter()
                    .map(|spec| {
                        let t = H1Template::new(&ep.target, spec);
                        let r = if t.has_placeholders() {
                            Err(t)
                        } else {
                            Ok(Arc::from(h1::encode_request(&ep.target, spec)))
                        };
                        let method = spec.method();
                        (r, method == "HEAD", crate::requests::idempotent(method.as_bytes()))
                    })
                    .collect(),
            ),
            Protocol::Http2 | Protocol::Http3 => EncodedRequests::H2(
                entries
                    .iter()
                    .map(|spec| {
                        RequestTemplate::new(&ep.target, spec).map_err(|e| match spec.origin() {
                            Some(o) => EngineError::Request(format!("{o}: {e}")),
                            None => EngineError::Request(e.to_string()),
                        })
                    })
                    .collect::<Result<_, _>>()?,
            ),
        });
    }
    Ok(requests)
}

/// A worker with this many connections or more keeps no buffers on idle ones: their memory is
/// then most of the client's, and each is used rarely enough that allocating per request costs
/// little (`bench/conn_memory.py`).
pub(crate) const FRUGAL_CONNECTIONS: u32 = 256;

pub(crate) fn frugal(cfg: &EngineConfig) -> bool {
    cfg.connections.get() >= FRUGAL_CONNECTIONS
}
