//! Two-phase shutdown and the connection cap.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::{Client, TestServer};
use shrike_server::ServerConfig;

#[test]
fn idle_keep_alive_connections_close_and_run_returns_promptly() {
    let server = TestServer::start(ServerConfig::default());
    let mut clients: Vec<Client> = (0..3).map(|_| server.connect()).collect();
    for c in &mut clients {
        c.get("").assert_filler(10);
    }
    // Well under the 30 s drain timeout: idle connections must not be waited for.
    let took = server.stop();
    assert!(took < Duration::from_secs(5), "{took:?}");
    for c in &mut clients {
        assert!(c.closed(), "idle connection left open after shutdown");
    }
}

#[test]
fn in_flight_delayed_request_completes_during_shutdown() {
    let mut server = TestServer::start(ServerConfig::default());
    let addr = server.addr;
    let mut client = server.connect();
    client.send(
        "GET / HTTP/1.1\r\nhost: t\r\n\
         x-nighthawk-test-server-config: {\"static_delay\": \"0.5s\"}\r\n\r\n",
    );
    std::thread::sleep(Duration::from_millis(100));
    server.signal_shutdown();
    let response = client.response();
    response.assert_filler(10);
    assert_eq!(response.header("connection"), Some("close"));
    assert!(client.closed());
    let took = server.join(Duration::from_secs(5));
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The listener is gone.
    let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err();
    assert!(refused, "still accepting after shutdown");
}

#[test]
fn drain_timeout_aborts_stragglers() {
    let mut server = TestServer::start(
        ServerConfig::builder().drain_timeout(Duration::from_millis(200)).build().expect("config"),
    );
    let mut client = server.connect();
    client.send(
        "GET / HTTP/1.1\r\nhost: t\r\n\
         x-nighthawk-test-server-config: {\"static_delay\": \"60s\"}\r\n\r\n",
    );
    std::thread::sleep(Duration::from_millis(100));
    server.signal_shutdown();
    let took = server.join(Duration::from_secs(5));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(client.closed());
}

#[test]
fn max_connections_caps_concurrent_connections() {
    let server =
        TestServer::start(ServerConfig::builder().max_connections(1).build().expect("config"));
    let mut first = server.connect();
    first.get("").assert_filler(10);
    // The server accepts the connection over the cap and resets it at once.
    if let Some(mut second) = Client::connect_unless_reset(server.addr) {
        assert!(second.closed(), "second connection was kept open");
    }
    // The first one is still served, and its slot is free again once it has gone.
    first.get("").assert_filler(10);
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // The server frees the slot when it sees the first connection's end, a moment later.
    loop {
        // Until then the server refuses it.
        if let Some(mut third) = Client::connect_unless_reset(server.addr) {
            let _ = third.stream.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n");
            let mut head = [0u8; 12];
            if third.stream.read_exact(&mut head).is_ok() {
                assert_eq!(&head, b"HTTP/1.1 200");
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the freed slot was never reused");
        std::thread::sleep(Duration::from_millis(20));
    }
}
