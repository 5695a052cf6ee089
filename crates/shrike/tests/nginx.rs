//! Shrike against a real nginx (Debian's package) on loopback.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Nginx {
    child: Child,
    port: u16,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nginx_binary() -> String {
    for p in ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("nginx is not installed: install Debian's nginx-light (.ci/run does)");
}

impl Nginx {
    fn start() -> Nginx {
        // nginx needs a port in its config; take a free one from the kernel.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind")
            .port();
        // Tests run in parallel in one process: the port keeps each nginx's files apart.
        let dir = std::env::temp_dir().join(format!("shrike-nginx-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("html")).expect("mkdir");
        std::fs::create_dir_all(dir.join("logs")).expect("mkdir");
        std::fs::write(dir.join("html/file"), vec![b'x'; 4321]).expect("write");
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n  keepalive_requests 100000;\n  server {{\n    listen 127.0.0.1:{port};\n    root {d}/html;\n    location = /missing {{ return 404; }}\n  }}\n}}\n",
            d = dir.display()
        );
        std::fs::write(dir.join("nginx.conf"), conf).expect("conf");
        let child = Command::new(nginx_binary())
            .args([
                "-p",
                &dir.display().to_string(),
                "-c",
                &dir.join("nginx.conf").display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not start listening on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, port, _dir: TempDir(dir) }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn shrike_against_nginx_static_file() {
    let nginx = Nginx::start();
    let url = format!("http://127.0.0.1:{}/file", nginx.port);
    let out = run(
        &[
            "run",
            &url,
            "--rps",
            "200",
            "--duration",
            "1",
            "--concurrency",
            "2",
            "--connections",
            "4",
            "--output-format",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert_eq!(counter(&g, "benchmark.http_2xx"), 400);
    let body = statistic(&g, "benchmark_http_client.response_body_size");
    assert_eq!((body["raw_min"].as_str(), body["raw_max"].as_str()), (Some("4321"), Some("4321")));
    let hdr = statistic(&g, "benchmark_http_client.response_header_size");
    let min_hdr: u64 = hdr["raw_min"].as_str().expect("raw_min").parse().expect("n");
    assert!(min_hdr > 100, "nginx sends server/date/etag/... headers");
    assert!(counter(&g, "upstream_cx_rx_bytes_total") >= 400 * (4321 + min_hdr));
}

#[test]
fn nginx_404_fires_default_failure_predicate() {
    let nginx = Nginx::start();
    let url = format!("http://127.0.0.1:{}/missing", nginx.port);
    let out = run(
        &["run", &url, "--rps", "50", "--duration", "2", "--output-format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("benchmark.http_4xx:0"), "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.http_4xx") >= 1);
}
