//! HTTP/1.1 requests from a connection's client bytes: each head (httparse), then its body by
//! content-length or chunked framing (kept verbatim, trailers included). Pipelined requests
//! (sent before the previous answer) are simply consecutive here, each with its own time. The
//! server's bytes give each request's captured answer (status and body size), read by the
//! engine's own response reader, for the replay's canary diff.

use shrike_jobs::{Body, Captured};

use super::Found;
use crate::flows::Flow;
use crate::report::Report;

/// The connection's requests, and the captured answers to the first of them (as many as the
/// server's bytes hold, in order).
pub fn split(flow: &Flow, report: &mut Report) -> (Vec<Found>, Vec<Captured>) {
    let data = flow.up.data();
    let mut out = Vec::new();
    let mut heads = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        // Blank lines between requests are allowed (RFC 9112 §2.2).
        if data[at..].starts_with(b"\r\n") {
            at += 2;
            continue;
        }
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        let head = match req.parse(&data[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                report.problem(cut_off(flow), 1);
                break;
            }
            Err(e) => {
                report.problem(format!("http: bytes that are no HTTP/1.1 request ({e})"), 1);
                report.unparsed_bytes += (data.len() - at) as u64;
                break;
            }
        };
        let body = match body_length(req.headers, &data[at + head..]) {
            Ok(Some(n)) => n,
            Ok(None) => {
                report.problem(cut_off(flow), 1);
                break;
            }
            Err(why) => {
                report.problem(format!("http: {why}"), 1);
                report.unparsed_bytes += (data.len() - at) as u64;
                break;
            }
        };
        let end = at + head + body;
        let ts = flow.up.time_at(at as u64).unwrap_or(flow.first);
        heads.push(req.method == Some("HEAD"));
        out.push((ts, Body::Raw { data: data[at..end].to_vec(), response_bytes: None }));
        at = end;
    }
    let answers = shrike_engine::h1::captured_answers(flow.down.data(), &heads)
        .into_iter()
        .map(|(status, body)| Captured { status, body_bytes: Some(body) })
        .collect();
    (out, answers)
}

fn cut_off(flow: &Flow) -> String {
    if flow.up.has_gap() {
        "http: a request cut by packets missing from the capture".into()
    } else {
        "http: a request cut off by the end of its connection or the capture".into()
    }
}

/// The body's length in `rest` (which follows the head): `None` when it is not all there.
fn body_length(headers: &[httparse::Header<'_>], rest: &[u8]) -> Result<Option<usize>, String> {
    let chunked = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && std::str::from_utf8(h.value)
                .is_ok_and(|v| v.to_ascii_lowercase().contains("chunked"))
    });
    if chunked {
        return chunked_length(rest);
    }
    let length = headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"));
    let Some(h) = length else { return Ok(Some(0)) };
    let n: usize =
        std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok()).ok_or_else(|| {
            format!("a content-length that is no number ({:?})", String::from_utf8_lossy(h.value))
        })?;
    Ok((rest.len() >= n).then_some(n))
}

/// The length of a chunked body (chunks, the last chunk, trailers, the final CRLF).
fn chunked_length(rest: &[u8]) -> Result<Option<usize>, String> {
    let mut at = 0;
    loop {
        let Some(eol) = find_crlf(&rest[at..]) else { return Ok(None) };
        let line = &rest[at..at + eol];
        let size = line.split(|&b| b == b';').next().unwrap_or_default();
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .ok_or_else(|| {
                format!("a chunk size that is no hex number ({:?})", String::from_utf8_lossy(line))
            })?;
        at += eol + 2;
        if size == 0 {
            // Trailers, up to an empty line.
            loop {
                let Some(eol) = find_crlf(&rest[at..]) else { return Ok(None) };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some(at));
                }
            }
        }
        if rest.len() < at + size + 2 {
            return Ok(None);
        }
        at += size + 2;
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::chunked_length;

    #[test]
    fn chunked_bodies() {
        let body = b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: 1\r\n\r\nGET";
        assert_eq!(chunked_length(body), Ok(Some(body.len() - 3)));
        assert_eq!(chunked_length(b"5\r\nhel"), Ok(None));
        assert!(chunked_length(b"zz\r\n").is_err());
    }
}
