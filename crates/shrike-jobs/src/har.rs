//! HAR 1.2 recordings (browser exports from Chrome and Firefox, proxies such as mitmproxy and
//! Charles: what k6 and Gatling users bring) made into jobs.
//!
//! - Entries are grouped into jobs by the connection they used (Chrome's `connection`), else by
//!   page (`pageref`), else each entry is a job of its own. A connection's job keeps one
//!   connection; the others open one per request, as a browser's pool spreads them.
//! - Each job starts at its first entry's `startedDateTime`; requests keep their offsets.
//! - Each request is rebuilt as HTTP/1.1: method, path and query, headers (without HTTP/2
//!   pseudo-headers), Host from the URL, and the body (`postData.text`, or its `params`
//!   form-encoded) with a content-length that matches it.
//! - Entries that are not http(s) (data:, blob:, ws:, extensions) are skipped and counted, as
//!   are those to hosts the caller did not ask for (a recording of a page holds its CDNs',
//!   analytics' and fonts' requests beside the service's).
//! - Each entry's recorded answer (status, and body size when known) is kept for the replay's
//!   canary diff.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use shrike_stats::timestamp::parse_rfc3339;

use crate::model::{Body, Captured, Connection, Job, JobProtocol, Request};

/// What a HAR file made.
#[derive(Debug, Default)]
pub struct HarImport {
    /// In start order, ids from 1, starts from the first job's.
    pub jobs: Vec<Job>,
    pub entries: usize,
    /// Origins (scheme://host:port) the recording's requests went to (kept or not).
    pub hosts: BTreeSet<String>,
    /// Of those, the origins of the entries kept (`--host`): what the jobs hold.
    pub kept: BTreeSet<String>,
    /// Entries left out, by reason.
    pub skipped: BTreeMap<String, usize>,
    /// How entries were grouped: `connection`, `page` or `entry`.
    pub grouped_by: &'static str,
}

/// A field of the HAR that is missing or wrong, by its JSON path.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct HarError {
    pub path: String,
    pub message: String,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> HarError {
    HarError { path: path.into(), message: message.into() }
}

/// One entry, ready to become a request.
struct Entry {
    time_ns: i128,
    group: String,
    data: Vec<u8>,
    origin: String,
    /// The recorded answer (status 0, a request that got none, is left out).
    response: Option<Captured>,
}

/// Reads a HAR document, every host's entries.
pub fn read_har(text: &str) -> Result<HarImport, HarError> {
    read_har_hosts(text, &[])
}

/// Reads a HAR document, keeping the entries to `hosts` (globs such as `*.example.com`,
/// matched against the URL's host, or host and port; case aside) or, with none, every entry.
pub fn read_har_hosts(text: &str, hosts: &[String]) -> Result<HarImport, HarError> {
    let doc: Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| err("(file)", format!("not JSON: {e}")))?;
    let entries = doc
        .get("log")
        .ok_or_else(|| err("log", "missing: a HAR file is {\"log\": {\"entries\": […]}}"))?
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| err("log.entries", "missing or not a list"))?;
    let mut out = HarImport { entries: entries.len(), ..HarImport::default() };
    let by_connection = entries.iter().any(|e| e.get("connection").is_some());
    let by_page = !by_connection && entries.iter().any(|e| e.get("pageref").is_some());
    out.grouped_by = if by_connection {
        "connection"
    } else if by_page {
        "page"
    } else {
        "entry"
    };
    let mut parsed = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let path = format!("log.entries[{i}]");
        match entry(e, &path, i, by_connection, by_page)? {
            Ok(en) => {
                out.hosts.insert(en.origin.clone());
                if hosts.is_empty() || hosts.iter().any(|h| host_matches(h, &en.origin)) {
                    out.kept.insert(en.origin.clone());
                    parsed.push(en);
                } else {
                    *out.skipped.entry("another host (not --host)".into()).or_default() += 1;
                }
            }
            Err(why) => *out.skipped.entry(why).or_default() += 1,
        }
    }
    let mut groups: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for e in parsed {
        groups.entry(e.group.clone()).or_default().push(e);
    }
    let mut jobs: Vec<(i128, Job)> = groups
        .into_values()
        .map(|mut list| {
            list.sort_by_key(|e| e.time_ns);
            let start = list[0].time_ns;
            let requests = list
                .iter()
                .map(|e| Request {
                    at: nanos(e.time_ns - start),
                    pipelined: false,
                    response: e.response,
                    body: Body::Raw { data: e.data.clone(), response_bytes: None },
                })
                .collect();
            let job = Job {
                id: 0,
                start: Duration::ZERO,
                protocol: JobProtocol::Http,
                connection: if by_connection {
                    Connection::Session
                } else {
                    Connection::PerRequest
                },
                server: Some(list[0].origin.clone()),
                login: None,
                connect_ahead: None,
                requests,
            };
            (start, job)
        })
        .collect();
    jobs.sort_by_key(|(start, _)| *start);
    let origin = jobs.first().map_or(0, |(s, _)| *s);
    for (i, (start, mut job)) in jobs.into_iter().enumerate() {
        job.id = i as u64 + 1;
        job.start = nanos(start - origin);
        out.jobs.push(job);
    }
    Ok(out)
}

