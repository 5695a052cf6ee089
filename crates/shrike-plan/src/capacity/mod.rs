//! The highest rate (or concurrency) that meets every SLO: an exponential ramp, bisection to
//! a precision, repeats near the boundary, and a full-length confirmation trial.
//!
//! - [`slo`]: objectives as users write them, grouped into goals.
//! - [`trial`]: one trial judged against every goal, with the generator self-check.
//! - [`search`]: which trial next, and each goal's answer.
//! - [`mod@run`]: the loop every caller runs (each trial made by [`crate::trial::trial_spec`],
//!   run by the caller's [`crate::trial::TrialRunner`]).

pub mod report;
mod run;
pub mod search;
pub mod slo;
pub mod trial;

pub use crate::trial::{ClientLoad, Dimension, TrialRun};
pub use report::Report;
pub use run::{run, AskError, CapacityAsk, CapacityOptions, Outcome, SearchError};
pub use search::{Answer, Next, Search, SearchConfig, Status};
pub use slo::{goals, Latency, Metric, Slo, SloError};
pub use trial::{Trial, TrialVerdict};
