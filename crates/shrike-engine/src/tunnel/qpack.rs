//! The little of QPACK (RFC 9204) an HTTP/3 tunnel needs: a request head written from the
//! static table and literals, and the `:status` read from an answer. We offer the proxy no
//! dynamic table (SETTINGS_QPACK_MAX_TABLE_CAPACITY stays 0), so its answers may not refer to
//! one (§3.2.3): a block that does is the proxy's error.

use shrike_h2::hpack::{read_int, write_int};

/// Static table entries (RFC 9204 Appendix A).
const AUTHORITY: usize = 0;
const PATH: usize = 1;
const METHOD_CONNECT: usize = 15;
const SCHEME_HTTPS: usize = 23;

/// The block of `CONNECT authority` (RFC 9114 §4.4: no `:scheme`, no `:path`).
pub(super) fn connect_block(authority: &str) -> Vec<u8> {
    let mut b = block_start();
    put_name_ref(&mut b, AUTHORITY, authority.as_bytes());
    b
}

/// The block of a CONNECT-UDP request (RFC 9298 §3.4 over RFC 9220's extended CONNECT).
pub(super) fn connect_udp_block(authority: &str, path: &str) -> Vec<u8> {
    let mut b = block_start();
    // :scheme https, indexed.
    b.push(0xc0 | SCHEME_HTTPS as u8);
    put_name_ref(&mut b, AUTHORITY, authority.as_bytes());
    put_name_ref(&mut b, PATH, path.as_bytes());
    put_literal(&mut b, b":protocol", b"connect-udp");
    put_literal(&mut b, b"capsule-protocol", b"?1");
    b
}

/// A block's prefix (no dynamic table: Required Insert Count and Base 0) and `:method
/// CONNECT`, indexed.
fn block_start() -> Vec<u8> {
    vec![0x00, 0x00, 0xc0 | METHOD_CONNECT as u8]
}

/// A literal field line whose name is a static entry's.
fn put_name_ref(b: &mut Vec<u8>, index: usize, value: &[u8]) {
    write_int(b, 0x50, 4, index);
    write_int(b, 0, 7, value.len());
    b.extend_from_slice(value);
}

/// A literal field line with a literal name.
fn put_literal(b: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    write_int(b, 0x20, 3, name.len());
    b.extend_from_slice(name);
    write_int(b, 0, 7, value.len());
    b.extend_from_slice(value);
}

/// A prefix integer (RFC 9204 §4.1.1, HPACK's), at `pos` in an answer.
fn prefix_int(b: &[u8], pos: &mut usize, bits: u32) -> Result<usize, String> {
    read_int(b, pos, bits)
        .map_err(|e| format!("a malformed QPACK integer in the proxy's answer ({e})"))
}

/// A QPACK string literal whose first byte has its Huffman flag at `bits` (its length's
/// prefix below it).
fn prefix_string(b: &[u8], pos: &mut usize, bits: u32) -> Result<Vec<u8>, String> {
    let huffman = b.get(*pos).is_some_and(|&x| x & (1 << bits) != 0);
    let len = prefix_int(b, pos, bits)?;
    let raw = b.get(*pos..*pos + len).ok_or("a truncated QPACK string")?;
    *pos += len;
    if !huffman {
        return Ok(raw.to_vec());
    }
    let mut out = Vec::with_capacity(len * 2);
    shrike_h2::huffman::decode(raw, &mut out).map_err(|e| format!("QPACK Huffman: {e:?}"))?;
    Ok(out)
}

/// The static table's `:status` entries (RFC 9204 Appendix A).
fn static_status(index: usize) -> Option<u16> {
    Some(match index {
        24 => 103,
        25 => 200,
        26 => 304,
        27 => 404,
        28 => 503,
        63 => 100,
        64 => 204,
        65 => 206,
        66 => 302,
        67 => 400,
        68 => 403,
        69 => 421,
        70 => 425,
        71 => 500,
        _ => return None,
    })
}

