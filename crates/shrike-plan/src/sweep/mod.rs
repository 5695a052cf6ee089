//! Saturation sweeps: a grid over connections or rate, iterations, server resource samples,
//! the throughput peak and knee, and baseline vs candidate, as the webserver-benchmarking
//! workflow does it by hand with wrk and scripts.
//!
//! - [`grid`]: grids such as `1,4,16:256:16,512`.
//! - [`resources`]: /proc and cgroup sampling of the server's processes and threads, and
//!   the machine.
//! - [`server`]: a server the sweep starts, waits for, watches and stops.
//! - [`usl`]: the Universal Scalability Law fit, judged, and its predicted peak.
//! - [`stats`]: mean ± deviation over iterations; changes with Welch's 95% interval.
//! - [`report`]: points, peak, comparison; human, CSV and JSON.
//! - `read`: a stored sweep read back, and two set side by side.
//! - [`mod@run`]: the loop every caller runs (each run made by [`crate::trial::trial_spec`],
//!   run by the caller's [`crate::trial::TrialRunner`]).

pub mod grid;
mod read;
pub mod report;
pub mod resources;
mod run;
pub mod server;
pub mod stats;
pub mod usl;

pub use read::ReadError;
pub use report::{Iteration, Point, Sweep};
pub use resources::{Sampler, Source, Window};
pub use run::{
    run, Collect, Instances, Measured, Placement, SweepAsk, SweepError, SweepOptions, Targets,
    DEFAULT_ITERATIONS, DEFAULT_LENGTH, DEFAULT_SAMPLE_EVERY, DEFAULT_WAIT,
};
pub use usl::Usl;
