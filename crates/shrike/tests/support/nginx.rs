//! A private nginx (Debian's package) on a free loopback port, speaking HTTP/1.1, h2c, or
//! TLS (1.2 and 1.3 unless the test says `ssl_protocols`) with HTTP/1.1 or HTTP/2, with a test
//! CA and a `localhost`/127.0.0.1 certificate made by the `openssl` CLI. Locations: `/file` (4321 bytes), `/missing` (404), `/slow` (200 after
//! 200 ms, via the echo module: Debian's `libnginx-mod-http-echo`), `/upload` (reads the whole
//! request body, then 200). A missing nginx or echo module fails the test, naming the package.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    Http1,
    H2c,
    Tls,
    TlsH2,
}

/// One access-log line.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// Unix time of the log write (the response's end), millisecond resolution.
    pub secs: f64,
    pub remote_addr: String,
    /// Request line, headers and body, in bytes.
    pub request_length: u64,
    /// nginx's connection serial number, and which request of that connection this was.
    pub connection: u64,
    pub connection_requests: u64,
    /// The status nginx answered (499 when the client closed first).
    pub status: u16,
    /// Over TLS: the version (`TLSv1.3`), the cipher (OpenSSL's name) and whether the session
    /// was resumed (`r`) or not (`.`); `-` each in plaintext.
    pub ssl_protocol: String,
    pub ssl_cipher: String,
    pub ssl_session_reused: String,
    /// The server name the client asked for (SNI), `-` without one.
    pub ssl_server_name: String,
    /// The Host header as sent.
    pub host: String,
    pub request: String,
}

pub struct Nginx {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

const ECHO_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_echo_module.so";

fn nginx_binary() -> &'static str {
    for p in ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"] {
        if Path::new(p).exists() {
            return p;
        }
    }
    panic!("nginx is not installed: install Debian's nginx package (.ci/run does)");
}

