//! The codec's frame handling, frame by frame: what each server frame does to the streams and
//! what the client queues in answer. The whole path runs against real servers in
//! `crates/shrike/tests` (nginx, `shrike serve`, and a hand-written hostile peer).

use bytes::Bytes;

use super::super::frame::{self, Head};
use super::super::hpack::encode_field;
use super::{Conn, Ended, Failure, Inner, CONNECTION_WINDOW, STREAM_WINDOW};

fn frame_of(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> (Head, Vec<u8>) {
    (Head { len: payload.len(), kind, flags, stream }, payload.to_vec())
}

fn feed(i: &mut Inner, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<(), String> {
    let (h, p) = frame_of(kind, flags, stream, payload);
    i.on_frame(h, &p).map_err(|(code, msg)| format!("{}: {msg}", frame::reason(code)))
}

fn head(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (k, v) in fields {
        encode_field(&mut b, k.as_bytes(), v.as_bytes());
    }
    b
}

/// A connection past the server's (empty) SETTINGS, with `streams` GET streams open.
fn ready(streams: usize) -> (std::rc::Rc<Conn>, Vec<u32>) {
    let conn = Conn::new(Some(http::HeaderName::from_static("x-origin")));
    let ids = {
        let mut i = conn.inner.borrow_mut();
        feed(&mut i, frame::SETTINGS, 0, 0, &[]).expect("settings");
        i.out.clear();
        (0..streams).map(|_| i.open_stream(&head(&[(":method", "GET")]), Bytes::new())).collect()
    };
    (conn, ids)
}

/// The server's SETTINGS_INITIAL_WINDOW_SIZE.
fn initial_window(i: &mut Inner, n: u32) {
    let mut s = frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
    s.extend_from_slice(&n.to_be_bytes());
    feed(i, frame::SETTINGS, 0, 0, &s).expect("settings");
}

fn outcome(i: &Inner, id: u32) -> Option<Result<(), Failure>> {
    i.streams.get(&id).and_then(|s| s.outcome.clone())
}

/// The frames queued for the socket, as (type, flags, stream, payload).
fn queued(i: &Inner) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut b = &i.out[..];
    while b.len() >= 9 {
        let h = Head::parse(b[..9].try_into().expect("9 bytes"));
        out.push((h.kind, h.flags, h.stream, b[9..9 + h.len].to_vec()));
        b = &b[9 + h.len..];
    }
    out
}

#[test]
fn a_response_is_counted_and_nothing_of_it_kept() {
    let (conn, ids) = ready(1);
    let mut i = conn.inner.borrow_mut();
    let h = head(&[(":status", "204"), ("x-origin", "1500"), ("server", "t")]);
    feed(&mut i, frame::HEADERS, frame::END_HEADERS, ids[0], &h).expect("head");
    assert!(outcome(&i, ids[0]).is_none());
    // Padded DATA: flow control counts the padding, the body does not.
    feed(&mut i, frame::DATA, frame::PADDED, ids[0], b"\x03abcdPPP").expect("data");
    feed(&mut i, frame::DATA, frame::END_STREAM, ids[0], b"ef").expect("data");
    assert!(matches!(outcome(&i, ids[0]), Some(Ok(()))));
    let s = &i.streams[&ids[0]];
    assert_eq!((s.status, s.body_bytes), (204, 6));
    // Each field: name + value + 32.
    assert_eq!(s.header_bytes, (7 + 3 + 32) + (8 + 4 + 32) + (6 + 1 + 32));
    assert_eq!(s.origin, crate::requests::OriginLatency::Ns(1500));
    assert_eq!(i.open, 0);
}

#[test]
fn informational_heads_are_skipped_and_trailers_end_the_stream() {
    let (conn, ids) = ready(2);
    let mut i = conn.inner.borrow_mut();
    feed(&mut i, frame::HEADERS, frame::END_HEADERS, ids[0], &head(&[(":status", "100")]))
        .expect("100");
    assert_eq!(i.streams[&ids[0]].status, 0);
    feed(&mut i, frame::HEADERS, frame::END_HEADERS, ids[0], &head(&[(":status", "200")]))
        .expect("200");
    feed(&mut i, frame::DATA, 0, ids[0], b"x").expect("data");
    let trailers = head(&[("grpc-status", "0")]);
    feed(&mut i, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, ids[0], &trailers)
        .expect("trailers");
    assert!(matches!(outcome(&i, ids[0]), Some(Ok(()))));
    assert_eq!(i.streams[&ids[0]].status, 200);
    // A head without :status is the stream's error: reset, not the connection's.
    feed(&mut i, frame::HEADERS, frame::END_HEADERS, ids[1], &head(&[("server", "t")]))
        .expect("stream error only");
    assert!(matches!(outcome(&i, ids[1]), Some(Err(Failure::Malformed(_)))));
    let q = queued(&i);
    assert_eq!(q.last().map(|f| (f.0, f.2)), Some((frame::RST_STREAM, ids[1])));
}

#[test]
fn heads_in_continuation_frames_are_reassembled_and_bounded() {
    let (conn, ids) = ready(1);
    let mut i = conn.inner.borrow_mut();
    let h = head(&[(":status", "200"), ("x-a", &"v".repeat(300))]);
    let (a, b) = h.split_at(100);
    feed(&mut i, frame::HEADERS, frame::END_STREAM, ids[0], a).expect("first part");
    // Nothing else may come between.
    assert!(feed(&mut i, frame::PING, 0, 0, &[0; 8]).is_err());
    feed(&mut i, frame::CONTINUATION, frame::END_HEADERS, ids[0], b).expect("rest");
    assert!(matches!(outcome(&i, ids[0]), Some(Ok(()))));
    let (conn, ids) = ready(1);
    let mut i = conn.inner.borrow_mut();
    feed(&mut i, frame::HEADERS, 0, ids[0], &[0; 16_384]).expect("first");
    let mut err = Ok(());
    for _ in 0..5 {
        err = err.and_then(|()| feed(&mut i, frame::CONTINUATION, 0, ids[0], &[0; 16_384]));
    }
    assert!(err.is_err_and(|e| e.starts_with("ENHANCE_YOUR_CALM")), "bounded");
}

#[test]
fn goaway_fails_only_the_streams_past_its_last_and_refuses_new_ones() {
    let (conn, ids) = ready(3);
    let mut i = conn.inner.borrow_mut();
    let mut g = ids[0].to_be_bytes().to_vec();
    g.extend_from_slice(&0u32.to_be_bytes());
    feed(&mut i, frame::GOAWAY, 0, 0, &g).expect("goaway");
    assert!(outcome(&i, ids[0]).is_none(), "at or below its last: still answered");
    for id in &ids[1..] {
        assert!(matches!(outcome(&i, *id), Some(Err(Failure::GoAway(0)))));
    }
    assert!(matches!(i.refusal(), Some(Failure::GoAway(0))));
    assert_eq!(i.open, 1);
}

#[test]
fn flow_control_is_kept_both_ways() {
    let (conn, _) = ready(0);
    let mut i = conn.inner.borrow_mut();
    // The server's initial window 10: a 25-byte body goes out 10 bytes at a time.
    initial_window(&mut i, 10);
    i.out.clear();
    let id = i.open_stream(&head(&[(":method", "POST")]), Bytes::from(vec![b'b'; 25]));
    let data = |i: &Inner| -> Vec<usize> {
        queued(i).iter().filter(|f| f.0 == frame::DATA).map(|f| f.3.len()).collect()
    };
    assert_eq!(data(&i), [10]);
    feed(&mut i, frame::WINDOW_UPDATE, 0, id, &10u32.to_be_bytes()).expect("update");
    assert_eq!(data(&i), [10, 10]);
    // Raising the initial window raises the open stream's too (RFC 9113 §6.9.2).
    initial_window(&mut i, 100);
    assert_eq!(data(&i), [10, 10, 5]);
    let last = queued(&i).into_iter().rfind(|f| f.0 == frame::DATA).expect("data");
    assert_eq!(last.1, frame::END_STREAM);
    // Receiving: the window is given back at half, so a server sending without end stays
    // within it...
    feed(&mut i, frame::HEADERS, frame::END_HEADERS, id, &head(&[(":status", "200")]))
        .expect("head");
    let chunk = vec![0u8; 16_384];
    for _ in 0..=(STREAM_WINDOW as usize / chunk.len()) {
        feed(&mut i, frame::DATA, 0, id, &chunk).expect("within the window");
    }
    assert!(queued(&i).iter().any(|f| f.0 == frame::WINDOW_UPDATE && f.2 == id));
    // ...and one that sends past what it was given breaks the protocol.
    i.streams.get_mut(&id).expect("open").recv_unacked = STREAM_WINDOW - 10;
    let r = feed(&mut i, frame::DATA, 0, id, &[0; 16]);
    assert!(r.is_err_and(|e| e.starts_with("FLOW_CONTROL_ERROR")));
}

#[test]
fn the_connection_window_is_given_back_at_half() {
    // Five streams, each just under half its window (so no stream update), 40 MiB in all.
    let (conn, ids) = ready(5);
    let mut i = conn.inner.borrow_mut();
    let chunk = vec![0u8; 16_384];
    let per_stream = (STREAM_WINDOW as usize) / 2 - chunk.len();
    for id in &ids {
        feed(&mut i, frame::HEADERS, frame::END_HEADERS, *id, &head(&[(":status", "200")]))
            .expect("head");
        for _ in 0..per_stream / chunk.len() {
            feed(&mut i, frame::DATA, 0, *id, &chunk).expect("within the windows");
        }
    }
    let updates: Vec<_> =
        queued(&i).into_iter().filter(|f| f.0 == frame::WINDOW_UPDATE && f.2 == 0).collect();
    assert_eq!(updates.len(), 1, "one connection WINDOW_UPDATE at 32 MiB");
    let inc = u32::from_be_bytes(updates[0].3[..4].try_into().expect("4 bytes"));
    assert!(inc >= CONNECTION_WINDOW / 2);
}

#[test]
fn control_frames_are_answered_and_violations_named() {
    let conn = Conn::new(None);
    let mut i = conn.inner.borrow_mut();
    let first = feed(&mut i, frame::PING, 0, 0, &[0; 8]);
    assert!(first.is_err_and(|e| e.contains("first frame")));
    feed(&mut i, frame::SETTINGS, 0, 0, &[]).expect("settings");
    i.out.clear();
    feed(&mut i, frame::PING, 0, 0, b"12345678").expect("ping");
    assert_eq!(queued(&i), [(frame::PING, frame::ACK, 0, b"12345678".to_vec())]);
    // A stream we never opened, a server push, a bad SETTINGS size.
    assert!(feed(&mut i, frame::HEADERS, frame::END_HEADERS, 1, &[0x88]).is_err());
    assert!(feed(&mut i, frame::PUSH_PROMISE, 0, 1, &[0; 4]).is_err());
    assert!(feed(&mut i, frame::SETTINGS, 0, 0, &[0; 5]).is_err());
    // An HPACK error is a COMPRESSION_ERROR.
    let id = i.open_stream(&[0x82], Bytes::new());
    let bad = feed(&mut i, frame::HEADERS, frame::END_HEADERS, id, &[0xff, 0xff, 0xff]);
    assert!(bad.is_err_and(|e| e.starts_with("COMPRESSION_ERROR")));
    // The end fails what is still open, with how the connection ended.
    i.end(&Ended::Io("reset".into()));
    assert!(matches!(outcome(&i, id), Some(Err(Failure::Conn(Ended::Io(_))))));
}

#[test]
fn the_read_buffer_grows_only_for_frames_that_need_it() {
    use super::driver::{dispatch, ReadBuffer};
    let (conn, ids) = ready(1);
    let mut i = conn.inner.borrow_mut();
    let mut rd = ReadBuffer::new();
    let mut wire = Vec::new();
    frame::put(&mut wire, frame::HEADERS, frame::END_HEADERS, ids[0], &head(&[(":status", "200")]));
    frame::put(&mut wire, frame::DATA, 0, ids[0], &[b'x'; 100]);
    let mut big = Vec::new();
    frame::put(&mut big, frame::DATA, frame::END_STREAM, ids[0], &[b'y'; 16_384]);
    // Small frames: one 4 KiB buffer.
    let room = rd.spare();
    room[..wire.len()].copy_from_slice(&wire);
    rd.filled(wire.len());
    dispatch(&mut i, &mut rd).expect("small frames");
    assert_eq!(rd.spare().len(), 4096);
    // A full-size frame arriving 1,000 bytes at a time: the buffer grows to hold it whole.
    for piece in big.chunks(1000) {
        let room = rd.spare();
        room[..piece.len()].copy_from_slice(piece);
        rd.filled(piece.len());
        dispatch(&mut i, &mut rd).expect("a full-size frame");
    }
    assert!(matches!(outcome(&i, ids[0]), Some(Ok(()))));
    assert_eq!(i.streams[&ids[0]].body_bytes, 16_484);
    assert_eq!(rd.spare().len(), 32_768);
    // A read that fills all its room doubles the buffer for the next one.
    let mut rd = ReadBuffer::new();
    let mut pings = Vec::new();
    while pings.len() < 4096 {
        frame::put(&mut pings, frame::PING, frame::ACK, 0, &[0; 8]);
    }
    let room = rd.spare();
    let n = room.len();
    room.copy_from_slice(&pings[..n]);
    rd.filled(n);
    dispatch(&mut i, &mut rd).expect("pings");
    assert!(rd.spare().len() >= 8192 - 17);
}

#[test]
fn a_real_nginx_byte_stream_decodes_read_by_read() {
    use super::driver::{dispatch, ReadBuffer};
    // The fuzz target's seed: nginx's answer to three GETs (its SETTINGS, WINDOW_UPDATE, a
    // PING ack, and heads with Huffman values it adds to the dynamic table each time).
    let seed = include_bytes!("../../../../../../fuzz/corpus/h2_response/nginx-3-streams");
    let conn = Conn::new(None);
    let mut i = conn.inner.borrow_mut();
    let ids: Vec<u32> = (0..3).map(|_| i.open_stream(&[0x82], Bytes::new())).collect();
    let mut rd = ReadBuffer::new();
    for piece in seed[2..].chunks(13) {
        let room = rd.spare();
        room[..piece.len()].copy_from_slice(piece);
        rd.filled(piece.len());
        dispatch(&mut i, &mut rd).expect("nginx speaks HTTP/2");
    }
    for id in ids {
        assert!(matches!(outcome(&i, id), Some(Ok(()))));
        let s = &i.streams[&id];
        assert_eq!((s.status, s.body_bytes), (200, 100));
        // Name + value + 32 each: :status 200 (42), server nginx/1.22.1 (50), a date (65),
        // content-type text/plain (54), content-length 100 (49).
        assert_eq!(s.header_bytes, 260);
    }
}

#[test]
fn the_last_stream_id_closes_the_connection_to_new_streams() {
    let (conn, _) = ready(0);
    let mut i = conn.inner.borrow_mut();
    i.next_id = 0x7fff_fffd;
    let id = i.open_stream(&[0x82], Bytes::new());
    assert_eq!(id, 0x7fff_fffd);
    assert!(i.refusal().is_none(), "one id left");
    let id = i.open_stream(&[0x82], Bytes::new());
    assert_eq!(id, 0x7fff_ffff);
    assert!(matches!(i.refusal(), Some(Failure::Exhausted)));
    // Streams already open are still answered.
    feed(&mut i, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, id, &[0x88])
        .expect("the last stream's answer");
    assert!(matches!(outcome(&i, id), Some(Ok(()))));
}

#[test]
fn an_answer_before_the_whole_body_closes_our_side() {
    let (conn, _) = ready(0);
    let mut i = conn.inner.borrow_mut();
    initial_window(&mut i, 10);
    let id = i.open_stream(&[0x83], Bytes::from(vec![b'b'; 25]));
    i.out.clear();
    // A 413 before the body is through: the stream is answered, and the rest never sent.
    let h = head(&[(":status", "413")]);
    feed(&mut i, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, id, &h).expect("413");
    assert!(matches!(outcome(&i, id), Some(Ok(()))));
    assert_eq!(queued(&i), [(frame::RST_STREAM, 0, id, frame::NO_ERROR.to_be_bytes().to_vec())]);
    feed(&mut i, frame::WINDOW_UPDATE, 0, 0, &100u32.to_be_bytes()).expect("window");
    assert!(queued(&i).iter().all(|f| f.0 != frame::DATA), "no body after the answer");
}

/// A stream refused beyond a limit the server had not yet announced (its SETTINGS came after
/// the stream opened) is told apart from one refused under a known limit: only the latter
/// uses up the stream's one retry.
#[test]
fn a_stream_refused_before_the_servers_settings_is_told_apart() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let mut cx = Context::from_waker(Waker::noop());
    let conn = Conn::new(None);
    let block = head(&[(":method", "GET")]);
    let (mut sent, mut sent_later) = (std::time::Instant::now(), std::time::Instant::now());
    let handle = || super::Handle(conn.clone());
    let mut before = std::pin::pin!(super::exchange(handle(), &block, Bytes::new(), &mut sent));
    assert!(before.as_mut().poll(&mut cx).is_pending());
    feed(&mut conn.inner.borrow_mut(), frame::SETTINGS, 0, 0, &[]).expect("settings");
    let block_later = block.clone();
    let mut after =
        std::pin::pin!(super::exchange(handle(), &block_later, Bytes::new(), &mut sent_later));
    assert!(after.as_mut().poll(&mut cx).is_pending());
    let refused = frame::REFUSED_STREAM.to_be_bytes();
    for id in [1, 3] {
        feed(&mut conn.inner.borrow_mut(), frame::RST_STREAM, 0, id, &refused).expect("rst");
    }
    let Poll::Ready(Err((f, responded))) = before.as_mut().poll(&mut cx) else {
        panic!("the first stream is not over")
    };
    assert!(matches!(f, Failure::RefusedBeforeSettings) && !responded, "{f:?}");
    let Poll::Ready(Err((f, _))) = after.as_mut().poll(&mut cx) else {
        panic!("the second stream is not over")
    };
    assert!(matches!(f, Failure::Reset(frame::REFUSED_STREAM)), "{f:?}");
}
