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

    /// The job's start and its requests' offsets, in replay time. Call in start order.
    pub fn place(&mut self, job: &Job) -> (Duration, Vec<Duration>) {
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
        (self.scale(start), offsets)
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
        assert_eq!(t.place(&job(1000, &[0, 100])), (ms(0), vec![ms(0), ms(50)]));
        assert_eq!(t.place(&job(1400, &[0])), (ms(200), vec![ms(0)]));
    }

    #[test]
    fn idle_gaps_shrink_within_and_between_jobs_but_overlaps_stay() {
        let mut t = Timeline::new(TimeOptions { scale: 1.0, max_idle: Some(ms(100)) });
        // A 1 s pause inside the job becomes 100 ms.
        assert_eq!(t.place(&job(0, &[0, 1000, 1050])), (ms(0), vec![ms(0), ms(100), ms(150)]));
        // Overlapping the first job (which ends at 1050): untouched.
        assert_eq!(t.place(&job(500, &[0])).0, ms(500));
        // Starts 2 s after everything ended (1050): the gap becomes 100 ms.
        assert_eq!(t.place(&job(3050, &[0])).0, ms(3050 - 1900));
        // And the cut carries over to later jobs.
        assert_eq!(t.place(&job(3060, &[0])).0, ms(3060 - 1900));
    }
}