/// The `load_module` line the config needs for `echo_sleep` and `echo_read_request_body`: the
/// module Debian packages separately, or nothing when this nginx has it compiled in. Without
/// either, nginx would refuse the config with "unknown directive", which hides the cause.
fn echo_module_directive() -> String {
    if Path::new(ECHO_MODULE).exists() {
        return format!("load_module {ECHO_MODULE};\n");
    }
    let out = Command::new(nginx_binary()).arg("-V").output().expect("run nginx -V");
    // nginx -V prints its configure arguments on stderr.
    if String::from_utf8_lossy(&out.stderr).contains("echo-nginx-module") {
        return String::new();
    }
    panic!(
        "nginx's echo module is missing ({ECHO_MODULE}): install Debian's libnginx-mod-http-echo \
         (.ci/run does)"
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (Debian's openssl package)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Writes `ca.pem` (a test CA) and `cert.pem`/`key.pem` (a leaf for localhost and 127.0.0.1
/// signed by it) into `dir`.
pub fn make_certs(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Shrike Test CA"]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend(["-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=localhost"]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "1",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            "cert.pem",
        ],
    );
}

impl Nginx {
    pub fn start(listen: Listen) -> Nginx {
        Nginx::start_with(listen, "")
    }

    /// `extra` goes into the server block (e.g. `keepalive_requests 10;`, which for HTTP/2
    /// makes nginx send GOAWAY after 10 streams). Every nginx keeps an access log of
    /// `$msec $remote_addr $request_length $connection $connection_requests $status
    /// $ssl_protocol $ssl_cipher $ssl_session_reused $ssl_server_name $http_host $request` per
    /// request, read back by [`Nginx::access_log`]: the witness of what a run sent.
    pub fn start_with(listen: Listen, extra: &str) -> Nginx {
        Nginx::launch_with_log(listen, extra, Some("timing"))
    }

    /// [`Nginx::start`]; the name says the test reads the access log's timing.
    pub fn start_logged(listen: Listen) -> Nginx {
        Nginx::start(listen)
    }

    /// Like [`Nginx::start`], with an access log of each request's B3 trace headers:
    /// `$http_x_b3_traceid $http_x_b3_spanid $http_x_b3_sampled $request` ("-" when absent),
    /// read back by [`Nginx::raw_access_log`].
    pub fn start_b3_logged(listen: Listen) -> Nginx {
        Nginx::launch_with_log(listen, "", Some("b3"))
    }

    /// The access log's lines as written.
    pub fn raw_access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("logs/access.log")).unwrap_or_default()
    }

    fn launch_with_log(listen: Listen, extra: &str, log_format: Option<&str>) -> Nginx {
        // nginx needs a port in its config; take a free one from the kernel.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind")
            .port();
        let dir = std::env::temp_dir().join(format!("shrike-nginx-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("html")).expect("mkdir");
        std::fs::create_dir_all(dir.join("logs")).expect("mkdir");
        std::fs::write(dir.join("html/file"), vec![b'x'; 4321]).expect("write");
        let d = dir.display();
        let (listen_params, tls) = match listen {
            Listen::Http1 => ("", String::new()),
            Listen::H2c => (" http2", String::new()),
            Listen::Tls | Listen::TlsH2 => {
                make_certs(&dir);
                // TLS 1.3 as well as 1.2: nginx 1.22 offers 1.3 only when told.
                let protocols = match extra.contains("ssl_protocols") {
                    true => "",
                    false => "    ssl_protocols TLSv1.2 TLSv1.3;\n",
                };
                let tls = format!(
                    "    ssl_certificate {d}/cert.pem;\n    ssl_certificate_key {d}/key.pem;\n    ssl_session_cache shared:SSL:1m;\n    ssl_session_tickets on;\n{protocols}"
                );
                (if listen == Listen::TlsH2 { " ssl http2" } else { " ssl" }, tls)
            }
        };
        let log = match log_format {
            Some(f) => format!("{d}/logs/access.log {f}"),
            None => "off".into(),
        };
        let echo = echo_module_directive();
        let conf = format!(
            "{echo}daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\nhttp {{\n  log_format timing '$msec $remote_addr $request_length $connection $connection_requests $status $ssl_protocol $ssl_cipher $ssl_session_reused $ssl_server_name $http_host $request';\n  log_format b3 '$http_x_b3_traceid $http_x_b3_spanid $http_x_b3_sampled $request';\n  access_log {log};\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n  keepalive_requests 100000;\n  server {{\n    listen 127.0.0.1:{port}{listen_params};\n{tls}    {extra}\n    root {d}/html;\n    location = /missing {{ return 404; }}\n    location = /slow {{ echo_sleep 0.2; echo slow; }}\n    location = /upload {{ echo_read_request_body; echo uploaded; }}\n  }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).expect("conf");
        let child = Command::new(nginx_binary())
            .args(["-p", &d.to_string(), "-c", &dir.join("nginx.conf").display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nginx did not start on {port}:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, port, dir }
    }

    /// The access log (see [`Nginx::start_logged`]), one entry per request, in log order.
    pub fn access_log(&self) -> Vec<LogEntry> {
        let text = std::fs::read_to_string(self.dir.join("logs/access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let mut f = l.splitn(12, ' ');
                let msec: f64 = f.next().unwrap().parse().unwrap();
                LogEntry {
                    secs: msec,
                    remote_addr: f.next().unwrap().to_string(),
                    request_length: f.next().unwrap().parse().unwrap(),
                    connection: f.next().unwrap().parse().unwrap(),
                    connection_requests: f.next().unwrap().parse().unwrap(),
                    status: f.next().unwrap().parse().unwrap(),
                    ssl_protocol: f.next().unwrap().to_string(),
                    ssl_cipher: f.next().unwrap().to_string(),
                    ssl_session_reused: f.next().unwrap().to_string(),
                    ssl_server_name: f.next().unwrap().to_string(),
                    host: f.next().unwrap().to_string(),
                    request: f.next().unwrap_or_default().to_string(),
                }
            })
            .collect()
    }

    /// How many requests the access log holds: where [`Nginx::agrees`] starts counting.
    pub fn mark(&self) -> usize {
        self.access_log().len()
    }

    /// Asserts nginx logged, after `mark`, what a client's `global` result says it sent and
    /// got: one line per request, and each status class. Returns those lines.
    pub fn agrees(&self, mark: usize, g: &serde_json::Value) -> Vec<LogEntry> {
        let counter = |name: &str| super::counter(g, name);
        let lines = self.access_log().split_off(mark);
        let sent = counter("upstream_rq_total") + counter("upstream_rq_retry");
        assert_eq!(lines.len() as u64, sent, "nginx's access log against the client's requests");
        for c in 1..=5u16 {
            let logged = lines.iter().filter(|e| e.status / 100 == c).count() as u64;
            let answered = counter(&format!("benchmark.http_{c}xx"));
            assert_eq!(logged, answered, "{c}xx in nginx's access log against the client's");
        }
        lines
    }

    pub fn ca(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    pub fn url(&self, scheme: &str, host: &str, path: &str) -> String {
        format!("{scheme}://{host}:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
