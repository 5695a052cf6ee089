//! Requests streamed in while the run goes on (Nighthawk's remote request source,
//! `--request-source grpc://…`): each worker reads its own stream of [`RemoteRequest`]s, and
//! each is merged over the run's own request, as Nighthawk merges a `RequestSpecifier` over
//! its configured headers, then encoded once as HTTP/1.1 (HTTP/2 and HTTP/3 pools translate
//! it as they do replayed requests).
//!
//! The engine knows nothing of gRPC: whoever starts the run (the CLI, the service) connects to
//! the source and hands each worker a channel.

use bytes::Bytes;

use crate::config::{Body, RequestSpec};
use crate::feed::{HttpMeta, Payload};
use crate::target::Target;

/// One request as a source describes it; what it leaves out comes from the run's request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteRequest {
    pub method: Option<String>,
    pub path: Option<String>,
    /// The `host` header (HTTP/2's `:authority`).
    pub authority: Option<String>,
    /// Headers replacing the run's headers of the same name (`:method`, `:path` and
    /// `:authority` here mean the fields above).
    pub headers: Vec<(String, String)>,
    /// A body of this many bytes (`a`s), as Nighthawk sends it.
    pub content_length: Option<u32>,
}

/// What a worker reads: requests, or why its source failed (the stream then ends).
pub type RemoteItem = Result<RemoteRequest, String>;

/// One worker's stream of requests.
pub type RemoteStream = tokio::sync::mpsc::Receiver<RemoteItem>;

/// `r` merged over the run's request `base` for `target`, as HTTP/1.1 bytes.
pub(crate) fn encode(r: &RemoteRequest, base: &RequestSpec, target: &Target) -> Payload {
    let mut method = r.method.clone().unwrap_or_else(|| base.method().to_string());
    let mut path = r.path.clone().or_else(|| base.path().map(String::from));
    let mut authority = r.authority.clone();
    let mut headers: Vec<(String, String)> = base.headers().to_vec();
    for (k, v) in &r.headers {
        match k.to_ascii_lowercase().as_str() {
            ":method" => method = v.clone(),
            ":path" => path = Some(v.clone()),
            ":authority" | "host" => authority = Some(v.clone()),
            // Derived from the body actually sent.
            "content-length" => {}
            name => {
                headers.retain(|(h, _)| !h.eq_ignore_ascii_case(name));
                headers.push((name.to_string(), v.clone()));
            }
        }
    }
    let body: Vec<u8> = match (r.content_length, base.body()) {
        (Some(n), _) => vec![b'a'; n as usize],
        (None, Body::Size(n)) => vec![b'a'; *n as usize],
        (None, Body::Text(t)) => t.as_bytes().to_vec(),
        (None, Body::Bytes(b)) => b.to_vec(),
    };
    let path = path.unwrap_or_else(|| target.path.clone());
    let authority = authority
        .or_else(|| {
            headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("host")).map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| target.authority.clone());
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(format!("{method} {path} HTTP/1.1\r\nhost: {authority}\r\n").as_bytes());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("user-agent")) {
        out.extend_from_slice(
            concat!("user-agent: shrike/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
        );
    }
    for (k, v) in headers.iter().filter(|(k, _)| !k.eq_ignore_ascii_case("host")) {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if !body.is_empty() || matches!(method.as_str(), "POST" | "PUT" | "PATCH") {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    match method.eq_ignore_ascii_case("HEAD") {
        true => Payload::with(out, HttpMeta { head: true, ..HttpMeta::default() }),
        false => Payload::bytes(Bytes::from(out)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_specifier_replaces_what_it_names() {
        let target = Target::parse_unresolved("http://127.0.0.1:9/base").expect("url");
        let base = RequestSpec::try_new(
            "GET",
            vec![("x-a".into(), "1".into()), ("x-b".into(), "2".into())],
            0,
        )
        .expect("spec");
        let r = RemoteRequest {
            path: Some("/r/7".into()),
            headers: vec![("X-B".into(), "3".into()), (":method".into(), "POST".into())],
            content_length: Some(4),
            ..RemoteRequest::default()
        };
        let p = encode(&r, &base, &target);
        let text = String::from_utf8(p.data.to_vec()).expect("utf8");
        assert!(text.starts_with("POST /r/7 HTTP/1.1\r\nhost: 127.0.0.1:9\r\n"), "{text}");
        assert!(
            text.contains("x-a: 1\r\n") && text.contains("x-b: 3\r\n") && !text.contains("x-b: 2"),
            "{text}"
        );
        assert!(text.ends_with("content-length: 4\r\n\r\naaaa"), "{text}");
        let p = encode(&RemoteRequest::default(), &base, &target);
        assert!(p.data.starts_with(b"GET /base HTTP/1.1\r\n"));
    }
}
