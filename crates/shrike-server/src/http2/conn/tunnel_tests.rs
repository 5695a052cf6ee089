//! Tunnel streams without sockets: the driver's side played by hand.

use std::time::Duration;

use shrike_h2::frame::{self, Head};
use shrike_h2::hpack::{encode_field, Decoder};

use super::tests::{conn, feed, kinds, start, written};
use super::{Conn, Dest, STREAM_WINDOW};
use crate::{ProxyConfig, ServerConfig};

fn proxy() -> crate::config::ServerConfigBuilder {
    let allow = vec![("127.0.0.0".parse().expect("address"), 8)];
    ServerConfig::builder()
        .connect_proxy(ProxyConfig { allow, connect_timeout: Duration::from_secs(1) })
}

fn connect(id: u32, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in fields {
        encode_field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut out = Vec::new();
    frame::put(&mut out, frame::HEADERS, frame::END_HEADERS, id, &block);
    out
}

const TCP: &[(&str, &str)] = &[(":method", "CONNECT"), (":authority", "127.0.0.1:9")];
const UDP: &[(&str, &str)] = &[
    (":method", "CONNECT"),
    (":protocol", "connect-udp"),
    (":scheme", "https"),
    (":path", "/.well-known/masque/udp/127.0.0.1/9/"),
    (":authority", "proxy"),
];

fn status(frames: &[(Head, Vec<u8>)]) -> String {
    let (_, block) = frames.iter().find(|(h, _)| h.kind == frame::HEADERS).expect("a head");
    let mut status = String::new();
    Decoder::new(4096)
        .decode(block, |n, v| {
            if n == b":status" {
                status = String::from_utf8_lossy(v).into_owned();
            }
        })
        .expect("a valid block");
    status
}

/// A tunnel on stream 1, opened.
fn opened(c: &mut Conn, fields: &[(&str, &str)], settings: &[(u16, u32)]) {
    let mut bytes = start(settings);
    bytes.extend(connect(1, fields));
    feed(c, &bytes);
    let opens = c.take_opens();
    assert_eq!(opens.len(), 1, "{opens:?}");
    c.tunnel_opened(1);
    let frames = written(c);
    assert_eq!(status(&frames), "200");
    assert!(frames.iter().all(|(h, _)| h.flags & frame::END_STREAM == 0), "the tunnel is open");
}

#[test]
fn the_clients_credit_comes_back_only_as_its_bytes_reach_the_destination() {
    let mut c = conn(proxy());
    opened(&mut c, TCP, &[]);
    let mut data = Vec::new();
    for _ in 0..40 {
        frame::put(&mut data, frame::DATA, 0, 1, &[7; 16_000]);
    }
    let frames = feed(&mut c, &data);
    assert!(frames.iter().all(|(h, _)| h.stream != 1), "no credit for unwritten bytes");
    assert_eq!(c.tunnel_view(1).expect("open").up.len(), 640_000);
    c.tunnel_wrote(1, 100_000);
    assert!(written(&mut c).is_empty(), "credit goes back in half windows");
    c.tunnel_wrote(1, 540_000);
    let k = written(&mut c);
    assert_eq!(kinds(&k), [(frame::WINDOW_UPDATE, 4, 0)]);
    assert_eq!(k[0].0.stream, 1);
    assert_eq!(k[0].1, 640_000u32.to_be_bytes());
    const { assert!(640_000 >= STREAM_WINDOW / 2) };
    assert!(c.tunnel_view(1).expect("open").up.is_empty());
}

#[test]
fn the_destinations_bytes_wait_for_credit_and_its_close_ends_the_stream() {
    let mut c = conn(proxy());
    opened(&mut c, TCP, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    c.tunnel_received(1, &[b"0123456789", b"abcdef"]);
    assert_eq!(kinds(&written(&mut c)), [(frame::DATA, 10, 0)]);
    c.tunnel_eof(1);
    assert!(written(&mut c).is_empty(), "END_STREAM waits behind the bytes");
    let mut more = Vec::new();
    frame::put_window_update(&mut more, 1, 100);
    assert_eq!(kinds(&feed(&mut c, &more)), [(frame::DATA, 6, 0), (frame::DATA, 0, 1)]);
    assert!(c.tunnel_alive(1), "the client's side is still open");
    let mut end = Vec::new();
    frame::put(&mut end, frame::DATA, frame::END_STREAM, 1, b"bye");
    feed(&mut c, &end);
    assert!(c.tunnel_alive(1), "until its last bytes are written");
    assert!(c.tunnel_view(1).expect("open").client_ended);
    c.tunnel_wrote(1, 3);
    assert!(!c.tunnel_alive(1) && !c.is_busy());
}

#[test]
fn a_udp_tunnel_ends_with_the_clients_side() {
    let mut c = conn(proxy());
    let mut bytes = start(&[]);
    bytes.extend(connect(1, UDP));
    feed(&mut c, &bytes);
    match &c.take_opens()[..] {
        [(1, Dest::Udp(path))] => assert_eq!(path, b"/.well-known/masque/udp/127.0.0.1/9/"),
        other => panic!("{other:?}"),
    }
    c.tunnel_opened(1);
    written(&mut c);
    let mut end = Vec::new();
    frame::put(&mut end, frame::DATA, frame::END_STREAM, 1, &[]);
    assert_eq!(kinds(&feed(&mut c, &end)), [(frame::DATA, 0, frame::END_STREAM)]);
    assert!(!c.tunnel_alive(1) && !c.is_busy());
}

#[test]
fn connects_a_server_cannot_serve_are_refused() {
    // Not a proxy: 405, and `:protocol` is malformed, extended CONNECT never offered.
    let mut c = conn(ServerConfig::builder());
    let mut bytes = start(&[]);
    bytes.extend(connect(1, TCP));
    assert_eq!(status(&feed(&mut c, &bytes)), "405");
    let frames = feed(&mut c, &connect(3, UDP));
    assert_eq!(kinds(&frames), [(frame::RST_STREAM, 4, 0)]);
    assert_eq!(frames[0].1, frame::PROTOCOL_ERROR.to_be_bytes());
    // A proxy: an unknown protocol is 501; a destination that fails is its status.
    let mut c = conn(proxy());
    let mut bytes = start(&[]);
    let mut ws = UDP.to_vec();
    ws[1] = (":protocol", "websocket");
    bytes.extend(connect(1, &ws));
    assert_eq!(status(&feed(&mut c, &bytes)), "501");
    feed(&mut c, &connect(3, TCP));
    assert_eq!(c.take_opens().len(), 1);
    c.tunnel_refused(3, 502, "connect to 127.0.0.1:9: refused");
    assert_eq!(status(&written(&mut c)), "502");
    assert!(!c.tunnel_alive(3));
}

#[test]
fn a_udp_tunnels_queued_capsules_go_out_whole_after_the_clients_end() {
    let mut c = conn(proxy());
    opened(&mut c, UDP, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let prefix = shrike_h2::capsule::datagram_prefix(13);
    c.tunnel_received(1, &[prefix.as_slice(), b"thirteen-byte"]);
    assert_eq!(kinds(&written(&mut c)), [(frame::DATA, 10, 0)]);
    let mut end = Vec::new();
    frame::put(&mut end, frame::DATA, frame::END_STREAM, 1, &[]);
    assert!(feed(&mut c, &end).is_empty(), "the rest of the capsule waits for credit");
    let mut more = Vec::new();
    frame::put_window_update(&mut more, 1, 100);
    assert_eq!(kinds(&feed(&mut c, &more)), [(frame::DATA, 6, 0), (frame::DATA, 0, 1)]);
    assert!(!c.tunnel_alive(1) && !c.is_busy());
}

#[test]
fn trailers_on_a_tunnel_and_shutdown_while_opening() {
    let mut c = conn(proxy());
    opened(&mut c, TCP, &[]);
    // §8.5: a tunnel's stream carries DATA only.
    let mut block = Vec::new();
    encode_field(&mut block, b"x-trailer", b"1");
    let mut trailers = Vec::new();
    frame::put(&mut trailers, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1, &block);
    let frames = feed(&mut c, &trailers);
    assert_eq!(kinds(&frames), [(frame::RST_STREAM, 4, 0)]);
    assert_eq!(frames[0].1, frame::PROTOCOL_ERROR.to_be_bytes());
    // A tunnel still opening when the server shuts down is answered 503, not reset.
    feed(&mut c, &connect(3, TCP));
    assert_eq!(c.take_opens().len(), 1);
    c.tunnel_close(3);
    assert_eq!(status(&written(&mut c)), "503");
}
