//! The real `shrike serve --tls` binary against the real `shrike run` client: the generated
//! certificate is printed for clients, validated by Shrike's client, and both HTTP/1.1 and
//! HTTP/2 are negotiated over it by ALPN.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;

struct TlsServer {
    child: Child,
    addr: String,
    ca: String,
}

impl TlsServer {
    fn start() -> TlsServer {
        let mut child = shrike()
            .args(["serve", "--listen", "127.0.0.1:0", "--tls", "--response-body-size", "321"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn shrike serve --tls");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            for _ in 0..2 {
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                let _ = tx.send(line.trim().to_string());
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).expect("address line");
        let ca_line = rx.recv_timeout(Duration::from_secs(10)).expect("tls-ca line");
        let ca = ca_line.strip_prefix("tls-ca: ").expect("second line is tls-ca: PATH").to_string();
        assert!(std::path::Path::new(&ca).exists(), "{ca} exists");
        TlsServer { child, addr, ca }
    }

    fn url(&self) -> String {
        // The generated certificate names localhost, 127.0.0.1 and ::1.
        format!("https://localhost:{}/", self.addr.rsplit(':').next().expect("port"))
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn client_validates_the_served_certificate_and_negotiates_both_protocols() {
    let server = TlsServer::start();
    for protocol in ["http1", "http2"] {
        let v = run_json_ok(&[
            "run",
            &server.url(),
            "--tls-ca",
            &server.ca,
            "--protocol",
            protocol,
            "--rps",
            "50",
            "--duration",
            "1",
        ]);
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{protocol}");
        assert!(counter(g, "ssl.handshake") >= 1, "{protocol}");
        let body = statistic(g, "benchmark_http_client.response_body_size");
        assert_eq!(body["raw_max"], "321", "{protocol}");
        let h2 = counter(g, "upstream_cx_http2_total");
        assert_eq!(h2 > 0, protocol == "http2", "{protocol}: http2 connections {h2}");
    }
}

#[test]
fn an_untrusted_certificate_fails_the_run_clearly() {
    let server = TlsServer::start();
    let out = run(
        &["run", &server.url(), "--rps", "10", "--duration", "1", "--output-format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    let err = out.stderr.to_lowercase();
    assert!(err.contains("certificate"), "{}", out.stderr);
    assert!(err.contains("localhost"), "names the host: {}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);
}
