//! Request sources: what each request sends.
//!
//! A run's [`RequestSource`] is one request (the flags) or a list of them (a request file, see
//! [`file`]). Each worker walks the list round robin, worker `i` starting at entry `i mod len`,
//! so N workers cover the list evenly from the first request on. An entry may name its
//! endpoint (a `url` entry); otherwise requests rotate over the run's endpoints as before.
//!
//! # Templates
//! Paths, header values and text bodies (inline `body`, `json`, `--json-body`) may hold
//! placeholders, parsed once at start-up ([`template`]):
//! - `{{seq}}`: the request's sequence number, unique across the run: worker `i` of `N` numbers
//!   its requests `i, i+N, i+2N, …` in the order it sends them;
//! - `{{worker}}`: the worker's index;
//! - `{{random_id}}`: 32 random hex digits, the same everywhere within one request;
//! - `{{choice:a|b|c}}`: one of the options, uniformly, per occurrence.
//!
//! Body files are sent byte for byte and never templated. An unknown placeholder is a
//! configuration error.
//!
//! # Cost
//! A request without placeholders is encoded once per endpoint, exactly as a plain run's single
//! request: the hot path writes the same pre-encoded bytes (HTTP/1.1) or clones the same
//! template (HTTP/2 and HTTP/3). A templated request is rendered into a buffer its connection
//! reuses (HTTP/1.1), with `content-length` computed from the rendered body.

pub mod file;
pub mod h2;
pub mod nighthawk;
pub mod remote;
pub mod template;

use std::cell::Cell;
use std::num::NonZeroU64;
use std::rc::Rc;

use crate::config::RequestSpec;
use crate::target::Target;
use template::{RenderCx, Rng, Template};

/// What a run sends: one request or a list used round robin, plus what to read from responses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSource {
    entries: Vec<RequestSpec>,
    latency_header: Option<String>,
    limit: Option<NonZeroU64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    #[error("the request list is empty")]
    Empty,
    #[error("the request list has more than {} entries", u32::MAX)]
    TooLong,
    #[error("invalid latency response header name {0:?}: must be an HTTP token")]
    HeaderName(String),
}

impl RequestSource {
    /// Every request is `spec`.
    pub fn single(spec: RequestSpec) -> RequestSource {
        RequestSource { entries: vec![spec], latency_header: None, limit: None }
    }

    /// Requests rotate over `entries` round robin.
    pub fn list(entries: Vec<RequestSpec>) -> Result<RequestSource, SourceError> {
        if entries.is_empty() {
            return Err(SourceError::Empty);
        }
        if u32::try_from(entries.len()).is_err() {
            return Err(SourceError::TooLong);
        }
        Ok(RequestSource { entries, latency_header: None, limit: None })
    }

    /// Records this response header's value (integer nanoseconds, as Nighthawk's test server
    /// emits with `emit_previous_request_delta_in_response_header`) into
    /// `benchmark_http_client.origin_latency_statistic`.
    pub fn with_latency_header(mut self, name: &str) -> Result<RequestSource, SourceError> {
        let name = name.trim();
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_graphic() && !b":()<>@,;\\\"/[]?={}".contains(&b))
        {
            return Err(SourceError::HeaderName(name.to_string()));
        }
        self.latency_header = Some(name.to_ascii_lowercase());
        Ok(self)
    }

    /// Each worker sends at most `n` requests, then stops (Nighthawk's `num_requests`).
    pub fn with_limit(mut self, n: NonZeroU64) -> RequestSource {
        self.limit = Some(n);
        self
    }

    pub fn entries(&self) -> &[RequestSpec] {
        &self.entries
    }
    pub fn latency_header(&self) -> Option<&str> {
        self.latency_header.as_deref()
    }
    pub fn limit(&self) -> Option<NonZeroU64> {
        self.limit
    }
}

/// A worker's walk over the request source: which entry comes next and how many were issued.
/// Cells only: the worker is single-threaded.
#[derive(Debug)]
pub(crate) struct RequestCursor {
    next: Cell<u32>,
    len: u32,
    issued: Cell<u64>,
    limit: u64,
    /// The limit is the worker's part of a total count (not the source's own limit), so a
    /// rate change scales what is left of it.
    counted: bool,
}

