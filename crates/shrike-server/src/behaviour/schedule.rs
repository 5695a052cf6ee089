//! The shape of a response body in time: chunks, the pauses between them, a stall part-way and
//! a truncation. Protocol-neutral: each front end turns the steps into its own frames (HTTP/1.1
//! chunks, HTTP/2 and HTTP/3 DATA frames) and sends each step before taking the next, so a
//! pause is never hidden by buffering.

use std::time::Duration;

/// Chunked (streamed) bodies: `size` bytes per chunk, `delay` between chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunking {
    pub(crate) size: u64,
    pub(crate) delay: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send (and flush) this many body bytes.
    Send(u64),
    Wait(Duration),
    /// Stop here and close (HTTP/1.1) or reset (HTTP/2, HTTP/3): the response is truncated.
    Abort,
    /// The body is complete.
    Done,
}

#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    remaining: u64,
    sent: u64,
    chunking: Option<Chunking>,
    stall: Option<(u64, Duration)>,
    truncate: Option<u64>,
    /// Bytes left in the current chunk.
    chunk_left: u64,
    /// The pause before the current chunk has been taken.
    paused: bool,
}

impl Schedule {
    pub(crate) fn new(
        len: u64,
        chunking: Option<Chunking>,
        stall: Option<(u64, Duration)>,
        truncate: Option<u64>,
    ) -> Self {
        Self {
            remaining: len,
            sent: 0,
            chunking,
            stall,
            // Truncating at or past the end leaves a complete response.
            truncate: truncate.filter(|&t| t < len),
            chunk_left: 0,
            paused: false,
        }
    }

    pub(crate) fn next_step(&mut self) -> Step {
        if let Some(at) = self.truncate {
            if self.sent >= at {
                return Step::Abort;
            }
        }
        if let Some((at, stall)) = self.stall {
            if self.sent >= at {
                self.stall = None;
                return Step::Wait(stall);
            }
        }
        if self.remaining == 0 {
            return Step::Done;
        }
        if self.chunk_left == 0 {
            let chunking =
                self.chunking.unwrap_or(Chunking { size: u64::MAX, delay: Duration::ZERO });
            if self.sent > 0 && !chunking.delay.is_zero() && !self.paused {
                self.paused = true;
                return Step::Wait(chunking.delay);
            }
            self.paused = false;
            self.chunk_left = chunking.size.min(self.remaining);
        }
        let mut n = self.chunk_left;
        if let Some((at, _)) = self.stall {
            n = n.min(at - self.sent);
        }
        if let Some(at) = self.truncate {
            n = n.min(at - self.sent);
        }
        self.sent += n;
        self.remaining -= n;
        self.chunk_left -= n;
        Step::Send(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(mut s: Schedule) -> Vec<Step> {
        let mut out = Vec::new();
        loop {
            let step = s.next_step();
            out.push(step);
            if matches!(step, Step::Done | Step::Abort) {
                return out;
            }
        }
    }

    const D: Duration = Duration::from_millis(5);
    const S: Duration = Duration::from_secs(1);

    #[test]
    fn plain_body_is_one_send() {
        assert_eq!(steps(Schedule::new(10, None, None, None)), [Step::Send(10), Step::Done]);
        assert_eq!(steps(Schedule::new(0, None, None, None)), [Step::Done]);
    }

    #[test]
    fn chunks_are_spaced() {
        let c = Some(Chunking { size: 4, delay: D });
        assert_eq!(
            steps(Schedule::new(10, c, None, None)),
            [Step::Send(4), Step::Wait(D), Step::Send(4), Step::Wait(D), Step::Send(2), Step::Done]
        );
    }

    #[test]
    fn stall_splits_a_chunk_without_an_extra_pause() {
        let c = Some(Chunking { size: 4, delay: D });
        assert_eq!(
            steps(Schedule::new(8, c, Some((2, S)), None)),
            [Step::Send(2), Step::Wait(S), Step::Send(2), Step::Wait(D), Step::Send(4), Step::Done]
        );
        assert_eq!(
            steps(Schedule::new(3, None, Some((0, S)), None)),
            [Step::Wait(S), Step::Send(3), Step::Done]
        );
    }

    #[test]
    fn truncation_stops_mid_body_only() {
        assert_eq!(steps(Schedule::new(10, None, None, Some(3))), [Step::Send(3), Step::Abort]);
        assert_eq!(steps(Schedule::new(10, None, None, Some(0))), [Step::Abort]);
        assert_eq!(steps(Schedule::new(3, None, None, Some(3))), [Step::Send(3), Step::Done]);
    }
}
