//! Request-head interpretation: message framing and connection semantics (RFC 9112).

use crate::behaviour::{self, CONFIG_HEADER};

/// The default caps on a request head, for the fuzz entry point; connections use the
/// configured ones.
pub(crate) const MAX_HEAD: usize = crate::limits::DEFAULT_MAX_REQUEST_HEADER_BYTES;
pub(crate) const MAX_HEADERS: usize = crate::limits::DEFAULT_MAX_REQUEST_HEADERS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    None,
    Length(u64),
    Chunked,
}

/// What the head says about the message and the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    pub(crate) body: BodyFraming,
    pub(crate) keep_alive: bool,
    pub(crate) http10: bool,
    pub(crate) expect_continue: bool,
    pub(crate) head: bool,
    pub(crate) has_config: bool,
}

/// A request the server refuses and answers by closing the connection, because after it the
/// byte stream can no longer be trusted to hold message boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reject {
    BadRequest(&'static str),
    /// Past the configured head size, carried for the message.
    HeadTooLarge(usize),
    /// Past the configured header count.
    TooManyHeaders(usize),
    /// The declared length, when known up front.
    BodyTooLarge(Option<u64>),
    /// An absolute-form request (`GET http://host/ HTTP/1.1`) to a server that is a CONNECT
    /// proxy: it forwards nothing, and answering it itself would let a client believe it had
    /// reached the host it named.
    NotForwarded,
}

impl Reject {
    pub(crate) fn status(self) -> u16 {
        match self {
            Reject::BadRequest(_) => 400,
            Reject::HeadTooLarge(_) | Reject::TooManyHeaders(_) => 431,
            Reject::BodyTooLarge(_) => 413,
            Reject::NotForwarded => 405,
        }
    }

    pub(crate) fn message(self, max_body: u64) -> String {
        match self {
            Reject::BadRequest(why) => format!("bad request: {why}"),
            Reject::HeadTooLarge(max) => {
                format!("request header fields too large: the request head exceeds {max} bytes")
            }
            Reject::TooManyHeaders(max) => {
                format!("request header fields too large: more than {max} header fields")
            }
            Reject::BodyTooLarge(declared) => behaviour::body_too_large(declared, max_body),
            Reject::NotForwarded => "this proxy only tunnels: it does not forward requests for \
                                     another host; use CONNECT host:port (curl: -p with -x)"
                .into(),
        }
    }
}

