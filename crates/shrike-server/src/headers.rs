//! Configured response headers: validation and Nighthawk's replace/append rules.
//!
//! Headers come from two places, the server-wide [`ServerConfig`](crate::ServerConfig) and the
//! per-request `x-nighthawk-test-server-config`. Both are validated here, once, so a protocol
//! front end can copy them to the wire without re-checking.

use std::borrow::Cow;

use crate::ConfigError;

/// One validated response header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHeader {
    name: String,
    value: String,
}

impl ResponseHeader {
    /// Validates `name` and `value`; see [`ConfigError`] for what is rejected.
    pub fn try_new(name: impl Into<String>, value: impl Into<String>) -> Result<Self, ConfigError> {
        let name = name.into();
        let value = value.into();
        validate(&name, &value)?;
        Ok(Self { name, value })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    pub(crate) fn into_parts(self) -> (String, String) {
        (self.name, self.value)
    }
}

/// Headers the server owns. Letting a configuration set them would break message framing
/// (`content-length`, `transfer-encoding`) or connection management, and HTTP/2 forbids the
/// connection-specific ones outright.
const MANAGED: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    "trailer",
];

pub(crate) fn validate(name: &str, value: &str) -> Result<(), ConfigError> {
    validate_name(name)?;
    // HTAB is the only control character a field value may carry; CR and LF would let a
    // configuration inject headers or split the response.
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(ConfigError::InvalidHeaderValue { name: name.to_string() });
    }
    Ok(())
}

pub(crate) fn validate_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(ConfigError::InvalidHeaderName(name.to_string()));
    }
    if MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name)) {
        return Err(ConfigError::ManagedHeader(name.to_string()));
    }
    Ok(())
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A response header list under construction, plus whether the server still emits its own
/// `date` (it is produced per response from a clock, so it is not an ordinary list entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderList<'a> {
    pub(crate) entries: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub(crate) date: bool,
}

impl<'a> HeaderList<'a> {
    /// Nighthawk semantics: without `append`, a header replaces every earlier header of the same
    /// name (including the server's own `server` and `date`); with it, it is added alongside.
    pub(crate) fn apply(&mut self, name: Cow<'a, str>, value: Cow<'a, str>, append: bool) {
        if !append {
            self.entries.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            if name.eq_ignore_ascii_case("date") {
                self.date = false;
            }
        }
        self.entries.push((name, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_injection_and_managed_names() {
        assert!(ResponseHeader::try_new("x-a", "ok\tvalue é").is_ok());
        assert!(matches!(
            ResponseHeader::try_new("x-a", "a\r\nx-evil: 1"),
            Err(ConfigError::InvalidHeaderValue { .. })
        ));
        assert!(matches!(
            ResponseHeader::try_new("x a", "v"),
            Err(ConfigError::InvalidHeaderName(_))
        ));
        assert!(matches!(
            ResponseHeader::try_new(":status", "500"),
            Err(ConfigError::InvalidHeaderName(_))
        ));
        assert!(matches!(
            ResponseHeader::try_new("Content-Length", "5"),
            Err(ConfigError::ManagedHeader(_))
        ));
    }

    #[test]
    fn replace_and_append() {
        let mut list = HeaderList { entries: vec![("server".into(), "shrike".into())], date: true };
        list.apply("foo".into(), "1".into(), false);
        list.apply("foo".into(), "2".into(), true);
        list.apply("Server".into(), "other".into(), false);
        list.apply("date".into(), "fixed".into(), false);
        assert!(!list.date);
        let got: Vec<_> = list.entries.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(got, ["foo=1", "foo=2", "Server=other", "date=fixed"]);
    }
}
