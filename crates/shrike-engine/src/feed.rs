//! Sessions fed while the run goes on, each request carrying its own payload: replay's seam
//! into the engine (shrike-replay feeds a jobs file's sessions), and the protocols those
//! payloads speak ([`FedProtocol`]).
//!
//! A replay can hold more sessions than fit in memory, so they are not handed over up front
//! (as [`crate::SessionPlan`]s are) but fed: a feeder thread (the caller's) sends
//! [`FedSession`]s in start order through a bounded channel per worker ([`feed`]), and each
//! worker's schedule takes the next one only when it falls due. Memory is then the sessions
//! running plus the channels' depth, whatever the file's size.
//!
//! The payload of a request travels with its session, and from the schedule to the protocol
//! through a per-worker store ([`Payloads`]) keyed by the ticket's request number, so the
//! tickets on the hot path stay small and `Copy`. A payload is bytes plus whatever its
//! protocol needs beyond them ([`Payload::extra`]): the engine knows HTTP/1.1's
//! ([`HttpMeta`]); a protocol of the caller's downcasts to its own.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::any::Any;

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

use crate::pool::serial::DynSerial;
use crate::protocol::Protocol;

/// One session to replay.
#[derive(Clone, Debug)]
pub struct FedSession {
    /// When it starts, from the run start (already scaled by the caller).
    pub start: Duration,
    /// When its connection opens, from the run start, ahead of its first request (a captured
    /// client's SYN); `None` opens it for the first request.
    pub connect: Option<Duration>,
    /// One connection for the session (the captured TCP connection), else a new one for each
    /// request.
    pub per_request_connections: bool,
    /// In order; offsets from the session's start never decrease. Never empty.
    pub requests: Vec<FedRequest>,
}

/// One request of a fed session.
#[derive(Clone, Debug)]
pub struct FedRequest {
    /// Offset from the session's start.
    pub at: Duration,
    pub payload: Payload,
}

/// What a request sends, and what its protocol needs to read the answer.
#[derive(Clone, Debug)]
pub struct Payload {
    /// The bytes sent: an HTTP/1.1 request (and any pipelined behind it), a TCP message; empty
    /// where the protocol sends a value of its own (in `extra`).
    pub data: Bytes,
    /// What the protocol needs beyond the bytes: [`HttpMeta`] for HTTP/1.1, a caller's
    /// protocol's own type (shared: payloads are cloned from the store per exchange).
    pub extra: Option<Arc<dyn Any + Send + Sync>>,
}

impl Payload {
    /// Bytes alone.
    pub fn bytes(data: impl Into<Bytes>) -> Payload {
        Payload { data: data.into(), extra: None }
    }

    /// Bytes and what their protocol needs beyond them.
    pub fn with(data: impl Into<Bytes>, extra: impl Any + Send + Sync) -> Payload {
        Payload { data: data.into(), extra: Some(Arc::new(extra)) }
    }

    /// The extra of type `T`, if this payload has one.
    pub fn extra<T: Any>(&self) -> Option<&T> {
        self.extra.as_deref()?.downcast_ref()
    }
}

/// HTTP/1.1's extra: what reading the answers needs that the bytes do not say cheaply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpMeta {
    /// The request is HEAD: its answer has no body whatever its headers say.
    pub head: bool,
    /// Requests pipelined behind this one, whose bytes follow its own in the payload: whether
    /// each is HEAD. Their answers are read after this one's, on the same connection.
    pub pipelined_heads: Vec<bool>,
    /// The captured answer, which the replayed one is compared with (the canary diff); `None`
    /// for a request pipelined with others (its answers are not told apart here).
    pub expect: Option<Expected>,
}

/// A replayed request's captured answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// How differences are grouped: the request's label (`GET /path`).
    pub label: Arc<str>,
    pub status: u16,
    /// Where the capture showed it.
    pub body_bytes: Option<u64>,
}

impl Expected {
    /// What an answer of `status` with `body_bytes` changed, or `None` if it matched.
    pub fn difference(&self, status: u16, body_bytes: u64) -> Option<String> {
        let label = &self.label;
        if status != self.status {
            return Some(format!("{label}: {} → {status}", self.status));
        }
        match self.body_bytes {
            Some(was) if was != body_bytes => {
                Some(format!("{label}: {status} with a {was}-byte body → {body_bytes} bytes"))
            }
            _ => None,
        }
    }
}

/// What fed payloads speak.
#[derive(Clone)]
pub enum FedProtocol {
    /// HTTP/1.1 requests as they are, in the run's HTTP version (HTTP/2 and HTTP/3 translate
    /// them); responses read fully.
    Http,
    /// A serial protocol of the caller's: one exchange at a time per connection, on the
    /// engine's serial pool (a captured TCP connection's session keeps its own).
    Serial(SerialProtocol),
}

