//! The state machine without sockets: frames in, frames out, the clock passed in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shrike_h2::frame::{self, Head};
use shrike_h2::hpack::encode_field;

use super::Conn;
use crate::server::Shared;
use crate::ServerConfig;

pub(super) fn conn(config: crate::config::ServerConfigBuilder) -> Conn {
    let shared = Shared::new(Arc::new(config.build().expect("valid config")));
    let mut conn = Conn::new(Arc::new(shared), Instant::now());
    conn.out.clear();
    conn
}

/// Feeds bytes, returning the frames written.
pub(super) fn feed(conn: &mut Conn, bytes: &[u8]) -> Vec<(Head, Vec<u8>)> {
    assert_eq!(conn.receive(bytes, Instant::now()), bytes.len(), "every frame consumed");
    conn.pump();
    written(conn)
}

pub(super) fn written(conn: &mut Conn) -> Vec<(Head, Vec<u8>)> {
    let out = std::mem::take(&mut conn.out);
    let mut frames = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let head = Head::parse(out[at..at + frame::HEADER_LEN].try_into().expect("9 bytes"));
        let start = at + frame::HEADER_LEN;
        frames.push((head, out[start..start + head.len].to_vec()));
        at = start + head.len;
    }
    frames
}

pub(super) fn start(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = frame::PREFACE.to_vec();
    frame::put_settings(&mut out, settings);
    out
}

fn get(id: u32) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "t")] {
        encode_field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut out = Vec::new();
    frame::put(&mut out, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, id, &block);
    out
}

pub(super) fn kinds(frames: &[(Head, Vec<u8>)]) -> Vec<(u8, usize, u8)> {
    frames.iter().map(|(h, _)| (h.kind, h.len, h.flags)).collect()
}

#[test]
fn a_body_follows_the_peers_window_credit() {
    let mut c = conn(ServerConfig::builder().response_body_size(25));
    let mut bytes = start(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    bytes.extend(get(1));
    let frames = feed(&mut c, &bytes);
    // The SETTINGS ACK, the head, and the ten bytes the window allows; the stream waits.
    let k = kinds(&frames);
    assert_eq!(k[0], (frame::SETTINGS, 0, frame::ACK));
    assert_eq!(k[1].0, frame::HEADERS);
    assert_eq!(k[2], (frame::DATA, 10, 0));
    assert_eq!(k.len(), 3);
    assert!(c.is_busy());
    let mut more = Vec::new();
    frame::put_window_update(&mut more, 1, 10);
    assert_eq!(kinds(&feed(&mut c, &more)), [(frame::DATA, 10, 0)]);
    // Credit past the rest: the last five bytes end the stream, which leaves the table.
    let mut more = Vec::new();
    frame::put_window_update(&mut more, 1, 100);
    assert_eq!(kinds(&feed(&mut c, &more)), [(frame::DATA, 5, frame::END_STREAM)]);
    assert!(!c.is_busy());
    assert!(c.ending().is_none());
}

#[test]
fn a_delay_holds_the_response_until_its_timer() {
    let mut c = conn(ServerConfig::builder().static_delay(Duration::from_millis(50)));
    let mut bytes = start(&[]);
    bytes.extend(get(1));
    let frames = feed(&mut c, &bytes);
    assert_eq!(kinds(&frames), [(frame::SETTINGS, 0, frame::ACK)]);
    let due = c.next_deadline().expect("a timer");
    assert!(due >= Instant::now() + Duration::from_millis(40), "{due:?}");
    c.fire(due - Duration::from_millis(1));
    assert!(written(&mut c).is_empty(), "fired early");
    c.fire(due);
    let k = kinds(&written(&mut c));
    assert_eq!(k.len(), 2, "{k:?}");
    assert_eq!((k[0].0, k[1]), (frame::HEADERS, (frame::DATA, 10, frame::END_STREAM)));
    assert!(c.next_deadline().is_none() && !c.is_busy());
}

#[test]
fn stream_errors_keep_the_connection_and_connection_errors_end_it() {
    let mut c = conn(ServerConfig::builder());
    let mut bytes = start(&[]);
    // A request with an uppercase field name is malformed: only its stream is reset.
    let mut block = Vec::new();
    for (n, v) in [(":method", "GET"), (":scheme", "http"), (":path", "/"), ("X-Up", "1")] {
        encode_field(&mut block, n.as_bytes(), v.as_bytes());
    }
    frame::put(&mut bytes, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1, &block);
    bytes.extend(get(3));
    let frames = feed(&mut c, &bytes);
    let rst = frames.iter().find(|(h, _)| h.kind == frame::RST_STREAM).expect("a reset");
    assert_eq!((rst.0.stream, &rst.1[..]), (1, &frame::PROTOCOL_ERROR.to_be_bytes()[..]));
    assert!(frames.iter().any(|(h, _)| h.kind == frame::HEADERS && h.stream == 3));
    assert!(c.ending().is_none());
    // DATA on a stream the client never opened: GOAWAY(PROTOCOL_ERROR) naming stream 3.
    let mut bad = Vec::new();
    frame::put(&mut bad, frame::DATA, 0, 7, b"x");
    let frames = feed(&mut c, &bad);
    let (head, payload) = frames.last().expect("a GOAWAY");
    assert_eq!(head.kind, frame::GOAWAY);
    assert_eq!(payload[..4], 3u32.to_be_bytes());
    assert_eq!(payload[4..8], frame::PROTOCOL_ERROR.to_be_bytes());
    assert!(c.ending().is_some());
}
