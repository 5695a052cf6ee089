//! Shrike's statistics: the numbers a load test is worth.
//!
//! - [`Statistic`]: an HdrHistogram (ns or bytes, 3 significant digits, auto-resizing so no
//!   sample is ever dropped) plus exact moments (count, mean, pstdev, min, max). Merging two
//!   statistics is exact: the histogram counts add and the moments combine with Chan's formula.
//! - [`StatId`] / [`Stats`]: the fixed set of statistics a worker records, indexed by enum so
//!   the hot path never hashes a string. [`RecordingStats`] records them on the hot path.
//! - [`Counter`] / [`Counters`]: the named counters users know from Nighthawk and Envoy.
//! - [`WorkerResult`] / [`RunResult`]: what a run produced, per worker and merged.
//! - [`duration`]: parsing and formatting of the duration strings users type and proto3 JSON uses.
//! - [`timestamp`]: RFC 3339 timestamps as proto3 JSON writes them.
//!
//! This crate does no I/O; formatters live in `shrike-output`.

pub mod counters;
pub mod duration;
pub mod recording;
pub mod relaxed;
pub mod result;
pub mod statistic;
pub mod timestamp;
pub mod verdict;

pub use counters::{Counter, Counters, StatusCodes};
/// The histogram type [`Statistic::decode_histogram`] returns.
pub use hdrhistogram::Histogram;
pub use recording::RecordingStats;
pub use result::{ForeignStatistic, Interval, IntervalStat, RunResult, Termination, WorkerResult};
pub use statistic::{HistogramDecodeError, Percentile, StatId, StatKind, Statistic, Stats};
pub use verdict::{Failure, Unanswered, Verdict};
