//! HTTP/2 (prior knowledge, on the plaintext port) driven by the `h2` crate's client: every
//! config-header behaviour, flow control, request bodies, and graceful shutdown.

// A panic is how these tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::{Client, Response, TestServer};
use bytes::Bytes;
use h2::client::SendRequest;
use http::{Method, Request};
use shrike_server::ServerConfig;

const LIMIT: Duration = Duration::from_secs(20);

/// Runs an async test body on a fresh runtime (the server has its own thread), bounded in time.
fn block_on<F: Future>(test: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { tokio::time::timeout(LIMIT, test).await.expect("test timed out") })
}

/// One HTTP/2 connection with h2's default (64 KiB) receive windows, so any response body
/// larger than that only arrives if the server honours flow control.
#[derive(Clone)]
struct H2 {
    send: SendRequest<Bytes>,
}

impl H2 {
    async fn connect(addr: SocketAddr) -> (Self, tokio::task::JoinHandle<Result<(), h2::Error>>) {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        (Self { send }, tokio::spawn(conn))
    }

    async fn try_request(
        &self,
        method: Method,
        headers: &[(&str, &str)],
        body: Option<(Bytes, usize)>,
    ) -> Result<Response, h2::Error> {
        let mut request = Request::builder().method(method).uri("http://test/path?q=1");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(()).unwrap();
        let mut send = self.send.clone().ready().await?;
        let (response, mut stream) = send.send_request(request, body.is_none())?;
        if let Some((data, chunk)) = body {
            // Chunks, so a streamed body (no content-length) arrives in several DATA frames.
            let mut data = data;
            while !data.is_empty() {
                let part = data.split_to(chunk.min(data.len()));
                stream.send_data(part, data.is_empty())?;
            }
        }
        let (parts, mut body) = response.await?.into_parts();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            body.flow_control().release_capacity(chunk.len())?;
            bytes.extend_from_slice(&chunk);
        }
        Ok(Response::from_http(parts.status, &parts.headers, bytes))
    }

    async fn get(&self, headers: &[(&str, &str)]) -> Response {
        self.try_request(Method::GET, headers, None).await.unwrap()
    }

    /// Line breaks in `json` (readable test literals) are folded into spaces.
    async fn get_with_config(&self, json: &str) -> Response {
        let json = json.replace('\n', " ");
        self.get(&[("x-nighthawk-test-server-config", &json)]).await
    }
}

fn server() -> TestServer {
    TestServer::start(ServerConfig::default())
}

#[test]
fn body_sizes_are_exact_and_flow_controlled() {
    let server = server();
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        // Past the client's 64 KiB windows, past the server's 1 MiB reservation step, and past
        // the 4 MiB default cap's neighbourhood.
        for size in [0, 1, 16_384, 65_535, 65_536, 200_000, 3_000_000] {
            h2.get_with_config(&format!(r#"{{"response_body_size": {size}}}"#))
                .await
                .assert_filler(size);
        }
        h2.get(&[]).await.assert_filler(10);
    });
}

#[test]
fn many_large_bodies_share_one_connection() {
    let server = TestServer::start_multi(ServerConfig::default(), 2);
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let streams: Vec<_> = (0..20)
            .map(|i| {
                let h2 = h2.clone();
                tokio::spawn(async move {
                    let size = 100_000 + i * 1000;
                    let json = format!(r#"{{"response_body_size": {size}}}"#);
                    h2.get_with_config(&json).await.assert_filler(size);
                })
            })
            .collect();
        for s in streams {
            s.await.unwrap();
        }
    });
}

