//! Capacity planning, built on the engine's library call (a [`shrike_spec::RunSpec`] in, a
//! [`shrike_stats::RunResult`] out): the planners decide which trial to run next and judge the
//! results; a [`trial::TrialRunner`] runs the trials, so the same planners serve the command
//! line, the gRPC service, a fleet (`--remote`) and a Nighthawk service.
//!
//! - [`trial`]: one trial's spec ([`trial::trial_spec`]) and how trials run (on this machine,
//!   or elsewhere), with the generator's CPU measured for its self-check.
//! - [`capacity`]: the highest rate (or concurrency) that meets every SLO.
//! - [`sweep`]: a grid over connections or rate with iterations, server resource samples,
//!   the throughput peak, a Universal Scalability Law fit, and baseline vs candidate.
//! - [`cause`]: why a trial or point got no successful response, and what to do about it.

pub mod capacity;
pub mod cause;
mod counts;
pub mod sweep;
mod text;
pub mod trial;