impl RequestCursor {
    /// `share`: at most this many requests from this worker (its part of a total count), on
    /// top of the source's own per-worker limit.
    pub fn new(worker: usize, source: &RequestSource, share: Option<u64>) -> RequestCursor {
        let len = u32::try_from(source.entries.len()).unwrap_or(u32::MAX).max(1);
        let limit = source.limit.map_or(u64::MAX, NonZeroU64::get);
        RequestCursor {
            next: Cell::new((worker as u64 % u64::from(len)) as u32),
            len,
            issued: Cell::new(0),
            limit: share.map_or(limit, |s| s.min(limit)),
            counted: share.is_some(),
        }
    }

    /// The rate changed by `factor` ([`crate::pacer::RateHandle`]): a counted worker's
    /// requests left change with it, so its time left stays what the plan said.
    pub fn rescale(&mut self, factor: f64) {
        if self.counted {
            self.limit = crate::pacer::scaled_limit(self.limit, self.issued.get(), factor);
        }
    }

    /// The entry the next request uses, or `None` once the worker's request limit is spent.
    #[inline]
    pub fn next(&self) -> Option<u32> {
        let issued = self.issued.get();
        if issued >= self.limit {
            return None;
        }
        self.issued.set(issued + 1);
        let i = self.next.get();
        if self.len > 1 {
            self.next.set(if i + 1 == self.len { 0 } else { i + 1 });
        }
        Some(i)
    }

    /// Whether the worker's request limit (`num_requests`) is spent.
    pub fn spent(&self) -> bool {
        self.issued.get() >= self.limit
    }

    /// The entry [`RequestCursor::next`] would return, without taking it (the warm-up request).
    pub fn peek(&self) -> u32 {
        self.next.get()
    }
}

/// The state templates render from: sequence numbers unique across the run, the worker's
/// index, and a random source.
#[derive(Debug)]
pub(crate) struct Renderer {
    /// Requests rendered so far by this worker.
    rendered: Cell<u64>,
    worker: u64,
    workers: u64,
    rng: Rng,
}

impl Renderer {
    pub fn new(worker: usize, workers: usize, seed: u64) -> Renderer {
        Renderer {
            rendered: Cell::new(0),
            worker: worker as u64,
            workers: workers as u64,
            rng: Rng::new(seed),
        }
    }

    /// The rendering context of one new request: it takes the next sequence number.
    pub fn render_cx(&self) -> RenderCx<'_> {
        let k = self.rendered.get();
        self.rendered.set(k + 1);
        RenderCx {
            seq: k.wrapping_mul(self.workers).wrapping_add(self.worker),
            worker: self.worker,
            random_id: None,
            rng: &self.rng,
        }
    }
}

/// The origin-latency header of one response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OriginLatency {
    /// Not configured, or the response did not carry the header.
    #[default]
    Absent,
    /// Nanoseconds.
    Ns(u64),
    /// The header was there but is no non-negative integer.
    Invalid,
}

impl OriginLatency {
    /// Parses a header value: a non-negative integer of nanoseconds, as Nighthawk reads it.
    pub fn parse(v: &[u8]) -> OriginLatency {
        let v = v.trim_ascii();
        if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
            return OriginLatency::Invalid;
        }
        v.iter()
            .try_fold(0u64, |a, &d| a.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .map_or(OriginLatency::Invalid, OriginLatency::Ns)
    }
}

/// An HTTP/1.1 request as a pool holds it.
#[derive(Clone, Debug)]
pub(crate) enum H1Request {
    /// Encoded once; written as is.
    Fixed(Rc<[u8]>),
    /// Rendered per request into the connection's buffer.
    Templated(Rc<H1Template>),
}

/// One request-list entry for one endpoint's HTTP/1.1 pool.
#[derive(Clone, Debug)]
pub(crate) struct H1Entry {
    pub request: H1Request,
    /// A HEAD request: the response has no body whatever its framing says.
    pub head: bool,
    /// Its method is idempotent: it may be sent again if its first send got no answer.
    pub idempotent: bool,
}

/// Whether a request with this method means the same sent twice as once (RFC 9110 §9.2.2), so
/// one that got no answer may be sent again without the server acting on it twice.
pub(crate) fn idempotent(method: &[u8]) -> bool {
    matches!(method, b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE")
}

/// A templated HTTP/1.1 request: the head up to (not including) `content-length`, and the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct H1Template {
    head: Template,
    body: Template,
    /// Send `content-length` even for an empty body (POST, PUT, PATCH).
    always_length: bool,
}

