//! Timed sessions: each an ordered list of requests at offsets from the session's start, with
//! at most one in flight. A heap holds the sessions whose next request is ready, keyed by its
//! due time; a session leaves the heap while its request is in flight and comes back when it
//! finishes. Programs and tests hand-make [`SessionPlan`]s; replay feeds its jobs while the
//! run goes on ([`crate::feed`]), one session ahead, so only running sessions are in memory.
//!
//! A fed session whose captured connection opened before its first request (its SYN) has an
//! opening on the heap first, at that time: the pools open its connection then, so the first
//! request finds it ready, as the captured one did, and a storm of new sessions spreads its
//! handshakes over their captured leads instead of putting each in front of its request.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Due, Peek, Schedule, SessionRef};
use crate::feed::{Admission, FedSession, Payload, Payloads};

/// One session's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPlan {
    /// When the session starts, from the run start.
    pub start: Duration,
    /// Its requests, in order: each an offset from the session's start and the request-source
    /// entry it sends. Offsets never decrease.
    pub requests: Vec<(Duration, u32)>,
    /// Keep one connection for the whole session (opened for its first request, closed after
    /// its last), as the captured client did.
    pub own_connection: bool,
}

/// A request of a live session: a request-source entry (planned sessions) or a payload of
/// its own (fed sessions).
#[derive(Debug)]
enum Item {
    Entry(u32),
    Fed(Payload),
    /// A fed payload already in the store, under this key: the first request's, put there
    /// when its connection opened ahead of it (a login may need it).
    Stored(u32),
}

#[derive(Debug)]
struct Live {
    start: Duration,
    /// Whether a request was taken yet.
    started: bool,
    /// What is left to send, each at its offset from the session's start.
    requests: VecDeque<(Duration, Item)>,
    own_connection: bool,
    fresh: bool,
    in_flight: bool,
    /// When its connection opens ahead of its first request, until it did.
    connect: Option<Duration>,
}

/// The feed a worker takes fed sessions from, one ahead.
#[derive(Debug)]
struct FeedRx {
    rx: mpsc::Receiver<FedSession>,
    /// The next session to start (the earliest not yet live: the feed is in start order).
    next: Option<FedSession>,
    /// No session will come any more (the feeder ended, or admission closed).
    done: bool,
    admission: Arc<Admission>,
}

impl FeedRx {
    /// Takes what the channel already holds, without waiting.
    fn poll(&mut self) {
        if !self.admission.is_open() {
            self.next = None;
            self.done = true;
        }
        while self.next.is_none() && !self.done {
            match self.rx.try_recv() {
                Ok(s) if s.requests.is_empty() => {}
                Ok(s) => self.next = Some(s),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.done = true,
            }
        }
    }

    /// When the next session needs the worker: its connection's opening, or its first
    /// request.
    fn due(&self) -> Option<Duration> {
        let s = self.next.as_ref()?;
        let first = s.start.saturating_add(s.requests.first()?.at);
        Some(s.connect.map_or(first, |c| c.min(first)))
    }
}

/// The sessions one worker plays.
#[derive(Debug)]
pub struct SessionSchedule {
    /// Live sessions by id; a finished session's id is reused.
    sessions: Vec<Option<Live>>,
    free: Vec<u32>,
    /// Sessions whose next request is ready: (due, session index).
    ready: BinaryHeap<Reverse<(Duration, u32)>>,
    /// Sessions whose connection opens ahead of their first request: (when, session).
    opens: BinaryHeap<Reverse<(Duration, u32)>>,
    /// Openings whose time has come, by when their first request is due: (that, session).
    /// A worker that fell behind takes these only where no request is due before them: an
    /// opening has slack up to its request, a request has none.
    openable: BinaryHeap<Reverse<(Duration, u32)>>,
    in_flight: usize,
    feed: Option<FeedRx>,
    payloads: Rc<Payloads>,
}

impl SessionSchedule {
    /// Sessions with no request are skipped.
    pub fn new(plans: Vec<SessionPlan>) -> SessionSchedule {
        let mut s = SessionSchedule {
            sessions: Vec::with_capacity(plans.len()),
            free: Vec::new(),
            ready: BinaryHeap::new(),
            opens: BinaryHeap::new(),
            openable: BinaryHeap::new(),
            in_flight: 0,
            feed: None,
            payloads: Rc::default(),
        };
        for plan in plans.into_iter().filter(|p| !p.requests.is_empty()) {
            let requests = plan.requests.iter().map(|&(at, r)| (at, Item::Entry(r))).collect();
            s.admit(Live {
                start: plan.start,
                started: false,
                requests,
                own_connection: plan.own_connection,
                fresh: false,
                in_flight: false,
                connect: None,
            });
        }
        s
    }

