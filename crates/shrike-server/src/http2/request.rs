//! A request's header block, decoded and checked against RFC 9113 §8.2-§8.3 into a flat head
//! that the response side reads in place: no `http` types, and no allocation per request once
//! the connection's head has grown to its requests' size.

use shrike_h2::hpack::{Decoder, HpackError};

use crate::behaviour::CONFIG_HEADER;

/// Why a header block is malformed (RFC 9113 §8.1.1): a stream error of type PROTOCOL_ERROR.
pub(crate) type Malformed = &'static str;

const METHOD: usize = 0;
const SCHEME: usize = 1;
const AUTHORITY: usize = 2;
const PATH: usize = 3;
/// Extended CONNECT's (RFC 8441 §4); refused by the connection unless it offered it.
const PROTOCOL: usize = 4;
const PSEUDO: [&[u8]; 5] = [b":method", b":scheme", b":authority", b":path", b":protocol"];

/// One connection's decoded request head, reused from request to request.
#[derive(Debug, Default)]
pub(crate) struct RequestHead {
    /// Every kept name and value, back to back.
    arena: Vec<u8>,
    /// Regular fields: where each starts in `arena`, its name's and its value's lengths.
    fields: Vec<(usize, usize, usize)>,
    /// The pseudo-header fields' values, as ranges of `arena`.
    pseudo: [Option<(usize, usize)>; 5],
    /// RFC 9113 §6.5.2's size of the whole list, pseudo-header fields included.
    pub(crate) list_size: usize,
    /// Regular fields, counted even past the size kept.
    pub(crate) field_count: usize,
    pub(crate) content_length: Option<u64>,
    pub(crate) has_config: bool,
}

impl RequestHead {
    /// Decodes a request's header block. The outer error is a connection error (the decoder's
    /// table may be half updated); the inner one makes only this request malformed. Fields
    /// past `keep` bytes of list are counted but not kept: a request that large is refused.
    pub(crate) fn decode(
        &mut self,
        decoder: &mut Decoder,
        block: &[u8],
        keep: usize,
    ) -> Result<Result<(), Malformed>, HpackError> {
        self.arena.clear();
        self.fields.clear();
        self.pseudo = [None; 5];
        self.list_size = 0;
        self.field_count = 0;
        self.content_length = None;
        self.has_config = false;
        let mut malformed = None;
        let mut regular_seen = false;
        decoder.decode(block, |name, value| {
            if malformed.is_none() {
                if let Err(why) = self.field(name, value, keep, &mut regular_seen) {
                    malformed = Some(why);
                }
            }
        })?;
        if let Some(why) = malformed {
            return Ok(Err(why));
        }
        Ok(self.complete())
    }

    fn field(
        &mut self,
        name: &[u8],
        value: &[u8],
        keep: usize,
        regular_seen: &mut bool,
    ) -> Result<(), Malformed> {
        self.list_size = self.list_size.saturating_add(name.len() + value.len() + 32);
        check_value(value)?;
        if let Some(pseudo) = name.strip_prefix(b":") {
            if *regular_seen {
                return Err("a pseudo-header field after a regular field");
            }
            let slot = PSEUDO
                .iter()
                .position(|p| &p[1..] == pseudo)
                .ok_or("an unknown or response pseudo-header field")?;
            if self.pseudo[slot].is_some() {
                return Err("a repeated pseudo-header field");
            }
            let start = self.arena.len();
            self.arena.extend_from_slice(value);
            self.pseudo[slot] = Some((start, value.len()));
            return Ok(());
        }
        *regular_seen = true;
        check_name(name)?;
        match name {
            b"connection" | b"proxy-connection" | b"keep-alive" | b"transfer-encoding"
            | b"upgrade" => return Err("a connection-specific header field"),
            b"te" if value != b"trailers" => return Err("te other than \"trailers\""),
            b"content-length" => {
                let len = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or("an invalid content-length")?;
                if self.content_length.is_some_and(|l| l != len) {
                    return Err("conflicting content-length values");
                }
                self.content_length = Some(len);
            }
            _ => {}
        }
        self.has_config |= name == CONFIG_HEADER.as_bytes();
        self.field_count += 1;
        if self.list_size <= keep {
            let start = self.arena.len();
            self.arena.extend_from_slice(name);
            self.arena.extend_from_slice(value);
            self.fields.push((start, name.len(), value.len()));
        }
        Ok(())
    }