/// One pass over the headers, matching on length first so most names cost one comparison.
pub(crate) fn framing(req: &httparse::Request<'_, '_>) -> Result<Framing, Reject> {
    let http10 = req.version == Some(0);
    let mut length: Option<u64> = None;
    let mut transfer_encoding = TransferEncoding::Absent;
    let mut close = false;
    let mut keep_alive = false;
    let mut expect_continue = false;
    let mut has_config = false;
    for h in req.headers.iter() {
        let name = h.name;
        match name.len() {
            14 if name.eq_ignore_ascii_case("content-length") => {
                let n = parse_length(h.value)?;
                // RFC 9112 §6.3: differing lengths make the framing ambiguous.
                if length.is_some_and(|prev| prev != n) {
                    return Err(Reject::BadRequest("conflicting content-length headers"));
                }
                length = Some(n);
            }
            17 if name.eq_ignore_ascii_case("transfer-encoding") => {
                transfer_encoding = transfer_encoding.add(h.value)?;
            }
            10 if name.eq_ignore_ascii_case("connection") => {
                for token in tokens(h.value) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            6 if name.eq_ignore_ascii_case("expect") => {
                expect_continue = trim(h.value).eq_ignore_ascii_case(b"100-continue");
            }
            n if n == CONFIG_HEADER.len() && name.eq_ignore_ascii_case(CONFIG_HEADER) => {
                has_config = true;
            }
            _ => {}
        }
    }
    if length.is_some() && transfer_encoding != TransferEncoding::Absent {
        return Err(Reject::BadRequest("both content-length and transfer-encoding"));
    }
    let body = match transfer_encoding {
        TransferEncoding::Other => {
            return Err(Reject::BadRequest("transfer-encoding must end with chunked"));
        }
        TransferEncoding::Chunked if http10 => {
            return Err(Reject::BadRequest("transfer-encoding in an HTTP/1.0 request"));
        }
        TransferEncoding::Chunked => BodyFraming::Chunked,
        TransferEncoding::Absent => match length {
            None | Some(0) => BodyFraming::None,
            Some(n) => BodyFraming::Length(n),
        },
    };
    Ok(Framing {
        body,
        keep_alive: if http10 { keep_alive && !close } else { !close },
        http10,
        expect_continue: expect_continue && body != BodyFraming::None && !http10,
        head: req.method == Some("HEAD"),
        has_config,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransferEncoding {
    Absent,
    Chunked,
    /// Not ending in `chunked`, or `chunked` applied twice: RFC 9112 §6.3 says 400.
    Other,
}

impl TransferEncoding {
    /// Codings accumulate across header lines; only the last decides the framing.
    fn add(self, value: &[u8]) -> Result<Self, Reject> {
        let mut state = self;
        let mut any = false;
        for coding in tokens(value) {
            any = true;
            let chunked = coding.eq_ignore_ascii_case(b"chunked");
            state = match (state, chunked) {
                (TransferEncoding::Chunked, _) => TransferEncoding::Other,
                (_, true) => TransferEncoding::Chunked,
                (_, false) => TransferEncoding::Other,
            };
        }
        if !any {
            return Err(Reject::BadRequest("empty transfer-encoding"));
        }
        Ok(state)
    }
}

fn parse_length(value: &[u8]) -> Result<u64, Reject> {
    const INVALID: Reject = Reject::BadRequest("invalid content-length");
    let digits = trim(value);
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(INVALID);
    }
    Ok(digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim).filter(|t| !t.is_empty())
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |i| i + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(head: &str) -> Result<Framing, Reject> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let status = req.parse(head.as_bytes()).unwrap();
        assert!(status.is_complete());
        framing(&req)
    }

    #[test]
    fn defaults() {
        let f = frame("GET / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        assert_eq!(f.body, BodyFraming::None);
        assert!(f.keep_alive && !f.http10 && !f.head && !f.has_config);
        let f = frame("HEAD / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!f.keep_alive && f.http10 && f.head);
        let f = frame("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap();
        assert!(f.keep_alive);
        let f = frame("GET / HTTP/1.1\r\nconnection: foo, close\r\n\r\n").unwrap();
        assert!(!f.keep_alive);
        let f = frame("GET / HTTP/1.1\r\nX-Nighthawk-Test-Server-Config: {}\r\n\r\n").unwrap();
        assert!(f.has_config);
    }

    #[test]
    fn bodies() {
        let f = frame("POST / HTTP/1.1\r\ncontent-length: 12\r\n\r\n").unwrap();
        assert_eq!(f.body, BodyFraming::Length(12));
        let f = frame("POST / HTTP/1.1\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\n").unwrap();
        assert_eq!(f.body, BodyFraming::Length(3));
        let f = frame(
            "POST / HTTP/1.1\r\ntransfer-encoding: gzip, Chunked\r\nexpect: 100-continue\r\n\r\n",
        )
        .unwrap();
        assert_eq!(f.body, BodyFraming::Chunked);
        assert!(f.expect_continue);
        let f =
            frame("POST / HTTP/1.1\r\ncontent-length: 0\r\nexpect: 100-continue\r\n\r\n").unwrap();
        assert!(!f.expect_continue);
    }

    #[test]
    fn ambiguous_framing_is_rejected() {
        for head in [
            "POST / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: -3\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: 3, 3\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: 99999999999999999999\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length:\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\n",
            "POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n",
        ] {
            assert!(matches!(frame(head), Err(Reject::BadRequest(_))), "{head:?}");
        }
    }
}