fn nanos(n: i128) -> Duration {
    Duration::from_nanos(u64::try_from(n.max(0)).unwrap_or(u64::MAX))
}

/// An entry, or (inner `Err`) why it is skipped; the outer error is a malformed HAR.
fn entry(
    e: &Value,
    path: &str,
    index: usize,
    by_connection: bool,
    by_page: bool,
) -> Result<Result<Entry, String>, HarError> {
    let started = e
        .get("startedDateTime")
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("{path}.startedDateTime"), "missing"))?;
    let time_ns = parse_rfc3339(started)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .ok_or_else(|| {
            err(format!("{path}.startedDateTime"), format!("{started:?} is no RFC 3339 time"))
        })?;
    let req = e.get("request").ok_or_else(|| err(format!("{path}.request"), "missing"))?;
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("{path}.request.method"), "missing"))?;
    let url = req
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("{path}.request.url"), "missing"))?;
    let Some((scheme, authority, target)) = split_url(url) else {
        let scheme = url.split(':').next().unwrap_or("").to_ascii_lowercase();
        return Ok(Err(format!("{scheme}: URLs (not http or https)")));
    };
    let default_port = if scheme == "https" { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => match p.parse::<u16>() {
            Ok(p) => (h.to_string(), p),
            Err(_) => (authority.to_string(), default_port),
        },
        _ => (authority.to_string(), default_port),
    };
    let origin = format!("{scheme}://{host}:{port}");
    let mut headers = Vec::new();
    if let Some(list) = req.get("headers").and_then(Value::as_array) {
        for (k, h) in list.iter().enumerate() {
            let hp = || format!("{path}.request.headers[{k}]");
            let name = h.get("name").and_then(Value::as_str).ok_or_else(|| err(hp(), "no name"))?;
            let value = h.get("value").and_then(Value::as_str).unwrap_or("");
            if value.contains(['\r', '\n']) {
                return Err(err(hp(), "a header value with a line break"));
            }
            headers.push((name, value.as_bytes()));
        }
    }
    let body = body(req.get("postData"));
    // Pseudo-headers are HTTP/2's request line; Host and the length are recomputed.
    let data = crate::http1::request(method, &target, Some(authority), headers, &body)
        .map_err(|e| err(format!("{path}.request.headers"), e))?;
    let group = match (by_connection, by_page) {
        (true, _) => match e.get("connection") {
            Some(Value::String(c)) => format!("c{c}"),
            Some(Value::Number(c)) => format!("c{c}"),
            _ => format!("e{index}"),
        },
        (false, true) => match e.get("pageref").and_then(Value::as_str) {
            Some(p) => format!("p{p}"),
            None => format!("e{index}"),
        },
        _ => format!("e{index}"),
    };
    // The recorded answer, for the replay's canary diff: its status, and its body's size as
    // it came over the wire (`bodySize`, -1 when unknown; `content.size` is decoded, which a
    // compressed answer's is not).
    let response = e.get("response").and_then(|r| {
        let status = r.get("status").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok());
        let status = status.filter(|s| (100..1000).contains(s))?;
        let body_bytes = r.get("bodySize").and_then(Value::as_u64);
        Some(Captured { status, body_bytes })
    });
    Ok(Ok(Entry { time_ns, group, data, origin, response }))
}

/// Whether glob `pattern` names `origin`'s (`scheme://host:port`, or `host:port`) host, or
/// host and port.
pub fn host_matches(pattern: &str, origin: &str) -> bool {
    let authority = origin.split_once("://").map_or(origin, |(_, a)| a);
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let pattern = pattern.to_ascii_lowercase();
    [host, authority]
        .iter()
        .any(|t| crate::filter::glob(pattern.as_bytes(), t.to_ascii_lowercase().as_bytes()))
}

/// A request body from `postData`: its text, or its params form-encoded.
fn body(post: Option<&Value>) -> Vec<u8> {
    let Some(post) = post else { return Vec::new() };
    if let Some(t) = post.get("text").and_then(Value::as_str) {
        return t.as_bytes().to_vec();
    }
    let Some(params) = post.get("params").and_then(Value::as_array) else { return Vec::new() };
    params
        .iter()
        .map(|p| {
            let name = p.get("name").and_then(Value::as_str).unwrap_or("");
            let value = p.get("value").and_then(Value::as_str).unwrap_or("");
            format!("{}={}", form_encode(name), form_encode(value))
        })
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `http(s)://authority/path?query#frag` → (scheme, authority, "/path?query").
fn split_url(url: &str) -> Option<(String, &str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    // Userinfo is no part of a request.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let tail = rest[end..].split('#').next().unwrap_or("");
    let target = if tail.starts_with('/') { tail.to_string() } else { format!("/{tail}") };
    (!authority.is_empty()).then_some((scheme, authority, target))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_forms() {
        let (s, a, t) = split_url("https://user:pw@shop.example:8443/cart?x=1#top").unwrap();
        assert_eq!((s.as_str(), a, t.as_str()), ("https", "shop.example:8443", "/cart?x=1"));
        assert_eq!(split_url("http://a.example").unwrap().2, "/");
        assert!(split_url("data:text/plain,hi").is_none());
        assert_eq!(form_encode("a b&c=é"), "a+b%26c%3D%C3%A9");
    }
}