    /// Sessions fed while the run goes on, their payloads kept in `payloads` for the
    /// protocol to find.
    pub(crate) fn fed(
        rx: mpsc::Receiver<FedSession>,
        admission: Arc<Admission>,
        payloads: Rc<Payloads>,
    ) -> SessionSchedule {
        SessionSchedule {
            sessions: Vec::new(),
            free: Vec::new(),
            ready: BinaryHeap::new(),
            opens: BinaryHeap::new(),
            openable: BinaryHeap::new(),
            in_flight: 0,
            feed: Some(FeedRx { rx, next: None, done: false, admission }),
            payloads,
        }
    }

    fn admit(&mut self, live: Live) {
        let id = match self.free.pop() {
            Some(id) => {
                self.sessions[id as usize] = Some(live);
                id
            }
            None => {
                self.sessions.push(Some(live));
                (self.sessions.len() - 1) as u32
            }
        };
        self.push_next(id);
    }

    fn push_next(&mut self, id: u32) {
        let Some(live) = self.sessions.get(id as usize).and_then(Option::as_ref) else { return };
        if let Some(at) = live.connect {
            self.opens.push(Reverse((at, id)));
            return;
        }
        match live.requests.front() {
            Some(&(offset, _)) => self.ready.push(Reverse((live.start.saturating_add(offset), id))),
            // Done: its id is free for the next session.
            None => {
                self.sessions[id as usize] = None;
                self.free.push(id);
            }
        }
    }

    /// Starts every fed session due by `now`.
    fn admit_fed(&mut self, now: Duration) {
        loop {
            let Some(feed) = self.feed.as_mut() else { return };
            feed.poll();
            if feed.due().is_none_or(|due| due > now) {
                return;
            }
            let Some(s) = feed.next.take() else { return };
            self.admit_session(s);
        }
    }

    fn admit_session(&mut self, s: FedSession) {
        let first = s.start.saturating_add(s.requests.first().map_or(Duration::ZERO, |r| r.at));
        // Opening at the first request's time gains nothing: the request opens it.
        let connect = s.connect.filter(|c| *c < first);
        let requests = s.requests.into_iter().map(|r| (r.at, Item::Fed(r.payload))).collect();
        let own_connection = true;
        let fresh = s.per_request_connections;
        let start = s.start;
        self.admit(Live {
            start,
            started: false,
            requests,
            own_connection,
            fresh,
            in_flight: false,
            connect,
        });
    }
}

impl SessionSchedule {
    /// The earliest ready request, and when it was due.
    fn take_request(&mut self) -> Option<(Due, Duration)> {
        let Reverse((due, id)) = self.ready.pop()?;
        let live = self.sessions.get_mut(id as usize)?.as_mut()?;
        let (_, item) = live.requests.pop_front()?;
        live.in_flight = true;
        let first = !std::mem::replace(&mut live.started, true);
        self.in_flight += 1;
        let last = live.requests.is_empty();
        let (request, fed) = match item {
            Item::Entry(r) => (r, false),
            Item::Fed(p) => (self.payloads.insert(p), true),
            Item::Stored(k) => (k, true),
        };
        let (own_connection, fresh) = (live.own_connection, live.fresh);
        let opening = false;
        let session = SessionRef { id, own_connection, first, last, fresh, fed, opening };
        Some((Due { request, session: Some(session) }, due))
    }

    /// When session `id`'s next request is due.
    fn first_due(&self, id: u32) -> Duration {
        let live = self.sessions.get(id as usize).and_then(Option::as_ref);
        live.and_then(|l| Some(l.start.saturating_add(l.requests.front()?.0))).unwrap_or_default()
    }

