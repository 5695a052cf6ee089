//! A connection's client bytes cut into requests, each stamped with the capture time of its
//! first byte: HTTP/1.1 requests ([`http`]), delimited or fixed-length TCP messages
//! ([`tcp`]), MySQL commands ([`mysql`]). What cannot be cut is counted in the report, by
//! reason.

pub mod http;
pub mod mysql;
pub mod tcp;

use std::time::Duration;

use shrike_jobs::Body;

/// How client bytes become requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Splitter {
    Http,
    /// Messages end with this delimiter (kept in the message).
    Delimited(Vec<u8>),
    /// Messages are this many bytes each.
    Fixed(usize),
    Mysql,
}

/// A request found in a connection, at its capture time.
pub type Found = (Duration, Body);
