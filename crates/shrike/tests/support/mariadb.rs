//! A private MariaDB (Debian's mariadb-server) for the MySQL replay tests: a fresh data
//! directory under a temp dir, `mariadbd` on a free loopback port (and a socket in that dir),
//! a user `replay` (password `pw`) allowed everything, stopped by its pid when dropped. A
//! missing server fails the test, naming the package.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MARIADBD: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";
const CLIENT: &str = "/usr/bin/mariadb";

pub struct MariaDb {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl MariaDb {
    pub fn start(name: &str) -> MariaDb {
        for (path, package) in [
            (MARIADBD, "mariadb-server"),
            (INSTALL_DB, "mariadb-server"),
            (CLIENT, "mariadb-client"),
        ] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: install Debian's {package} (.ci/run does)"
            );
        }
        let dir =
            std::env::temp_dir().join(format!("shrike-mariadb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data");
        // Each server's own temporary directory: two bootstraps at once in the shared /tmp
        // collide on their temporary tables' names ("Could not remove temporary table").
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let out = Command::new(INSTALL_DB)
            .env("TMPDIR", &tmp)
            .args(["--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .arg("--user=root")
            .output()
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--log-error={}", dir.join("error.log").display()))
            .arg("--user=root")
            // Small and quick: the tests hold little data.
            .args([
                "--innodb-buffer-pool-size=16M",
                "--skip-name-resolve",
                "--max-connections=2000",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mariadbd");
        let db = MariaDb { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !db.sql_ok("SELECT 1") {
            let log = std::fs::read_to_string(db.dir.join("error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "mariadbd did not start:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
        db.sql("CREATE USER 'replay'@'%' IDENTIFIED BY 'pw'; GRANT ALL ON *.* TO 'replay'@'%';");
        db
    }

    /// Runs SQL as root over the socket; its output (tab-separated, no headers).
    pub fn sql(&self, sql: &str) -> String {
        let out = self.client().args(["-N", "-B", "-e", sql]).output().expect("run mariadb");
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn sql_ok(&self, sql: &str) -> bool {
        self.client().args(["-e", sql]).output().is_ok_and(|o| o.status.success())
    }

    fn client(&self) -> Command {
        let mut c = Command::new(CLIENT);
        c.arg("--no-defaults")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg("-uroot");
        c.stdin(Stdio::null());
        c
    }

    /// The client over TCP as `replay`, as an application would connect.
    pub fn tcp_client(&self) -> Command {
        let mut c = Command::new(CLIENT);
        c.args(["--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-ureplay", "-ppw"])
            .arg(format!("-P{}", self.port));
        c.stdin(Stdio::null());
        c
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
