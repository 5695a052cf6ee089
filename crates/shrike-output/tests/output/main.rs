//! The output formats end to end, in one test binary (each extra binary would link the crate
//! again): every format written from sample results and read back by its real consumer where
//! one exists (Python, Go, the golden files), merges, and stored results read back.

#[path = "../common/mod.rs"]
mod common;

mod csv;
mod dotted;
mod human;
mod json_read_errors;
mod json_round_trip;
mod json_shape;
mod merge;
mod nighthawk;
mod oracle;
mod prometheus;
mod yaml;
