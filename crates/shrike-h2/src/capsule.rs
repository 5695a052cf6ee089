//! HTTP capsules (RFC 9297 §3.2) and the QUIC variable-length integers that frame them
//! (RFC 9000 §16): CONNECT-UDP's datagrams in an HTTP/2 stream's DATA (RFC 9298 §5), read and
//! written by the load generator's tunnel and by the test server's proxy alike.

use std::ops::Range;

/// The capsule type of an HTTP Datagram (RFC 9297 §3.5).
pub const DATAGRAM: u64 = 0;
/// A capsule longer than any UDP payload (and its context id) is refused, of any type: CONNECT-UDP
/// defines no larger one, and buffering a peer's announcement of megabytes is how memory runs
/// out. (RFC 9297 would have an unknown type's capsule skipped at any length.)
pub const MAX_CAPSULE: u64 = 65_535 + 8;

/// A capsule announcing more than [`MAX_CAPSULE`] bytes: its announced length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong(pub u64);

/// A whole capsule at the start of `b`: its type and where its value lies; `None` until all
/// of it arrived.
pub fn parse(b: &[u8]) -> Result<Option<(u64, Range<usize>)>, TooLong> {
    let Some((kind, a)) = varint(b) else { return Ok(None) };
    let Some((len, n)) = varint(&b[a..]) else { return Ok(None) };
    if len > MAX_CAPSULE {
        return Err(TooLong(len));
    }
    let value = a + n..a + n + len as usize;
    Ok((value.end <= b.len()).then_some((kind, value)))
}

/// The UDP payload a capsule carries: a DATAGRAM with context id 0 (RFC 9298 §5). Other
/// capsule types and contexts are skipped by the reader (RFC 9297 §3.2).
pub fn udp_payload(kind: u64, value: &[u8]) -> Option<&[u8]> {
    if kind != DATAGRAM {
        return None;
    }
    // The context id is a varint, not always in its shortest form (RFC 9000 §16).
    match varint(value)? {
        (0, n) => Some(&value[n..]),
        _ => None,
    }
}

/// The bytes before a UDP payload of `len` bytes in its DATAGRAM capsule: type, length and
/// context id 0.
pub fn datagram_prefix(len: usize) -> Prefix {
    let mut p = Prefix { bytes: [0; 17], len: 0 };
    p.push(DATAGRAM);
    p.push(len as u64 + 1);
    p.push(0);
    p
}

/// A capsule's framing, at most three varints.
#[derive(Debug, Clone, Copy)]
pub struct Prefix {
    bytes: [u8; 17],
    len: usize,
}

impl Prefix {
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn push(&mut self, v: u64) {
        let (b, n) = encode_varint(v);
        self.bytes[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }
}

/// A QUIC variable-length integer at the start of `b`, and its length.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let n = 1usize << (first >> 6);
    let rest = b.get(1..n)?;
    let v = rest.iter().fold(u64::from(first & 0x3f), |v, &x| v << 8 | u64::from(x));
    Some((v, n))
}

/// `v` (below 2^62) as a QUIC variable-length integer: the bytes and how many of them count.
pub fn encode_varint(v: u64) -> ([u8; 8], usize) {
    let (tagged, n) = match v {
        0..0x40 => (v, 1),
        0x40..0x4000 => (v | 0x4000, 2),
        0x4000..0x4000_0000 => (v | 0x8000_0000, 4),
        _ => (v | 0xc000_0000_0000_0000, 8),
    };
    let mut out = [0; 8];
    out[..n].copy_from_slice(&tagged.to_be_bytes()[8 - n..]);
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_capsules_round_trip_and_wait_for_their_whole() {
        for (v, len) in [(0, 1), (63, 1), (64, 2), (16_383, 2), (16_384, 4), (1 << 30, 8)] {
            let (b, n) = encode_varint(v);
            assert_eq!(n, len, "{v}");
            assert_eq!(varint(&b[..n]), Some((v, n)), "{v}");
            assert_eq!(varint(&b[..n - 1]), None, "{v} cut short");
        }
        // RFC 9000 §A.1's examples.
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494_878_333, 4)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15_293, 2)));
        let mut b = datagram_prefix(300).as_slice().to_vec();
        assert_eq!(b, [0, 0x41, 0x2d, 0]);
        b.extend_from_slice(&[7; 300]);
        let (kind, value) = parse(&b).expect("well formed").expect("whole");
        assert_eq!((kind, value.clone()), (DATAGRAM, 3..304));
        assert_eq!(udp_payload(kind, &b[value]), Some(&[7u8; 300][..]));
        assert_eq!(parse(&b[..303]), Ok(None));
        assert_eq!(udp_payload(1, &[0, 1]), None, "another capsule type");
        assert_eq!(udp_payload(DATAGRAM, &[1, 1]), None, "another context");
        assert_eq!(udp_payload(DATAGRAM, &[0x40, 0, 9]), Some(&[9u8][..]), "a two-byte zero");
        let (big, n) = encode_varint(1 << 20);
        let mut huge = vec![0];
        huge.extend_from_slice(&big[..n]);
        assert_eq!(parse(&huge), Err(TooLong(1 << 20)));
    }
}
