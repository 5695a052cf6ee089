//! A server a command starts itself (`shrike sweep --server-cmd '…'`): run through `sh -c` in
//! its own process group, its listen address read from the first line of its stdout that
//! holds one (`shrike serve` prints it first; for others, print it, e.g. `nginx …; echo
//! 127.0.0.1:8080`), and stopped by its process group on every path: SIGTERM, then SIGKILL
//! after a grace period. Never by name.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};

/// How long a server gets to print its address.
const LISTEN_WAIT: Duration = Duration::from_secs(15);
/// How long it gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);

pub(crate) struct ServerCmd {
    child: Child,
    pub addr: SocketAddr,
}

impl ServerCmd {
    pub fn start(cmd: &str) -> anyhow::Result<ServerCmd> {
        use std::os::unix::process::CommandExt as _;
        let mut child = Command::new("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so stopping it reaches everything it started.
            .process_group(0)
            .spawn()
            .with_context(|| format!("--server-cmd {cmd:?}: cannot start sh"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let mut sent = false;
            while let Some(Ok(line)) = lines.next() {
                if !sent {
                    if let Some(addr) = find_addr(&line) {
                        let _ = tx.send(addr);
                        sent = true;
                    }
                }
                // Keep draining so the server never blocks on a full pipe.
            }
        });
        let deadline = Instant::now() + LISTEN_WAIT;
        let mut server = ServerCmd { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        loop {
            if let Ok(addr) = rx.recv_timeout(Duration::from_millis(50)) {
                server.addr = addr;
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(anyhow!(
                    "--server-cmd {cmd:?} exited ({status}) before printing its listen address"
                ));
            }
            if Instant::now() >= deadline {
                server.stop();
                return Err(anyhow!(
                    "--server-cmd {cmd:?} printed no listen address (HOST:PORT) within {}s",
                    LISTEN_WAIT.as_secs()
                ));
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        let group = format!("-{}", self.child.id());
        let signal = |sig: &str| {
            let _ = Command::new("kill").args([sig, "--", &group]).stderr(Stdio::null()).status();
        };
        signal("-TERM");
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal("-KILL");
        let _ = self.child.wait();
    }
}

impl Drop for ServerCmd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The first `HOST:PORT` (IPv4, or `[v6]:port`) in `line`, port not 0.
fn find_addr(line: &str) -> Option<SocketAddr> {
    line.split(|c: char| c.is_whitespace() || c == '/' || c == ',')
        .filter_map(|w| w.trim_matches(|c: char| c == '"' || c == '\'').parse::<SocketAddr>().ok())
        .find(|a| a.port() != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_address_in_a_line() {
        assert_eq!(find_addr("127.0.0.1:8080").unwrap().port(), 8080);
        assert_eq!(find_addr("listening on http://127.0.0.1:9/ now").unwrap().port(), 9);
        assert_eq!(find_addr("[::1]:443").unwrap().port(), 443);
        assert!(find_addr("tls-ca: /tmp/x.pem").is_none());
        assert!(find_addr("127.0.0.1:0").is_none());
    }
}
