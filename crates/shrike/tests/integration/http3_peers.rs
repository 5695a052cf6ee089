//! HTTP/3 against a peer that is not Shrike (issue 10): Shrike's h3 client against a quic-go
//! server, and a quic-go client against `shrike serve --http3`. Shrike's own h3 tests pair
//! its client with its server, so a mistake shared by both (framing, QPACK, ALPN, stream
//! handling) would pass them; quic-go is an independent implementation.
//!
//! The Go programs live in `tests/quic_go` (quic-go pinned in go.mod/go.sum) and are built
//! once per test binary; the Go build and module caches sit under the Cargo target directory
//! so later runs only relink.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);
const QUIC_GO: &str = "github.com/quic-go/quic-go v0.65.0";

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Builds the quic-go server and client once; returns the directory holding both binaries.
fn quic_go_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| go_build("quic_go", &["./server", "./client"], QUIC_GO))
}

/// A directory for one test's files, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = tmp().join(format!("http3_peers-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A self-signed leaf (CA:FALSE: Shrike's verifier rejects CA certificates as end entities)
/// naming both localhost and 127.0.0.1. Returns (cert, key).
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let child = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl (to make the quic-go server's certificate)");
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 0, "openssl req failed:\n{}", out.stderr);
    (cert, key)
}

/// The quic-go server on 127.0.0.1:0; killed (by its own handle) when dropped.
struct GoServer {
    child: Child,
    addr: String,
}

impl GoServer {
    fn start(cert: &Path, key: &Path, body_size: usize) -> GoServer {
        let mut child = Command::new(quic_go_bin().join("server"))
            .args(["-listen", "127.0.0.1:0", "-size", &body_size.to_string()])
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn quic-go server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line.trim().to_string());
        });
        // Constructed before the wait so a failed start still kills the child.
        let mut server = GoServer { child, addr: String::new() };
        server.addr = rx.recv_timeout(Duration::from_secs(10)).expect("quic-go server address");
        assert!(server.addr.starts_with("127.0.0.1:"), "unexpected address {:?}", server.addr);
        server
    }
}

impl Drop for GoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn shrike_h3_client_against_quic_go_server() {
    let scratch = Scratch::new("client");
    let (cert, key) = certificate(&scratch.0);
    let server = GoServer::start(&cert, &key, 2345);
    let url = format!("https://{}/some/path", server.addr);
    let v = run_json_ok(&[
        "run",
        &url,
        "--protocol",
        "http3",
        "--tls-ca",
        cert.to_str().unwrap(),
        "--rps",
        "50",
        "--duration",
        "1",
    ]);
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{g}");
    for other in ["benchmark.http_1xx", "benchmark.http_3xx", "benchmark.http_4xx"] {
        assert_eq!(counter(g, other), 0, "{other}");
    }
    assert_eq!(counter(g, "benchmark.http_5xx") + counter(g, "benchmark.http_xxx"), 0);
    assert!(counter(g, "upstream_cx_http3_total") >= 1, "{g}");
    assert_eq!(counter(g, "upstream_cx_http2_total"), 0);
    assert_eq!(counter(g, "upstream_cx_http1_total"), 0);
    let body = statistic(g, "benchmark_http_client.response_body_size");
    assert_eq!(body["count"], "50");
    assert_eq!(body["raw_min"], "2345");
    assert_eq!(body["raw_max"], "2345");
    // No failure of any kind: every counter that names an error or a failure is absent.
    let counters = g["counters"].as_array().unwrap();
    let bad: Vec<_> = counters
        .iter()
        .filter(|c| {
            let n = c["name"].as_str().unwrap();
            ["error", "fail", "timeout", "reset"].iter().any(|bad| n.contains(bad))
        })
        .collect();
    assert!(bad.is_empty(), "failures against quic-go: {bad:?}");
}

#[test]
fn quic_go_client_against_shrike_serve_http3() {
    let server = TlsServer::start(&["--tls", "--http3"]);
    assert!(!server.ca.is_empty(), "shrike serve --tls announced its certificate");
    // The generated certificate names localhost; dialling 127.0.0.1 with that server name
    // keeps the client off ::1, where the server does not listen.
    let url = format!("https://127.0.0.1:{}/anything", server.port);
    let child = Command::new(quic_go_bin().join("client"))
        .args(["-url", &url, "-n", "20", "-ca", &server.ca, "-server-name", "localhost"])
        .args(["-header", r#"x-nighthawk-test-server-config: {"response_body_size": 1234}"#])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quic-go client");
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 0, "quic-go client failed:\n{}", out.stderr);
    let t: serde_json::Value = serde_json::from_str(&out.stdout).expect("client tally is JSON");
    assert_eq!(t["errors"], serde_json::json!([]), "{t}");
    assert_eq!(t["statuses"], serde_json::json!({"200": 20}), "{t}");
    // The body size came from the per-request config header, so Shrike decoded quic-go's
    // QPACK-encoded request headers, and quic-go read exactly the advertised body.
    assert_eq!(t["body_lengths"], serde_json::json!({"1234": 20}), "{t}");
    assert_eq!(t["protocols"], serde_json::json!({"HTTP/3.0": 20}), "{t}");
    assert_eq!(t["served_by"], serde_json::json!({"shrike": 20}), "{t}");
}