#[test]
fn response_headers_are_added_replaced_and_appended() {
    let server = TestServer::start(
        ServerConfig::builder().response_header("x-default", "server").build().unwrap(),
    );
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let r = h2
            .get_with_config(
                r#"{"response_headers": [
                    {"header": {"key": "x-default", "value": "request"}},
                    {"header": {"key": "X-New", "value": "1"}},
                    {"header": {"key": "x-new", "value": "2"}, "append": true},
                    {"header": {"key": "server", "value": "not-shrike"}}
                ]}"#,
            )
            .await;
        r.assert_filler(10);
        assert_eq!(r.all("x-default"), ["request"]);
        assert_eq!(r.all("x-new"), ["1", "2"]);
        assert_eq!(r.all("server"), ["not-shrike"]);
        assert!(r.header("date").is_some());
        let r = h2.get(&[]).await;
        assert_eq!(r.all("x-default"), ["server"]);
        assert_eq!(r.all("server"), ["shrike"]);
        assert_eq!(r.header("x-new"), None);
    });
}

#[test]
fn echo_lists_pseudo_headers_then_headers() {
    let server = server();
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let config = r#"{"echo_request_headers": true}"#;
        let r = h2
            .get(&[("x-custom", "hello world"), ("x-nighthawk-test-server-config", config)])
            .await;
        assert_eq!(r.status, 200);
        let body = r.text();
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(
            lines,
            [
                ":method: GET",
                ":scheme: http",
                ":authority: test",
                ":path: /path?q=1",
                "x-custom: hello world",
                &format!("x-nighthawk-test-server-config: {config}"),
            ]
        );
        assert_eq!(r.header("content-length"), Some(body.len().to_string().as_str()));
    });
}

#[test]
fn delays_hold_only_their_own_stream() {
    let server = server();
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let started = Instant::now();
        h2.get_with_config(r#"{"static_delay": "0.2s"}"#).await.assert_filler(10);
        assert!(started.elapsed() >= Duration::from_millis(200));

        // 50 delayed streams at once on one connection finish together, not one after another
        // (serially they would take 25 s), and a plain request is not held up behind them.
        let started = Instant::now();
        let delayed: Vec<_> = (0..50)
            .map(|_| {
                let h2 = h2.clone();
                tokio::spawn(async move {
                    h2.get_with_config(r#"{"static_delay": "0.5s"}"#).await.assert_filler(10)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        h2.get(&[]).await.assert_filler(10);
        assert!(
            delayed.iter().all(|d| !d.is_finished()),
            "a plain request waited for delayed ones"
        );
        for d in delayed {
            d.await.unwrap();
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(5), "{took:?}");
    });
}

#[test]
fn linear_delay_counts_concurrent_streams() {
    let server = server();
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let config = r#"{"concurrency_based_linear_delay":
            {"minimal_delay": "0.05s", "concurrency_delay_factor": "0.05s"}}"#;
        let started = Instant::now();
        let streams: Vec<_> = (0..3)
            .map(|_| {
                let h2 = h2.clone();
                tokio::spawn(async move { h2.get_with_config(config).await.assert_filler(10) })
            })
            .collect();
        for s in streams {
            s.await.unwrap();
        }
        // The last of three to arrive waits minimal + 3 × factor.
        assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
    });
}

#[test]
fn delta_header_status_and_head() {
    let server = server();
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        let config = r#"{"emit_previous_request_delta_in_response_header": "x-delta"}"#;
        assert_eq!(h2.get_with_config(config).await.header("x-delta"), None);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let delta: u64 =
            h2.get_with_config(config).await.header("x-delta").unwrap().parse().unwrap();
        assert!(delta >= 50_000_000, "{delta}");

        let r = h2.get_with_config(r#"{"response_status": 503}"#).await;
        assert_eq!((r.status, r.body.len()), (503, 10));
        let r = h2.get_with_config(r#"{"response_status": 204}"#).await;
        assert_eq!(r.status, 204);
        assert!(r.body.is_empty() && r.header("content-length").is_none());

        let r = h2.try_request(Method::HEAD, &[], None).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("10"));
        assert!(r.body.is_empty());
    });
}

