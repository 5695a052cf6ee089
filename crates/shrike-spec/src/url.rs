//! Target URLs, checked for syntax only: resolving a host is I/O and belongs to the engine,
//! which does it once before a run starts.

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A syntactically valid `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub scheme: Scheme,
    /// Host as written (without brackets for IPv6), used for SNI and resolution.
    pub host: String,
    pub port: u16,
    /// Value of the `host` header: host, bracketed if IPv6, with the port unless default.
    pub authority: String,
    /// Path plus query, always starting with `/`.
    pub path: String,
}

/// Why a URL is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {url:?}: {reason}")]
pub struct UrlError {
    pub url: String,
    pub reason: &'static str,
}

impl Url {
    pub fn parse(url: &str) -> Result<Url, UrlError> {
        let bad = |reason| UrlError { url: url.to_string(), reason };
        let (scheme, rest) = if let Some(r) = strip_prefix_ci(url, "http://") {
            (Scheme::Http, r)
        } else if let Some(r) = strip_prefix_ci(url, "https://") {
            (Scheme::Https, r)
        } else {
            return Err(bad("the scheme must be http:// or https://"));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let path = match path.find('#') {
            Some(i) => path[..i].to_string(),
            None => path,
        };
        if authority.contains('@') {
            return Err(bad("user info in the URL is not supported"));
        }
        if authority.is_empty() {
            return Err(bad("the host is missing"));
        }
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| bad("unterminated IPv6 address"))?;
            let host = &r[..end];
            let after = &r[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(bad("unexpected characters after the IPv6 address")),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the host contains whitespace or control characters"));
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(
                "the path contains whitespace or control characters (percent-encode them)",
            ));
        }
        let port = match port {
            None => scheme.default_port(),
            Some(p) => match p.parse::<u16>() {
                Ok(0) => return Err(bad("port 0 is not a valid target port")),
                Ok(p) => p,
                Err(_) => return Err(bad("the port must be a number from 1 to 65535")),
            },
        };
        let host_hdr = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let authority =
            if port == scheme.default_port() { host_hdr } else { format!("{host_hdr}:{port}") };
        Ok(Url { scheme, host: host.to_string(), port, authority, path })
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix) {
        Some(&s[prefix.len()..])
    } else {
        None
    }
}
