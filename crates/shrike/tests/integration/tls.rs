//! TLS through the real binary against nginx: certificates are verified by default, trust can
//! be extended or (explicitly) skipped, and session resumption is measurable.

use crate::support::nginx;

use std::time::Duration;

use crate::support::*;
use nginx::{Listen, LogEntry, Nginx};

const LIMIT: Duration = Duration::from_secs(60);

fn shrike_run(args: &[&str]) -> Output {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output-format", "json"]);
    run(&all, LIMIT)
}

/// [`shrike_run`] against `nginx`: the output, and the access-log lines of the run, which
/// must hold every request the run says it sent and each status class it counted.
fn run_at(nginx: &Nginx, args: &[&str]) -> (Output, Vec<LogEntry>) {
    let mark = nginx.mark();
    let out = shrike_run(args);
    let lines = nginx.agrees(mark, global(&json(&out)));
    (out, lines)
}

/// How many connections nginx served `lines` on.
fn served_on(lines: &[LogEntry]) -> u64 {
    lines.iter().map(|e| e.connection).collect::<std::collections::BTreeSet<_>>().len() as u64
}

/// [`shrike_run`] against a `shrike serve --tls`, with what the server counted meanwhile:
/// every request and status class the run reports, and a handshake for each it reports.
fn run_served(server: &TlsServer, args: &[&str]) -> (Output, serde_json::Value, Witness) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, LIMIT);
    let g = global(&json(&out)).clone();
    w.agrees(&g);
    assert_eq!(w.count("/tls/handshakes"), counter(&g, "ssl.handshake"), "handshakes");
    (out, g, w)
}

#[test]
fn untrusted_certificate_fails_the_run_with_a_clear_error() {
    let nginx = Nginx::start(Listen::Tls);
    let url = nginx.url("https", "localhost", "/file");
    let (out, lines) = run_at(&nginx, &[&url, "--rps", "20", "--duration", "1"]);
    assert_eq!(out.code(), 1, "an unverified server must not pass:\n{}", out.stderr);
    assert!(lines.is_empty(), "nginx answered nothing: {lines:?}");
    assert!(out.stderr.contains("invalid peer certificate"), "{}", out.stderr);
    assert!(out.stderr.contains("UnknownIssuer"), "{}", out.stderr);
    assert!(out.stderr.contains("SNI localhost"), "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 0);
    assert!(counter(&g, "upstream_cx_connect_fail") >= 1);
    assert_eq!(counter(&g, "ssl.handshake"), 0);
}

#[test]
fn wrong_server_name_is_rejected() {
    // Trusted CA, but the certificate is not for this name.
    let nginx = Nginx::start(Listen::Tls);
    let ca = nginx.ca();
    let url = nginx.url("https", "127.0.0.1", "/file");
    let (out, lines) =
        run_at(&nginx, &[&url, "--tls-ca", &ca, "--tls-sni", "example.com", "--duration", "1"]);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("not valid for name \"example.com\""), "{}", out.stderr);
    assert!(lines.is_empty(), "nginx answered nothing: {lines:?}");
}

#[test]
fn tls_ca_and_tls_insecure_make_it_pass() {
    let nginx = Nginx::start(Listen::Tls);
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/file");
    for extra in [vec!["--tls-ca", ca.as_str()], vec!["--tls-insecure"]] {
        let mut args = vec![url.as_str(), "--rps", "20", "--duration", "1"];
        args.extend_from_slice(&extra);
        let (out, lines) = run_at(&nginx, &args);
        assert_eq!(out.code(), 0, "{extra:?}:\n{}", out.stderr);
        let g = global(&json(&out)).clone();
        assert_eq!(counter(&g, "benchmark.http_2xx"), 20, "{extra:?}");
        assert!(counter(&g, "ssl.handshake") >= 1, "{extra:?}");
        // Each connection nginx served requests on was one the client handshook.
        let on = served_on(&lines);
        assert!((1..=counter(&g, "ssl.handshake")).contains(&on), "{extra:?}: nginx saw {on}");
        assert!(lines.iter().all(|e| e.ssl_protocol.starts_with("TLSv1.")), "{lines:?}");
    }
}

