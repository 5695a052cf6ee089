//! HTTP/3: the server driven by a real HTTP/3 client (h3 over quinn) that trusts the generated
//! certificate, over loopback UDP on the same port number as the TCP listener. Every per-request
//! behaviour of the config header is checked as the other front ends check it, plus streams in
//! parallel on one connection and a graceful shutdown that finishes an in-flight request.
//!
//! Debian's curl (7.88, no HTTP/3) and h2load (nghttp2 1.52, built without ngtcp2: no
//! `--alpn-list`) cannot speak HTTP/3, so no peer tool is run over QUIC here; curl checks the
//! `alt-svc` advertisement on the TCP side.

// A panic is how these tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{require_tool, run_tool, Response, TestServer};
use bytes::{Buf, Bytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use shrike_server::{
    SelfSignedCert, ServerConfig, ServerConfigBuilder, ServerTotals, CONFIG_HEADER,
};

/// Bounds every test: a hang fails instead of stalling the suite.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

struct H3Server {
    server: TestServer,
    cert: SelfSignedCert,
}

impl H3Server {
    fn start(builder: ServerConfigBuilder) -> Self {
        let cert = SelfSignedCert::generate(&SelfSignedCert::LOOPBACK_NAMES).unwrap();
        let config = builder.tls(cert.tls_config().unwrap()).build().unwrap();
        // Two workers, as `shrike serve` runs: the QUIC endpoint and the connections share them.
        let server = TestServer::start_h3(config, Some(2));
        Self { server, cert }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// Shuts down (bounded) and returns what `run_with_udp` reported.
    fn stop(mut self) -> ServerTotals {
        self.server.signal_shutdown();
        self.server.join(crate::common::IO_TIMEOUT);
        self.server.totals.take().unwrap()
    }
}

/// One HTTP/3 connection, with h3's connection driver running in a task of its own.
struct H3Client {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    endpoint: quinn::Endpoint,
    /// Ends with the connection's closing error.
    driver: tokio::task::JoinHandle<h3::error::ConnectionError>,
}

impl H3Client {
    async fn connect(server: &H3Server) -> Self {
        let endpoint = client_endpoint(server.cert.cert_pem());
        let quic = endpoint.connect(server.addr(), "localhost").unwrap().await.unwrap();
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic)).await.unwrap();
        let driver = tokio::spawn(async move { poll_fn(|cx| driver.poll_close(cx)).await });
        Self { send, endpoint, driver }
    }

    fn get(config: Option<&str>) -> http::Request<()> {
        let mut request = http::Request::get("https://localhost/");
        if let Some(config) = config {
            // Line breaks in readable test literals are folded into spaces.
            request = request.header(CONFIG_HEADER, config.replace('\n', " "));
        }
        request.body(()).unwrap()
    }

    async fn request(&mut self, request: http::Request<()>, body: Option<Bytes>) -> Response {
        exchange(self.send.clone(), request, body).await
    }

    async fn close(self) {
        drop(self.send);
        self.endpoint.close(0u32.into(), b"done");
        self.endpoint.wait_idle().await;
        self.driver.abort();
    }
}

/// A client endpoint trusting only `cert_pem`, offering ALPN `h3`.
fn client_endpoint(cert_pem: &str) -> quinn::Endpoint {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    endpoint
}

/// Sends one request (and its body), then reads the whole response.
async fn exchange(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    request: http::Request<()>,
    body: Option<Bytes>,
) -> Response {
    let mut stream = send.send_request(request).await.unwrap();
    if let Some(body) = body {
        // The server may refuse a body (413) and stop reading it: then sending fails, and the
        // response is what counts.
        let _ = stream.send_data(body).await;
    }
    let _ = stream.finish().await;
    let head = stream.recv_response().await.unwrap();
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    Response::from_http(head.status(), head.headers(), body)
}

/// Runs `test` on a current-thread runtime of the test's own, bounded by [`TEST_TIMEOUT`].
fn block_on<F: Future<Output = ()>>(test: F) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        tokio::time::timeout(TEST_TIMEOUT, test).await.expect("test timed out");
    });
}

