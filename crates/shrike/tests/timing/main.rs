//! End-to-end checks of the `shrike` binary whose bounds assume a quiet machine: sub-millisecond
//! timing, reads that wait on purpose, and capacity searches judged against latency bounds.
//! Cargo runs test binaries one after another, so nothing of the `integration` binary (which
//! runs many tests at once) runs beside these; within this binary each test holds
//! [`support::alone`] or [`support::quiet`] for its whole run, whatever `--test-threads` says.

// Tests state what they expect with expect and unwrap: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

/// Every test here is named `quiet_machine::…`, so CI can run the other binaries' tests with
/// `--skip quiet_machine::` while it does other work, and these after it (.ci/run).
mod quiet_machine {
    mod capacity;
    mod read_coalesce;
    mod timing_precise;
}
