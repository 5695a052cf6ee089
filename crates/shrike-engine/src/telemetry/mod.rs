//! Live telemetry: the run's time series, sampled exactly and off the hot path.
//!
//! Each worker records the interval statistics (`scheduled_to_response`, `request_to_response`)
//! into per-tick histograms next to its cumulative ones (`recorder`). At each tick boundary,
//! aligned to the run start every worker shares, it swaps them out and sends them with its
//! counter and status-code deltas over a non-blocking channel. A collector thread
//! (`collector`) merges the workers' parts of each tick exactly, hands every tick to the
//! [`Observer`]s (progress lines want a fast cadence), groups `ticks_per_interval` ticks into
//! one stored [`Interval`] (periodic reports, scrapes, statsd flushes and the result's series)
//! and returns the intervals when the run ends.
//!
//! With no telemetry the workers hold no recorder: the recording path is one untaken branch.
//! A response is assigned to the tick its completion time falls in, so counts are exact
//! however late the worker's event loop notices the boundary.

pub(crate) mod collector;
pub(crate) mod recorder;

use std::num::NonZeroU32;
use std::time::Duration;

use shrike_stats::{Counters, Interval, Statistic, StatusCodes};

pub(crate) use recorder::{attach, finish, record_failure, record_response, Link};

/// How often workers sample, and how many samples make one stored interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The sampling period (a tick). Workers ship one part per tick.
    pub tick: Duration,
    /// Ticks per stored [`Interval`] (the `--stats-interval` period is `tick × this`).
    pub ticks_per_interval: NonZeroU32,
}

impl TelemetryConfig {
    /// Samples every `interval`, or faster when `max_tick` asks for finer ticks: the tick
    /// then divides the interval evenly so intervals stay aligned to whole ticks.
    pub fn new(interval: Duration, max_tick: Option<Duration>) -> Option<TelemetryConfig> {
        let interval_ns = u64::try_from(interval.as_nanos()).ok().filter(|&n| n > 0)?;
        let k = match max_tick.map(|t| t.as_nanos() as u64) {
            Some(t) if t > 0 && t < interval_ns => interval_ns.div_ceil(t),
            _ => 1,
        };
        let k = u32::try_from(k).ok().and_then(NonZeroU32::new)?;
        Some(TelemetryConfig {
            tick: Duration::from_nanos(interval_ns / u64::from(k.get())),
            ticks_per_interval: k,
        })
    }

    /// The stored interval's period.
    pub fn interval(&self) -> Duration {
        self.tick * self.ticks_per_interval.get()
    }
}

/// One tick (or one interval: several ticks merged), summed exactly over workers.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Offset of the sample's start from the run start.
    pub start: Duration,
    /// The sampled time: the period, except for the run's last sample (its true length).
    pub duration: Duration,
    /// Counter increments during the sample.
    pub counters: Counters,
    /// Responses per status code during the sample.
    pub status_codes: StatusCodes,
    pub scheduled_to_response: Statistic,
    pub request_to_response: Statistic,
    /// How late the interval's answered requests left (actual send − scheduled).
    pub send_lateness: Statistic,
    /// Requests released and not finished (in flight or queued in the pool) at the sample's
    /// end, summed over workers: Apiary's level.
    pub in_flight: u64,
    /// The highest tick-end `in_flight` within the sample.
    pub in_flight_max: u64,
    /// The run's last sample.
    pub last: bool,
}

impl Sample {
    /// Nothing happened from `start` for `duration`. Presized: the workers' parts merge into
    /// it at once, and growing from the smallest size on each merge faulted in more pages.
    pub fn empty(start: Duration, duration: Duration) -> Sample {
        Sample {
            start,
            duration,
            counters: Counters::new(),
            status_codes: StatusCodes::new(),
            scheduled_to_response: Statistic::presized(),
            request_to_response: Statistic::presized(),
            send_lateness: Statistic::presized(),
            in_flight: 0,
            in_flight_max: 0,
            last: false,
        }
    }

    /// Adds the same window measured elsewhere (another generator's tick): everything sums
    /// exactly; the window is the longer of the two.
    pub fn add(&mut self, s: &Sample) {
        self.duration = self.duration.max(s.duration);
        self.counters.merge(&s.counters);
        self.status_codes.merge(&s.status_codes);
        self.scheduled_to_response.merge(&s.scheduled_to_response);
        self.request_to_response.merge(&s.request_to_response);
        self.send_lateness.merge(&s.send_lateness);
        self.in_flight += s.in_flight;
        self.in_flight_max += s.in_flight_max;
        self.last |= s.last;
    }

    /// Adds a later, adjacent sample: the window grows to cover it.
    pub fn absorb(&mut self, s: &Sample) {
        self.duration = (s.start + s.duration).saturating_sub(self.start);
        self.counters.merge(&s.counters);
        self.status_codes.merge(&s.status_codes);
        self.scheduled_to_response.merge(&s.scheduled_to_response);
        self.request_to_response.merge(&s.request_to_response);
        self.send_lateness.merge(&s.send_lateness);
        self.in_flight = s.in_flight;
        self.in_flight_max = self.in_flight_max.max(s.in_flight_max);
        self.last = s.last;
    }

    /// The stored form: counters plus summaries with exact encoded histograms.
    pub fn to_interval(&self) -> Interval {
        use shrike_stats::{IntervalStat, StatId};
        Interval {
            start: self.start,
            duration: self.duration,
            counters: self.counters.clone(),
            stats: vec![
                IntervalStat::summarize(StatId::ScheduledToResponse, &self.scheduled_to_response),
                IntervalStat::summarize(StatId::RequestToResponse, &self.request_to_response),
                IntervalStat::summarize(StatId::SendLateness, &self.send_lateness),
            ],
        }
    }
}

/// A consumer of the live series (progress line, periodic reports, metrics endpoints). Runs on
/// the collector thread: it may format and do I/O, it never slows a worker.
pub trait Observer: Send {
    /// Every tick, in order.
    fn tick(&mut self, _tick: &Sample) {}
    /// Every completed interval (the last one may be partial), in order.
    fn interval(&mut self, _interval: &Sample) {}
    /// The run is over; nothing follows.
    fn finish(&mut self) {}
}

/// What a run with telemetry needs: the sampling periods and who watches.
pub struct Telemetry {
    pub config: TelemetryConfig,
    pub observers: Vec<Box<dyn Observer>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("config", &self.config)
            .field("observers", &self.observers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_divides_the_interval() {
        let c = TelemetryConfig::new(Duration::from_secs(1), None).unwrap();
        assert_eq!((c.tick, c.ticks_per_interval.get()), (Duration::from_secs(1), 1));
        let c =
            TelemetryConfig::new(Duration::from_secs(1), Some(Duration::from_millis(250))).unwrap();
        assert_eq!((c.tick, c.ticks_per_interval.get()), (Duration::from_millis(250), 4));
        let c = TelemetryConfig::new(Duration::from_millis(1300), Some(Duration::from_millis(250)))
            .unwrap();
        assert_eq!(c.ticks_per_interval.get(), 6);
        assert!(c.tick <= Duration::from_millis(250));
        assert!(c.interval() <= Duration::from_millis(1300));
        let c = TelemetryConfig::new(Duration::from_millis(100), Some(Duration::from_millis(250)))
            .unwrap();
        assert_eq!((c.tick, c.ticks_per_interval.get()), (Duration::from_millis(100), 1));
        assert!(TelemetryConfig::new(Duration::ZERO, None).is_none());
    }
}
