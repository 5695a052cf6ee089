//! HTTP/2 framing (RFC 9113 §4, §6): frame headers, the frames either end writes, and the
//! error codes by name.

/// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Error codes (RFC 9113 §7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const INTERNAL_ERROR: u32 = 0x2;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const CONNECT_ERROR: u32 = 0xa;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// Settings (RFC 9113 §6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;
/// RFC 8441 §3: the peer accepts extended CONNECT (`:protocol`).
pub const SETTINGS_ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The frame header's size, and the largest payload before SETTINGS_MAX_FRAME_SIZE changes it
/// (neither end of Shrike raises its own, so it bounds every frame the peer may send us).
pub const HEADER_LEN: usize = 9;
pub const DEFAULT_MAX_FRAME: usize = 16_384;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// A frame header as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// Parses the 9-byte header (the reserved bit of the stream id is ignored, §4.1).
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// Appends a frame header; the payload follows.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// A frame header, for writing over a placeholder once the payload's length is known.
pub fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Appends a whole frame.
pub fn put(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    put_head(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

pub fn put_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    put_head(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, v) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put(out, WINDOW_UPDATE, 0, stream, &increment.to_be_bytes());
}

pub fn put_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    put(out, RST_STREAM, 0, stream, &code.to_be_bytes());
}

pub fn put_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    put_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a header block as HEADERS and, beyond `max_frame`, CONTINUATION frames.
pub fn put_header_block(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut chunks = block.chunks(max_frame.max(1)).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or_default();
        let last = chunks.peek().is_none();
        put(out, kind, flags | if last { END_HEADERS } else { 0 }, stream, chunk);
        if last {
            return;
        }
        kind = CONTINUATION;
        flags = 0;
    }
}

/// The payload of a PADDED frame without its padding (§6.1): `None` if the padding does not
/// fit.
pub fn unpad(flags: u8, payload: &[u8]) -> Option<&[u8]> {
    if flags & PADDED == 0 {
        return Some(payload);
    }
    let (&pad, rest) = payload.split_first()?;
    rest.len().checked_sub(pad as usize).map(|n| &rest[..n])
}

/// An error code by its RFC name, so failures read as the peers print them.
pub fn reason(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).to_string(),
        None => format!("error code {code:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_split_into_continuations() {
        let mut out = Vec::new();
        put(&mut out, DATA, END_STREAM, 0x8000_0003, b"abc");
        let h = Head::parse(out[..9].try_into().expect("9 bytes"));
        // The reserved bit is ignored on read.
        assert_eq!(h, Head { len: 3, kind: DATA, flags: END_STREAM, stream: 3 });
        let mut out = Vec::new();
        put_header_block(&mut out, 5, &[7u8; 25], true, 10);
        let heads: Vec<Head> = [0usize, 19, 38]
            .iter()
            .map(|&i| Head::parse(out[i..i + 9].try_into().expect("9 bytes")))
            .collect();
        assert_eq!(heads[0], Head { len: 10, kind: HEADERS, flags: END_STREAM, stream: 5 });
        assert_eq!(heads[1], Head { len: 10, kind: CONTINUATION, flags: 0, stream: 5 });
        assert_eq!(heads[2], Head { len: 5, kind: CONTINUATION, flags: END_HEADERS, stream: 5 });
        assert_eq!(out.len(), 3 * 9 + 25);
        let mut out = Vec::new();
        put_header_block(&mut out, 1, &[], false, 10);
        assert_eq!(out, [0, 0, 0, HEADERS, END_HEADERS, 0, 0, 0, 1]);
    }

    #[test]
    fn padding_is_stripped_and_checked() {
        assert_eq!(unpad(0, b"xyz"), Some(&b"xyz"[..]));
        assert_eq!(unpad(PADDED, b"\x02abPP"), Some(&b"ab"[..]));
        assert_eq!(unpad(PADDED, b"\x05ab"), None);
        assert_eq!(unpad(PADDED, b""), None);
        assert_eq!(reason(7), "REFUSED_STREAM");
        assert_eq!(reason(0x42), "error code 0x42");
    }
}
