//! HTTP/1.1 request bytes rebuilt from a request's parts, for imports whose requests did not
//! travel as HTTP/1.1 bytes (HAR recordings, HTTP/2 streams): the request line, Host from the
//! authority, the headers in order, and the body with a content-length that matches it.

/// The request's bytes, or why it cannot be one (a header value with a line break, which
/// would split the request). Host and Content-Length among `headers` are left out (recomputed
/// here), as are HTTP/2 pseudo-headers (`:path`). A content-length is sent with any body, and
/// with an empty one for methods that carry a body (POST, PUT, PATCH).
pub fn request<'a>(
    method: &str,
    target: &str,
    authority: Option<&str>,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let mut data = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
    if let Some(a) = authority {
        data.extend_from_slice(format!("host: {a}\r\n").as_bytes());
    }
    for (name, value) in headers {
        if name.starts_with(':')
            || name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("content-length")
        {
            continue;
        }
        if value.contains(&b'\r') || value.contains(&b'\n') {
            return Err(format!("header {name} has a line break in its value"));
        }
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(b": ");
        data.extend_from_slice(value);
        data.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        data.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    data.extend_from_slice(b"\r\n");
    data.extend_from_slice(body);
    Ok(data)
}
