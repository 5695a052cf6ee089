//! The remote schedule: the pacer's plan releases requests, a stream from a request source
//! ([`crate::requests::remote`]) says what each sends. A request released before the stream
//! delivered one waits for it and keeps its scheduled time, so a slow source shows as lateness
//! (`sequencer.send_lateness`, `scheduled_to_response`), never as a quieter rate. The schedule
//! ends when the stream does (the source is spent, or failed), or at the worker's count.

use std::rc::Rc;
use std::sync::Arc;

use super::{Due, Peek, Schedule};
use crate::config::RequestSpec;
use crate::feed::Payloads;
use crate::pacer::{scaled_limit, Follower, Pacer, Release};
use crate::requests::remote::{encode, RemoteRequest, RemoteStream};
use crate::target::Target;

pub struct RemoteSchedule {
    pacer: Pacer,
    stream: RemoteStream,
    /// The next request, received but not yet released.
    ready: Option<RemoteRequest>,
    ended: bool,
    /// Why the source ended early, for the worker's errors.
    failure: Option<String>,
    next: Option<Release>,
    payloads: Rc<Payloads>,
    base: RequestSpec,
    target: Arc<Target>,
    left: u64,
    /// Rate changes made while the run goes on.
    follower: Follower,
}

impl RemoteSchedule {
    pub(crate) fn new(
        pacer: Pacer,
        stream: RemoteStream,
        payloads: Rc<Payloads>,
        base: RequestSpec,
        target: Arc<Target>,
        limit: Option<u64>,
        follower: Follower,
    ) -> RemoteSchedule {
        RemoteSchedule {
            pacer,
            stream,
            ready: None,
            ended: false,
            failure: None,
            next: None,
            payloads,
            base,
            target,
            left: limit.unwrap_or(u64::MAX),
            follower,
        }
    }

    fn received(&mut self, item: Option<Result<RemoteRequest, String>>) {
        match item {
            Some(Ok(r)) => self.ready = Some(r),
            Some(Err(why)) => {
                self.failure = Some(why);
                self.ended = true;
            }
            None => self.ended = true,
        }
    }
}

impl Schedule for RemoteSchedule {
    const HAS_SESSIONS: bool = false;

    fn peek(&mut self) -> Peek {
        if self.left == 0 {
            return Peek::End;
        }
        if self.ready.is_none() && !self.ended {
            match self.stream.try_recv() {
                Ok(item) => self.received(Some(item)),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => self.received(None),
            }
        }
        if self.ready.is_none() {
            return if self.ended { Peek::End } else { Peek::Wait };
        }
        if self.next.is_none() {
            if let Some(factor) = self.follower.rescale(&mut self.pacer) {
                self.left = scaled_limit(self.left, 0, factor);
            }
        }
        Peek::of(*self.next.get_or_insert_with(|| self.pacer.next_release()))
    }

    fn take(&mut self) -> Option<Due> {
        match self.next.take() {
            Some(Release::At(_) | Release::Now) => {
                let r = self.ready.take()?;
                self.left -= 1;
                let request = self.payloads.insert(encode(&r, &self.base, &self.target));
                Some(Due { request, session: None })
            }
            _ => None,
        }
    }

    fn finished(&mut self, _session: u32) -> bool {
        false
    }

    /// No warm-up (the worker skips it): every request the source sends is one of the run's.
    fn warmup_request(&self) -> u32 {
        u32::MAX
    }

    fn failure(&mut self) -> Option<String> {
        self.failure.take()
    }

    async fn arrival(&mut self) {
        if self.ready.is_some() || self.ended {
            return std::future::pending().await;
        }
        let item = self.stream.recv().await;
        self.received(item);
    }
}
