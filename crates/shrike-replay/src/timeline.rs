//! When each job and request is due in the replay: the capture's times, with long idle gaps
//! shrunk (`--max-idle`) and then scaled (`--time-scale 2` plays twice as fast).
//!
//! Idle gaps shrink in two places: between a job's requests, and between jobs when no job is
//! running (the capture went quiet). Jobs come in start order, so a running shift is enough:
//! whenever a job starts more than `max_idle` after every earlier job ended, the excess is
//! cut from it and from everything after it. Overlapping jobs are never pulled together, so
//! the concurrency seen on the wire is kept.

use std::time::Duration;

use shrike_jobs::Job;

/// How capture time maps onto replay time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeOptions {
    /// Speed: 2.0 plays twice as fast, 0.5 at half speed. Above 0.
    pub scale: f64,
    /// Gaps longer than this shrink to it (in capture time, before scaling).
    pub max_idle: Option<Duration>,
}

impl Default for TimeOptions {
    fn default() -> TimeOptions {
        TimeOptions { scale: 1.0, max_idle: None }
    }
}

/// Where a job falls in the replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// When it starts, from the replay's start.
    pub start: Duration,
    /// Its requests' offsets from its start.
    pub offsets: Vec<Duration>,
    /// When its connection opens, from the replay's start, if the capture showed it.
    pub connect: Option<Duration>,
}

/// Walks jobs in start order and says when each is due.
#[derive(Debug)]
pub struct Timeline {
    options: TimeOptions,
    /// The capture time of the first job: replay time 0.
    origin: Option<Duration>,
    /// Capture time cut so far by idle compression.
    shift: Duration,
    /// The latest end (capture time) of any job seen.
    busy_until: Option<Duration>,
}

impl Timeline {
    pub fn new(options: TimeOptions) -> Timeline {
        Timeline { options, origin: None, shift: Duration::ZERO, busy_until: None }
    }

    /// The job's start, its requests' offsets and when its connection opens, in replay time.
    /// Call in start order.
    pub fn place(&mut self, job: &Job) -> Placed {
        let origin = *self.origin.get_or_insert(job.start);
        if let (Some(max), Some(busy)) = (self.options.max_idle, self.busy_until) {
            let gap = job.start.saturating_sub(busy);
            self.shift += gap.saturating_sub(max);
        }
        let end = job.end();
        self.busy_until = Some(self.busy_until.map_or(end, |b| b.max(end)));
        let start = job.start.saturating_sub(origin).saturating_sub(self.shift);
        let mut offsets = Vec::with_capacity(job.requests.len());
        let (mut prev, mut cut) = (Duration::ZERO, Duration::ZERO);
        for r in &job.requests {
            if let Some(max) = self.options.max_idle {
                cut += r.at.saturating_sub(prev).saturating_sub(max);
            }
            prev = r.at;
            offsets.push(self.scale(r.at.saturating_sub(cut)));
        }
        let start = self.scale(start);
        // The captured lead, an idle stretch like any other (so `--max-idle` shrinks it); no
        // connection opens before the replay does.
        let connect = job.connect_ahead.map(|ahead| {
            let ahead = self.options.max_idle.map_or(ahead, |max| ahead.min(max));
            start.saturating_sub(self.scale(ahead))
        });
        Placed { start, offsets, connect }
    }

    fn scale(&self, d: Duration) -> Duration {
        if self.options.scale == 1.0 {
            d
        } else {
            d.div_f64(self.options.scale)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use shrike_jobs::{Body, Connection, JobProtocol, Request};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn job(start: u64, ats: &[u64]) -> Job {
        Job {
            id: start,
            start: ms(start),
            protocol: JobProtocol::Http,
            connection: Connection::Session,
            server: None,
            login: None,
            connect_ahead: None,
            requests: ats
                .iter()
                .map(|&a| Request {
                    at: ms(a),
                    pipelined: false,
                    response: None,
                    body: Body::Raw { data: Vec::new(), response_bytes: None },
                })
                .collect(),
        }
    }

    #[test]
    fn scales_and_starts_at_the_first_job() {
        let mut t = Timeline::new(TimeOptions { scale: 2.0, max_idle: None });
        let p = t.place(&job(1000, &[0, 100]));
        assert_eq!((p.start, p.offsets), (ms(0), vec![ms(0), ms(50)]));
        let p = t.place(&job(1400, &[0]));
        assert_eq!((p.start, p.offsets), (ms(200), vec![ms(0)]));
    }

    #[test]
    fn idle_gaps_shrink_within_and_between_jobs_but_overlaps_stay() {
        let mut t = Timeline::new(TimeOptions { scale: 1.0, max_idle: Some(ms(100)) });
        // A 1 s pause inside the job becomes 100 ms.
        let p = t.place(&job(0, &[0, 1000, 1050]));
        assert_eq!((p.start, p.offsets), (ms(0), vec![ms(0), ms(100), ms(150)]));
        // Overlapping the first job (which ends at 1050): untouched.
        assert_eq!(t.place(&job(500, &[0])).start, ms(500));
        // Starts 2 s after everything ended (1050): the gap becomes 100 ms.
        assert_eq!(t.place(&job(3050, &[0])).start, ms(3050 - 1900));
        // And the cut carries over to later jobs.
        assert_eq!(t.place(&job(3060, &[0])).start, ms(3060 - 1900));
    }

    #[test]
    fn connections_open_their_captured_lead_ahead_scaled_and_shrunk_like_idle_gaps() {
        // Each job runs 5 s, so no idle gap between them is cut.
        let ahead = |start, lead| Job { connect_ahead: Some(ms(lead)), ..job(start, &[0, 5000]) };
        let mut t = Timeline::new(TimeOptions { scale: 2.0, max_idle: Some(ms(300)) });
        // The first job is the replay's time 0: its connection cannot open before that.
        assert_eq!(t.place(&ahead(1000, 40)).connect, Some(ms(0)));
        // 200 ms ahead of a job due at 500 ms (1100 ms of capture at 2×, 100 ms lead).
        let p = t.place(&ahead(2000, 200));
        assert_eq!((p.start, p.connect), (ms(500), Some(ms(400))));
        // A 1 s lead is an idle gap: it shrinks to 300 ms (150 ms at 2×).
        assert_eq!(t.place(&ahead(2100, 1000)).connect, Some(ms(550 - 150)));
        // No SYN captured: opened for the first request.
        assert_eq!(t.place(&job(2200, &[0])).connect, None);
    }
}
