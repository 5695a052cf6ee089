//! Requests for HTTP/2 and HTTP/3: the `http` request each stream sends, built once per
//! endpoint and entry, with the templated parts rendered per request.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};

use super::template::Template;
use super::{OriginLatency, Renderer};
use crate::config::{Body, EngineConfig, RequestSpec};
use crate::target::{Scheme, Target};

/// The request, built once per run; each stream clones the parts (cheap for the URI and body,
/// one small map clone for the headers, which `h2` takes by value).
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The parts with placeholders, rendered per request; `None` for a fixed request.
    dynamic: Option<Arc<Dynamic>>,
    /// A fixed request's HTTP/2 head, HPACK-encoded once.
    h2_block: Option<Bytes>,
}

/// The templated parts of a request: they replace or add to the fixed ones per request.
#[derive(Debug)]
struct Dynamic {
    path: Option<Template>,
    headers: Vec<(HeaderName, Template)>,
    body: Option<Template>,
    /// Send `content-length` even for an empty rendered body (POST, PUT, PATCH).
    always_length: bool,
}

/// HTTP/1.1 connection-specific headers have no meaning in HTTP/2 (RFC 9113 §8.2.2) and
/// `h2` rejects them; they are dropped rather than failing every request.
const CONNECTION_HEADERS: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// A request that cannot be sent over HTTP/2 or HTTP/3 (a header h2 forbids, a method that is
/// no token); found once, when the run is prepared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRequest(String);

impl RequestTemplate {
    /// Builds the template. A `host` header becomes the `:authority`, as h2 requires.
    /// Templated parts are checked here (every `{{choice:…}}` option must be valid where it
    /// goes) so that rendering never fails at run time.
    pub fn new(target: &Target, spec: &RequestSpec) -> Result<RequestTemplate, InvalidRequest> {
        let method = Method::from_bytes(spec.method().as_bytes())
            .map_err(|e| InvalidRequest(format!("request method {:?}: {e}", spec.method())))?;
        let mut authority = target.authority.clone();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static(concat!("shrike/", env!("CARGO_PKG_VERSION"))),
        );
        let mut dynamic_headers = Vec::new();
        for (k, v) in spec.headers() {
            let lower = k.to_ascii_lowercase();
            if lower == "host" {
                authority = v.clone();
                continue;
            }
            if lower == "content-length" || CONNECTION_HEADERS.contains(&lower.as_str()) {
                continue;
            }
            let name = HeaderName::from_bytes(lower.as_bytes())
                .map_err(|e| InvalidRequest(format!("request header {k:?}: {e}")))?;
            let t = Template::parse(v)
                .map_err(|e| InvalidRequest(format!("request header {k:?}: {e}")))?;
            if t.has_placeholders() {
                for o in t.choice_options() {
                    HeaderValue::from_bytes(o).map_err(|e| {
                        InvalidRequest(format!(
                            "request header {k:?} choice {:?}: {e}",
                            String::from_utf8_lossy(o)
                        ))
                    })?;
                }
                if name == http::header::USER_AGENT {
                    headers.remove(&name);
                }
                dynamic_headers.push((name, t));
                continue;
            }
            let value = HeaderValue::from_bytes(v.as_bytes())
                .map_err(|e| InvalidRequest(format!("request header {k:?} value {v:?}: {e}")))?;
            if name == http::header::USER_AGENT {
                headers.insert(name, value);
            } else {
                headers.append(name, value);
            }
        }
        let always_length = matches!(spec.method(), "POST" | "PUT" | "PATCH");
        let body_t = spec.body().template();
        let body_t = body_t.has_placeholders().then_some(body_t);
        let body_size = spec.body().len();
        if body_t.is_none() && (body_size > 0 || always_length) {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body_size));
        }
        let scheme = match target.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let path = spec.path().unwrap_or(&target.path);
        let path_t = Template::parse(path)
            .map_err(|e| InvalidRequest(format!("request path {path:?}: {e}")))?;
        for o in path_t.choice_options() {
            let mut p = b"/".to_vec();
            p.extend_from_slice(o);
            http::uri::PathAndQuery::try_from(p).map_err(|e| {
                InvalidRequest(format!(
                    "request path {path:?} choice {:?}: {e}",
                    String::from_utf8_lossy(o)
                ))
            })?;
        }
        let fixed_path = if path_t.has_placeholders() {
            String::from_utf8_lossy(&path_t.sample()).into_owned()
        } else {
            path.to_string()
        };
        let uri = Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(fixed_path.as_str())
            .build()
            .map_err(|e| {
                InvalidRequest(format!("request URI {scheme}://{authority}{path}: {e}"))
            })?;
        let path_t = path_t.has_placeholders().then_some(path_t);
        let dynamic =
            (path_t.is_some() || body_t.is_some() || !dynamic_headers.is_empty()).then(|| {
                Arc::new(Dynamic {
                    path: path_t,
                    headers: dynamic_headers,
                    body: body_t,
                    always_length,
                })
            });
        let body = match spec.body() {
            Body::Size(n) => Bytes::from(vec![b'a'; *n as usize]),
            Body::Text(t) => Bytes::copy_from_slice(t.as_bytes()),
            Body::Bytes(b) => Bytes::copy_from_slice(b),
        };
        let mut t = RequestTemplate { method, uri, headers, body, dynamic, h2_block: None };
        if t.dynamic.is_none() {
            t.h2_block = Some(crate::pool::h2::encode_head(&t.request()));
        }
        Ok(t)
    }

    /// A fixed request's HTTP/2 head block; `None` when parts are rendered per request.
    pub(crate) fn h2_block(&self) -> Option<&Bytes> {
        self.h2_block.as_ref()
    }

    pub(crate) fn request(&self) -> Request<()> {
        let mut r = Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }

    /// The request and body to send next: the fixed ones, or a fresh rendering.
    pub(crate) fn build(&self, renderer: &Renderer) -> (Request<()>, Bytes) {
        let Some(d) = &self.dynamic else {
            return (self.request(), self.body.clone());
        };
        let mut r = self.request();
        let mut cx = renderer.render_cx();
        if let Some(p) = &d.path {
            let mut buf = Vec::new();
            p.render(&mut buf, &mut cx);
            let mut parts = self.uri.clone().into_parts();
            // Every option was checked in `new`; on the impossible failure the sample path
            // stays.
            parts.path_and_query =
                http::uri::PathAndQuery::from_maybe_shared(Bytes::from(buf)).ok();
            if let Ok(u) = Uri::from_parts(parts) {
                *r.uri_mut() = u;
            }
        }
        for (name, t) in &d.headers {
            let mut buf = Vec::new();
            t.render(&mut buf, &mut cx);
            if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(buf)) {
                r.headers_mut().append(name.clone(), v);
            }
        }
        let body = match &d.body {
            Some(t) => {
                let mut buf = Vec::new();
                t.render(&mut buf, &mut cx);
                if !buf.is_empty() || d.always_length {
                    r.headers_mut()
                        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(buf.len()));
                }
                Bytes::from(buf)
            }
            None => self.body.clone(),
        };
        (r, body)
    }
}

