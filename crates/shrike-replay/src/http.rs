//! Captured HTTP/1.1 requests made fit for the replay target: the Host header names the target
//! (unless `--keep-host`), a proxy's absolute-form target (`GET http://a/b HTTP/1.1`) becomes
//! origin-form (`GET /b`), which origin servers expect, and the target URL's path prefix goes
//! in front of every path (`--target http://h/v2` sends `GET /v2/b`), after any `--rewrite`
//! rules ([`Rewrites`]) changed the path and headers. Everything else, header order, case and
//! the body, is sent byte for byte.

use crate::rewrite::Rewrites;

/// How captured requests are fitted to the target.
pub struct Fit<'a> {
    /// The Host header's value (`host:port`); `None` keeps the captured Host.
    pub authority: Option<&'a str>,
    /// Put before every path (`""` or `/v2`, no trailing slash).
    pub prefix: &'a str,
    pub rewrites: &'a Rewrites,
}

/// A request's bytes fitted as `fit` says, and whether it is HEAD. Bytes that are no HTTP
/// request head are sent unchanged (the server's answer will say what it makes of them).
pub fn for_target(data: &[u8], fit: &Fit) -> (Vec<u8>, bool) {
    let (authority, prefix) = (fit.authority, fit.prefix);
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(head_len)) = req.parse(data) else {
        return (data.to_vec(), data.starts_with(b"HEAD "));
    };
    let head = req.method == Some("HEAD");
    if authority.is_none() && prefix.is_empty() && fit.rewrites.is_empty() {
        return (data.to_vec(), head);
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return (data.to_vec(), head);
    };
    let path = fit.rewrites.path(origin_form(path));
    // `*` (OPTIONS) names the server, not a path: no prefix.
    let prefix = if path.starts_with('/') { prefix } else { "" };
    let mut out = Vec::with_capacity(data.len() + prefix.len() + authority.map_or(0, str::len));
    out.extend_from_slice(format!("{method} {prefix}{path} HTTP/1.{version}\r\n").as_bytes());
    let mut host_done = false;
    for h in req.headers.iter() {
        if let (true, Some(authority)) = (h.name.eq_ignore_ascii_case("host"), authority) {
            if host_done {
                // Two Host headers is a request servers must reject; send one.
                continue;
            }
            host_done = true;
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(authority.as_bytes());
        } else {
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            match fit.rewrites.header(h.name, h.value) {
                Some(v) => out.extend_from_slice(&v),
                None => out.extend_from_slice(h.value),
            }
        }
        out.extend_from_slice(b"\r\n");
    }
    if let (false, 1, Some(authority)) = (host_done, version, authority) {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(authority.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&data[head_len..]);
    (out, head)
}

/// `http://host:port/a?b` → `/a?b`; origin-form and `*` are kept.
fn origin_form(path: &str) -> &str {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = path.strip_prefix(scheme) {
            return rest.find('/').map_or("/", |i| &rest[i..]);
        }
    }
    path
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fit(data: &[u8], authority: Option<&str>, prefix: &str) -> (Vec<u8>, bool) {
        for_target(data, &Fit { authority, prefix, rewrites: &Rewrites::default() })
    }

    #[test]
    fn host_names_the_target_and_the_rest_is_kept() {
        let raw = b"POST /cart?x=1 HTTP/1.1\r\nHost: shop.example\r\nX-A: b\r\ncontent-length: 3\r\n\r\none";
        let (out, head) = fit(raw, Some("127.0.0.1:8080"), "");
        assert!(!head);
        assert_eq!(
            out,
            b"POST /cart?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: b\r\ncontent-length: 3\r\n\r\none"
        );
        assert_eq!(fit(raw, None, "").0, raw.to_vec(), "--keep-host sends it unchanged");
    }

    #[test]
    fn absolute_form_becomes_origin_form_and_a_missing_host_is_added() {
        let (out, _) = fit(b"GET http://a.example:81/p/q HTTP/1.1\r\n\r\n", Some("t:1"), "");
        assert_eq!(out, b"GET /p/q HTTP/1.1\r\nhost: t:1\r\n\r\n");
        let (out, head) = fit(b"HEAD http://a.example HTTP/1.0\r\n\r\n", Some("t:1"), "");
        assert!(head);
        assert_eq!(out, b"HEAD / HTTP/1.0\r\n\r\n");
    }

    #[test]
    fn duplicate_hosts_become_one_and_garbage_passes_unchanged() {
        let (out, _) = fit(b"GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", Some("t:1"), "");
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: t:1\r\n\r\n");
        assert_eq!(fit(b"\x00\x01junk", Some("t:1"), "").0, b"\x00\x01junk".to_vec());
    }

    #[test]
    fn the_targets_path_prefix_goes_before_every_path() {
        let raw = b"GET /a?x=1 HTTP/1.1\r\nHost: shop\r\n\r\n";
        let (out, _) = fit(raw, Some("t:1"), "/prefix");
        assert_eq!(out, b"GET /prefix/a?x=1 HTTP/1.1\r\nHost: t:1\r\n\r\n");
        // With the captured Host kept, the path is still the target's.
        let (out, _) = fit(raw, None, "/prefix");
        assert_eq!(out, b"GET /prefix/a?x=1 HTTP/1.1\r\nHost: shop\r\n\r\n");
        let (out, _) = fit(b"GET http://a/b HTTP/1.1\r\n\r\n", Some("t:1"), "/v2");
        assert_eq!(out, b"GET /v2/b HTTP/1.1\r\nhost: t:1\r\n\r\n");
        let (out, _) = fit(b"OPTIONS * HTTP/1.1\r\n\r\n", Some("t:1"), "/v2");
        assert_eq!(out, b"OPTIONS * HTTP/1.1\r\nhost: t:1\r\n\r\n");
    }

    #[test]
    fn rewrites_change_the_path_before_the_prefix_and_the_headers_named() {
        let rules =
            ["path:^/v1/(\\w+)=>/v2/$1".to_string(), "header:x-env:prod=>canary".to_string()];
        let rewrites = Rewrites::parse(&rules).unwrap();
        let raw = b"GET /v1/cart?id=7 HTTP/1.1\r\nHost: shop\r\nX-Env: prod-eu\r\n\r\n";
        let fit = Fit { authority: None, prefix: "/p", rewrites: &rewrites };
        let (out, _) = for_target(raw, &fit);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "GET /p/v2/cart?id=7 HTTP/1.1\r\nHost: shop\r\nX-Env: canary-eu\r\n\r\n");
    }
}