#[test]
fn bad_configs_get_500_and_the_connection_keeps_serving() {
    let server = server();
    block_on(async {
        let (h2, conn) = H2::connect(server.addr).await;
        for (json, needle) in [
            (r#"{"response_body_size": "#, "EOF while parsing"),
            (r#"{"foo": 1}"#, "unknown field `foo`"),
            (r#"{"response_status": 42}"#, "response_status 42 is out of range"),
            (
                r#"{"response_headers": [{"header": {"key": "connection", "value": "x"}}]}"#,
                "managed by the server",
            ),
        ] {
            let r = h2.get_with_config(json).await;
            assert_eq!(r.status, 500, "{json}");
            assert!(r.text().starts_with("invalid x-nighthawk-test-server-config: "));
            assert!(r.text().contains(needle), "{json}: {}", r.text());
            h2.get(&[]).await.assert_filler(10);
        }
        assert!(!conn.is_finished());
    });
}

#[test]
fn request_bodies_are_consumed_and_capped() {
    let server = TestServer::start(ServerConfig::builder().max_body_size(1 << 20).build().unwrap());
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        // Exactly the cap, in 16 KiB frames, with a declared length and streamed: more than the
        // 64 KiB default window, so it only arrives if the server returns credit as it reads.
        let body = Bytes::from(vec![b'u'; 1 << 20]);
        let len = body.len().to_string();
        let declared = [("content-length", len.as_str())];
        let r = h2.try_request(Method::POST, &declared, Some((body.clone(), 16_384))).await;
        r.unwrap().assert_filler(10);
        let r = h2.try_request(Method::POST, &[], Some((body.clone(), 16_384))).await;
        r.unwrap().assert_filler(10);

        // One byte over: refused by its declared length before a byte is read...
        let over = Bytes::from(vec![b'u'; (1 << 20) + 1]);
        let len = over.len().to_string();
        let declared = [("content-length", len.as_str())];
        let r = h2.try_request(Method::POST, &declared, Some((over.clone(), 65_536))).await;
        let r = r.unwrap();
        assert_eq!(r.status, 413);
        assert!(r.text().contains("request body of 1048577 bytes exceeds"), "{}", r.text());
        // ...or by counting, when streamed.
        let r = h2.try_request(Method::POST, &[], Some((over, 65_536))).await.unwrap();
        assert_eq!(r.status, 413);
        assert!(r.text().contains("request body exceeds the server's max"), "{}", r.text());
        // The connection is still good.
        h2.get(&[]).await.assert_filler(10);
    });
}

#[test]
fn trailers_end_a_request_and_a_wrong_content_length_resets_only_its_stream() {
    let server = server();
    block_on(async {
        let (h2, conn) = H2::connect(server.addr).await;
        let mut send = h2.send.clone().ready().await.unwrap();
        let request = Request::post("http://test/").body(()).unwrap();
        let (response, mut stream) = send.send_request(request, false).unwrap();
        stream.send_data(Bytes::from_static(b"abc"), false).unwrap();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", "1".parse().unwrap());
        stream.send_trailers(trailers).unwrap();
        assert_eq!(response.await.unwrap().status(), 200);
        // Five bytes declared, three sent: malformed (RFC 9113 §8.1.1), so only this stream is
        // reset and the connection serves on.
        let request = Request::post("http://test/").header("content-length", "5").body(()).unwrap();
        let mut send = h2.send.clone().ready().await.unwrap();
        let (response, mut stream) = send.send_request(request, false).unwrap();
        stream.send_data(Bytes::from_static(b"abc"), true).unwrap();
        let err = response.await.expect_err("reset");
        assert_eq!(err.reason(), Some(h2::Reason::PROTOCOL_ERROR), "{err}");
        h2.get(&[]).await.assert_filler(10);
        assert!(!conn.is_finished());
    });
}

#[test]
fn a_client_without_a_dynamic_table_gets_no_indices() {
    // The server indexes its default head in the client's table. A client that allows no
    // table (SETTINGS_HEADER_TABLE_SIZE 0) must be told so at the start of the next block and
    // get literals from then on; h2's own client is lenient here, so the frames are read raw
    // and decoded with a decoder that holds no table at all.
    use shrike_h2::{frame, hpack};
    use std::io::{Read, Write};
    let server = server();
    let mut tcp = std::net::TcpStream::connect(server.addr).unwrap();
    tcp.set_read_timeout(Some(LIMIT)).unwrap();
    let mut out = frame::PREFACE.to_vec();
    frame::put_settings(&mut out, &[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]);
    let mut get = Vec::new();
    for (name, value) in
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "t")]
    {
        hpack::encode_field(&mut get, name.as_bytes(), value.as_bytes());
    }
    for id in [1, 3, 5] {
        frame::put(&mut out, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, id, &get);
    }
    tcp.write_all(&out).unwrap();
    let mut decoder = hpack::Decoder::new(0);
    let mut heads = Vec::new();
    let mut buf = Vec::new();
    while heads.len() < 3 {
        let mut chunk = [0u8; 4096];
        let n = tcp.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {} responses", heads.len());
        buf.extend_from_slice(&chunk[..n]);
        while buf.len() >= frame::HEADER_LEN {
            let head = frame::Head::parse(buf[..frame::HEADER_LEN].try_into().unwrap());
            if buf.len() < frame::HEADER_LEN + head.len {
                break;
            }
            let payload: Vec<u8> = buf.drain(..frame::HEADER_LEN + head.len).skip(9).collect();
            if head.kind == frame::HEADERS {
                let mut fields = Vec::new();
                decoder
                    .decode(&payload, |n, v| fields.push((n.to_vec(), v.to_vec())))
                    .unwrap_or_else(|e| panic!("response {}: {e}", heads.len() + 1));
                heads.push((payload, fields));
            }
        }
    }
    assert_eq!(heads[0].0[0], 0x20, "the first block announces the size 0: {:?}", heads[0].0);
    assert_eq!(heads[1].1, heads[0].1);
    assert_eq!(heads[2].1, heads[0].1);
}

