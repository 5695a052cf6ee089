//! Schedules: what is due next for a worker, as (due time, session, request).
//!
//! The worker loop asks its [`Schedule`] when the next request is due, waits for that moment,
//! takes it and hands it to the pools. Two schedules exist:
//! - [`rate::RateSchedule`]: the pacer's rate plan (constant, ramp, stages or unpaced) walking
//!   the request source round robin; requests belong to no session and go to any connection;
//! - [`sessions::SessionSchedule`]: timed sessions (replay's jobs, or a hand-made list), each an
//!   ordered list of requests at offsets from the session's start, optionally bound to a
//!   connection of its own for the session's life.
//!
//! A session has at most one request in flight: its next request becomes due only when the
//! previous one finished ([`Schedule::finished`]), so a slow answer delays that session alone,
//! never the others of the worker. Its scheduled times stay those of its plan, so the delay
//! shows in `scheduled_to_response` and `sequencer.send_lateness`.

pub mod rate;
pub mod remote;
pub mod sessions;

use std::time::{Duration, Instant};

/// A session, as a request carries it to the pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionRef {
    /// Unique within the worker.
    pub id: u32,
    /// The session keeps one connection of its own, opened for its first request and closed
    /// after its last (a captured TCP connection); otherwise its requests use the shared pool.
    pub own_connection: bool,
    /// This is the session's first request (it starts the session) and its last (its
    /// connection closes after it).
    pub first: bool,
    pub last: bool,
    /// Its own connection closes after every request (a client that did not keep
    /// connections alive).
    pub fresh: bool,
    /// `request` is a key into the worker's fed payloads, not a request-source entry.
    pub fed: bool,
    /// Nothing is sent: the session's own connection opens now, ahead of its first request
    /// (`request`, whose payload a login may need), as the captured client's did.
    pub opening: bool,
}

/// One request that is due: which request-source entry, and for which session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub request: u32,
    pub session: Option<SessionRef>,
}

/// When the next request is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peek {
    /// At this offset from the run start.
    At(Duration),
    /// As soon as a connection can take it (unpaced).
    Now,
    /// Nothing is due until a request in flight finishes (every live session waits for one).
    Wait,
    /// The schedule is spent.
    End,
}

impl Peek {
    /// What the pacer's next release means for the worker loop.
    pub(crate) fn of(release: crate::pacer::Release) -> Peek {
        use crate::pacer::Release;
        match release {
            Release::At(d) => Peek::At(d),
            Release::Now => Peek::Now,
            // The plan ended at rate 0: nothing more, but the run lasts its duration.
            Release::Never => Peek::Wait,
        }
    }
}

/// What is due next for one worker. Single-threaded: each worker owns its schedule.
pub trait Schedule {
    /// When the next request is due, without taking it.
    fn peek(&mut self) -> Peek;
    /// Takes the request [`Schedule::peek`] announced (`None` after `Wait` or `End`).
    fn take(&mut self) -> Option<Due>;
    /// Takes what matters most of what is due by `now` (from the run start; at or after what
    /// [`Schedule::peek`] announced), and when it was due: a schedule that holds work with
    /// slack (a connection's opening, which may wait until its request) puts what has none
    /// first when the worker fell behind. Only schedules with sessions are asked; by default,
    /// what `take` gives, due `now`.
    fn take_by(&mut self, now: Duration) -> Option<(Due, Duration)> {
        self.take().map(|due| (due, now))
    }
    /// A request of `session` finished (answered, failed or abandoned): its next request may
    /// become due. Returns whether that changed what [`Schedule::peek`] says.
    fn finished(&mut self, session: u32) -> bool;
    /// The entry a warm-up request would use, without spending anything.
    fn warmup_request(&self) -> u32;
    /// Why the schedule ended early, if something outside the run failed (a request source).
    fn failure(&mut self) -> Option<String> {
        None
    }
    /// When a paced schedule that ran out of requests (`-n`) would have made its next release
    /// (from the run start): N releases at R/s span N/R, not the (N−1)/R to the last of them,
    /// so the sending window ends there. `None` for schedules that are not paced or not spent.
    fn spent_at(&self) -> Option<Duration> {
        None
    }
    /// Whether requests can finish a session (so the worker loop must listen for that while
    /// it waits); false spares the rate schedule's releases a waiter registration each.
    const HAS_SESSIONS: bool;
    // Schedules live on one worker's single-threaded runtime: the future is never sent, so
    // the missing `Send` bound the lint warns of costs nothing.
    #[allow(async_fn_in_trait)]
    /// Completes once the schedule holds what its first moments need (a fed schedule: its
    /// feed's lead), or after `within`; at once for schedules that know everything.
    async fn primed(&mut self, _within: Duration) {}
    #[allow(async_fn_in_trait)]
    /// Completes when something arrived that may change what [`Schedule::peek`] says (a fed
    /// session); never, for schedules that know everything up front.
    async fn arrival(&mut self) {
        std::future::pending().await
    }
}

/// A request handed to the pools: what is due, when it was due, and when it was released.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub scheduled: Instant,
    pub released: Instant,
    /// Set once the request was re-dispatched after a connection refused it unprocessed
    /// (GOAWAY, h2 REFUSED_STREAM, h3 H3_REQUEST_REJECTED); a request is retried at most once.
    pub retried: bool,
    /// Refusals of this request on streams opened before their server announced its stream
    /// limit (retried apart from `retried`, a few times at most).
    pub early_refusals: u8,
    /// Which request-source entry it sends.
    pub request: u32,
    pub session: Option<SessionRef>,
    /// Set when the request is traced: it carries B3 headers and becomes a Zipkin span.
    pub trace: Option<crate::trace::TraceIds>,
}

impl Ticket {
    /// `due`, released at `released` (with `trace`, if sampled), due at `scheduled`: the
    /// release itself for an unpaced request.
    pub fn release(
        due: Due,
        trace: Option<crate::trace::TraceIds>,
        scheduled: Option<Instant>,
        released: Instant,
    ) -> Ticket {
        let scheduled = scheduled.unwrap_or(released);
        let (request, session) = (due.request, due.session);
        Ticket { scheduled, released, retried: false, early_refusals: 0, request, session, trace }
    }
}