/// Reads the origin-latency header of a response head, when one is configured.
pub(crate) fn origin_latency(headers: &HeaderMap, name: Option<&HeaderName>) -> OriginLatency {
    match name.and_then(|n| headers.get(n)) {
        None => OriginLatency::Absent,
        Some(v) => OriginLatency::parse(v.as_bytes()),
    }
}

/// The configured origin-latency header as an h2/h3 header name (validated by the config).
pub(crate) fn latency_header_name(cfg: &EngineConfig) -> Option<HeaderName> {
    cfg.requests.latency_header().and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(url: &str, method: &str, headers: &[(&str, &str)], body: u32) -> RequestTemplate {
        let target = Target::parse_unresolved(url).expect("url");
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let spec = RequestSpec::try_new(method, headers, body).expect("spec");
        RequestTemplate::new(&target, &spec).expect("template")
    }

    #[test]
    fn template_maps_h1_headers_to_h2() {
        let t = template(
            "http://127.0.0.1:8080/p?q=1",
            "POST",
            &[("Host", "example.com"), ("Connection", "keep-alive"), ("X-A", "1")],
            3,
        );
        let r = t.request();
        assert_eq!(r.method(), "POST");
        // The host header becomes :authority; connection-specific headers are dropped.
        assert_eq!(r.uri().to_string(), "http://example.com/p?q=1");
        assert!(r.headers().get("host").is_none() && r.headers().get("connection").is_none());
        assert_eq!(r.headers()["x-a"], "1");
        assert_eq!(r.headers()["content-length"], "3");
        assert!(r.headers()["user-agent"].to_str().is_ok_and(|v| v.starts_with("shrike/")));
        assert_eq!(&t.body[..], b"aaa");
        let t = template("https://h/", "GET", &[("user-agent", "custom")], 0);
        let r = t.request();
        assert_eq!(r.uri().to_string(), "https://h/");
        assert_eq!(r.headers().get_all("user-agent").iter().count(), 1);
        assert_eq!(r.headers()["user-agent"], "custom");
        assert!(r.headers().get("content-length").is_none() && t.body.is_empty());
    }

    #[test]
    fn invalid_authority_is_an_error_not_a_panic() {
        let target = Target::parse_unresolved("http://h/").expect("url");
        let spec =
            RequestSpec::try_new("GET", vec![("host".into(), "a b".into())], 0).expect("spec");
        assert!(RequestTemplate::new(&target, &spec).is_err());
    }
}

