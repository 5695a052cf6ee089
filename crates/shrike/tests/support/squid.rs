//! Debian's squid as a CONNECT proxy on a loopback port of its own, with its own config, log
//! and pid file in a temp dir; stopped by its pid (the child handle) when dropped. `.ci/run`
//! installs the package and keeps its system service from starting.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Squid {
    child: Child,
    pub port: u16,
    /// The TLS port (`Squid::start_tls`), whose certificate `ca.pem` in `dir` signs.
    pub tls_port: Option<u16>,
    pub dir: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind").port()
}

const SQUID: &str = "/usr/sbin/squid";

impl Squid {
    /// A proxy that tunnels to any port of 127.0.0.1 for loopback clients, except the ports in
    /// `deny` (answered 403 Forbidden).
    pub fn start(deny: &[u16]) -> Squid {
        Squid::launch(deny, false)
    }

    /// Like [`Squid::start`], also taking TLS connections (`https_port`) with a certificate
    /// for localhost and 127.0.0.1 signed by `dir/ca.pem`.
    pub fn start_tls() -> Squid {
        Squid::launch(&[], true)
    }

    fn launch(deny: &[u16], tls: bool) -> Squid {
        assert!(
            std::path::Path::new(SQUID).exists(),
            "squid is not installed: install Debian's squid package (.ci/run does)"
        );
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("shrike-squid-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        // Started as root, squid drops to its own user, which must write its logs here.
        let _ = Command::new("chmod").args(["0777", &dir.display().to_string()]).status();
        let d = dir.display();
        let tls_port = tls.then(free_port);
        let https = match tls_port {
            None => String::new(),
            Some(p) => {
                super::nginx::make_certs(&dir);
                // Read by squid's own user.
                let _ = Command::new("chmod")
                    .args(["0644", &dir.join("key.pem").display().to_string()])
                    .status();
                format!("https_port 127.0.0.1:{p} tls-cert={d}/cert.pem tls-key={d}/key.pem\n")
            }
        };
        let denied = match deny {
            [] => String::new(),
            ports => format!(
                "acl denied_ports port {}\nhttp_access deny CONNECT denied_ports\n",
                ports.iter().map(u16::to_string).collect::<Vec<_>>().join(" ")
            ),
        };
        let conf = format!(
            "{https}http_port 127.0.0.1:{port}\npid_filename {d}/squid.pid\ncache_log {d}/cache.log\n\
             access_log stdio:{d}/access.log squid\ncoredump_dir {d}\ncache deny all\n\
             shutdown_lifetime 0 seconds\nlogfile_rotate 0\npinger_enable off\nacl loopback src 127.0.0.0/8\n\
             acl CONNECT method CONNECT\n{denied}http_access allow loopback\nhttp_access deny all\n"
        );
        std::fs::write(dir.join("squid.conf"), conf).expect("conf");
        let child = Command::new(SQUID)
            .args(["-N", "-f", &dir.join("squid.conf").display().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn squid");
        let deadline = Instant::now() + Duration::from_secs(20);
        for p in std::iter::once(port).chain(tls_port) {
            while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
                let log = std::fs::read_to_string(dir.join("cache.log")).unwrap_or_default();
                assert!(Instant::now() < deadline, "squid did not start on {p}:\n{log}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Squid { child, port, tls_port, dir }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The access log's CONNECT lines once there are at least `n` (squid logs a tunnel when it
    /// closes), or what there is after a few seconds: `(result code, URL)` each, such as
    /// `("TCP_TUNNEL/200", "127.0.0.1:8080")`.
    pub fn connects(&self, n: usize) -> Vec<(String, String)> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
            // time elapsed client code/status bytes method URL …
            let lines: Vec<(String, String)> = log
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .filter(|f| f.len() > 6 && f[5] == "CONNECT")
                .map(|f| (f[3].to_string(), f[6].to_string()))
                .collect();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