    /// Session `id`'s connection opens now: its first request goes on the heap at its own
    /// time, its payload into the store (the connection's login may read it).
    fn opening(&mut self, id: u32) -> Option<(Due, Duration)> {
        let live = self.sessions.get_mut(id as usize)?.as_mut()?;
        let at = live.connect.take()?;
        let (_, item) = live.requests.front_mut()?;
        if let Item::Fed(p) = item {
            *item = Item::Stored(self.payloads.insert(p.clone()));
        }
        let (request, fed) = match item {
            Item::Stored(k) => (*k, true),
            Item::Entry(k) => (*k, false),
            Item::Fed(_) => return None,
        };
        let (own_connection, fresh) = (live.own_connection, live.fresh);
        self.push_next(id);
        let session =
            SessionRef { id, own_connection, first: false, last: false, fresh, fed, opening: true };
        Some((Due { request, session: Some(session) }, at))
    }
}

impl Schedule for SessionSchedule {
    const HAS_SESSIONS: bool = true;

    fn peek(&mut self) -> Peek {
        let fed = self.feed.as_mut().and_then(|f| {
            f.poll();
            f.due()
        });
        // An opening whose time has come is due at once.
        let openable = (!self.openable.is_empty()).then_some(Duration::ZERO);
        let heap = [&self.ready, &self.opens]
            .into_iter()
            .filter_map(|h| h.peek().map(|Reverse((t, _))| *t))
            .chain(openable)
            .min();
        match (heap, fed) {
            (Some(h), Some(f)) => Peek::At(h.min(f)),
            (Some(t), None) | (None, Some(t)) => Peek::At(t),
            (None, None) if self.in_flight > 0 => Peek::Wait,
            (None, None) if self.feed.as_ref().is_some_and(|f| !f.done) => Peek::Wait,
            (None, None) => Peek::End,
        }
    }

    fn take(&mut self) -> Option<Due> {
        let Peek::At(now) = self.peek() else { return None };
        self.take_by(now).map(|(due, _)| due)
    }

    fn take_by(&mut self, now: Duration) -> Option<(Due, Duration)> {
        self.admit_fed(now);
        while let Some(&Reverse((at, id))) = self.opens.peek() {
            if at > now {
                break;
            }
            self.opens.pop();
            self.openable.push(Reverse((self.first_due(id), id)));
        }
        let request = self.ready.peek().map(|Reverse((due, _))| *due).filter(|d| *d <= now);
        let opening = self.openable.peek().map(|Reverse((by, _))| *by);
        match (request, opening) {
            (Some(r), Some(o)) if o <= r => {}
            (Some(_), _) => return self.take_request(),
            (None, Some(_)) => {}
            // Nothing by `now` (a caller ahead of time): the earliest, as ever.
            (None, None) => return self.take_request(),
        }
        let Reverse((_, id)) = self.openable.pop()?;
        self.opening(id)
    }

    fn finished(&mut self, session: u32) -> bool {
        let Some(Some(live)) = self.sessions.get_mut(session as usize) else { return false };
        if !std::mem::replace(&mut live.in_flight, false) {
            return false;
        }
        self.in_flight -= 1;
        self.push_next(session);
        true
    }

    fn warmup_request(&self) -> u32 {
        let first = self.sessions.iter().flatten().next();
        match first.and_then(|s| s.requests.front()) {
            Some((_, Item::Entry(r))) => *r,
            _ => 0,
        }
    }

    async fn primed(&mut self, within: Duration) {
        let Some(feed) = self.feed.as_ref() else { return };
        // The feeder fills the channel before the clock starts, so the first seconds' sessions
        // are parsed before they are due (a storm of starts would otherwise share its second
        // with the parsing). Bounded: a slow source (a stream) starts the run anyway.
        let began = std::time::Instant::now();
        // One short of full: the feeder deals in turn, so when it waits on one worker's full
        // channel, the workers after it are one session short of theirs.
        while feed.rx.len() + 1 < feed.rx.max_capacity()
            && !feed.rx.is_closed()
            && feed.admission.is_open()
            && began.elapsed() < within
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn arrival(&mut self) {
        let Some(feed) = self.feed.as_mut() else { return std::future::pending().await };
        if feed.done {
            return std::future::pending().await;
        }
        let admission = feed.admission.clone();
        if feed.next.is_some() {
            // Only a soft stop changes what is next.
            return admission.closed().await;
        }
        tokio::select! {
            s = feed.rx.recv() => match s {
                Some(s) if !s.requests.is_empty() => feed.next = Some(s),
                Some(_) => {}
                None => feed.done = true,
            },
            _ = admission.closed() => {}
        }
    }
}

#[cfg(test)]
mod tests;
