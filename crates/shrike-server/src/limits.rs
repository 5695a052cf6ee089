//! Per-connection limits that keep one abusive client (slowloris, an idle connection hoarder, a
//! header flood) from holding the server's connections or memory: validated once, read by every
//! front end.
//!
//! What each protocol does with them:
//!
//! | limit | HTTP/1.1 (plain or TLS) | HTTP/2 | HTTP/3 |
//! |---|---|---|---|
//! | header timeout | 408 if part of a head arrived, then close | GOAWAY, close (until the first request) | the QUIC handshake timeout instead |
//! | idle timeout | close | GOAWAY, close | QUIC's idle timeout (any packet, pings included, resets it) |
//! | header count / bytes | 431, close | 431 on the stream | 431 on the stream |
//! | requests per connection | the Nth response says `connection: close`, close | GOAWAY after the Nth stream | GOAWAY after the Nth request |

use std::num::NonZeroU64;
use std::time::Duration;

use crate::config::ConfigError;
use crate::stats::LimitKind;

/// Time allowed for a complete request head, from its first byte (a new connection that has
/// sent nothing is idle; HTTP/2 over TLS: from the handshake). nginx's `client_header_timeout`
/// is 60 s;
/// a test server has no slow clients to wait for, so a shorter default frees stuck slots sooner.
pub const DEFAULT_REQUEST_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may sit between requests (nginx's `keepalive_timeout` is 75 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Header fields in one request (Apache's `LimitRequestFields` default).
pub const DEFAULT_MAX_REQUEST_HEADERS: usize = 100;
/// Bytes in one request head.
pub const DEFAULT_MAX_REQUEST_HEADER_BYTES: usize = 64 * 1024;
/// Upper bound of the header-count cap: the HTTP/1.1 parser keeps this many slots on the stack.
pub const MAX_REQUEST_HEADERS_LIMIT: usize = 1024;
/// Bounds of the header-bytes cap. Below the lower one ordinary requests would not fit; the
/// upper one bounds what one connection may make the server buffer.
pub const MIN_REQUEST_HEADER_BYTES: usize = 1024;
pub const MAX_REQUEST_HEADER_BYTES_LIMIT: usize = 1024 * 1024;

/// Validated connection limits; see the module docs for what each protocol does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_headers: usize,
    pub(crate) max_header_bytes: usize,
    pub(crate) max_requests: Option<NonZeroU64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_REQUEST_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_headers: DEFAULT_MAX_REQUEST_HEADERS,
            max_header_bytes: DEFAULT_MAX_REQUEST_HEADER_BYTES,
            max_requests: None,
        }
    }
}

impl Limits {
    /// Checks raw values; `max_requests` 0 is refused rather than read as "no cap", which is
    /// `None`.
    pub(crate) fn try_new(
        header_timeout: Duration,
        idle_timeout: Duration,
        max_headers: usize,
        max_header_bytes: usize,
        max_requests: Option<u64>,
    ) -> Result<Self, ConfigError> {
        let invalid = |field: &'static str, why: String| ConfigError::InvalidLimit { field, why };
        if header_timeout.is_zero() {
            return Err(invalid("request_header_timeout", "must be more than 0".into()));
        }
        if idle_timeout.is_zero() {
            return Err(invalid("idle_timeout", "must be more than 0".into()));
        }
        if !(1..=MAX_REQUEST_HEADERS_LIMIT).contains(&max_headers) {
            let why = format!("{max_headers} is out of range 1..={MAX_REQUEST_HEADERS_LIMIT}");
            return Err(invalid("max_request_headers", why));
        }
        let bytes = MIN_REQUEST_HEADER_BYTES..=MAX_REQUEST_HEADER_BYTES_LIMIT;
        if !bytes.contains(&max_header_bytes) {
            let why = format!(
                "{max_header_bytes} is out of range \
                 {MIN_REQUEST_HEADER_BYTES}..={MAX_REQUEST_HEADER_BYTES_LIMIT}"
            );
            return Err(invalid("max_request_header_bytes", why));
        }
        let max_requests = match max_requests {
            None => None,
            Some(n) => Some(NonZeroU64::new(n).ok_or_else(|| {
                invalid(
                    "max_requests_per_connection",
                    "must be at least 1 (omit it for no cap)".into(),
                )
            })?),
        };
        Ok(Self { header_timeout, idle_timeout, max_headers, max_header_bytes, max_requests })
    }

    /// Whether the `served`-th request (counting from 1) is the connection's last.
    pub(crate) fn is_last(&self, served: u64) -> bool {
        self.max_requests.is_some_and(|max| served >= max.get())
    }

