//! HTTP/1.1 wire behaviour over raw sockets: keep-alive, pipelining, request bodies, HEAD,
//! HTTP/1.0 and the requests that must be refused.

use std::time::Duration;

use crate::common::TestServer;
use shrike_server::ServerConfig;

fn server() -> TestServer {
    TestServer::start(ServerConfig::default())
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let server = server();
    let mut client = server.connect();
    for _ in 0..5 {
        let r = client.get("");
        r.assert_filler(10);
        assert_eq!(r.header("server"), Some("shrike"));
        let date = r.header("date").expect("date header");
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
        assert_eq!(r.header("connection"), None);
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = server();
    let mut client = server.connect();
    let mut batch = String::new();
    for size in [1, 2, 3] {
        batch.push_str(&format!(
            "GET /{size} HTTP/1.1\r\nhost: t\r\n\
             x-nighthawk-test-server-config: {{\"response_body_size\": {size}}}\r\n\r\n"
        ));
    }
    client.send(batch);
    for size in [1, 2, 3] {
        client.response().assert_filler(size);
    }
    client.get("").assert_filler(10);
}

#[test]
fn chunked_body_is_consumed_then_the_next_request_works() {
    let server = server();
    let mut client = server.connect();
    client.send("POST / HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5;name=v\r\nhel");
    // The rest arrives later, split inside the data, the CRLFs and the trailer section.
    std::thread::sleep(Duration::from_millis(20));
    client.send("lo\r\n1");
    std::thread::sleep(Duration::from_millis(20));
    client.send("A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: yes\r");
    std::thread::sleep(Duration::from_millis(20));
    client.send("\n\r\n");
    client.response().assert_filler(10);
    client.get("").assert_filler(10);

    // A larger body in many chunks, with the next request in the same write.
    let mut big = String::from("POST / HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n");
    for _ in 0..200 {
        big.push_str("3e8\r\n");
        big.push_str(&"x".repeat(1000));
        big.push_str("\r\n");
    }
    big.push_str("0\r\n\r\nGET / HTTP/1.1\r\nhost: t\r\n\r\n");
    client.send(big);
    client.response().assert_filler(10);
    client.response().assert_filler(10);
}

#[test]
fn content_length_body_is_consumed_not_parsed() {
    let server = server();
    let mut client = server.connect();
    // A body that looks like a request: answering it would shift every later response.
    let smuggled = "GET /x HTTP/1.1\r\nhost: t\r\n\
                    x-nighthawk-test-server-config: {\"response_status\": 404}\r\n\r\n";
    client.send(format!(
        "POST / HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    ));
    client.response().assert_filler(10);

    // A body larger than the read buffer, sent in pieces.
    let body = vec![b'z'; 300_000];
    client.send(format!("POST / HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n", body.len()));
    for piece in body.chunks(70_000) {
        client.send(piece);
    }
    client.response().assert_filler(10);
    let last = client.get("connection: close\r\n");
    last.assert_filler(10);
    assert_eq!(last.header("connection"), Some("close"));
    assert!(client.closed(), "extra bytes after the last response");
}

#[test]
fn head_gets_the_length_but_no_body() {
    let server = server();
    let mut client = server.connect();
    client.send("HEAD / HTTP/1.1\r\nhost: t\r\nx-nighthawk-test-server-config: {\"response_body_size\": 77}\r\n\r\n");
    let r = client.read_response(true);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("77"));
    // A body sent for HEAD would be read as the start of this response and fail to parse.
    client.get("").assert_filler(10);
}

#[test]
fn http10_closes_unless_keep_alive_is_asked_for() {
    let server = server();
    let mut client = server.connect();
    client.send("GET / HTTP/1.0\r\n\r\n");
    let r = client.response();
    r.assert_filler(10);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(client.closed(), "HTTP/1.0 without keep-alive must close");

    let mut client = server.connect();
    for _ in 0..3 {
        client.send("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        let r = client.response();
        r.assert_filler(10);
        assert_eq!(r.header("connection"), Some("keep-alive"));
    }
}

#[test]
fn connection_close_is_honoured() {
    let server = server();
    let mut client = server.connect();
    let r = client.get("connection: close\r\n");
    r.assert_filler(10);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(client.closed());
}

#[test]
fn expect_100_continue_gets_an_interim_response() {
    let server = server();
    let mut client = server.connect();
    client.send("POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n");
    assert_eq!(client.response().status, 100);
    client.send("hello");
    client.response().assert_filler(10);
}

#[test]
fn large_and_empty_bodies() {
    let server = TestServer::start(
        ServerConfig::builder().response_body_size(1 << 20).build().expect("config"),
    );
    let mut client = server.connect();
    client.get("").assert_filler(1 << 20);
    let r = client.get_with_config(r#"{"response_status": 204}"#);
    assert_eq!(r.status, 204);
    assert_eq!(r.header("content-length"), None);
    client.get_with_config(r#"{"response_body_size": 0}"#).assert_filler(0);
    client.get("").assert_filler(1 << 20);
}

fn small_cap() -> TestServer {
    TestServer::start(crate::common::build(
        ServerConfig::builder().max_body_size(1000).response_body_size(10),
    ))
}

#[test]
fn oversize_content_length_gets_413_and_close() {
    let server = small_cap();
    let mut client = server.connect();
    client.send("POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 1001\r\n\r\n");
    client.send(vec![b'x'; 500]);
    let r = client.response();
    assert_eq!(r.status, 413);
    assert!(r.text().contains("1001 bytes exceeds"), "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert!(client.closed());

    // At the limit is fine.
    let mut client = server.connect();
    client.send("POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 1000\r\n\r\n");
    client.send(vec![b'x'; 1000]);
    client.response().assert_filler(10);
}

#[test]
fn oversize_chunked_body_gets_413_and_close() {
    let server = small_cap();
    let mut client = server.connect();
    client.send("POST / HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n");
    client.send(format!("1f4\r\n{}\r\n", "x".repeat(500)));
    client.send(format!("1f5\r\n{}\r\n", "x".repeat(501)));
    let r = client.response();
    assert_eq!(r.status, 413);
    assert!(r.text().contains("max body size of 1000 bytes"), "{}", r.text());
    assert!(client.closed());
}

fn assert_refused(request: &[u8], status: u16, needle: &str) {
    let server = server();
    let mut client = server.connect();
    client.send(request);
    let r = client.response();
    assert_eq!(r.status, status, "{}", r.text());
    assert!(r.text().contains(needle), "{:?}: {}", String::from_utf8_lossy(request), r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert!(client.closed(), "connection must close after {status}");
}

#[test]
fn garbage_gets_400_and_close() {
    assert_refused(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "malformed");
    assert_refused(b"GET / HTTP/1.1\r\nbad header\r\n\r\n", 400, "malformed");
    assert_refused(
        b"POST / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n",
        400,
        "both content-length and transfer-encoding",
    );
    assert_refused(b"POST / HTTP/1.1\r\ncontent-length: 1x\r\n\r\n", 400, "invalid content-length");
    assert_refused(
        b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        400,
        "chunk size",
    );
}

#[test]
fn oversized_heads_get_431_and_close() {
    let mut huge = b"GET / HTTP/1.1\r\nx-big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'v', 70 * 1024));
    huge.extend_from_slice(b"\r\n\r\n");
    assert_refused(&huge, 431, "exceeds 65536 bytes");

    let mut many = String::from("GET / HTTP/1.1\r\n");
    for i in 0..101 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    assert_refused(many.as_bytes(), 431, "more than 100 header fields");
}

#[test]
fn a_refused_request_still_gets_the_earlier_pipelined_responses() {
    let server = server();
    let mut client = server.connect();
    client
        .send("GET / HTTP/1.1\r\nhost: t\r\n\r\nGET / HTTP/1.1\r\nhost: t\r\n\r\nNOT HTTP\r\n\r\n");
    client.response().assert_filler(10);
    client.response().assert_filler(10);
    assert_eq!(client.response().status, 400);
    assert!(client.closed());
}
