//! The response side of a connection: a request's delay, faults and stall, its head, and its
//! body as the peer's flow-control windows, the write buffer and a paced body's pauses allow.
//! Every stream that waits here sits in the connection's table; the timers and credit that
//! move it on come through [`Conn::fire`] and [`Conn::pump`].

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use shrike_h2::frame;

use super::{Conn, Goaway, Phase, Stream, LINGER_TIME, OUT_HIGH, PING_WAIT};
use crate::behaviour::{ResetScope, Schedule, Step};
use crate::http2::encode;
use crate::http2::response::Payload;

impl Conn {
    /// The request is complete (or refused): wait out its delay, then answer.
    pub(super) fn respond(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        let wait = if s.refused { Duration::ZERO } else { s.pacing.delay.now(&self.shared.state) };
        if wait.is_zero() {
            self.after_delay(id);
        } else {
            s.phase = Phase::Delay;
            self.wake(id, Instant::now() + wait);
        }
    }

    fn after_delay(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        if !s.refused {
            match s.pacing.rolled.reset {
                Some(ResetScope::Stream) => return self.reset(id, frame::INTERNAL_ERROR),
                Some(ResetScope::Connection) => return self.fail(frame::INTERNAL_ERROR),
                None => {}
            }
            let stall = s.pacing.stall_before_head();
            if !stall.is_zero() {
                s.phase = Phase::Stall;
                self.wake(id, Instant::now() + stall);
                return;
            }
        }
        self.head_now(id);
    }