impl H1Template {
    /// The request line and headers as [`crate::h1::encode_request`] writes them.
    pub fn new(target: &Target, spec: &RequestSpec) -> H1Template {
        let mut head = Template::literal(spec.method().as_bytes());
        head.push_literal(b" ");
        match spec.path() {
            Some(p) => {
                head.push(&Template::parse(p).unwrap_or_else(|_| Template::literal(p.as_bytes())))
            }
            None => head.push_literal(target.path.as_bytes()),
        }
        head.push_literal(b" HTTP/1.1\r\n");
        let has = |name: &str| spec.headers().iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        if !has("host") {
            push_header(&mut head, "host", &Template::literal(target.authority.as_bytes()));
        }
        if !has("user-agent") {
            let ua = concat!("shrike/", env!("CARGO_PKG_VERSION"));
            push_header(&mut head, "user-agent", &Template::literal(ua.as_bytes()));
        }
        for (k, v) in spec.headers() {
            if k.eq_ignore_ascii_case("content-length") {
                continue; // always derived from the body we actually send
            }
            // Validated when the spec was built.
            let v = Template::parse(v).unwrap_or_else(|_| Template::literal(v.as_bytes()));
            push_header(&mut head, k, &v);
        }
        H1Template {
            head,
            body: spec.body().template(),
            always_length: matches!(spec.method(), "POST" | "PUT" | "PATCH"),
        }
    }

    pub fn has_placeholders(&self) -> bool {
        self.head.has_placeholders() || self.body.has_placeholders()
    }

    /// Renders the whole request into `out` (cleared first); `body` is scratch space.
    pub fn render(&self, out: &mut Vec<u8>, body: &mut Vec<u8>, cx: &mut RenderCx<'_>) {
        out.clear();
        body.clear();
        self.head.render(out, cx);
        self.body.render(body, cx);
        if !body.is_empty() || self.always_length {
            out.extend_from_slice(b"content-length: ");
            template::push_decimal(out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
    }
}

fn push_header(t: &mut Template, k: &str, v: &Template) {
    t.push_literal(k.as_bytes());
    t.push_literal(b": ");
    t.push(v);
    t.push_literal(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_latency_parsing() {
        assert_eq!(OriginLatency::parse(b" 12345 "), OriginLatency::Ns(12345));
        assert_eq!(OriginLatency::parse(b"0"), OriginLatency::Ns(0));
        for bad in [&b""[..], b"-1", b"1.5", b"12ms", b"99999999999999999999"] {
            assert_eq!(OriginLatency::parse(bad), OriginLatency::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn templated_h1_request_has_the_rendered_length() {
        let t = Target::parse_unresolved("http://127.0.0.1:9/base").expect("url");
        let spec = RequestSpec::try_new("POST", vec![("x-id".into(), "{{seq}}".into())], 0)
            .and_then(|s| s.with_path("/items/{{seq}}"))
            .and_then(|s| s.with_body(crate::config::Body::Text("{\"n\":{{seq}}}".into())))
            .expect("spec");
        let h = H1Template::new(&t, &spec);
        assert!(h.has_placeholders());
        let rng = Rng::new(3);
        let (mut out, mut body) = (Vec::new(), Vec::new());
        let mut cx = RenderCx { seq: 1234, worker: 0, random_id: None, rng: &rng };
        h.render(&mut out, &mut body, &mut cx);
        let s = String::from_utf8(out).expect("utf8");
        assert!(s.starts_with("POST /items/1234 HTTP/1.1\r\nhost: 127.0.0.1:9\r\n"), "{s}");
        assert!(s.ends_with("x-id: 1234\r\ncontent-length: 10\r\n\r\n{\"n\":1234}"), "{s}");
    }

    #[test]
    fn fixed_requests_encode_exactly_as_before() {
        let t = Target::parse_unresolved("http://127.0.0.1:8080/p?q=1").expect("url");
        let spec = RequestSpec::try_new("POST", vec![("x-a".into(), "1".into())], 3).expect("spec");
        let h = H1Template::new(&t, &spec);
        assert!(!h.has_placeholders());
        assert_eq!(crate::h1::encode_request(&t, &spec), {
            let rng = Rng::new(1);
            let (mut out, mut body) = (Vec::new(), Vec::new());
            h.render(
                &mut out,
                &mut body,
                &mut RenderCx { seq: 0, worker: 0, random_id: None, rng: &rng },
            );
            out
        });
    }
}
