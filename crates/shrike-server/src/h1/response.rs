//! Response encoding: a [`ResponsePlan`] onto the HTTP/1.1 wire, appended to the connection's write
//! buffer so pipelined responses leave in one write.

use crate::behaviour::{Body, Headers, ResponsePlan, ACTIVE_HEADER, FILLER, SERVICE_TIME_HEADER};
use crate::date;
use crate::http2::response::Payload;
use crate::status;
use crate::ServerConfig;
/// Bodies up to this size are copied behind their head so both leave in one write; larger ones
/// are written straight from [`FILLER`], where a copy would cost more than the extra syscall.
pub(crate) const INLINE_BODY_MAX: u64 = 16 * 1024;

/// The parts of a default response that never change, encoded once per server.
#[derive(Debug)]
pub(crate) struct FixedParts {
    status: u16,
    status_line: Vec<u8>,
    headers: Vec<u8>,
    date: bool,
}

impl FixedParts {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let mut status_line = Vec::new();
        write_status_line(&mut status_line, config.response_status());
        let mut headers = Vec::new();
        for (name, value) in config.response_headers() {
            write_header(&mut headers, name.as_bytes(), value.as_bytes());
        }
        Self { status: config.response_status(), status_line, headers, date: config.emits_date() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionHeader {
    /// HTTP/1.1 keep-alive needs no header.
    None,
    Close,
    /// HTTP/1.0 keeps the connection only if the response says so.
    KeepAlive,
}

/// The request-side facts encoding needs.
pub(crate) struct Exchange<'r, 'b> {
    pub(crate) request_headers: &'r [httparse::Header<'b>],
    pub(crate) head_only: bool,
    pub(crate) connection: ConnectionHeader,
    pub(crate) delta_ns: Option<u64>,
    /// HTTP/1.0 has no chunked transfer-coding.
    pub(crate) http10: bool,
}

/// Width reserved for the service time, filled in just before the head leaves (leading spaces
/// are optional whitespace that every parser strips).
pub(crate) const SERVICE_TIME_WIDTH: usize = 20;

/// Where things landed in the write buffer.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// Offset in `out` of the connection header line (or of where it would go), so a shutdown
    /// arriving while the response is held can still turn it into `connection: close`.
    pub(crate) connection_at: usize,
    /// Filler bytes the caller still has to write after `out` is flushed.
    pub(crate) deferred_body: u64,
    /// A body to send step by step after the head (chunks, stall, truncation), and whether it
    /// uses the chunked transfer-coding.
    pub(crate) paced: Option<(Payload, bool)>,
    /// Offset in `out` of the service-time placeholder.
    pub(crate) service_time_at: Option<usize>,
}

impl Encoded {
    fn new(connection_at: usize) -> Self {
        Self { connection_at, deferred_body: 0, paced: None, service_time_at: None }
    }
}

/// Writes `value` right-aligned into the placeholder at `at`.
pub(crate) fn fill_service_time(out: &mut [u8], at: usize, value: u64) {
    let digits = itoa(&mut [0; 20], value).to_vec();
    let end = at + SERVICE_TIME_WIDTH;
    if let Some(slot) = out.get_mut(end - digits.len()..end) {
        slot.copy_from_slice(&digits);
    }
}

/// Appends the response head (and the body when it is small) to `out`.
pub(crate) fn encode(
    out: &mut Vec<u8>,
    prepared: &FixedParts,
    plan: &ResponsePlan<'_>,
    x: &Exchange<'_, '_>,
) -> Encoded {
    if plan.status == prepared.status {
        out.extend_from_slice(&prepared.status_line);
    } else {
        write_status_line(out, plan.status);
    }
    match &plan.headers {
        Headers::Default => {
            if prepared.date {
                write_date(out);
            }
            out.extend_from_slice(&prepared.headers);
        }
        Headers::Custom(list) => {
            if list.date {
                write_date(out);
            }
            for (name, value) in &list.entries {
                write_header(out, name.as_bytes(), value.as_bytes());
            }
        }
    }
    if let (Some(name), Some(delta)) = (&plan.delta_header, x.delta_ns) {
        write_header(out, name.as_bytes(), itoa(&mut [0; 20], delta));
    }
    let mut service_time_at = None;
    if let Some(stats) = plan.stats {
        write_header(out, ACTIVE_HEADER.as_bytes(), itoa(&mut [0; 20], stats.active as u64));
        out.extend_from_slice(SERVICE_TIME_HEADER.as_bytes());
        out.extend_from_slice(b": ");
        service_time_at = Some(out.len());
        out.extend_from_slice(&[b' '; SERVICE_TIME_WIDTH]);
        out.extend_from_slice(b"\r\n");
    }
    let connection_at = out.len();
    out.extend_from_slice(connection_header(x.connection));
    let mut encoded = Encoded { service_time_at, ..Encoded::new(connection_at) };
    if !status::allows_body(plan.status) {
        out.extend_from_slice(b"\r\n");
        return encoded;
    }
    let len = match plan.body {
        Body::Filler(n) => n,
        Body::Echo => echo_len(x.request_headers),
    };
    if plan.pacing().paced_body() && !x.head_only {
        let chunked = plan.chunking.is_some() && !x.http10;
        if chunked {
            write_header(out, b"transfer-encoding", b"chunked");
        } else {
            write_header(out, b"content-length", itoa(&mut [0; 20], len));
        }
        out.extend_from_slice(b"\r\n");
        let payload = match plan.body {
            Body::Filler(n) => Payload::Filler(n),
            Body::Echo => {
                let mut echo = Vec::with_capacity(len as usize);
                write_echo(&mut echo, x.request_headers);
                Payload::Bytes(echo.into())
            }
        };
        encoded.paced = Some((payload, chunked));
        return encoded;
    }
    write_header(out, b"content-length", itoa(&mut [0; 20], len));
    out.extend_from_slice(b"\r\n");
    if x.head_only {
        return encoded;
    }
    match plan.body {
        Body::Echo => write_echo(out, x.request_headers),
        Body::Filler(n) if n <= INLINE_BODY_MAX => out.extend_from_slice(&FILLER[..n as usize]),
        Body::Filler(n) => encoded.deferred_body = n,
    }
    encoded
}