impl std::fmt::Debug for FedProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FedProtocol::Http => f.write_str("Http"),
            FedProtocol::Serial(_) => f.write_str("Serial"),
        }
    }
}

/// Makes endpoint `index`'s pool of a caller's protocol, on the worker that calls it.
type MakePool = dyn Fn(&crate::config::EngineConfig, usize) -> Rc<dyn DynSerial> + Send + Sync;

/// A caller's [`Protocol`], ready to give each worker's pool its own copy.
#[derive(Clone)]
pub struct SerialProtocol {
    make: Arc<MakePool>,
}

impl SerialProtocol {
    pub fn new<P: Protocol + Clone + Send + Sync>(protocol: P) -> SerialProtocol {
        SerialProtocol {
            make: Arc::new(move |cfg, index| {
                Rc::new(crate::pool::serial::SerialPool::new(cfg, index, protocol.clone()))
            }),
        }
    }

    /// Endpoint `index`'s pool, on the calling worker.
    pub(crate) fn pool(
        &self,
        cfg: &crate::config::EngineConfig,
        index: usize,
    ) -> Rc<dyn DynSerial> {
        (self.make)(cfg, index)
    }
}

/// The sending side of a feed, for the caller's feeder thread.
#[derive(Debug)]
pub struct FeedSender {
    senders: Vec<mpsc::Sender<FedSession>>,
    next: usize,
    admission: Arc<Admission>,
}

/// The receiving side, handed to the run.
#[derive(Debug)]
pub struct Feed {
    pub(crate) receivers: Vec<mpsc::Receiver<FedSession>>,
    pub(crate) admission: Arc<Admission>,
}

/// Whether new sessions may start. Closing it is replay's soft stop: sessions already running
/// finish, nothing new starts.
#[derive(Debug)]
pub(crate) struct Admission {
    open: AtomicBool,
    closed: Notify,
}

impl Admission {
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Completes once admission is closed.
    pub async fn closed(&self) {
        let notified = self.closed.notified();
        tokio::pin!(notified);
        // Registered before the check, so a close between the two is not missed.
        notified.as_mut().enable();
        if !self.is_open() {
            return;
        }
        notified.await;
    }
}

/// Closes a feed's admission from any thread (a signal handler's, say).
#[derive(Clone, Debug)]
pub struct AdmissionHandle(Arc<Admission>);

impl AdmissionHandle {
    /// No session starts after this; the running ones go on to their end.
    pub fn close(&self) {
        self.0.open.store(false, Ordering::Release);
        self.0.closed.notify_waiters();
    }

    pub fn is_open(&self) -> bool {
        self.0.is_open()
    }
}

/// A feed for `workers` workers, each channel holding up to `depth` sessions ahead of time.
pub fn feed(workers: usize, depth: usize) -> (FeedSender, Feed) {
    let admission = Arc::new(Admission { open: AtomicBool::new(true), closed: Notify::new() });
    let (senders, receivers) = (0..workers.max(1)).map(|_| mpsc::channel(depth.max(1))).unzip();
    (FeedSender { senders, next: 0, admission: admission.clone() }, Feed { receivers, admission })
}

impl FeedSender {
    /// Sends the next session (in start order) to the next worker in turn, waiting while that
    /// worker's channel is full. False when the run no longer takes sessions (it ended, or
    /// admission closed): the feeder should stop. Never call it from inside an async runtime.
    pub fn send(&mut self, session: FedSession) -> bool {
        if !self.admission.is_open() || session.requests.is_empty() {
            return self.admission.is_open();
        }
        let k = self.next;
        self.next = (k + 1) % self.senders.len();
        self.senders[k].blocking_send(session).is_ok()
    }

    /// A handle that closes admission (replay's soft stop).
    pub fn admission(&self) -> AdmissionHandle {
        AdmissionHandle(self.admission.clone())
    }

    /// How many workers the feed deals to.
    pub fn workers(&self) -> usize {
        self.senders.len()
    }
}

/// A worker's fed payloads, keyed by the request number their tickets carry. A key is
/// reused once its request finished.
#[derive(Debug, Default)]
pub(crate) struct Payloads {
    slots: RefCell<Vec<Option<Payload>>>,
    free: RefCell<Vec<u32>>,
}

impl Payloads {
    pub fn insert(&self, p: Payload) -> u32 {
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(k) => {
                slots[k as usize] = Some(p);
                k
            }
            None => {
                slots.push(Some(p));
                (slots.len() - 1) as u32
            }
        }
    }

    /// The payload of request `k` (a cheap clone: the bytes are shared).
    pub fn get(&self, k: u32) -> Option<Payload> {
        self.slots.borrow().get(k as usize).cloned().flatten()
    }

    pub fn remove(&self, k: u32) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(k as usize) {
            if slot.take().is_some() {
                self.free.borrow_mut().push(k);
            }
        }
    }
}