#[test]
fn settings_advertise_max_concurrent_streams() {
    let server =
        TestServer::start(ServerConfig::builder().max_concurrent_streams(7).build().unwrap());
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        // SETTINGS arrive with the first response at the latest.
        h2.get(&[]).await.assert_filler(10);
        assert_eq!(h2.send.current_max_send_streams(), 7);
    });
}

#[test]
fn the_plaintext_port_still_speaks_http1() {
    let server = server();
    let mut client = server.connect();
    client.get("").assert_filler(10);
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        h2.get(&[]).await.assert_filler(10);
    });
    // Methods that share the preface's first letter are HTTP/1.1.
    let mut client = Client::connect(server.addr);
    client.send("POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\n\r\nhi");
    client.response().assert_filler(10);
    let mut server = server;
    server.signal_shutdown();
    server.join(Duration::from_secs(5));
    let totals = server.totals.unwrap();
    assert_eq!((totals.http1_connections, totals.http2_connections), (2, 1));
}

#[test]
fn graceful_shutdown_finishes_streams_and_refuses_new_ones() {
    let mut server = server();
    block_on(async {
        let (h2, conn) = H2::connect(server.addr).await;
        h2.get(&[]).await.assert_filler(10);
        let in_flight = {
            let h2 = h2.clone();
            tokio::spawn(async move { h2.get_with_config(r#"{"static_delay": "1s"}"#).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.signal_shutdown();
        // GOAWAY, then a PING round trip before the final GOAWAY: give both time to arrive.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let refused = h2.try_request(Method::GET, &[], None).await;
        assert!(refused.is_err(), "a stream opened after GOAWAY was served: {refused:?}");
        let r = in_flight.await.unwrap();
        r.assert_filler(10);
        // The server closes the connection once its last stream is done.
        let closed = tokio::time::timeout(Duration::from_secs(5), conn).await;
        assert!(closed.is_ok(), "connection left open after its last stream");
    });
    let took = server.join(Duration::from_secs(5));
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// A client runtime that keeps driving its connections while the test thread waits on the
/// server (HTTP/2 needs the client to answer the server's PING during graceful shutdown).
fn background_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

#[test]
fn idle_connections_close_at_once_on_shutdown() {
    let mut server = server();
    let rt = background_runtime();
    let (h2, conn) = rt.block_on(H2::connect(server.addr));
    rt.block_on(h2.get(&[])).assert_filler(10);
    server.signal_shutdown();
    // Well under the 30 s drain timeout: an idle connection must not be waited for.
    let took = server.join(Duration::from_secs(5));
    assert!(took < Duration::from_secs(3), "{took:?}");
    let closed = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), conn).await });
    assert!(closed.is_ok(), "client connection still open");
}

#[test]
fn drain_timeout_bounds_stuck_streams() {
    let mut server = TestServer::start(
        ServerConfig::builder().drain_timeout(Duration::from_millis(300)).build().unwrap(),
    );
    let rt = background_runtime();
    let addr = server.addr;
    let stuck = rt.spawn(async move {
        let (h2, _) = H2::connect(addr).await;
        h2.get_with_config(r#"{"static_delay": "60s"}"#).await
    });
    std::thread::sleep(Duration::from_millis(200));
    server.signal_shutdown();
    let took = server.join(Duration::from_secs(5));
    assert!(took < Duration::from_secs(3), "{took:?}");
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), stuck).await })
        .unwrap()
        .unwrap_err();
}

