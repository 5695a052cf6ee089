//! The JSON result: the proto3-JSON shape of Nighthawk's `Output`, plus Shrike's extensions.
//!
//! ```text
//! {
//!   "options": { ...every option as given... },
//!   "results": [ {worker_0}, ..., {global} ],
//!   "version": {"version": {"major_number": 0, "minor_number": 1, "patch": 0}},
//!   "timestamp": "2026-11-21T05:27:52.123456789Z",
//!   "shrike": {"schema_version": 1, "tool_version": "0.1.0",
//!              "termination": {"kind": "completed", "detail": "", "description": "completed"},
//!              "environment": {"os": "linux", "arch": "x86_64", "available_parallelism": 2,
//!                              "io_backend": "epoll"}}
//! }
//! ```
//!
//! Tools that read Nighthawk's output read this unchanged: uint64 values are strings, durations
//! are proto3 duration strings, size statistics use the `raw_*` fields. Shrike adds fields
//! Nighthawk readers ignore: a top-level `shrike` object, and per statistic a
//! `shrike_histogram` holding the whole HdrHistogram (V2 deflate, base64), which is what lets
//! [`from_json`] rebuild every statistic so stored results merge exactly. The printed
//! percentiles are derived from that histogram and are read back only for a statistic without
//! one: [`from_json`] also reads Nighthawk's own JSON, whose statistics are summaries (see
//! `read.rs`).
//!
//! Every statistic is written, even with no samples, so the document's shape does not depend
//! on what happened during the run.

mod read;
mod write;

pub use read::{from_json, unanswered, ReadError};
pub use write::{to_json_value, write, write_value};

/// Version of the `shrike` extension schema. Bump it when a reader of the old schema would
/// misread new documents; [`from_json`] rejects versions it does not know.
pub const SCHEMA_VERSION: u64 = 1;