/// A captured HTTP/1.1 request (replay) as an HTTP/2 or HTTP/3 request: method, path and
/// headers from its head, `:authority` from its Host header (else `authority`), the body
/// de-chunked, and the headers HTTP/2 forbids (connection-specific ones, RFC 9113 §8.2.2) left
/// out. `Err` says why the bytes are no request.
pub(crate) fn from_h1(
    data: &[u8],
    scheme: &str,
    authority: &str,
) -> Result<(Request<()>, Bytes), String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("an incomplete HTTP/1.1 request".into()),
        Err(e) => return Err(format!("no HTTP/1.1 request: {e}")),
    };
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Err("an HTTP/1.1 request without method or path".into());
    };
    let host = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("host"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .unwrap_or(authority);
    let uri = if path.starts_with('/') || path == "*" {
        format!("{scheme}://{host}{path}")
    } else {
        path.to_string()
    };
    let mut r = Request::new(());
    *r.method_mut() = http::Method::from_bytes(method.as_bytes())
        .map_err(|e| format!("method {method:?}: {e}"))?;
    *r.uri_mut() = uri.parse::<Uri>().map_err(|e| format!("target {path:?}: {e}"))?;
    let mut chunked = false;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "host" | "connection" | "keep-alive" | "proxy-connection" | "upgrade" => continue,
            "transfer-encoding" => {
                chunked = String::from_utf8_lossy(h.value).to_ascii_lowercase().contains("chunked");
                continue;
            }
            // Only "trailers" may pass (RFC 9113 §8.2.2).
            "te" if !h.value.eq_ignore_ascii_case(b"trailers") => continue,
            _ => {}
        }
        let (Ok(n), Ok(v)) =
            (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(h.value))
        else {
            return Err(format!("header {:?} cannot be sent over HTTP/2", h.name));
        };
        r.headers_mut().append(n, v);
    }
    let rest = &data[head..];
    let body = if chunked { dechunk(rest)? } else { Bytes::copy_from_slice(rest) };
    if chunked {
        r.headers_mut().insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    Ok((r, body))
}

/// A chunked body's data, without its framing (trailers dropped).
fn dechunk(mut rest: &[u8]) -> Result<Bytes, String> {
    let mut out = Vec::with_capacity(rest.len());
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").ok_or("a cut chunked body")?;
        let size = rest[..eol].split(|&b| b == b';').next().unwrap_or_default();
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .ok_or("a chunk size that is no hex number")?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(Bytes::from(out));
        }
        out.extend_from_slice(rest.get(..size).ok_or("a cut chunk")?);
        rest = rest.get(size + 2..).ok_or("a cut chunk")?;
    }
}

#[cfg(test)]
mod replay_tests {
    use super::from_h1;

    #[test]
    fn captured_requests_become_h2_requests() {
        let raw = b"POST /cart?x=1 HTTP/1.1\r\nHost: t:1\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let (r, body) = from_h1(raw, "http", "fallback:2").expect("converts");
        assert_eq!(r.method(), "POST");
        assert_eq!(r.uri().to_string(), "http://t:1/cart?x=1");
        assert_eq!(&body[..], b"abcde");
        assert_eq!(r.headers()["x-a"], "b");
        assert_eq!(r.headers()["content-length"], "5");
        assert!(r.headers().get("connection").is_none() && r.headers().get("host").is_none());
        let (r, _) = from_h1(b"GET / HTTP/1.1\r\n\r\n", "https", "fallback:2").expect("converts");
        assert_eq!(r.uri().to_string(), "https://fallback:2/");
        assert!(from_h1(b"\x00garbage", "http", "a").is_err());
    }
}