    /// §8.3.1: every request has `:method`; all but CONNECT have a non-empty `:path` and a
    /// `:scheme`, and CONNECT has `:authority` and neither of those, unless it is an extended
    /// CONNECT (RFC 8441 §4), which has all three and `:protocol`.
    fn complete(&self) -> Result<(), Malformed> {
        let Some(method) = self.get(METHOD) else { return Err("no :method") };
        if self.pseudo[PROTOCOL].is_some() {
            if method != b"CONNECT" {
                return Err(":protocol on a method other than CONNECT");
            }
            if self.pseudo[AUTHORITY].is_none() {
                return Err("an extended CONNECT without :authority");
            }
        } else if method == b"CONNECT" {
            if self.pseudo[SCHEME].is_some() || self.pseudo[PATH].is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            return match self.pseudo[AUTHORITY] {
                Some(_) => Ok(()),
                None => Err("CONNECT without :authority"),
            };
        }
        if self.pseudo[SCHEME].is_none() {
            return Err("no :scheme");
        }
        match self.get(PATH) {
            None => Err("no :path"),
            Some([]) => Err("an empty :path"),
            Some(_) => Ok(()),
        }
    }

    fn get(&self, slot: usize) -> Option<&[u8]> {
        self.pseudo[slot].map(|(start, len)| &self.arena[start..start + len])
    }

    pub(crate) fn method(&self) -> &[u8] {
        self.get(METHOD).unwrap_or_default()
    }

    pub(crate) fn authority(&self) -> &[u8] {
        self.get(AUTHORITY).unwrap_or_default()
    }

    /// `:path`, query and all.
    pub(crate) fn path(&self) -> &[u8] {
        self.get(PATH).unwrap_or_default()
    }

    /// An extended CONNECT's `:protocol`.
    pub(crate) fn protocol(&self) -> Option<&[u8]> {
        self.get(PROTOCOL)
    }

    /// `:path` without its query.
    pub(crate) fn path_only(&self) -> &[u8] {
        let path = self.get(PATH).unwrap_or_default();
        path.split(|&b| b == b'?').next().unwrap_or_default()
    }

