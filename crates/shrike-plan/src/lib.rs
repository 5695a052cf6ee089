//! Capacity planning, built on the engine's library call (a [`shrike_spec::RunSpec`] in, a
//! [`shrike_stats::RunResult`] out): the planners decide which trial to run next and judge the
//! results; the caller runs the trials, so the same planners serve the command line and,
//! later, the remote service.
//!
//! - [`capacity`]: the highest rate (or concurrency) that meets every SLO.
//! - [`sweep`]: a grid over connections or rate with iterations, server resource samples,
//!   the throughput peak, a Universal Scalability Law fit, and baseline vs candidate.

pub mod capacity;
mod counts;
pub mod sweep;
mod text;
