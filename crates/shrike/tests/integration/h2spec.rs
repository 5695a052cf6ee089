//! HTTP/2 conformance of `shrike serve` (issue 38): h2spec, an independent conformance suite
//! (RFC 9113 and RFC 7541, 145 cases), against the server's own HTTP/2 codec over h2c and
//! over TLS. h2spec is pinned in `tests/h2spec/go.mod` and built once per test binary.
//!
//! Over h2c one case cannot pass by design: "3.5/2, invalid connection preface" sends bytes
//! that are not the preface, and the plaintext port reads them as HTTP/1.1 (it serves both
//! protocols on one port, as `curl --http2-prior-knowledge` and h2load expect), answering
//! with a 400 instead of closing at once.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::*;

fn h2spec() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let dir = BIN.get_or_init(|| {
        go_build("h2spec", &["github.com/summerwind/h2spec/cmd/h2spec"], "h2spec v2.2.1")
    });
    dir.join("h2spec")
}

/// Runs every h2spec case against 127.0.0.1:`port`; returns (cases, names of the failed ones).
fn conformance(port: &str, tls: bool) -> (usize, Vec<String>) {
    let mut cmd = Command::new(h2spec());
    cmd.args(["-h", "127.0.0.1", "-p", port, "-o", "5"]);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = wait_limited(child.spawn().expect("spawn h2spec"), Duration::from_secs(120));
    let summary = out
        .stdout
        .lines()
        .find(|l| l.ends_with(" failed") && l.contains(" tests, "))
        .unwrap_or_else(|| panic!("no h2spec summary:\n{}{}", out.stdout, out.stderr));
    let cases = summary.split(' ').next().unwrap().parse().unwrap();
    // The failures are listed again after "Failures:", each on a line starting with "×".
    let failed = out
        .stdout
        .split_once("Failures:")
        .map(|(_, rest)| {
            rest.lines().filter_map(|l| l.trim().strip_prefix("× ")).map(str::to_string).collect()
        })
        .unwrap_or_default();
    (cases, failed)
}

#[test]
fn h2c_passes_every_case_but_the_shared_ports_preface() {
    let server = Server::start(&[]);
    let port = server.addr.rsplit(':').next().unwrap();
    let (cases, failed) = conformance(port, false);
    assert!(cases >= 145, "{cases} cases");
    assert_eq!(failed, ["2: Sends invalid connection preface"], "{failed:#?}");
}

/// With `--connect-proxy` too: the proxy's streams and its extended CONNECT setting leave
/// every other stream as conformant as before.
#[test]
fn h2_over_tls_passes_every_case() {
    let server = TlsServer::start(&["--tls", "--connect-proxy"]);
    let (cases, failed) = conformance(&server.port, true);
    assert!(cases >= 145, "{cases} cases");
    assert!(failed.is_empty(), "{failed:#?}");
}
