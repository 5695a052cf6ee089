//! Real HTTP clients against the server: curl, ApacheBench and h2load (Debian packages `curl`,
//! `apache2-utils`, `nghttp2-client`), over HTTP/1.1 and HTTP/2 with prior knowledge (h2c) on the
//! same plaintext port. A missing tool fails the test, naming the package. TLS is in `tls.rs`.

use std::process::Command;
use std::time::Duration;

use crate::common::{require_tool, run_tool, TestServer};
use shrike_server::ServerConfig;

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

fn stdout_of(command: &mut Command) -> String {
    let output = run_tool(command, TOOL_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed: {}\n{stdout}\n{stderr}", output.status);
    stdout
}

/// The value of `label: value` in tool output.
fn field<'a>(output: &'a str, label: &str) -> &'a str {
    output
        .lines()
        .find_map(|line| line.strip_prefix(label))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {label:?} in output:\n{output}"))
}

#[test]
fn curl_gets_the_configured_response() {
    let curl = require_tool("curl", "curl");
    let server = TestServer::start(ServerConfig::default());
    let config = r#"x-nighthawk-test-server-config: {"response_body_size": 1234, "response_headers": [{"header": {"key": "x-from-config", "value": "yes"}}]}"#;
    let out = stdout_of(
        Command::new(&curl)
            .args(["-sS", "-i", "--max-time", "10", "-H", config])
            .arg(server.url("/")),
    );
    let (head, body) = out.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("\r\nx-from-config: yes"), "{head}");
    assert!(head.contains("\r\ncontent-length: 1234"), "{head}");
    assert!(head.contains("\r\nserver: shrike"), "{head}");
    assert_eq!(body.len(), 1234);
    assert!(body.bytes().all(|b| b == b'a'));
}

#[test]
fn curl_uploads_with_expect_continue_and_chunked() {
    let curl = require_tool("curl", "curl");
    let server = TestServer::start(ServerConfig::default());
    let dir = std::env::temp_dir().join(format!("shrike-server-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("upload.bin");
    // Over curl's 1 MiB threshold, so it sends `Expect: 100-continue` and waits for our 100.
    std::fs::write(&file, vec![b'u'; 2 << 20]).expect("write upload");
    let data = format!("@{}", file.display());
    let output = run_tool(
        Command::new(&curl)
            .args(["-sS", "-v", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(["--expect100-timeout", "5", "--data-binary", &data])
            .arg(server.url("/upload")),
        TOOL_TIMEOUT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "200", "{stderr}");
    assert!(stderr.contains("HTTP/1.1 100 Continue"), "no interim response:\n{stderr}");

    // The same file streamed chunked, followed by a second URL on the same connection.
    let out = stdout_of(
        Command::new(&curl)
            .args(["-sS", "--max-time", "10", "-H", "transfer-encoding: chunked"])
            .args(["-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n"])
            .args(["--data-binary", &data])
            .arg(server.url("/a"))
            .args(["-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n"])
            .arg(server.url("/b")),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out, "200 1\n200 0\n", "second request must reuse the connection");
}

#[test]
fn apache_bench_keep_alive() {
    let ab = require_tool("ab", "apache2-utils");
    let server = TestServer::start_multi(ServerConfig::default(), 2);
    let out = stdout_of(
        Command::new(&ab).args(["-k", "-n", "2000", "-c", "8", "-s", "10"]).arg(server.url("/")),
    );
    assert_eq!(field(&out, "Complete requests:"), "2000", "{out}");
    assert_eq!(field(&out, "Failed requests:"), "0", "{out}");
    assert_eq!(field(&out, "Keep-Alive requests:"), "2000", "{out}");
    assert_eq!(field(&out, "Document Length:"), "10 bytes", "{out}");
    assert_eq!(field(&out, "Server Software:"), "shrike", "{out}");
}

#[test]
fn apache_bench_without_keep_alive() {
    let ab = require_tool("ab", "apache2-utils");
    let server = TestServer::start(ServerConfig::default());
    let out = stdout_of(
        Command::new(&ab).args(["-n", "300", "-c", "4", "-s", "10"]).arg(server.url("/")),
    );
    assert_eq!(field(&out, "Complete requests:"), "300", "{out}");
    assert_eq!(field(&out, "Failed requests:"), "0", "{out}");
}

fn h2load_succeeds(extra: &[&str]) {
    let h2load = require_tool("h2load", "nghttp2-client");
    let server = TestServer::start(ServerConfig::default());
    let out = stdout_of(
        Command::new(&h2load).args(["-n", "2000", "-c", "4"]).args(extra).arg(server.url("/")),
    );
    let requests = field(&out, "requests:");
    assert!(
        requests.starts_with("2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed"),
        "{out}"
    );
    let codes = field(&out, "status codes:");
    assert!(codes.starts_with("2000 2xx"), "{out}");
}

#[test]
fn h2load_h1() {
    h2load_succeeds(&["--h1"]);
}

#[test]
fn h2load_h1_pipelined() {
    // h2load pipelines HTTP/1.1 requests when asked for several streams per connection.
    h2load_succeeds(&["--h1", "-m", "8"]);
}

#[test]
fn h2load_h2c() {
    // Without --h1, h2load speaks HTTP/2 with prior knowledge to an http:// URL.
    h2load_succeeds(&["-m", "10"]);
}

#[test]
fn curl_http2_prior_knowledge_and_http1_share_the_port() {
    let curl = require_tool("curl", "curl");
    let server = TestServer::start(ServerConfig::default());
    let config = r#"x-nighthawk-test-server-config: {"response_body_size": 1234, "response_headers": [{"header": {"key": "x-from-config", "value": "yes"}}]}"#;
    let out = stdout_of(
        Command::new(&curl)
            .args(["-sS", "--max-time", "10", "--http2-prior-knowledge", "-H", config])
            .args(["-D", "-", "-o", "/dev/null", "-w", "%{http_version} %{size_download}"])
            .arg(server.url("/")),
    );
    assert!(out.starts_with("HTTP/2 200"), "{out}");
    assert!(out.contains("\r\nx-from-config: yes\r\n"), "{out}");
    assert!(out.contains("\r\ncontent-length: 1234\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\n2 1234"), "{out}");
    let out = stdout_of(
        Command::new(&curl)
            .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_version}"])
            .arg(server.url("/")),
    );
    assert_eq!(out, "1.1");
    // `Upgrade: h2c` is ignored: the answer is a plain HTTP/1.1 response.
    let out = stdout_of(
        Command::new(&curl)
            .args(["-sS", "--max-time", "10", "--http2", "-o", "/dev/null"])
            .args(["-w", "%{http_version} %{http_code}"])
            .arg(server.url("/")),
    );
    assert_eq!(out, "1.1 200");
}

#[test]
fn curl_h2c_uploads_are_consumed_and_capped() {
    let curl = require_tool("curl", "curl");
    let server = TestServer::start(ServerConfig::default());
    let dir = std::env::temp_dir().join(format!("shrike-server-h2c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let upload = |name: &str, size: usize| {
        let file = dir.join(name);
        std::fs::write(&file, vec![b'u'; size]).expect("write upload");
        stdout_of(
            Command::new(&curl)
                .args(["-sS", "--max-time", "10", "--http2-prior-knowledge", "-o", "/dev/null"])
                .args(["-w", "%{http_version} %{http_code}"])
                .args(["--data-binary", &format!("@{}", file.display())])
                .arg(server.url("/upload")),
        )
    };
    let within = upload("within.bin", 4 << 20);
    let over = upload("over.bin", (4 << 20) + 1);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(within, "2 200");
    assert_eq!(over, "2 413");
}