#[test]
fn version_and_cipher_pinning_are_honoured() {
    // nginx offers TLS 1.3 and 1.2 (1.22 offers 1.3 only when told), and left to itself
    // negotiates 1.3 with this client: only the pins make it 1.2 and the AES-128 suite.
    let nginx = Nginx::start_with(Listen::Tls, "ssl_protocols TLSv1.2 TLSv1.3;");
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/file");
    let (out, lines) = run_at(&nginx, &[&url, "--tls-ca", &ca, "--rps", "5", "--duration", "1"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(lines.iter().all(|e| e.ssl_protocol == "TLSv1.3"), "unpinned: {lines:?}");
    let (out, lines) = run_at(
        &nginx,
        &[
            &url,
            "--tls-ca",
            &ca,
            "--tls-max-version",
            "1.2",
            "--tls-cipher-suites",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "--rps",
            "10",
            "--duration",
            "1",
        ],
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(lines.len(), 10);
    // nginx negotiated what was pinned: TLS 1.2 and that suite (OpenSSL's name for it).
    for e in &lines {
        assert_eq!(
            (e.ssl_protocol.as_str(), e.ssl_cipher.as_str()),
            ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
        );
    }
    // A suite the server's ECDSA key cannot use: the handshake must fail, not fall back.
    let (out, lines) = run_at(
        &nginx,
        &[
            &url,
            "--tls-ca",
            &ca,
            "--tls-cipher-suites",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-max-version",
            "1.2",
            "--duration",
            "1",
        ],
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("TLS handshake"), "{}", out.stderr);
    assert!(lines.is_empty(), "nginx answered nothing: {lines:?}");
}

/// One TLS connection per request, 20 of them; the run's result and nginx's log of it.
fn resumption_run(nginx: &Nginx, extra: &[&str]) -> (serde_json::Value, Vec<LogEntry>) {
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/file");
    let mut args = vec![
        url.as_str(),
        "--tls-ca",
        &ca,
        "--max-requests-per-connection",
        "1",
        "--connections",
        "1",
        "--rps",
        "20",
        "--duration",
        "1",
    ];
    args.extend_from_slice(extra);
    let (out, lines) = run_at(nginx, &args);
    assert_eq!(out.code(), 0, "{extra:?}:\n{}", out.stderr);
    assert_eq!(served_on(&lines), 20, "{extra:?}: nginx saw one connection per request");
    (global(&json(&out)).clone(), lines)
}

#[test]
fn sessions_resume_unless_disabled() {
    // nginx 1.22 (Debian 12's) offers TLS 1.3 only when told to: its log showed this test's
    // "1.3" runs negotiating TLS 1.2.
    let nginx = Nginx::start_with(Listen::Tls, "ssl_protocols TLSv1.2 TLSv1.3;");
    for version in ["1.3", "1.2"] {
        let protocol = format!("TLSv{version}");
        // nginx's own word on each connection: the version, and whether it resumed.
        let resumed = |lines: &[LogEntry]| {
            assert!(lines.iter().all(|e| e.ssl_protocol == protocol), "{lines:?}");
            lines.iter().filter(|e| e.ssl_session_reused == "r").count() as u64
        };
        let (g, lines) = resumption_run(&nginx, &["--tls-max-version", version]);
        assert_eq!(counter(&g, "ssl.handshake"), 20, "TLS {version}: one connection per request");
        let reused = counter(&g, "ssl.session_reused");
        assert!(reused >= 10, "TLS {version}: recycled connections resume, got {reused}");
        assert_eq!(resumed(&lines), reused, "TLS {version}: sessions nginx resumed");
        let (g, lines) =
            resumption_run(&nginx, &["--tls-max-version", version, "--tls-no-session-resumption"]);
        assert_eq!(counter(&g, "ssl.handshake"), 20);
        assert_eq!(counter(&g, "ssl.session_reused"), 0, "TLS {version}");
        assert_eq!(resumed(&lines), 0, "TLS {version}: nginx resumed none");
    }
}

#[test]
fn tls_usage_errors_exit_2() {
    let dir = std::env::temp_dir().join(format!("shrike-tls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").expect("write");
    let bad_pem = dir.join("bad.pem");
    std::fs::write(&bad_pem, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        .expect("write");
    let u = "https://127.0.0.1:9/";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--tls-cipher-suites", "RC4_MD5"], "TLS13_AES_128_GCM_SHA256"),
        (vec!["--tls-ca", "/no/such/ca.pem"], "/no/such/ca.pem"),
        (vec!["--tls-ca", garbage.to_str().unwrap()], "no PEM certificates"),
        (vec!["--tls-ca", bad_pem.to_str().unwrap()], "bad.pem"),
        (vec!["--tls-min-version", "1.1"], "--tls-min-version"),
        (vec!["--tls-min-version", "1.3", "--tls-max-version", "1.2"], "version"),
        (vec!["--protocol", "bogus"], "--protocol"),
        (vec!["--protocol", "http3", "--tls-max-version", "1.2"], "requires TLS 1.3"),
        (vec!["--protocol", "http2", "--h2"], "cannot be used with"),
        (vec!["--max-active-requests", "0"], "--max-active-requests"),
        (vec!["--max-concurrent-streams", "0"], "--max-concurrent-streams"),
        (vec!["--protocol", "http2", "--tls-insecure", "--request-header", "host: a b"], "HTTP/2"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", u];
        args.extend_from_slice(&extra);
        let out = run(&args, LIMIT);
        assert_eq!(out.code(), 2, "{extra:?}:\n{}", out.stderr);
        assert!(
            out.stderr.contains(needle),
            "{extra:?} should mention {needle:?}:\n{}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
    let out = run(&["run", "http://127.0.0.1:9/", "--tls-insecure"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("https://"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn large_request_bodies_go_out_whole_over_tls() {
    // 500 kB per request is far more than a socket buffer: the h1 path must flush what
    // rustls buffers, and h2 must send it under flow control.
    let nginx = Nginx::start_with(Listen::TlsH2, "client_max_body_size 2m;");
    let ca = nginx.ca();
    let url = nginx.url("https", "localhost", "/upload");
    for (protocol, version) in [("http1", "HTTP/1.1"), ("http2", "HTTP/2.0")] {
        let (out, lines) = run_at(
            &nginx,
            &[
                &url,
                "--protocol",
                protocol,
                "--tls-ca",
                &ca,
                "--request-method",
                "POST",
                "--request-body-size",
                "500000",
                "--rps",
                "10",
                "--duration",
                "1",
            ],
        );
        assert_eq!(out.code(), 0, "{protocol}:\n{}", out.stderr);
        let g = global(&json(&out)).clone();
        assert_eq!(counter(&g, "benchmark.http_2xx"), 10, "{protocol}");
        // nginx read each body whole, over the protocol asked for.
        for e in &lines {
            assert_eq!(e.request, format!("POST /upload {version}"), "{protocol}");
            assert!(e.request_length >= 500_000, "{protocol}: {e:?}");
        }
    }
}

// ---- Handshake failures in plain words (issue 10) ----

/// `https://` pointed at a plaintext port: the error says so instead of naming a TLS record.
#[test]
fn plain_http_port_is_reported_in_plain_words() {
    let server = Server::start(&[]);
    let url = format!("https://{}/", server.addr);
    let args = ["run", &url, "--rps", "5", "--duration", "1", "--output-format", "json"];
    let (out, w) = run_witnessed(&server, &args, LIMIT);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    // The server took each connection the client opened for plain HTTP/1.1, read the
    // ClientHello as a malformed request and answered it 400; the client counted no request.
    let g = global(&json(&out)).clone();
    assert_eq!(w.count("/connections/http1"), counter(&g, "upstream_cx_total"), "{g}");
    assert_eq!(counter(&g, "upstream_rq_total"), 0, "{g}");
    assert!(w.count("/requests") <= counter(&g, "upstream_cx_total"));
    assert_eq!(w.count("/responses/4xx"), w.count("/requests"), "each a 400");
    assert!(
        out.stderr.contains("the server did not answer TLS (is it plain HTTP?)"),
        "{}",
        out.stderr
    );
}

/// A peer that resets the connection mid-handshake (closing a socket with unread data makes
/// Linux send RST) is named as such, not as an opaque I/O error.
#[test]
fn reset_during_the_handshake_is_reported_in_plain_words() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let resetter = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut resets: u64 = 0;
        while std::time::Instant::now() < deadline && resets < 50 {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).expect("blocking");
                    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
                    // Wait for the ClientHello so it sits unread when the socket closes.
                    let _ = stream.peek(&mut [0u8; 1]);
                    drop(stream);
                    resets += 1;
                }
                // Asked to stop once the client has gone: every connection it opened has been
                // accepted by now (the backlog is empty).
                Err(_) if stopped.load(std::sync::atomic::Ordering::SeqCst) => break,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        resets
    });
    let url = format!("https://127.0.0.1:{port}/");
    let out = shrike_run(&[&url, "--tls-insecure", "--rps", "5", "--duration", "1"]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("the server reset the connection during the TLS handshake"),
        "{}",
        out.stderr
    );
    // The peer's count: it reset every connection the client says it opened, and each failed.
    let resets = resetter.join().expect("the resetter ran");
    let g = global(&json(&out)).clone();
    assert_eq!(resets, counter(&g, "upstream_cx_total"), "{g}");
    assert_eq!(resets, counter(&g, "upstream_cx_connect_fail"), "{g}");
}

// ---- Self-signed `openssl req -x509` certificates pinned with --tls-ca (issue 10) ----

/// A scratch directory for openssl's output, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("shrike-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&self.0)
            .output()
            .expect("openssl is installed (.ci/run installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// `openssl req -x509` as users run it: CA:TRUE by default, SAN localhost and 127.0.0.1.
    fn self_signed(&self, name: &str) -> (String, String) {
        self.req_x509(name, "/CN=localhost", &[])
    }

    /// `openssl req -x509` with this subject and extra arguments: SAN localhost and 127.0.0.1.
    fn req_x509(&self, name: &str, subject: &str, extra: &[&str]) -> (String, String) {
        let (cert, key) = (self.path(&format!("{name}.pem")), self.path(&format!("{name}.key")));
        let mut args = vec![
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            subject,
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-keyout", &key, "-out", &cert]);
        self.openssl(&args);
        (cert, key)
    }

    /// The same kind of certificate, valid only in January 2020: this openssl (3.0) has no
    /// `req -not_before`, but `ca -selfsign` takes explicit dates.
    fn expired_self_signed(&self) -> (String, String) {
        let (cert, key, csr) = (self.path("old.pem"), self.path("old.key"), self.path("old.csr"));
        std::fs::write(
            self.0.join("ca.cnf"),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\n\
             rand_serial = yes\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n\
             [ext]\nbasicConstraints = critical,CA:TRUE\n\
             subjectAltName = DNS:localhost,IP:127.0.0.1\n",
        )
        .expect("write config");
        std::fs::write(self.0.join("index.txt"), "").expect("write index");
        self.openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &key,
            "-out",
            &csr,
        ]);
        self.openssl(&[
            "ca",
            "-config",
            "ca.cnf",
            "-selfsign",
            "-keyfile",
            &key,
            "-in",
            &csr,
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200201000000Z",
            "-extensions",
            "ext",
            "-batch",
            "-notext",
            "-out",
            &cert,
        ]);
        (cert, key)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve_cert(cert: &str, key: &str) -> TlsServer {
    TlsServer::start(&["--tls-cert", cert, "--tls-key", key])
}

/// A run whose every handshake the client refuses: the server counted each as a failed
/// handshake, as many as the client's failed connections, and served no request.
fn run_refused(server: &TlsServer, args: &[&str]) -> Output {
    let (out, g, w) = run_served(server, args);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let failed = counter(&g, "upstream_cx_connect_fail");
    assert!(failed >= 1, "{g}");
    assert_eq!(w.count("/tls/handshake_failures"), failed, "the server's failed handshakes");
    assert_eq!(w.count("/requests"), 0);
    out
}

#[test]
fn pinned_openssl_self_signed_certificate_is_trusted() {
    let dir = Scratch::new("pin-ok");
    let (cert, key) = dir.self_signed("ca-true");
    let server = serve_cert(&cert, &key);
    for url in [server.url(), format!("https://127.0.0.1:{}/", server.port)] {
        let (out, g, w) =
            run_served(&server, &[&url, "--tls-ca", &cert, "--rps", "10", "--duration", "1"]);
        assert_eq!(out.code(), 0, "{url}:\n{}", out.stderr);
        assert_eq!(counter(&g, "benchmark.http_2xx"), 10, "{url}");
        assert!(counter(&g, "ssl.handshake") >= 1, "{url}");
        assert_eq!(w.count("/tls/handshake_failures"), 0, "{url}");
        assert_eq!(w.connections(), counter(&g, "upstream_cx_total"), "{url}");
    }
}

#[test]
fn pinned_certificate_still_needs_the_right_name() {
    let dir = Scratch::new("pin-name");
    let (cert, key) = dir.self_signed("ca-true");
    let server = serve_cert(&cert, &key);
    let url = server.url();
    let out = run_refused(
        &server,
        &[&url, "--tls-ca", &cert, "--tls-sni", "example.com", "--duration", "1"],
    );
    assert!(out.stderr.contains("not valid for name \"example.com\""), "{}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);
}

#[test]
fn pinned_certificate_still_needs_to_be_in_date() {
    let dir = Scratch::new("pin-expired");
    let (cert, key) = dir.expired_self_signed();
    let server = serve_cert(&cert, &key);
    let url = server.url();
    let out = run_refused(&server, &[&url, "--tls-ca", &cert, "--duration", "1"]);
    assert!(out.stderr.contains("certificate expired"), "{}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);
}

/// Pinning trusts exactly the certificate given, not any self-signed one.
#[test]
fn a_different_self_signed_certificate_is_not_trusted() {
    let dir = Scratch::new("pin-other");
    let (served, served_key) = dir.self_signed("served");
    let (other, _) = dir.self_signed("other");
    let server = serve_cert(&served, &served_key);
    let url = server.url();
    let out = run_refused(&server, &[&url, "--tls-ca", &other, "--duration", "1"]);
    // webpki rejects a CA:TRUE server certificate before looking for its issuer, so the
    // error is CaUsedAsEndEntity, with the hint on how to fix it.
    assert!(out.stderr.contains("CaUsedAsEndEntity"), "{}", out.stderr);
    assert!(out.stderr.contains("CA:FALSE"), "hint missing:\n{}", out.stderr);
    assert_eq!(counter(global(&json(&out)), "benchmark.http_2xx"), 0);

    // The same with CA:FALSE certificates reaches the issuer lookup: UnknownIssuer. Distinct
    // subjects, or webpki would take the other certificate for the issuer (same name) and
    // report BadSignature instead.
    let leaf = |name: &str| {
        let ca_false = ["-addext", "basicConstraints=critical,CA:FALSE"];
        dir.req_x509(name, &format!("/CN={name}"), &ca_false)
    };
    let (served, served_key) = leaf("leaf-served");
    let (other, _) = leaf("leaf-other");
    let server = serve_cert(&served, &served_key);
    let url = server.url();
    let out = run_refused(&server, &[&url, "--tls-ca", &other, "--duration", "1"]);
    assert!(out.stderr.contains("UnknownIssuer"), "{}", out.stderr);
}

// ---- Generated certificates do not outlive `shrike serve --tls` (issue 10) ----

fn sigterm(server: &mut TlsServer) {
    let pid = server.child.id().to_string();
    let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            assert!(status.success(), "a first SIGTERM drains and exits 0: {status}");
            return;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn generated_certificate_directory_is_removed_at_exit() {
    let mut server = TlsServer::start(&["--tls"]);
    let cert = std::path::PathBuf::from(&server.ca);
    assert!(cert.is_file(), "tls-ca {:?} exists while serving", server.ca);
    let dir = cert.parent().expect("in a directory").to_path_buf();
    sigterm(&mut server);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn tls_cert_out_files_are_kept() {
    let out = Scratch::new("cert-out");
    let kept = out.path("kept");
    let mut server = TlsServer::start(&["--tls", "--tls-cert-out", &kept]);
    assert_eq!(server.ca, out.path("kept/cert.pem"));
    sigterm(&mut server);
    assert!(out.0.join("kept/cert.pem").is_file());
    assert!(out.0.join("kept/key.pem").is_file());
}
