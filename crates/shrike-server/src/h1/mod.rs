//! The HTTP/1.1 front end: a hand-written codec over any byte stream (TCP or TLS), with
//! httparse for heads.

mod chunked;
mod conn;
mod request;
mod response;

pub(crate) use conn::{serve, READ_BUF};
pub(crate) use response::Prepared;
