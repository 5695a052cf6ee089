//! The io_uring ring through its public streams, in one test binary: reads, writes, and
//! coalesced receives with their kernel stamps.
mod coalesce;
mod stream;