#[test]
fn body_sizes_status_headers_and_echo() {
    let server = H3Server::start(ServerConfig::builder().response_header("x-default", "1"));
    block_on(async {
        let mut client = H3Client::connect(&server).await;
        client.request(H3Client::get(None), None).await.assert_filler(10);
        // 0, one byte, and more than one 64 KiB slice of the shared filler.
        for size in [0usize, 1, 200_000] {
            let config = format!(r#"{{"response_body_size": {size}}}"#);
            client.request(H3Client::get(Some(&config)), None).await.assert_filler(size);
        }

        let config = r#"{"response_status": 503, "response_headers": [
            {"header": {"key": "server", "value": "custom"}},
            {"header": {"key": "x-default", "value": "2"}, "append": true}]}"#;
        let reply = client.request(H3Client::get(Some(config)), None).await;
        assert_eq!(reply.status, 503);
        assert_eq!(reply.header("server"), Some("custom"));
        let defaults = reply.all("x-default");
        assert_eq!(defaults, ["1", "2"]);
        assert_eq!(reply.header("date").map(str::len), Some(29));
        let alt_svc = format!("h3=\":{}\"; ma=86400", server.addr().port());
        assert_eq!(reply.header("alt-svc"), Some(alt_svc.as_str()));

        let request = http::Request::get("https://localhost/echo?q=1")
            .header(CONFIG_HEADER, r#"{"echo_request_headers": true}"#)
            .header("x-echo-me", "yes")
            .body(())
            .unwrap();
        let echo = client.request(request, None).await.text();
        for line in [":method: GET", ":path: /echo?q=1", "x-echo-me: yes", ":authority: localhost"]
        {
            assert!(echo.lines().any(|l| l == line), "{line:?} missing from echo:\n{echo}");
        }

        let head = http::Request::head("https://localhost/")
            .header(CONFIG_HEADER, r#"{"response_body_size": 123}"#)
            .body(())
            .unwrap();
        let reply = client.request(head, None).await;
        assert_eq!((reply.status, reply.header("content-length")), (200, Some("123")));
        assert!(reply.body.is_empty());
        client.close().await;
    });
}

#[test]
fn delays_and_previous_request_delta() {
    let server = H3Server::start(ServerConfig::builder());
    block_on(async {
        let mut client = H3Client::connect(&server).await;
        let started = Instant::now();
        let reply = client.request(H3Client::get(Some(r#"{"static_delay": "0.3s"}"#)), None).await;
        let took = started.elapsed();
        reply.assert_filler(10);
        assert!(took >= Duration::from_millis(300), "answered after {took:?}");

        let linear = r#"{"concurrency_based_linear_delay":
            {"minimal_delay": "0.2s", "concurrency_delay_factor": "0.05s"}}"#;
        let started = Instant::now();
        client.request(H3Client::get(Some(linear)), None).await.assert_filler(10);
        // Alone in flight: minimal + 1 × factor.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(250), "answered after {took:?}");

        let delta = r#"{"emit_previous_request_delta_in_response_header": "x-delta"}"#;
        client.request(H3Client::get(None), None).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let reply = client.request(H3Client::get(Some(delta)), None).await;
        let ns: u64 = reply.header("x-delta").expect("delta header").parse().unwrap();
        assert!(ns >= 20_000_000, "delta {ns} ns");
        client.close().await;
    });
}

#[test]
fn bad_config_gets_500_and_the_connection_stays_usable() {
    let server = H3Server::start(ServerConfig::builder());
    block_on(async {
        let mut client = H3Client::connect(&server).await;
        for (config, needle) in [
            (r#"{"response_body_size": "#, "invalid x-nighthawk-test-server-config"),
            (r#"{"response_body_sise": 3}"#, "unknown field `response_body_sise`"),
            (r#"{"response_status": 42}"#, "response_status 42"),
        ] {
            let reply = client.request(H3Client::get(Some(config)), None).await;
            assert_eq!(reply.status, 500);
            assert!(reply.text().contains(needle), "{config}: {}", reply.text());
        }
        // The same QUIC connection serves the next request.
        client.request(H3Client::get(None), None).await.assert_filler(10);
        client.close().await;
    });
    assert_eq!(server.stop().http3_connections, 1);
}

#[test]
fn request_bodies_are_consumed_and_capped() {
    let server = H3Server::start(ServerConfig::builder().max_body_size(100_000));
    block_on(async {
        let mut client = H3Client::connect(&server).await;
        let post = |length: Option<usize>| {
            let mut request = http::Request::post("https://localhost/upload");
            if let Some(length) = length {
                request = request.header("content-length", length);
            }
            request.body(()).unwrap()
        };
        // Exactly at the cap, with and without a declared length.
        let body = Bytes::from(vec![b'x'; 100_000]);
        client.request(post(Some(100_000)), Some(body.clone())).await.assert_filler(10);
        client.request(post(None), Some(body)).await.assert_filler(10);

        // One byte over, found while reading.
        let reply = client.request(post(None), Some(Bytes::from(vec![b'x'; 100_001]))).await;
        assert_eq!(reply.status, 413);
        assert!(reply.text().contains("max body size of 100000 bytes"), "{}", reply.text());

        // Declared too large: refused before reading.
        let reply = client.request(post(Some(5_000_000)), Some(Bytes::from_static(b"x"))).await;
        assert_eq!(reply.status, 413);
        assert!(reply.text().contains("request body of 5000000 bytes"), "{}", reply.text());

        client.request(H3Client::get(None), None).await.assert_filler(10);
        client.close().await;
    });
}

#[test]
fn streams_run_in_parallel_on_one_connection() {
    let server = H3Server::start(ServerConfig::builder());
    block_on(async {
        let client = H3Client::connect(&server).await;
        let config = r#"{"static_delay": "0.5s", "response_body_size": 1000}"#;
        let started = Instant::now();
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..20 {
            requests.spawn(exchange(client.send.clone(), H3Client::get(Some(config)), None));
        }
        while let Some(reply) = requests.join_next().await {
            reply.unwrap().assert_filler(1000);
        }
        let took = started.elapsed();
        // One after another they would take 10 s.
        assert!(took < Duration::from_secs(5), "20 delayed requests took {took:?}");
        client.close().await;
    });
    assert_eq!(server.stop().http3_connections, 1);
}

#[test]
fn graceful_shutdown_finishes_in_flight_requests() {
    let mut server = H3Server::start(ServerConfig::builder());
    let cert = server.cert.clone();
    let addr = server.addr();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Timers and sockets created outside `block_on` need the runtime too.
    let _context = runtime.enter();
    let client = runtime.block_on(H3Client::connect(&server));
    let config = r#"{"static_delay": "0.6s", "response_body_size": 70000}"#;
    let in_flight = runtime.spawn(exchange(client.send.clone(), H3Client::get(Some(config)), None));
    // Let the request reach the server before shutdown starts.
    runtime.block_on(tokio::time::sleep(Duration::from_millis(200)));
    server.server.signal_shutdown();
    let reply = runtime.block_on(async {
        tokio::time::timeout(TEST_TIMEOUT, in_flight).await.expect("in-flight request hung")
    });
    reply.unwrap().assert_filler(70_000);
    let took = server.server.join(Duration::from_secs(10));
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert_eq!(server.server.totals.unwrap().http3_connections, 1);
    // The connection was closed, and the endpoint is gone.
    runtime.block_on(async {
        let closed = tokio::time::timeout(Duration::from_secs(5), client.driver).await;
        assert!(closed.is_ok(), "the server did not close the QUIC connection");
        let endpoint = client_endpoint(cert.cert_pem());
        let again = tokio::time::timeout(
            Duration::from_secs(3),
            endpoint.connect(addr, "localhost").unwrap(),
        )
        .await;
        assert!(!matches!(again, Ok(Ok(_))), "a stopped server accepted a QUIC connection");
    });
}

#[test]
fn drain_timeout_bounds_shutdown() {
    let builder = ServerConfig::builder().drain_timeout(Duration::from_millis(300));
    let mut server = H3Server::start(builder);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Timers and sockets created outside `block_on` need the runtime too.
    let _context = runtime.enter();
    let client = runtime.block_on(H3Client::connect(&server));
    let stuck = runtime.spawn(exchange(
        client.send.clone(),
        H3Client::get(Some(r#"{"static_delay": "60s"}"#)),
        None,
    ));
    runtime.block_on(tokio::time::sleep(Duration::from_millis(200)));
    server.server.signal_shutdown();
    let took = server.server.join(Duration::from_secs(10));
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    stuck.abort();
}

#[test]
fn http3_needs_tls() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let err = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let udp = std::net::UdpSocket::bind(listener.local_addr().unwrap()).unwrap();
        let config = Arc::new(ServerConfig::default());
        shrike_server::run_with_udp(listener, Some(udp), config, std::future::pending())
            .await
            .unwrap_err()
    });
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("HTTP/3 needs TLS"), "{err}");
}

/// TCP responses advertise HTTP/3 on the same port, as browsers and curl expect to find it.
#[test]
fn tcp_responses_advertise_h3() {
    let server = H3Server::start(ServerConfig::builder());
    let dir = std::env::temp_dir().join(format!("shrike-server-h3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("cert.pem");
    std::fs::write(&ca, server.cert.cert_pem()).unwrap();
    let port = server.addr().port();
    let out = run_tool(
        Command::new(require_tool("curl", "curl"))
            .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-D", "-", "--cacert"])
            .arg(&ca)
            .arg("--resolve")
            .arg(format!("localhost:{port}:127.0.0.1"))
            .arg(format!("https://localhost:{port}/")),
        Duration::from_secs(30),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let head = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{head}{}", String::from_utf8_lossy(&out.stderr));
    let expected = format!("alt-svc: h3=\":{port}\"; ma=86400");
    assert!(head.lines().any(|l| l.trim_end() == expected), "{expected:?} missing:\n{head}");
}

/// QUIC connections have a cap of `max_connections` like TCP ones; one over it is refused at
/// once rather than left to retransmit into silence.
#[test]
fn connection_cap_applies_to_quic() {
    let server = H3Server::start(ServerConfig::builder().max_connections(1));
    block_on(async {
        let mut first = H3Client::connect(&server).await;
        first.request(H3Client::get(None), None).await.assert_filler(10);
        let endpoint = client_endpoint(server.cert.cert_pem());
        let second = endpoint.connect(server.addr(), "localhost").unwrap();
        let refused = tokio::time::timeout(Duration::from_secs(5), second).await;
        assert!(matches!(refused, Ok(Err(_))), "over the cap: {refused:?}");
        first.close().await;
    });
    let totals = server.stop();
    assert_eq!((totals.http3_connections, totals.tls_handshakes), (1, 1));
}

/// A client that cannot agree on ALPN `h3` fails its handshake; that is counted, and only its
/// own connection is affected.
#[test]
fn failed_quic_handshakes_are_counted() {
    let server = H3Server::start(ServerConfig::builder());
    block_on(async {
        let mut roots = rustls::RootCertStore::empty();
        let cert = CertificateDer::from_pem_slice(server.cert.cert_pem().as_bytes()).unwrap();
        roots.add(cert).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h2".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let config = quinn::ClientConfig::new(Arc::new(quic));
        let attempt = endpoint.connect_with(config, server.addr(), "localhost").unwrap();
        let failed = tokio::time::timeout(Duration::from_secs(5), attempt).await;
        assert!(matches!(failed, Ok(Err(_))), "ALPN h2 over QUIC: {failed:?}");

        let mut client = H3Client::connect(&server).await;
        client.request(H3Client::get(None), None).await.assert_filler(10);
        client.close().await;
    });
    let totals = server.stop();
    assert_eq!(totals.tls_handshake_failures, 1);
    assert_eq!((totals.http3_connections, totals.tls_handshakes), (1, 1));
}
