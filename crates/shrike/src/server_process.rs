//! A server a command starts itself (`shrike sweep --server-cmd '…'`): run through `sh -c` in
//! its own process group, its listen address read from the first line of its stdout that
//! holds one (`shrike serve` prints it first; for others, print it, e.g. `nginx …; echo
//! 127.0.0.1:8080`), and stopped by its process group on every path: SIGTERM, then SIGKILL
//! after a grace period. Never by name. Every group started is registered until stopped, so
//! an exit that skips destructors (a second Ctrl-C) still stops them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};

/// How long it gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The process groups started and not yet stopped.
static STARTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn started() -> std::sync::MutexGuard<'static, Vec<u32>> {
    STARTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn signal_group(group: u32, sig: &str) {
    let group = format!("-{group}");
    let _ = Command::new("kill").args([sig, "--", &group]).stderr(Stdio::null()).status();
}

/// Stops every server still running, at once (SIGTERM, then SIGKILL shortly after): for an
/// exit that will not run destructors.
pub(crate) fn stop_all_started() {
    let groups = std::mem::take(&mut *started());
    for &g in &groups {
        signal_group(g, "-TERM");
    }
    if !groups.is_empty() {
        std::thread::sleep(Duration::from_millis(300));
    }
    for &g in &groups {
        signal_group(g, "-KILL");
    }
}

/// Why a server did not come up.
#[derive(Debug)]
pub(crate) enum StartError {
    /// A signal asked the command to stop while it waited.
    Interrupted,
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(e: anyhow::Error) -> StartError {
        StartError::Failed(e)
    }
}

pub(crate) struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `cmd` and waits up to `wait` for its address, checking `interrupted` meanwhile.
    pub fn start(
        cmd: &str,
        wait: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<ServerProcess, StartError> {
        use std::os::unix::process::CommandExt as _;
        let child = Command::new("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so stopping it reaches everything it started.
            .process_group(0)
            .spawn()
            .with_context(|| format!("--server-cmd {cmd:?}: cannot start sh"))?;
        started().push(child.id());
        let mut server = ServerProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let stdout = server.child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
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
        let deadline = Instant::now() + wait;
        loop {
            if let Ok(addr) = rx.recv_timeout(Duration::from_millis(50)) {
                server.addr = addr;
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(StartError::Failed(anyhow!(
                    "--server-cmd {cmd:?} exited ({status}) before printing its listen address"
                )));
            }
            if interrupted() {
                return Err(StartError::Interrupted);
            }
            if Instant::now() >= deadline {
                return Err(StartError::Failed(anyhow!(
                    "--server-cmd {cmd:?} printed no listen address (HOST:PORT) within {} \
                     (--server-start-timeout); it was stopped",
                    shrike_stats::duration::format_human_ns(wait.as_nanos() as f64)
                )));
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

    /// SIGTERM to the group, SIGKILL after the grace; the group is forgotten only once its
    /// leader is reaped, so a second Ctrl-C meanwhile still reaches it.
    fn stop(&mut self) {
        let group = self.child.id();
        if self.alive() {
            signal_group(group, "-TERM");
            let deadline = Instant::now() + STOP_GRACE;
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            // The leader (sh) may be gone while what it started lives on in the group.
            signal_group(group, "-KILL");
            let _ = self.child.wait();
        } else {
            signal_group(group, "-KILL");
        }
        started().retain(|&g| g != group);
    }
}

impl Drop for ServerProcess {
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
