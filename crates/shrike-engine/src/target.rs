//! The target URL, parsed once and resolved to socket addresses before the run starts.

use std::net::{SocketAddr, ToSocketAddrs};

/// An `http://` or `https://` target, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// Host as written (without brackets for IPv6), used for SNI and resolution.
    pub host: String,
    pub port: u16,
    /// Value of the `host` header: host, bracketed if IPv6, with the port unless default.
    pub authority: String,
    /// Path plus query, always starting with `/`.
    pub path: String,
    /// Resolved addresses in connect preference order.
    pub addrs: Vec<SocketAddr>,
}

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

/// Which resolved addresses a run may connect to (Nighthawk's `--address-family`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddressFamily {
    /// Every address, IPv4 first.
    #[default]
    Auto,
    V4,
    V6,
}

impl AddressFamily {
    pub fn parse(s: &str) -> Option<AddressFamily> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(AddressFamily::Auto),
            "v4" => Some(AddressFamily::V4),
            "v6" => Some(AddressFamily::V6),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AddressFamily::Auto => "auto",
            AddressFamily::V4 => "v4",
            AddressFamily::V6 => "v6",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("invalid URL {url:?}: {reason}")]
    Invalid { url: String, reason: &'static str },
    #[error("cannot resolve host {host:?} of {url:?}: {reason}")]
    Resolve { url: String, host: String, reason: String },
}

impl Target {
    /// Parses and resolves `url`. Resolution happens here, once, so that a typo fails before the
    /// run starts and DNS never sits on the hot path.
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        Self::parse_with_family(url, AddressFamily::Auto)
    }

    /// [`Target::parse`], keeping only addresses of `family`.
    pub fn parse_with_family(url: &str, family: AddressFamily) -> Result<Target, TargetError> {
        let mut t = Self::parse_unresolved(url)?;
        let addrs: Vec<SocketAddr> = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|e| TargetError::Resolve {
                url: url.to_string(),
                host: t.host.clone(),
                reason: e.to_string(),
            })?
            .collect();
        if addrs.is_empty() {
            return Err(TargetError::Resolve {
                url: url.to_string(),
                host: t.host.clone(),
                reason: "no addresses".into(),
            });
        }
        // "auto" family preference: IPv4 first. Most servers under test listen on v4 only, and
        // `localhost` commonly resolves to ::1 first.
        let (mut v4, v6): (Vec<_>, Vec<_>) = addrs.into_iter().partition(|a| a.is_ipv4());
        t.addrs = match family {
            AddressFamily::Auto => {
                v4.extend(v6);
                v4
            }
            AddressFamily::V4 => v4,
            AddressFamily::V6 => v6,
        };
        if t.addrs.is_empty() {
            return Err(TargetError::Resolve {
                url: url.to_string(),
                host: t.host.clone(),
                reason: format!(
                    "no {} addresses (--address-family {})",
                    match family {
                        AddressFamily::V6 => "IPv6",
                        _ => "IPv4",
                    },
                    family.name()
                ),
            });
        }
        Ok(t)
    }

    /// Parses without resolving (used by tests and for validation of syntax alone).
    pub fn parse_unresolved(url: &str) -> Result<Target, TargetError> {
        let bad = |reason| TargetError::Invalid { url: url.to_string(), reason };
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
        Ok(Target { scheme, host: host.to_string(), port, authority, path, addrs: Vec::new() })
    }

    pub fn url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}{}", self.authority, self.path)
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix) {
        Some(&s[prefix.len()..])
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let t = Target::parse_unresolved("http://127.0.0.1:8080/a/b?x=1").expect("ok");
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("127.0.0.1", 8080, "/a/b?x=1"));
        assert_eq!(t.authority, "127.0.0.1:8080");
        let t = Target::parse_unresolved("HTTP://localhost").expect("ok");
        assert_eq!((t.port, t.path.as_str(), t.authority.as_str()), (80, "/", "localhost"));
        let t = Target::parse_unresolved("http://[::1]:9/x#frag").expect("ok");
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("::1", 9, "/x"));
        assert_eq!(t.authority, "[::1]:9");
        let t = Target::parse_unresolved("https://h?q").expect("ok");
        assert_eq!((t.port, t.path.as_str()), (443, "/?q"));
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "",
            "127.0.0.1:80",
            "ftp://x/",
            "http://",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://h:abc/",
            "http://[::1/",
            "http://u@h/",
            "http://h/a b",
        ] {
            assert!(Target::parse_unresolved(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn resolves_loopback_v4_first() {
        let t = Target::parse("http://localhost:8080/").expect("resolves");
        assert!(!t.addrs.is_empty());
        if t.addrs.iter().any(|a| a.is_ipv4()) {
            assert!(t.addrs[0].is_ipv4());
        }
        assert!(Target::parse("http://no-such-host.invalid/").is_err());
    }

    #[test]
    fn address_family_filters() {
        let t = Target::parse_with_family("http://127.0.0.1:80/", AddressFamily::V4).expect("v4");
        assert!(t.addrs.iter().all(|a| a.is_ipv4()));
        let e = Target::parse_with_family("http://127.0.0.1:80/", AddressFamily::V6)
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains("no IPv6 addresses"), "{e}");
        let t = Target::parse_with_family("http://[::1]:80/", AddressFamily::V6).expect("v6");
        assert!(t.addrs.iter().all(|a| a.is_ipv6()));
        assert_eq!(AddressFamily::parse("V4"), Some(AddressFamily::V4));
        assert_eq!(AddressFamily::parse("v5"), None);
    }
}