#[test]
fn a_peer_breaking_the_protocol_loses_only_its_connection() {
    let server = server();
    let mut broken = Client::connect(server.addr);
    // The preface, then bytes that are not a SETTINGS frame.
    broken.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff");
    let mut rest = Vec::new();
    // The server answers with its SETTINGS and a GOAWAY, then closes.
    let closed = match std::io::Read::read_to_end(&mut broken.stream, &mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "broken HTTP/2 connection left open");
    block_on(async {
        let (h2, _) = H2::connect(server.addr).await;
        h2.get(&[]).await.assert_filler(10);
    });
}

/// A tunnel's download larger than the server's write buffer, to a client whose windows are
/// large enough that it sends no WINDOW_UPDATE for most of it and reads slowly: the
/// destination's bytes must keep flowing when the write side, not the client, frees room.
/// Every byte arrives, in order, and the destination's close ends the stream.
#[test]
fn a_tunnel_download_keeps_flowing_to_a_slow_reader_with_large_windows() {
    const SIZE: usize = 24 << 20;
    let dest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = dest.accept().unwrap();
        let data: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
        s.write_all(&data).unwrap();
    });
    let proxy = shrike_server::ProxyConfig {
        allow: vec![("127.0.0.1".parse().unwrap(), 32)],
        connect_timeout: Duration::from_secs(5),
    };
    let server =
        TestServer::start(crate::common::build(ServerConfig::builder().connect_proxy(proxy)));
    block_on(async {
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(32 << 20)
            .initial_connection_window_size(32 << 20)
            .handshake::<_, Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(conn);
        let request =
            Request::builder().method(Method::CONNECT).uri(dest_addr.to_string()).body(()).unwrap();
        let mut send = send.ready().await.unwrap();
        let (response, _stream) = send.send_request(request, false).unwrap();
        let mut body = response.await.unwrap().into_body();
        let mut received = 0usize;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            for (i, b) in chunk.iter().enumerate() {
                assert_eq!(*b, ((received + i) % 251) as u8, "byte {}", received + i);
            }
            received += chunk.len();
            body.flow_control().release_capacity(chunk.len()).unwrap();
            // Slower than the destination: the server's write buffer fills.
            if received % (1 << 20) < chunk.len() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        assert_eq!(received, SIZE);
    });
    writer.join().unwrap();
}
