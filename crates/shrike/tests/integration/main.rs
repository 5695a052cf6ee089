//! End-to-end tests of the `shrike` binary, in one test binary: every extra binary would link
//! the whole workspace again, and linking is most of a test build. Each module is one area
//! (the file names say which); `support` holds what they share (the binary with a hard time
//! limit, its test server on 127.0.0.1:0, nginx, MariaDB, captures, hostile peers).
//!
//! Checks whose bounds assume a quiet machine (sub-millisecond timing, coalesced reads,
//! capacity searches judged against latency bounds) live in the `timing` test binary, which
//! runs them one or two at a time.

// Tests state what they expect with expect and unwrap: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod atomic_writes;
mod bad_input;
mod capture_replay;
mod cli_habits;
mod client_options;
mod deploy;
mod every_flag;
mod flags_at_the_server;
mod fleet;
mod fleet_hosts;
mod fuzz_corpus;
mod grpc_python;
mod h2_codec;
mod h2spec;
mod hostile_peers;
mod http3;
mod http3_peers;
mod io_backend;
mod jobs_tools;
mod json_roundtrip;
mod multi_target;
mod mysql_replay;
mod nginx;
mod nighthawk_api;
mod pipes;
mod plan_trust;
mod protocols;
mod readme;
mod replay;
mod report;
mod request_source;
mod request_sources;
mod run_load;
mod serve_abuse;
mod serve_envoy_config;
mod serve_faults;
mod serve_timing;
mod serve_tls_e2e;
mod shaping;
mod signal_phases;
mod signals;
mod soak;
mod spec_file;
mod summary;
mod sweep;
mod telemetry;
mod tls;
mod tracing;
mod transform;
mod tunnels;
mod verdict;
mod witness;
