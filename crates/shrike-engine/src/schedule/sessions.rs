//! Timed sessions: each an ordered list of requests at offsets from the session's start, with
//! at most one in flight. A heap holds the sessions whose next request is ready, keyed by its
//! due time; a session leaves the heap while its request is in flight and comes back when it
//! finishes. Replay builds its jobs into this; tests and programs can hand-make them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::{Due, Peek, Schedule, SessionRef};

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

#[derive(Debug)]
struct Live {
    plan: SessionPlan,
    /// Index of the next request to send.
    next: usize,
    in_flight: bool,
}

/// The sessions one worker plays.
#[derive(Debug)]
pub struct SessionSchedule {
    sessions: Vec<Live>,
    /// Sessions whose next request is ready: (due, session index).
    ready: BinaryHeap<Reverse<(Duration, u32)>>,
    in_flight: usize,
}

impl SessionSchedule {
    /// Sessions with no request are skipped.
    pub fn new(plans: Vec<SessionPlan>) -> SessionSchedule {
        let mut s = SessionSchedule {
            sessions: Vec::with_capacity(plans.len()),
            ready: BinaryHeap::new(),
            in_flight: 0,
        };
        for plan in plans.into_iter().filter(|p| !p.requests.is_empty()) {
            let id = s.sessions.len() as u32;
            s.sessions.push(Live { plan, next: 0, in_flight: false });
            s.push_next(id);
        }
        s
    }

    fn push_next(&mut self, id: u32) {
        let live = &self.sessions[id as usize];
        if let Some(&(offset, _)) = live.plan.requests.get(live.next) {
            self.ready.push(Reverse((live.plan.start.saturating_add(offset), id)));
        }
    }
}

impl Schedule for SessionSchedule {
    const HAS_SESSIONS: bool = true;

    fn peek(&mut self) -> Peek {
        match self.ready.peek() {
            Some(Reverse((due, _))) => Peek::At(*due),
            None if self.in_flight > 0 => Peek::Wait,
            None => Peek::End,
        }
    }

    fn take(&mut self) -> Option<Due> {
        let Reverse((_, id)) = self.ready.pop()?;
        let live = &mut self.sessions[id as usize];
        let (_, request) = live.plan.requests[live.next];
        live.next += 1;
        live.in_flight = true;
        self.in_flight += 1;
        let last = live.next == live.plan.requests.len();
        let own_connection = live.plan.own_connection;
        Some(Due { request, session: Some(SessionRef { id, own_connection, last }) })
    }

    fn finished(&mut self, session: u32) -> bool {
        let Some(live) = self.sessions.get_mut(session as usize) else { return false };
        if !std::mem::replace(&mut live.in_flight, false) {
            return false;
        }
        self.in_flight -= 1;
        self.push_next(session);
        true
    }

    fn warmup_request(&self) -> u32 {
        self.sessions.first().and_then(|s| s.plan.requests.first()).map_or(0, |r| r.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_session_waits_for_its_previous_request_and_others_do_not() {
        let plan = |start, own| SessionPlan {
            start: ms(start),
            requests: vec![(ms(0), 0), (ms(10), 1)],
            own_connection: own,
        };
        let mut s = SessionSchedule::new(vec![plan(0, true), plan(5, false)]);
        assert_eq!(s.peek(), Peek::At(ms(0)));
        let a = s.take().expect("a0");
        assert_eq!(a.session.map(|r| (r.id, r.own_connection, r.last)), Some((0, true, false)));
        // Session 0 is in flight; session 1 is next, at 5 ms.
        assert_eq!(s.peek(), Peek::At(ms(5)));
        let b = s.take().expect("b0");
        assert_eq!((b.request, b.session.map(|r| r.id)), (0, Some(1)));
        assert_eq!(s.peek(), Peek::Wait, "both sessions wait for a response");
        // Session 1 answers first: its second request is due at 5 + 10 ms.
        assert!(s.finished(1));
        assert_eq!(s.peek(), Peek::At(ms(15)));
        assert!(s.finished(0));
        assert_eq!(s.peek(), Peek::At(ms(10)), "session 0's second request comes first");
        let a1 = s.take().expect("a1");
        assert_eq!((a1.request, a1.session.map(|r| r.last)), (1, Some(true)));
        let b1 = s.take().expect("b1");
        assert_eq!(b1.session.map(|r| r.last), Some(true));
        assert_eq!(s.peek(), Peek::Wait);
        assert!(s.finished(0) && s.finished(1));
        assert!(!s.finished(1), "a session with nothing in flight changes nothing");
        assert_eq!(s.peek(), Peek::End);
    }
}
