//! An HTTP/2 connection as a capture holds it, both directions whole, read into its streams:
//! each request (pseudo-headers, headers, body) with where it began in the client's bytes, and
//! the answer the server gave it (status, body size). Replay's import makes jobs of them. The
//! header blocks are decoded in order, one HPACK table per direction, by the client's own
//! decoder; the framing is the client's own ([`frame::Head`]).

use std::collections::BTreeMap;

use super::frame::{self, Head};
use super::hpack::Decoder;

/// One stream of a captured connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapturedStream {
    pub id: u32,
    /// Where its HEADERS frame began in the client's bytes (after the preface).
    pub offset: usize,
    pub method: String,
    /// `:path` (absent for CONNECT).
    pub path: String,
    pub authority: Option<String>,
    /// The regular headers, in order (pseudo-headers left out).
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// The client ended it (END_STREAM): the request is whole.
    pub complete: bool,
    /// The server's `:status`, and its DATA bytes, when the capture holds them.
    pub status: Option<u16>,
    pub answer_bytes: u64,
    /// The server ended its answer (END_STREAM), in the frame at this offset of its bytes.
    pub answered: bool,
    pub answer_end: Option<usize>,
}

/// Reads a captured h2 connection: `client` from its preface on, `server` from its first
/// frame (after the 101 of an h2c Upgrade: `upgraded`, whose stream 1 is the upgrading
/// HTTP/1.1 request's answer, listed first with no request of its own). Streams in the order
/// they opened; an error says where the bytes stopped making sense (the streams read before
/// it are kept).
pub fn read_connection(
    client: &[u8],
    server: &[u8],
    upgraded: bool,
) -> (Vec<CapturedStream>, Option<String>) {
    let mut streams: BTreeMap<u32, CapturedStream> = BTreeMap::new();
    let mut order: Vec<u32> = Vec::new();
    if upgraded {
        streams.insert(1, CapturedStream { id: 1, complete: true, ..CapturedStream::default() });
        order.push(1);
    }
    let Some(frames) = client.strip_prefix(frame::PREFACE) else {
        return (Vec::new(), Some("no HTTP/2 connection preface".into()));
    };
    let base = frame::PREFACE.len();
    // The peers' tables may grow to what each allowed; a capture does not say, so allow the
    // most a SETTINGS value can (a table is only as large as its inserts make it).
    let mut requests = Decoder::new(1 << 20);
    let mut error = walk(frames, &mut |at, head, payload, block| {
        let s = streams.entry(head.stream).or_insert_with(|| {
            order.push(head.stream);
            CapturedStream { id: head.stream, offset: base + at, ..CapturedStream::default() }
        });
        if let Some(block) = block {
            let mut fields = Vec::new();
            requests
                .decode(block, |n, v| fields.push((n.to_vec(), v.to_vec())))
                .map_err(|e| format!("HPACK (client): {e}"))?;
            for (n, v) in fields {
                let text = || String::from_utf8_lossy(&v).into_owned();
                match n.as_slice() {
                    b":method" => s.method = text(),
                    b":path" => s.path = text(),
                    b":authority" => s.authority = Some(text()),
                    n if n.starts_with(b":") => {}
                    _ => s.headers.push((String::from_utf8_lossy(&n).into_owned(), v)),
                }
            }
        } else {
            s.body.extend_from_slice(payload);
        }
        s.complete |= head.flags & frame::END_STREAM != 0;
        Ok(())
    });
    let mut answers = Decoder::new(1 << 20);
    let server_error = walk(server, &mut |at, head, payload, block| {
        let Some(s) = streams.get_mut(&head.stream) else { return Ok(()) };
        if let Some(block) = block {
            let mut status = None;
            answers
                .decode(block, |n, v| {
                    if n == b":status" {
                        status = std::str::from_utf8(v).ok().and_then(|v| v.parse::<u16>().ok());
                    }
                })
                .map_err(|e| format!("HPACK (server): {e}"))?;
            // Interim (1xx) heads precede the answer's own.
            if status.is_some_and(|st| st >= 200) || s.status.is_none() {
                s.status = status;
            }
        } else {
            s.answer_bytes += payload.len() as u64;
        }
        if head.flags & frame::END_STREAM != 0 && s.status.is_some_and(|st| st >= 200) {
            s.answered = true;
            s.answer_end = Some(at);
        }
        Ok(())
    });
    if error.is_none() {
        error = server_error;
    }
    let out = order.into_iter().filter_map(|id| streams.remove(&id)).collect();
    (out, error)
}

