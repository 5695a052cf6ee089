//! HTTP/2's wire format for both of Shrike's ends: the load generator's client and the test
//! server frame, compress and decompress with the same code.
//!
//! Written by hand rather than taken from the `h2` crate because it sits on the per-request hot
//! path of both: the client's codec halved its instructions per request against `h2`'s
//! (bench/results/hot-path-costs.md), and the server's connection state machine is built on
//! the same pieces. Only the wire format lives here; each side keeps its own connection state.

pub mod capsule;
pub mod frame;
pub mod hpack;
pub mod huffman;
pub mod indexing;
