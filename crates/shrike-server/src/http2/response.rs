//! Response heads and payloads as `http` types: a [`ResponsePlan`] as an `http::Response`, plus
//! the body to stream after it, for HTTP/3 (h3 takes `http` types). HTTP/2 encodes the same
//! plan straight to HPACK (`super::encode`); the body side, [`Payload`], is shared by all
//! three protocols.

use std::cell::RefCell;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, DATE, SERVER};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

use crate::behaviour::{
    Body, Headers, Pacing, ResponsePlan, StatsHeaders, ACTIVE_HEADER, CONFIG_HEADER, FILLER,
    SERVICE_TIME_HEADER,
};
use crate::server::Shared;
use crate::{date, status, ServerConfig};

/// The server-wide response headers, converted once per server.
#[derive(Debug)]
pub(crate) struct FixedParts {
    headers: HeaderMap,
    date: bool,
}

impl FixedParts {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let mut headers = HeaderMap::new();
        for (name, value) in config.response_headers() {
            // Cannot fail: the builder accepted only RFC 9110 token names and values without
            // control characters, which is exactly what `http` accepts.
            if let Ok(entry) = header(name, value) {
                headers.append(entry.0, entry.1);
            }
        }
        Self { headers, date: config.emits_date() }
    }
}

/// What follows the head on the stream.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    Filler(u64),
    Bytes(Bytes),
}

impl Payload {
    pub(crate) const EMPTY: Payload = Payload::Filler(0);

    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::Filler(n) => *n,
            Payload::Bytes(b) => b.len() as u64,
        }
    }

    /// The first `n` bytes (at most [`FILLER`]'s length for filler), without copying: filler
    /// slices the shared static buffer, other bodies are reference-counted.
    pub(crate) fn split_to(&mut self, n: usize) -> Bytes {
        match self {
            Payload::Filler(left) => {
                let n = n.min(FILLER.len()).min(usize::try_from(*left).unwrap_or(usize::MAX));
                *left -= n as u64;
                Bytes::from_static(&FILLER[..n])
            }
            Payload::Bytes(b) => b.split_to(n.min(b.len())),
        }
    }
}

/// A complete response: the head, and the body to stream after it.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) head: Response<()>,
    pub(crate) payload: Payload,
}

/// The request facts a response depends on.
pub(crate) struct Exchange<'r> {
    pub(crate) request: &'r http::request::Parts,
    pub(crate) head_only: bool,
    pub(crate) delta_ns: Option<u64>,
}

/// The response the request's configuration asks for, and how to send it. Records the
/// request's arrival (see [`ResponsePlan::for_request`]). The statistics endpoint, when the request
/// names it, is answered here too.
pub(crate) fn for_request(
    parts: &http::request::Parts,
    head_only: bool,
    shared: &Shared,
) -> (Reply, Pacing) {
    if let Some(json) = shared.stats_answer(parts.uri.path().as_bytes()) {
        let mut reply = text(200, &json, head_only);
        reply.head.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return (reply, Pacing::default());
    }
    let values = parts.headers.get_all(CONFIG_HEADER);
    let values = values.iter().next().is_some().then(|| values.iter().map(|v| v.as_bytes()));
    match ResponsePlan::for_request(&shared.config, &shared.state, values, head_only) {
        Ok((plan, delta_ns)) => {
            let x = Exchange { request: parts, head_only, delta_ns };
            (planned(&shared.h3, &plan, &x), plan.pacing())
        }
        Err(e) => (text(500, &e.to_string(), head_only), Pacing::default()),
    }
}

/// Adds the service time (arrival to now) to a head about to be sent.
pub(crate) fn stamp_service_time(head: &mut Response<()>, stats: Option<StatsHeaders>) {
    if let Some(stats) = stats {
        head.headers_mut().insert(SERVICE_TIME_HEADER, HeaderValue::from(stats.service_time_us()));
    }
}