/// What [`walk`] calls per frame of interest: its offset, header, DATA payload, and (for
/// HEADERS) its whole header block.
type OnFrame<'a> = dyn FnMut(usize, Head, &[u8], Option<&[u8]>) -> Result<(), String> + 'a;

/// Calls `on(offset, head, data, block)` for each stream's HEADERS (with its whole header
/// block, CONTINUATIONs joined: `block`) and DATA (its data, padding removed) in `bytes`,
/// in order; other frames are passed over. An error names what broke.
fn walk(bytes: &[u8], on: &mut OnFrame) -> Option<String> {
    let mut at = 0usize;
    // A header block being continued: its stream, HEADERS frame (offset, head) and bytes.
    let mut open: Option<(usize, Head, Vec<u8>)> = None;
    while at + frame::HEADER_LEN <= bytes.len() {
        let Ok(h) = <&[u8; frame::HEADER_LEN]>::try_from(&bytes[at..at + frame::HEADER_LEN]) else {
            break;
        };
        let head = Head::parse(h);
        let start = at + frame::HEADER_LEN;
        let Some(payload) = bytes.get(start..start + head.len) else {
            return Some("a frame cut off by the end of the capture".into());
        };
        let frame_at = at;
        at = start + head.len;
        match head.kind {
            frame::HEADERS | frame::CONTINUATION if head.stream != 0 => {
                let fragment = match head.kind {
                    frame::HEADERS => match headers_fragment(head, payload) {
                        Some(f) => f,
                        None => return Some("a HEADERS frame shorter than its padding".into()),
                    },
                    _ => payload,
                };
                let mut block = match (head.kind, open.take()) {
                    (frame::HEADERS, None) => (frame_at, head, Vec::new()),
                    (frame::CONTINUATION, Some(o)) if o.1.stream == head.stream => o,
                    _ => return Some("a header block interrupted by another frame".into()),
                };
                block.2.extend_from_slice(fragment);
                if head.flags & frame::END_HEADERS == 0 {
                    open = Some(block);
                    continue;
                }
                // The END_STREAM flag rides on the HEADERS frame, not the CONTINUATION.
                let (offset, first, data) = block;
                if let Err(e) = on(offset, first, &[], Some(&data)) {
                    return Some(e);
                }
            }
            _ if open.is_some() => {
                return Some("a header block interrupted by another frame".into())
            }
            frame::DATA if head.stream != 0 => {
                let Some(data) = unpadded(head, payload) else {
                    return Some("a DATA frame shorter than its padding".into());
                };
                if let Err(e) = on(frame_at, head, data, None) {
                    return Some(e);
                }
            }
            _ => {}
        }
    }
    None
}

/// A HEADERS frame's header block fragment: without its padding and priority fields.
fn headers_fragment(head: Head, payload: &[u8]) -> Option<&[u8]> {
    let payload = unpadded(head, payload)?;
    match head.flags & frame::PRIORITY_FLAG != 0 {
        true => payload.get(5..),
        false => Some(payload),
    }
}

/// A frame's payload without its padding (PADDED: a length byte first, that many at the end).
fn unpadded(head: Head, payload: &[u8]) -> Option<&[u8]> {
    if head.flags & frame::PADDED == 0 {
        return Some(payload);
    }
    let (&pad, rest) = payload.split_first()?;
    rest.get(..rest.len().checked_sub(usize::from(pad))?)
}
