//! End-to-end checks of the `shrike` binary whose bounds assume a quiet machine: sub-millisecond
//! timing, reads that wait on purpose, and capacity searches judged against latency bounds.
//! Cargo runs test binaries one after another, so nothing of the `integration` binary (which
//! runs many tests at once) runs beside these; within this binary each test holds
//! [`support::alone`] or [`support::quiet`] for its whole run, whatever `--test-threads` says.

#[path = "../support/mod.rs"]
mod support;

mod capacity;
mod read_coalesce;
mod timing_precise;