/// The request's `content-length`, when it declares a valid one.
pub(crate) fn declared_length(parts: &http::request::Parts) -> Option<u64> {
    parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// The response a plan describes. A configured header `http` cannot encode would be a bug in
/// validation; it becomes a 500 naming it rather than a panic.
pub(crate) fn planned(prepared: &FixedParts, plan: &ResponsePlan<'_>, x: &Exchange<'_>) -> Reply {
    match try_planned(prepared, plan, x) {
        Ok(reply) => reply,
        Err(e) => text(500, &format!("cannot encode the configured response: {e}"), x.head_only),
    }
}

fn try_planned(
    prepared: &FixedParts,
    plan: &ResponsePlan<'_>,
    x: &Exchange<'_>,
) -> Result<Reply, http::Error> {
    let mut head = Response::new(());
    *head.status_mut() = StatusCode::from_u16(plan.status)?;
    let headers = head.headers_mut();
    match &plan.headers {
        Headers::Default => {
            headers.clone_from(&prepared.headers);
            if prepared.date {
                append_date(headers);
            }
        }
        Headers::Custom(list) => {
            if list.date {
                append_date(headers);
            }
            for (name, value) in &list.entries {
                let (name, value) = header(name, value)?;
                headers.append(name, value);
            }
        }
    }
    if let (Some(name), Some(delta)) = (&plan.delta_header, x.delta_ns) {
        headers.append(HeaderName::from_bytes(name.as_bytes())?, HeaderValue::from(delta));
    }
    if let Some(stats) = plan.stats {
        headers.insert(ACTIVE_HEADER, HeaderValue::from(stats.active));
    }
    if !status::allows_body(plan.status) {
        return Ok(Reply { head, payload: Payload::EMPTY });
    }
    let payload = match plan.body {
        Body::Filler(n) => Payload::Filler(n),
        Body::Echo => Payload::Bytes(echo(x.request)),
    };
    headers.insert(CONTENT_LENGTH, HeaderValue::from(payload.len()));
    let payload = if x.head_only { Payload::EMPTY } else { payload };
    Ok(Reply { head, payload })
}

/// A server-generated `text/plain` response (errors), worded as the HTTP/1.1 front end words it.
pub(crate) fn text(status: u16, message: &str, head_only: bool) -> Reply {
    let mut head = Response::new(());
    *head.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = Bytes::from(format!("{message}\n"));
    let headers = head.headers_mut();
    append_date(headers);
    headers.insert(SERVER, HeaderValue::from_static("shrike"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    let payload = if head_only { Payload::EMPTY } else { Payload::Bytes(body) };
    Reply { head, payload }
}

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), http::Error> {
    Ok((HeaderName::from_bytes(name.as_bytes())?, HeaderValue::from_bytes(value.as_bytes())?))
}

/// The request head, one `name: value` line per field, pseudo-header fields first: over HTTP/2
/// they carry what the HTTP/1.1 request line and `host` carry, and Nighthawk (Envoy) lists them.
fn echo(request: &http::request::Parts) -> Bytes {
    let mut out = Vec::new();
    let mut line = |name: &str, value: &[u8]| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.push(b'\n');
    };
    line(":method", request.method.as_str().as_bytes());
    if let Some(scheme) = request.uri.scheme_str() {
        line(":scheme", scheme.as_bytes());
    }
    if let Some(authority) = request.uri.authority() {
        line(":authority", authority.as_str().as_bytes());
    }
    let path = request.uri.path_and_query().map_or("/", |p| p.as_str());
    line(":path", path.as_bytes());
    for (name, value) in &request.headers {
        line(name.as_str(), value.as_bytes());
    }
    Bytes::from(out)
}

/// Appends `date`, formatted at most once per second per thread like the HTTP/1.1 one.
fn append_date(headers: &mut HeaderMap) {
    thread_local! {
        static CACHE: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
    }
    let second = date::unix_now();
    let value = CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        match &*cache {
            Some((cached, value)) if *cached == second => Some(value.clone()),
            _ => {
                let value = HeaderValue::from_bytes(&date::format(second)).ok()?;
                *cache = Some((second, value.clone()));
                Some(value)
            }
        }
    });
    // An IMF-fixdate is plain ASCII, so `value` is always there.
    if let Some(value) = value {
        headers.append(DATE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_payload_is_sliced_without_copies() {
        let mut p = Payload::Filler(100_000);
        let first = p.split_to(usize::MAX);
        assert_eq!(first.len(), FILLER.len());
        assert_eq!(first.as_ptr(), FILLER.as_ptr());
        assert_eq!(p.len(), 100_000 - FILLER.len() as u64);
        let mut b = Payload::Bytes(Bytes::from_static(b"hello"));
        assert_eq!(&b.split_to(2)[..], b"he");
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn default_and_head_responses() {
        let config = ServerConfig::default();
        let prepared = FixedParts::new(&config);
        let request = http::Request::get("http://x/").body(()).unwrap().into_parts().0;
        let plan = ResponsePlan::defaults(&config);
        let x = Exchange { request: &request, head_only: false, delta_ns: None };
        let reply = planned(&prepared, &plan, &x);
        assert_eq!(reply.head.status(), 200);
        assert_eq!(reply.head.headers()["server"], "shrike");
        assert_eq!(reply.head.headers()["content-length"], "10");
        assert_eq!(reply.head.headers()["date"].len(), date::HTTP_DATE_LEN);
        assert_eq!(reply.payload.len(), 10);
        let x = Exchange { head_only: true, ..x };
        let reply = planned(&prepared, &plan, &x);
        assert_eq!(reply.head.headers()["content-length"], "10");
        assert_eq!(reply.payload.len(), 0);
    }
}
