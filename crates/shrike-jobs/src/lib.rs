//! Shrike's replay jobs: the model ([`model`]: a job is one client session, its requests at
//! offsets with their exact payloads) and the jobs file ([`file`]: versioned JSON Lines, read
//! lazily, optionally zstd-compressed), and HAR recordings made into jobs ([`har`]). Capture
//! import writes jobs; `shrike replay` plays them; `shrike jobs stats` and `filter` read and
//! rewrite them.

pub mod file;
pub mod filter;
pub mod har;
pub mod http1;
pub mod model;
pub mod stats;

pub use file::{JobReader, JobWriter, JobsError, MAX_LINE};
pub use model::{
    Body, Captured, Connection, Job, JobProtocol, Login, MysqlCommand, MysqlValue, Request,
};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