    /// The regular fields in order.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|&(start, name, value)| {
            (&self.arena[start..start + name], &self.arena[start + name..start + name + value])
        })
    }

    /// The values of every field called `name`.
    pub(crate) fn values<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.fields().filter(move |(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The head as the echo body lists it: the pseudo-header fields that are present (in the
    /// order the HTTP/1.1 request line and `host` carry them), then every field.
    pub(crate) fn echo(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.arena.len() + 16 * (self.fields.len() + 4));
        let mut line = |name: &[u8], value: &[u8]| {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.push(b'\n');
        };
        for (slot, name) in PSEUDO.iter().enumerate() {
            if let Some(value) = self.get(slot) {
                line(name, value);
            }
        }
        for (name, value) in self.fields() {
            line(name, value);
        }
        out
    }
}

/// Checks a trailer block: the fields are dropped, but pseudo-header fields and malformed
/// names or values still make the request malformed.
pub(crate) fn decode_trailers(
    decoder: &mut Decoder,
    block: &[u8],
) -> Result<Result<(), Malformed>, HpackError> {
    let mut malformed = None;
    decoder.decode(block, |name, value| {
        if malformed.is_none() {
            let checked = if name.starts_with(b":") {
                Err("a pseudo-header field in trailers")
            } else {
                check_name(name).and_then(|()| check_value(value))
            };
            malformed = checked.err();
        }
    })?;
    Ok(malformed.map_or(Ok(()), Err))
}

/// §8.2.1: a name is lowercase, and holds no control character, space or non-ASCII byte.
fn check_name(name: &[u8]) -> Result<(), Malformed> {
    if name.is_empty() {
        return Err("an empty field name");
    }
    if name.iter().any(|&b| b.is_ascii_uppercase()) {
        return Err("an uppercase field name");
    }
    if name.iter().any(|&b| b <= 0x20 || b >= 0x7f) {
        return Err("a field name with a control character, space or non-ASCII byte");
    }
    Ok(())
}

/// §8.2.1: a value holds no NUL, CR or LF. Leading or trailing whitespace is let through, as
/// nginx and the `h2` crate let it: a test server answers what it can.
fn check_value(value: &[u8]) -> Result<(), Malformed> {
    if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err("a field value with NUL, CR or LF");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shrike_h2::hpack::encode_field;

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, v) in fields {
            encode_field(&mut out, n.as_bytes(), v.as_bytes());
        }
        out
    }

    fn decode(fields: &[(&str, &str)]) -> (RequestHead, Result<(), Malformed>) {
        let mut head = RequestHead::default();
        let mut decoder = Decoder::new(4096);
        let verdict = head.decode(&mut decoder, &block(fields), 1 << 20).expect("valid HPACK");
        (head, verdict)
    }

    const GET: [(&str, &str); 4] =
        [(":method", "GET"), (":scheme", "http"), (":authority", "x"), (":path", "/a?b")];

    #[test]
    fn a_request_decodes_in_place() {
        let mut fields = GET.to_vec();
        fields.extend([("x-nighthawk-test-server-config", "{}"), ("content-length", "3")]);
        fields.push(("x-nighthawk-test-server-config", "{\"a\":1}"));
        let (head, verdict) = decode(&fields);
        assert_eq!(verdict, Ok(()));
        assert_eq!((head.method(), head.path_only()), (&b"GET"[..], &b"/a"[..]));
        assert!(head.has_config);
        assert_eq!(head.content_length, Some(3));
        assert_eq!(head.field_count, 3);
        let configs: Vec<_> = head.values(b"x-nighthawk-test-server-config").collect();
        assert_eq!(configs, [&b"{}"[..], b"{\"a\":1}"]);
        let echo = String::from_utf8(head.echo()).unwrap();
        assert!(echo.starts_with(":method: GET\n:scheme: http\n:authority: x\n:path: /a?b\n"));
        let size: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert_eq!(head.list_size, size);
    }

    #[test]
    fn malformed_requests_are_named() {
        let cases: [(&[(&str, &str)], &str); 10] = [
            (&[(":method", "GET"), (":path", "/")], "no :scheme"),
            (&[(":method", "GET"), (":scheme", "http"), (":path", "")], "an empty :path"),
            (&[(":method", "GET"), (":scheme", "http")], "no :path"),
            (&[(":scheme", "http"), (":path", "/")], "no :method"),
            (&[(":method", "GET"), (":status", "200")], "an unknown or response pseudo"),
            (&[(":method", "GET"), ("a", "1"), (":path", "/")], "after a regular field"),
            (&[(":method", "GET"), (":method", "GET")], "a repeated pseudo"),
            (&[(":method", "GET"), ("connection", "close")], "connection-specific"),
            (&[(":method", "GET"), ("te", "gzip")], "te other"),
            (&[(":method", "GET"), ("X-Upper", "1")], "uppercase"),
        ];
        for (fields, needle) in cases {
            let (_, verdict) = decode(fields);
            let why = verdict.expect_err(needle);
            assert!(why.contains(needle), "{fields:?}: {why}");
        }
        let mut fields = GET.to_vec();
        fields.push(("te", "trailers"));
        assert_eq!(decode(&fields).1, Ok(()));
        fields.push(("x", " padded "));
        assert_eq!(decode(&fields).1, Ok(()));
        fields.push(("x", "a\rb"));
        assert!(decode(&fields).1.is_err());
        let connect = [(":method", "CONNECT"), (":authority", "h:1")];
        assert_eq!(decode(&connect).1, Ok(()));
    }

    #[test]
    fn large_lists_are_counted_but_not_kept() {
        let mut head = RequestHead::default();
        let mut decoder = Decoder::new(4096);
        let mut fields = GET.to_vec();
        let big = "a".repeat(500);
        fields.extend([("x-1", big.as_str()), ("x-2", big.as_str())]);
        assert_eq!(head.decode(&mut decoder, &block(&fields), 600), Ok(Ok(())));
        assert_eq!(head.field_count, 2);
        assert_eq!(head.fields().count(), 0);
        assert!(head.list_size > 1000);
        let trailers = block(&[(":path", "/")]);
        assert!(decode_trailers(&mut decoder, &trailers).unwrap().is_err());
        assert_eq!(decode_trailers(&mut decoder, &block(&[("x", "1")])), Ok(Ok(())));
    }
}
