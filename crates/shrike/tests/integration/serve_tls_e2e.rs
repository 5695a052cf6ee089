//! The real `shrike serve --tls` binary against the real `shrike run` client: the generated
//! certificate is printed for clients, validated by Shrike's client, and both HTTP/1.1 and
//! HTTP/2 are negotiated over it by ALPN.

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

#[test]
fn client_validates_the_served_certificate_and_negotiates_both_protocols() {
    let server = TlsServer::start(&["--tls", "--response-body-size", "321"]);
    for protocol in ["http1", "http2"] {
        let (g, w) = run_agreed(
            &server,
            &[
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
            ],
        );
        let g = &g;
        assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{protocol}");
        assert!(counter(g, "ssl.handshake") >= 1, "{protocol}");
        let body = statistic(g, "benchmark_http_client.response_body_size");
        assert_eq!(body["raw_max"], "321", "{protocol}");
        let h2 = counter(g, "upstream_cx_http2_total");
        assert_eq!(h2 > 0, protocol == "http2", "{protocol}: http2 connections {h2}");
        // The server negotiated the same: a handshake and a connection of that protocol for
        // each the client counted, and the bodies it says it sent.
        assert_eq!(w.count("/tls/handshakes"), counter(g, "ssl.handshake"), "{protocol}");
        assert_eq!(w.count("/connections/http2"), h2, "{protocol}");
        let h1 = counter(g, "upstream_cx_http1_total");
        assert_eq!(w.count("/connections/http1"), h1, "{protocol}");
        assert_eq!(w.count("/response_body_bytes"), 50 * 321, "{protocol}");
    }
}

#[test]
fn an_untrusted_certificate_fails_the_run_clearly() {
    let server = TlsServer::start(&["--tls", "--response-body-size", "321"]);
    let (out, w) = run_witnessed(
        &server,
        &["run", &server.url(), "--rps", "10", "--duration", "1", "--output-format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    // The server saw each handshake the client refused fail, and no request.
    let failed = counter(global(&json(&out)), "upstream_cx_connect_fail");
    assert!(failed >= 1, "{}", out.stdout);
    assert_eq!(w.count("/tls/handshake_failures"), failed);
    assert_eq!(w.count("/requests"), 0);
    let err = out.stderr.to_lowercase();
    assert!(err.contains("certificate"), "{}", out.stderr);
    assert!(err.contains("localhost"), "names the host: {}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);
}

/// `openssl req -x509` makes a CA:TRUE certificate. Passed itself with --tls-ca it is now
/// trusted (pinned, as curl and browsers do); the same certificate made CA:FALSE still is.
#[test]
fn openssl_self_signed_certificates_are_trusted_when_pinned() {
    let dir = std::env::temp_dir().join(format!("shrike-x509-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let gen = |name: &str, extra: &[&str]| {
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        let status = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            .args(extra)
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed (.ci/run installs it)");
        assert!(status.success());
        (cert.display().to_string(), key.display().to_string())
    };
    let (ca_cert, ca_key) = gen("ca-true", &[]);
    let (leaf_cert, leaf_key) = gen("ca-false", &["-addext", "basicConstraints=critical,CA:FALSE"]);
    for (cert, key) in [(&ca_cert, &ca_key), (&leaf_cert, &leaf_key)] {
        let server = TlsServer::start(&["--tls-cert", cert, "--tls-key", key]);
        let (g, w) = run_agreed(
            &server,
            &["run", &server.url(), "--tls-ca", cert, "--rps", "10", "--duration", "1"],
        );
        assert_eq!(counter(&g, "benchmark.http_2xx"), 10, "{cert}");
        assert_eq!(w.count("/tls/handshakes"), counter(&g, "ssl.handshake"), "{cert}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