/// A server-generated `text/plain` response (errors). `head_only` drops the body for HEAD.
pub(crate) fn encode_text(
    out: &mut Vec<u8>,
    status: u16,
    message: &str,
    head_only: bool,
    connection: ConnectionHeader,
) -> Encoded {
    encode_typed(out, status, "text/plain; charset=utf-8", message, head_only, connection)
}

/// A server-generated response with the given content type; the body is `message` and a
/// newline.
pub(crate) fn encode_typed(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    message: &str,
    head_only: bool,
    connection: ConnectionHeader,
) -> Encoded {
    write_status_line(out, status);
    write_date(out);
    out.extend_from_slice(b"server: shrike\r\n");
    // The one 405 the server writes this way refuses a request to forward: a proxy that only
    // tunnels allows CONNECT (RFC 9110 §15.5.6: a 405 names what is allowed).
    if status == 405 {
        write_header(out, b"allow", b"CONNECT");
    }
    write_header(out, b"content-type", content_type.as_bytes());
    let connection_at = out.len();
    out.extend_from_slice(connection_header(connection));
    let body_len = message.len() as u64 + 1;
    write_header(out, b"content-length", itoa(&mut [0; 20], body_len));
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(message.as_bytes());
        out.push(b'\n');
    }
    Encoded::new(connection_at)
}

pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

fn write_status_line(out: &mut Vec<u8>, status: u16) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa(&mut [0; 20], u64::from(status)));
    out.push(b' ');
    out.extend_from_slice(status::reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn write_date(out: &mut Vec<u8>) {
    out.extend_from_slice(b"date: ");
    date::append_now(out);
    out.extend_from_slice(b"\r\n");
}

pub(crate) fn connection_header(connection: ConnectionHeader) -> &'static [u8] {
    match connection {
        ConnectionHeader::None => b"",
        ConnectionHeader::Close => b"connection: close\r\n",
        ConnectionHeader::KeepAlive => b"connection: keep-alive\r\n",
    }
}

fn write_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Echo bodies list the request headers as received, one `name: value\n` line each.
fn echo_len(headers: &[httparse::Header<'_>]) -> u64 {
    headers.iter().map(|h| (h.name.len() + h.value.len() + 3) as u64).sum()
}

fn write_echo(out: &mut Vec<u8>, headers: &[httparse::Header<'_>]) {
    for h in headers {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.push(b'\n');
    }
}

/// Decimal digits of `n` in a caller-provided buffer (no allocation, no formatter machinery).
pub(crate) fn itoa(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itoa_edges() {
        assert_eq!(itoa(&mut [0; 20], 0), b"0");
        assert_eq!(itoa(&mut [0; 20], 1234), b"1234");
        assert_eq!(itoa(&mut [0; 20], u64::MAX), u64::MAX.to_string().as_bytes());
    }

    fn exchange<'r, 'b>(headers: &'r [httparse::Header<'b>]) -> Exchange<'r, 'b> {
        Exchange {
            request_headers: headers,
            head_only: false,
            connection: ConnectionHeader::None,
            delta_ns: None,
            http10: false,
        }
    }

    #[test]
    fn default_response() {
        let config = ServerConfig::default();
        let prepared = FixedParts::new(&config);
        let mut out = Vec::new();
        let encoded = encode(&mut out, &prepared, &ResponsePlan::defaults(&config), &exchange(&[]));
        assert_eq!(encoded.deferred_body, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\ndate: "), "{text}");
        assert!(
            text.ends_with("\r\nserver: shrike\r\ncontent-length: 10\r\n\r\naaaaaaaaaa"),
            "{text}"
        );
    }

    #[test]
    fn large_bodies_are_deferred_and_204_has_no_length() {
        let config = ServerConfig::default();
        let prepared = FixedParts::new(&config);
        let mut plan = ResponsePlan::defaults(&config);
        plan.body = Body::Filler(INLINE_BODY_MAX + 1);
        let mut out = Vec::new();
        let encoded = encode(&mut out, &prepared, &plan, &exchange(&[]));
        assert_eq!(encoded.deferred_body, INLINE_BODY_MAX + 1);
        assert!(out.ends_with(b"content-length: 16385\r\n\r\n"));
        plan.status = 204;
        out.clear();
        assert_eq!(encode(&mut out, &prepared, &plan, &exchange(&[])).deferred_body, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 204 No Content\r\n") && !text.contains("content-length")
        );
    }

    #[test]
    fn echo_body_matches_its_length() {
        let config = ServerConfig::builder().echo_request_headers(true).build().unwrap();
        let prepared = FixedParts::new(&config);
        let headers = [
            httparse::Header { name: "Host", value: b"x" },
            httparse::Header { name: "a", value: b"b c" },
        ];
        let mut out = Vec::new();
        encode(&mut out, &prepared, &ResponsePlan::defaults(&config), &exchange(&headers));
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("content-length: 15\r\n\r\nHost: x\na: b c\n"), "{text}");
    }
}