    /// The header-list size HTTP/2 and HTTP/3 advertise and enforce in their libraries. Twice
    /// the cap, so requests just over it reach the server's own check, which counts them and
    /// says why in the 431's body; the libraries' own refusal (a bare 431, or a reset) only
    /// bounds memory against heads far over it.
    pub(crate) fn library_header_list_size(&self) -> u32 {
        u32::try_from(self.max_header_bytes.saturating_mul(2)).unwrap_or(u32::MAX)
    }
}

/// RFC 9113 §6.5.2's size of a header list: each field's name and value plus 32 bytes, the
/// pseudo-header fields included (HTTP/3 counts the same way, RFC 9114 §4.2.2).
pub(crate) fn header_list_size(parts: &http::request::Parts) -> usize {
    let fields: usize = parts.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
    let path = parts.uri.path_and_query().map_or(1, |p| p.as_str().len());
    let authority = parts.uri.authority().map_or(0, |a| a.as_str().len() + ":authority".len() + 32);
    let scheme = parts.uri.scheme_str().map_or(0, |s| s.len() + ":scheme".len() + 32);
    fields
        + parts.method.as_str().len()
        + ":method".len()
        + 32
        + path
        + ":path".len()
        + 32
        + authority
        + scheme
}

/// Which cap an HTTP/2 or HTTP/3 request's header fields break, and why in words for the
/// 431's body; `None` when they are within both.
pub(crate) fn header_refusal(
    limits: &Limits,
    parts: &http::request::Parts,
) -> Option<(LimitKind, String)> {
    refusal(limits, parts.headers.len(), header_list_size(parts))
}

/// [`header_refusal`] from the counts: `fields` regular fields making a list of `size` bytes.
pub(crate) fn refusal(limits: &Limits, fields: usize, size: usize) -> Option<(LimitKind, String)> {
    if fields > limits.max_headers {
        let why = format!(
            "request header fields too large: {fields} header fields, more than {}",
            limits.max_headers
        );
        return Some((LimitKind::TooManyHeaders, why));
    }
    (size > limits.max_header_bytes).then(|| {
        let why = format!(
            "request header fields too large: the header list is {size} bytes, more than {}",
            limits.max_header_bytes
        );
        (LimitKind::HeadersTooLarge, why)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates() {
        let d = Limits::default();
        let ok = Limits::try_new(d.header_timeout, d.idle_timeout, 100, 65536, None).unwrap();
        assert_eq!(ok, d);
        let secs = Duration::from_secs(1);
        for (h, i, n, b, r) in [
            (Duration::ZERO, secs, 100, 65536, None),
            (secs, Duration::ZERO, 100, 65536, None),
            (secs, secs, 0, 65536, None),
            (secs, secs, 1025, 65536, None),
            (secs, secs, 100, 1023, None),
            (secs, secs, 100, (1 << 20) + 1, None),
            (secs, secs, 100, 65536, Some(0)),
        ] {
            assert!(Limits::try_new(h, i, n, b, r).is_err(), "{h:?} {i:?} {n} {b} {r:?}");
        }
        let capped = Limits::try_new(secs, secs, 1, 1024, Some(2)).unwrap();
        assert!(!capped.is_last(1) && capped.is_last(2));
        assert!(!d.is_last(u64::MAX));
    }

    #[test]
    fn refusals_name_the_cap() {
        let limits =
            Limits::try_new(Duration::from_secs(1), Duration::from_secs(1), 2, 1024, None).unwrap();
        let (plain, ()) = http::Request::get("http://x/").body(()).unwrap().into_parts();
        assert_eq!(header_refusal(&limits, &plain), None);
        let mut req = http::Request::get("http://x/").body(()).unwrap();
        req.headers_mut().insert("a", "1".parse().unwrap());
        req.headers_mut().insert("b", "1".parse().unwrap());
        req.headers_mut().insert("c", "1".parse().unwrap());
        let (parts, ()) = req.into_parts();
        let (kind, why) = header_refusal(&limits, &parts).unwrap();
        assert_eq!(kind, LimitKind::TooManyHeaders);
        assert!(why.contains("3 header fields, more than 2"), "{why}");
        let mut req = http::Request::get("http://x/").body(()).unwrap();
        req.headers_mut().insert("a", "x".repeat(2000).parse().unwrap());
        let (parts, ()) = req.into_parts();
        let (kind, why) = header_refusal(&limits, &parts).unwrap();
        assert_eq!(kind, LimitKind::HeadersTooLarge);
        assert!(why.contains("more than 1024"), "{why}");
    }
}
