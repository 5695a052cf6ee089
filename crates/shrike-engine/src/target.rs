//! The target URL, parsed once and resolved to socket addresses before the run starts.

use std::net::{SocketAddr, ToSocketAddrs};

pub use shrike_spec::{AddressFamily, Scheme, Url};

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
        Self::resolve(Self::parse_unresolved(url)?, family)
    }

    /// Resolves an unresolved target's host, keeping only addresses of `family`.
    pub fn resolve(mut t: Target, family: AddressFamily) -> Result<Target, TargetError> {
        let url = t.url();
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
        let u = Url::parse(url)
            .map_err(|e| TargetError::Invalid { url: url.to_string(), reason: e.reason })?;
        Ok(Target::from_url(u))
    }

    /// The target of an already validated URL (resolved later).
    pub fn from_url(u: Url) -> Target {
        Target {
            scheme: u.scheme,
            host: u.host,
            port: u.port,
            authority: u.authority,
            path: u.path,
            addrs: Vec::new(),
        }
    }

    pub fn url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}{}", self.authority, self.path)
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
