//! HTTP/1.1 requests from a connection's client bytes: each head (httparse), then its body by
//! content-length or chunked framing (kept verbatim, trailers included). Pipelined requests
//! (sent before the previous answer) are simply consecutive here, each with its own time. The
//! server's bytes give each request's captured answer (status and body size), read by the
//! engine's own response reader, for the replay's canary diff.
//!
//! Cleartext HTTP/2, by prior knowledge (the connection opens with the h2 preface) or by an
//! h2c Upgrade (a request with `Upgrade: h2c` answered 101), is read by the engine's own h2
//! framing and HPACK decoder ([`shrike_engine::pool::h2::captured`]): each stream becomes an
//! HTTP/1.1 request of the connection's job, at its HEADERS frame's time, with its answer.
//! Streams the client ran at once are kept in the order they opened and replayed one after
//! another (the report counts them).

use shrike_engine::pool::h2::captured::{read_connection, CapturedStream};
use shrike_jobs::{Body, Captured};

use super::Found;
use crate::flows::Flow;
use crate::report::Report;

/// The h2 connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection's requests, each with its captured answer where the server's bytes hold it.
pub struct Split {
    pub found: Vec<Found>,
    pub answers: Vec<Option<Captured>>,
    /// The first request that came over HTTP/2 (its streams are replayed one after another:
    /// none is pipelined).
    pub h2_from: Option<usize>,
}

pub fn split(flow: &Flow, report: &mut Report) -> Split {
    let (found, answers, h2_from) = split_either(flow, report);
    Split { found, answers, h2_from }
}

fn split_either(
    flow: &Flow,
    report: &mut Report,
) -> (Vec<Found>, Vec<Option<Captured>>, Option<usize>) {
    let data = flow.up.data();
    if data.starts_with(PREFACE) {
        report.http2_connections += 1;
        let (found, answers) = h2(flow, (0, 0), None, report);
        return (found, answers, Some(0));
    }
    let mut out = Vec::new();
    let mut heads = Vec::new();
    // An h2c Upgrade: where the client's h2 bytes begin, and the upgrading request rebuilt
    // without its upgrade headers (its replay must not ask again).
    let mut switched: Option<(usize, Vec<u8>)> = None;
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
        let upgrade = req.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("upgrade")
                && h.value
                    .split(|&b| b == b',')
                    .any(|v| v.trim_ascii().eq_ignore_ascii_case(b"h2c"))
        });
        at = end;
        if upgrade && data[at..].starts_with(PREFACE) && body == 0 {
            switched = Some((at, without_upgrade(&req)));
            break;
        }
    }
    let (answers, read) = shrike_engine::h1::captured_answers(flow.down.data(), &heads);
    let mut answers: Vec<Option<Captured>> = answers
        .into_iter()
        .map(|(status, body)| Some(Captured { status, body_bytes: Some(body) }))
        .collect();
    let Some((client_at, upgraded)) = switched else { return (out, answers, None) };
    // The server switched only if its answer to the upgrade was 101.
    if answers.len() != out.len()
        || answers.last().is_some_and(|a| a.is_none_or(|a| a.status != 101))
    {
        report.problem(
            "http: an h2c Upgrade the capture shows no 101 for (its h2 bytes left out)",
            1,
        );
        return (out, answers, None);
    }
    report.http2_connections += 1;
    if let Some(last) = out.last_mut() {
        last.1 = Body::Raw { data: upgraded, response_bytes: None };
    }
    answers.pop();
    let h2_from = out.len();
    let (more, mut more_answers) = h2(flow, (client_at, read), out.last().map(|f| f.0), report);
    // Stream 1 is the upgrading request's answer.
    answers.push(more_answers.first().cloned().flatten());
    out.extend(more.into_iter().skip(1));
    answers.extend(more_answers.drain(..).skip(1));
    (out, answers, Some(h2_from))
}

/// The upgrading request's bytes without `Upgrade`, `HTTP2-Settings` and a `Connection` that
/// named them: replayed, it is a plain request.
fn without_upgrade(req: &httparse::Request) -> Vec<u8> {
    let hop = |n: &str| {
        n.eq_ignore_ascii_case("upgrade")
            || n.eq_ignore_ascii_case("http2-settings")
            || n.eq_ignore_ascii_case("connection")
    };
    let headers = req.headers.iter().filter(|h| !hop(h.name)).map(|h| (h.name, h.value));
    let (method, path) = (req.method.unwrap_or("GET"), req.path.unwrap_or("/"));
    let host = req.headers.iter().find(|h| h.name.eq_ignore_ascii_case("host"));
    let host = host.map(|h| String::from_utf8_lossy(h.value).into_owned());
    // A header value with a line break cannot be in a parsed head: the rebuild cannot fail.
    shrike_jobs::http1::request(method, path, host.as_deref(), headers, b"").unwrap_or_default()
}

/// The streams of an h2 connection whose client bytes begin at `at.0` (its preface) and
/// server bytes at `at.1`, as requests with their answers. After an h2c Upgrade (`upgraded`:
/// the upgrading request's time), the first is a placeholder for stream 1 (its request was
/// HTTP/1.1), carrying that request's answer.
fn h2(
    flow: &Flow,
    at: (usize, usize),
    upgraded: Option<std::time::Duration>,
    report: &mut Report,
) -> (Vec<Found>, Vec<Option<Captured>>) {
    let (client, server) = (flow.up.data(), flow.down.data());
    let (streams, error) =
        read_connection(&client[at.0..], server.get(at.1..).unwrap_or(&[]), upgraded.is_some());
    if let Some(e) = error {
        report.problem(format!("http2: {e}"), 1);
    }
    let mut out = Vec::new();
    let mut answers = Vec::new();
    // When the previous stream's answer ended: a stream opened before it ran at once with it.
    let mut previous_done: Option<std::time::Duration> = None;
    for s in streams {
        let answer = s
            .status
            .map(|status| Captured { status, body_bytes: s.answered.then_some(s.answer_bytes) });
        if upgraded.is_some() && s.id == 1 {
            out.push((
                upgraded.unwrap_or(flow.first),
                Body::Raw { data: Vec::new(), response_bytes: None },
            ));
            answers.push(answer);
            continue;
        }
        if !s.complete {
            report
                .problem("http2: a stream cut off by the end of its connection or the capture", 1);
            continue;
        }
        match stream_request(&s) {
            Ok(data) => {
                let ts = flow.up.time_at((at.0 + s.offset) as u64).unwrap_or(flow.first);
                if previous_done.is_none_or(|done| ts < done) && !out.is_empty() {
                    report.http2_concurrent += 1;
                }
                previous_done = s.answer_end.and_then(|o| flow.down.time_at((at.1 + o) as u64));
                out.push((ts, Body::Raw { data, response_bytes: None }));
                answers.push(answer);
            }
            Err(why) => report.problem(format!("http2: a stream skipped: {why}"), 1),
        }
    }
    (out, answers)
}

/// A stream's request as HTTP/1.1 bytes (what replay sends, over HTTP/1.1 or converted back).
fn stream_request(s: &CapturedStream) -> Result<Vec<u8>, String> {
    if s.method.is_empty() || s.path.is_empty() {
        return Err(format!("stream {} has no :method or :path (CONNECT?)", s.id));
    }
    // Connection-specific fields have no place in h2; any a client sent anyway stay out.
    let headers = s
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.as_str(), "connection" | "keep-alive" | "transfer-encoding"))
        .map(|(n, v)| (n.as_str(), v.as_slice()));
    shrike_jobs::http1::request(&s.method, &s.path, s.authority.as_deref(), headers, &s.body)
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