    /// Sends the head of a stream in the table and carries on with its body.
    fn head_now(&mut self, id: u32) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        self.send_head(id, &mut s);
        self.settle(id, s);
    }

    /// Writes the head (with the service time, if asked) and as much body as the windows
    /// allow; `s` is left in the phase that sends the rest.
    pub(super) fn send_head(&mut self, id: u32, s: &mut Stream) {
        let len = s.payload.len();
        let end = len == 0;
        self.put_head(id, s, end);
        if end {
            s.phase = Phase::Linger;
            s.payload = Payload::EMPTY;
            return;
        }
        let schedule = (s.pacing.paced_body() && !s.refused).then(|| s.pacing.schedule(len));
        s.phase = match schedule {
            Some(schedule) => Phase::Pause(schedule),
            None => Phase::Sending { left: len, schedule: None },
        };
        if let Phase::Pause(_) = s.phase {
            self.next_step(id, s);
        } else {
            self.send_body(id, s);
        }
    }

    /// Writes the head's HEADERS (and CONTINUATION) frames, with END_STREAM if `end`.
    pub(super) fn put_head(&mut self, id: u32, s: &mut Stream, end: bool) {
        // The block goes straight behind a frame header whose length is filled in after; one
        // too large for a frame is moved out and split into CONTINUATION frames.
        let at = self.out.len();
        self.out.extend_from_slice(&[0; frame::HEADER_LEN]);
        self.heads.table.start_block(&mut self.out);
        match s.default {
            Some(head) => self.heads.default_head(&self.shared.h2, head, &mut self.out),
            None => {
                encode::stamp_service_time(&mut s.block, s.pacing.stats);
                self.out.extend_from_slice(&s.block);
            }
        }
        let block_len = self.out.len() - at - frame::HEADER_LEN;
        if block_len <= self.peer_max_frame {
            let flags = frame::END_HEADERS | if end { frame::END_STREAM } else { 0 };
            let head = frame::head_bytes(block_len, frame::HEADERS, flags, id);
            self.out[at..at + frame::HEADER_LEN].copy_from_slice(&head);
        } else {
            let block = self.out.split_off(at + frame::HEADER_LEN);
            self.out.truncate(at);
            frame::put_header_block(&mut self.out, id, &block, end, self.peer_max_frame);
        }
    }

    /// Sends body data for `s` while the windows and the buffer allow.
    fn send_body(&mut self, id: u32, s: &mut Stream) {
        loop {
            let Phase::Sending { left, schedule } = &mut s.phase else { return };
            if *left == 0 {
                match schedule.take() {
                    Some(schedule) => {
                        s.phase = Phase::Pause(schedule);
                        self.next_step(id, s);
                    }
                    None => s.phase = Phase::Linger,
                }
                return;
            }
            let Some(credit) = self.credit(id, s) else { return };
            let Phase::Sending { left, schedule } = &mut s.phase else { return };
            let n = (*left).min(credit as u64).min(self.peer_max_frame as u64);
            let chunk = s.payload.split_to(n as usize);
            let n = chunk.len() as u64;
            *left -= n;
            let last = *left == 0 && schedule.is_none();
            let flags = if last { frame::END_STREAM } else { 0 };
            frame::put(&mut self.out, frame::DATA, flags, id, &chunk);
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
    }

    /// How many bytes `s` may send now, by both windows; `None` when it must wait, in which
    /// case it is queued behind the others if it waits for room in the buffer or for the
    /// connection's credit (its own credit arrives with its WINDOW_UPDATE, which queues it).
    pub(super) fn credit(&mut self, id: u32, s: &mut Stream) -> Option<usize> {
        let credit = self.send_window.min(s.send_window);
        if credit <= 0 || self.out.len() >= OUT_HIGH {
            if !s.queued && (self.out.len() >= OUT_HIGH || self.send_window <= 0) {
                s.queued = true;
                self.ready.push_back(id);
            }
            return None;
        }
        Some(usize::try_from(credit).unwrap_or(usize::MAX))
    }

    /// A paced body's next step.
    fn next_step(&mut self, id: u32, s: &mut Stream) {
        let Phase::Pause(schedule) = &mut s.phase else { return };
        match schedule.next_step() {
            Step::Send(n) => {
                let schedule = std::mem::replace(schedule, Schedule::new(0, None, None, None));
                s.phase = Phase::Sending { left: n, schedule: Some(schedule) };
                self.send_body(id, s);
            }
            Step::Wait(d) => {
                let at = Instant::now() + d;
                s.wake = Some(at);
                self.timers.push(Reverse((at, id)));
            }
            Step::Abort => {
                s.phase = Phase::Linger;
                s.wake = None;
                s.payload = Payload::EMPTY;
                frame::put_rst(&mut self.out, id, frame::INTERNAL_ERROR);
                self.remember(id, true);
                s.ended = true;
            }
            Step::Done => {
                frame::put(&mut self.out, frame::DATA, frame::END_STREAM, id, &[]);
                s.phase = Phase::Linger;
            }
        }
    }

    /// Streams whose body waits for room or credit: called once per wake-up, after reading.
    pub(in crate::http2) fn pump(&mut self) {
        let mut rounds = self.ready.len();
        while rounds > 0 && self.send_window > 0 && self.out.len() < OUT_HIGH {
            rounds -= 1;
            let Some(id) = self.ready.pop_front() else { break };
            let Some(mut s) = self.streams.remove(&id) else { continue };
            s.queued = false;
            // A stream that runs out of room queues itself again, behind the others.
            if let Phase::Tunnel(_) = s.phase {
                self.send_tunnel(id, &mut s);
            } else {
                self.send_body(id, &mut s);
            }
            self.settle(id, s);
        }
    }

    /// Puts a stream taken out back in the table, or closes it when both sides are done.
    pub(super) fn settle(&mut self, id: u32, mut s: Stream) {
        if s.done() {
            if s.ended {
                self.finish(id, &s);
                return;
            }
            // The response is out but the request is still coming: its rest is read and
            // dropped until the linger ends, no longer counted as active.
            if s.active {
                self.shared.state.leave_active();
                s.active = false;
            }
            if s.wake.is_none() {
                let at = Instant::now() + LINGER_TIME;
                s.wake = Some(at);
                self.timers.push(Reverse((at, id)));
            }
        }
        self.streams.insert(id, s);
    }

    /// Fires the timers due by `now`.
    pub(in crate::http2) fn fire(&mut self, now: Instant) {
        if let Goaway::Probing(since) = self.goaway {
            if now >= since + PING_WAIT {
                self.final_goaway();
            }
        }
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.streams.get_mut(&id) else { continue };
            if s.wake != Some(at) {
                continue;
            }
            s.wake = None;
            match s.phase {
                Phase::Delay => self.after_delay(id),
                Phase::Stall => self.head_now(id),
                Phase::Pause(_) => {
                    if let Some(mut s) = self.streams.remove(&id) {
                        self.next_step(id, &mut s);
                        self.settle(id, s);
                    }
                }
                Phase::Linger => {
                    // The linger is over: end the stream whose request never finished.
                    self.reset(id, frame::NO_ERROR);
                }
                _ => {}
            }
        }
    }

    fn wake(&mut self, id: u32, at: Instant) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.wake = Some(at);
            self.timers.push(Reverse((at, id)));
        }
    }
}

impl Stream {
    /// The response is complete.
    pub(super) fn done(&self) -> bool {
        match &self.phase {
            Phase::Linger => true,
            Phase::Tunnel(t) => t.done(self.ended),
            _ => false,
        }
    }

    /// Body data waits for flow-control credit.
    pub(super) fn wants_credit(&self) -> bool {
        match &self.phase {
            Phase::Sending { left, .. } => *left > 0,
            Phase::Tunnel(t) => t.wants_credit(),
            _ => false,
        }
    }
}
