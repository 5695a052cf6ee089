//! The server's integration tests, one binary: each module used to be a binary of its own, and
//! each compiled the whole server again (the harness instantiates it), about 35 s apiece.

// A panic is how these tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod config_header;
mod http2;
mod http3;
mod peers;
mod shutdown;
mod tls;
mod wire;
