//! The HTTP/1.1 front end: a hand-written codec over `TcpStream`, with httparse for heads.

mod chunked;
mod conn;
mod request;
mod response;

pub(crate) use conn::serve;
pub(crate) use response::Prepared;
