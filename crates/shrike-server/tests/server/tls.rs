//! TLS with a generated certificate, checked by real peers: curl verifies the certificate and
//! negotiates HTTP/2 or HTTP/1.1 by ALPN; h2load loads it over h2. Peers that fail or stall the
//! handshake lose only their own connection. Needs Debian's `curl` and `nghttp2-client`.

// A panic is how these tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{require_tool, run_tool, run_tool_with_input, Client, TestServer};
use shrike_server::{SelfSignedCert, ServerConfig, ServerConfigBuilder};

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

struct TlsServer {
    server: TestServer,
    dir: PathBuf,
    ca: String,
}

impl TlsServer {
    fn start(builder: ServerConfigBuilder) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let cert = SelfSignedCert::generate(&SelfSignedCert::LOOPBACK_NAMES).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "shrike-server-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("cert.pem");
        std::fs::write(&ca, cert.cert_pem()).unwrap();
        let config = builder.tls(cert.tls_config().unwrap()).build().unwrap();
        let server = TestServer::start_multi(config, 2);
        Self { server, ca: ca.display().to_string(), dir }
    }

    fn port(&self) -> u16 {
        self.server.addr.port()
    }

    /// curl for `https://localhost:PORT/`, pinned to the server's address.
    fn curl(&self) -> Command {
        let mut curl = Command::new(require_tool("curl", "curl"));
        curl.args(["-sS", "--max-time", "10"])
            .arg("--resolve")
            .arg(format!("localhost:{}:127.0.0.1", self.port()));
        curl
    }

    fn localhost(&self) -> String {
        format!("https://localhost:{}/", self.port())
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// True when the server closes the connection, after whatever it sent (a TLS alert).
fn closes(client: &mut Client) -> bool {
    let mut sink = Vec::new();
    match client.stream.read_to_end(&mut sink) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn curl_verifies_the_certificate_and_negotiates_by_alpn() {
    let mut tls = TlsServer::start(ServerConfig::builder());
    let config = r#"x-nighthawk-test-server-config: {"response_body_size": 1234, "response_headers": [{"header": {"key": "x-from-config", "value": "yes"}}]}"#;
    let write_out = "%{http_version} %{http_code} %{size_download}";
    let h2 = run_tool(
        tls.curl()
            .args(["--http2", "--cacert", &tls.ca, "-H", config, "-D", "-", "-o", "/dev/null"])
            .args(["-w", write_out])
            .arg(tls.localhost()),
        TOOL_TIMEOUT,
    );
    let out = stdout(&h2);
    assert!(h2.status.success(), "{out}\n{}", String::from_utf8_lossy(&h2.stderr));
    assert!(out.starts_with("HTTP/2 200"), "{out}");
    assert!(out.contains("\r\nx-from-config: yes\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\n2 200 1234"), "{out}");

    let h1 = run_tool(
        tls.curl()
            .args(["--http1.1", "--cacert", &tls.ca, "-H", config, "-o", "/dev/null"])
            .args(["-w", write_out])
            .arg(tls.localhost()),
        TOOL_TIMEOUT,
    );
    assert_eq!(stdout(&h1), "1.1 200 1234", "{}", String::from_utf8_lossy(&h1.stderr));

    // The certificate carries the loopback address too.
    let by_ip = run_tool(
        tls.curl()
            .args(["--cacert", &tls.ca, "-o", "/dev/null", "-w", "%{http_version}"])
            .arg(format!("https://127.0.0.1:{}/", tls.port())),
        TOOL_TIMEOUT,
    );
    assert_eq!(stdout(&by_ip), "2", "{}", String::from_utf8_lossy(&by_ip.stderr));

    // No ALPN means HTTP/1.1, unless the client opens with the HTTP/2 preface anyway.
    for (flags, version) in
        [(&["--no-alpn"][..], "1.1"), (&["--no-alpn", "--http2-prior-knowledge"], "2")]
    {
        let out = run_tool(
            tls.curl()
                .args(flags)
                .args(["--cacert", &tls.ca, "-o", "/dev/null", "-w", "%{http_version}"])
                .arg(tls.localhost()),
            TOOL_TIMEOUT,
        );
        assert_eq!(stdout(&out), version, "{flags:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    // Without trusting it, curl must refuse: the certificate is really checked.
    let untrusted =
        run_tool(tls.curl().args(["-o", "/dev/null"]).arg(tls.localhost()), TOOL_TIMEOUT);
    assert_eq!(untrusted.status.code(), Some(60), "curl accepted an untrusted certificate");

    tls.server.signal_shutdown();
    tls.server.join(Duration::from_secs(10));
    let totals = tls.server.totals.unwrap();
    assert_eq!(totals.tls_handshakes, 5);
    assert_eq!(totals.tls_handshake_failures, 1);
    assert_eq!((totals.http1_connections, totals.http2_connections), (2, 3));
}

#[test]
fn curl_uploads_over_tls_h2() {
    let tls = TlsServer::start(ServerConfig::builder());
    let file = tls.dir.join("upload.bin");
    std::fs::write(&file, vec![b'u'; 3 << 20]).unwrap();
    let out = run_tool(
        tls.curl()
            .args(["--http2", "--cacert", &tls.ca, "-o", "/dev/null"])
            .args(["-w", "%{http_version} %{http_code} %{size_upload}"])
            .args(["--data-binary", &format!("@{}", file.display())])
            .arg(tls.localhost()),
        TOOL_TIMEOUT,
    );
    assert_eq!(stdout(&out), "2 200 3145728", "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn h2load_over_tls() {
    let h2load = require_tool("h2load", "nghttp2-client");
    let tls = TlsServer::start(ServerConfig::builder());
    let output = run_tool(
        Command::new(h2load)
            .args(["-n", "2000", "-c", "4", "-m", "10"])
            .arg(format!("https://127.0.0.1:{}/", tls.port())),
        TOOL_TIMEOUT,
    );
    let out = stdout(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("Application protocol: h2"), "{out}");
    assert!(
        out.contains("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed"),
        "{out}"
    );
    assert!(out.contains("status codes: 2000 2xx"), "{out}");
}

#[test]
fn failed_and_stalled_handshakes_only_close_their_own_connection() {
    let mut tls =
        TlsServer::start(ServerConfig::builder().tls_handshake_timeout(Duration::from_millis(300)));
    // Plaintext HTTP at a TLS port: the handshake fails and the connection closes.
    let mut plain = Client::connect(tls.server.addr);
    plain.send("GET / HTTP/1.1\r\nhost: t\r\n\r\n");
    assert!(closes(&mut plain), "plaintext connection left open");
    // A peer that never starts the handshake is dropped after the timeout, not kept forever.
    let started = Instant::now();
    let mut silent = Client::connect(tls.server.addr);
    assert!(closes(&mut silent), "stalled handshake left open");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(5), "{waited:?}");
    // The server is unharmed.
    let ok = run_tool(
        tls.curl()
            .args(["--cacert", &tls.ca, "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(tls.localhost()),
        TOOL_TIMEOUT,
    );
    assert_eq!(stdout(&ok), "200");
    tls.server.signal_shutdown();
    tls.server.join(Duration::from_secs(10));
    let totals = tls.server.totals.unwrap();
    assert_eq!((totals.tls_handshakes, totals.tls_handshake_failures), (1, 2));
}

#[test]
fn sessions_resume_with_tls_1_2_and_1_3() {
    let openssl = require_tool("openssl", "openssl");
    let tls = TlsServer::start(ServerConfig::builder());
    let addr = tls.server.addr.to_string();
    // `connection: close` ends the exchange, so s_client exits after reading the response (and,
    // with TLS 1.3, the tickets sent after the handshake).
    let request = b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
    for version in ["-tls1_3", "-tls1_2"] {
        let session = tls.dir.join(format!("session{version}.pem"));
        let session = session.display().to_string();
        let connect = |resume: &str| {
            let output = run_tool_with_input(
                Command::new(&openssl)
                    .args(["s_client", version, "-connect", &addr, "-servername", "localhost"])
                    .args(["-CAfile", &tls.ca, "-ign_eof", resume, &session]),
                request,
                TOOL_TIMEOUT,
            );
            stdout(&output)
        };
        let first = connect("-sess_out");
        assert!(first.contains("\nNew, TLSv1."), "{version}: {first}");
        assert!(first.contains("Verify return code: 0 (ok)"), "{version}: {first}");
        assert!(first.contains("HTTP/1.1 200 OK"), "{version}: {first}");
        let second = connect("-sess_in");
        assert!(second.contains("\nReused, TLSv1."), "{version}: session not resumed\n{second}");
        assert!(second.contains("HTTP/1.1 200 OK"), "{version}: {second}");
    }
}