/// The `:status` of an answer's QPACK block (the first field, as pseudo-fields lead).
pub(super) fn qpack_status(block: &[u8]) -> Result<u16, String> {
    let dynamic = || "the proxy's answer refers to a QPACK dynamic table it was not offered";
    let mut pos = 0;
    if prefix_int(block, &mut pos, 8)? != 0 {
        return Err(dynamic().into());
    }
    prefix_int(block, &mut pos, 7)?;
    let parse = |value: &[u8]| {
        std::str::from_utf8(value).ok().and_then(|v| v.parse::<u16>().ok()).ok_or_else(|| {
            format!("the proxy's answer has a :status of {:?}", String::from_utf8_lossy(value))
        })
    };
    let first = *block.get(pos).ok_or("the proxy's answer has no :status")?;
    match first {
        // Indexed field line: static (T) only.
        b if b & 0x80 != 0 => {
            let index = prefix_int(block, &mut pos, 6)?;
            if b & 0x40 == 0 {
                return Err(dynamic().into());
            }
            static_status(index).ok_or_else(|| "the proxy's answer has no :status".into())
        }
        // Literal field line with a name reference.
        b if b & 0xc0 == 0x40 => {
            let index = prefix_int(block, &mut pos, 4)?;
            if b & 0x10 == 0 {
                return Err(dynamic().into());
            }
            let value = prefix_string(block, &mut pos, 7)?;
            match static_status(index) {
                Some(_) => parse(&value),
                None => Err("the proxy's answer has no :status".into()),
            }
        }
        // Literal field line with a literal name.
        b if b & 0xe0 == 0x20 => {
            let name = prefix_string(block, &mut pos, 3)?;
            let value = prefix_string(block, &mut pos, 7)?;
            match name == b":status" {
                true => parse(&value),
                false => Err("the proxy's answer has no :status".into()),
            }
        }
        _ => Err(dynamic().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_heads_and_answers_in_static_qpack() {
        // RFC 9204 §4.5: prefix 0/0, :method CONNECT indexed, :authority's name by reference.
        let b = connect_block("127.0.0.1:8080");
        assert_eq!(&b[..5], &[0x00, 0x00, 0xcf, 0x50, 14]);
        assert_eq!(&b[5..], b"127.0.0.1:8080");
        let long = "a".repeat(200);
        let b = connect_block(&long);
        let mut pos = 4;
        assert_eq!(prefix_int(&b, &mut pos, 7), Ok(200));
        assert_eq!(b.len() - pos, 200);
        // An indexed :status 200, a literal 407 by name reference (Huffman or not), a literal
        // name, and the refusals.
        assert_eq!(qpack_status(&[0, 0, 0xc0 | 25]), Ok(200));
        assert_eq!(qpack_status(&[0, 0, 0xc0 | 63, 68 - 63]), Ok(403), "a multi-byte index");
        assert_eq!(qpack_status(&[0, 0, 0x50 | 0x0f, 24 - 15, 3, b'4', b'0', b'7']), Ok(407));
        let mut huff = Vec::new();
        shrike_h2::huffman::encode(b"502", &mut huff);
        let mut b = vec![0, 0, 0x50 | 0x0f, 24 - 15];
        write_int(&mut b, 0x80, 7, huff.len());
        b.extend_from_slice(&huff);
        assert_eq!(qpack_status(&b), Ok(502));
        // A 7-byte name fills the 3-bit prefix: a zero continuation byte follows.
        let mut b = vec![0, 0, 0x20 | 7, 0];
        b.extend_from_slice(b":status");
        b.extend_from_slice(&[3, b'2', b'0', b'4']);
        assert_eq!(qpack_status(&b), Ok(204));
        assert!(qpack_status(&[2, 0, 0x80]).unwrap_err().contains("dynamic table"));
        assert!(qpack_status(&[0, 0, 0x80 | 1]).unwrap_err().contains("dynamic table"));
        assert!(qpack_status(&[0, 0, 0xc0 | 1]).unwrap_err().contains("no :status"));
        assert!(qpack_status(&[0, 0, 0x50 | 0x0f, 24 - 15, 3, b'2']).is_err(), "truncated");
    }
}
