//! The rate schedule: the pacer's plan releases requests, the request cursor picks which entry
//! each sends. No sessions: any connection may carry any request.

use std::time::Duration;

use super::{Due, Peek, Schedule};
use crate::pacer::{Follower, Pacer, Release};
use crate::requests::RequestCursor;

pub struct RateSchedule {
    pacer: Pacer,
    cursor: RequestCursor,
    /// The pacer's next release, computed by `peek` and spent by `take`.
    next: Option<Release>,
    /// Rate changes made while the run goes on.
    follower: Follower,
}

impl RateSchedule {
    pub(crate) fn new(pacer: Pacer, cursor: RequestCursor, follower: Follower) -> RateSchedule {
        RateSchedule { pacer, cursor, next: None, follower }
    }
}

impl Schedule for RateSchedule {
    const HAS_SESSIONS: bool = false;

    fn peek(&mut self) -> Peek {
        if self.cursor.spent() {
            return Peek::End;
        }
        if self.next.is_none() {
            if let Some(factor) = self.follower.rescale(&mut self.pacer) {
                self.cursor.rescale(factor);
                if self.cursor.spent() {
                    return Peek::End;
                }
            }
        }
        Peek::of(*self.next.get_or_insert_with(|| self.pacer.next_release()))
    }

    fn take(&mut self) -> Option<Due> {
        match self.next.take() {
            Some(Release::At(_) | Release::Now) => {
                Some(Due { request: self.cursor.next()?, session: None })
            }
            _ => None,
        }
    }

    fn finished(&mut self, _session: u32) -> bool {
        false
    }

    fn warmup_request(&self) -> u32 {
        self.cursor.peek()
    }

    fn spent_at(&self) -> Option<Duration> {
        self.cursor.spent().then(|| self.pacer.next_planned()).flatten()
    }
}
