//! A server a sweep starts itself (`shrike sweep --server-cmd '…'`), run through `sh -c` in
//! its own process group and stopped on every path: SIGTERM, then SIGKILL after a grace
//! period, by process group and by pid, never by name. Every group started is registered until
//! stopped, so an exit that skips destructors (a second Ctrl-C) still stops them
//! ([`stop_all_started`]).
//!
//! Its address is the target URL's when the user gave one, else the first `HOST:PORT` its
//! stdout prints (`shrike serve` prints it first). Either way it is ready only once that
//! address accepts a TCP connection: a server that prints its address before it listens, or
//! is told its address and takes a moment, is not measured while it starts.
//!
//! A server that daemonizes (nginx by default) leaves `sh` to exit at once while it runs on in
//! a session of its own: with a pid file (`--server-pid-file`) the server is the process the
//! file names, sampled, watched and stopped through it; without one, a command that exits
//! while its address answers is refused, since nothing could sample or stop what it started.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::resources::{self, Source};

/// How long it gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The process groups (and daemons' pids) started and not yet stopped.
static STARTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn started() -> std::sync::MutexGuard<'static, Vec<u32>> {
    STARTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Signals a process group and its leader's pid (a daemon's pid file names a group leader
/// when it called setsid, as nginx does, and a plain process otherwise).
fn signal(pid: u32, sig: &str) {
    for target in [format!("-{pid}"), pid.to_string()] {
        let _ = Command::new("kill")
            .args([sig, "--", &target])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Stops every server still running, at once (SIGTERM, then SIGKILL shortly after): for an
/// exit that will not run destructors.
pub fn stop_all_started() {
    let pids = std::mem::take(&mut *started());
    for &p in &pids {
        signal(p, "-TERM");
    }
    if !pids.is_empty() {
        std::thread::sleep(Duration::from_millis(300));
    }
    for &p in &pids {
        signal(p, "-KILL");
    }
}

/// Why a server did not come up.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A stop was asked for while it came up.
    #[error("interrupted while the server started")]
    Interrupted,
    #[error("{0}")]
    Failed(String),
}

/// How to start a server and know it is up.
#[derive(Clone, Debug)]
pub struct ServerCmd {
    /// Run with `sh -c`.
    pub cmd: String,
    /// Its address, when the target URL gives it; else the first it prints.
    pub addr: Option<SocketAddr>,
    /// The pid file a daemonizing server writes.
    pub pid_file: Option<PathBuf>,
    /// How long it gets to accept a connection.
    pub start_timeout: Duration,
}

pub struct ServerProcess {
    child: Child,
    pid_file: Option<PathBuf>,
    /// The daemon's pid, once its pid file named a live process.
    daemon: Option<u32>,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `how.cmd` and waits until its address accepts a connection, checking `stopped`
    /// meanwhile.
    pub fn start(how: &ServerCmd, stopped: &dyn Fn() -> bool) -> Result<ServerProcess, StartError> {
        use std::os::unix::process::CommandExt as _;
        let cmd = &how.cmd;
        let failed = |why: String| StartError::Failed(format!("--server-cmd {cmd:?} {why}"));
        let spawned = uptime();
        let child = Command::new("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so stopping it reaches everything it started.
            .process_group(0)
            .spawn()
            .map_err(|e| failed(format!("cannot start sh: {e}")))?;
        started().push(child.id());
        let mut server = ServerProcess {
            child,
            pid_file: how.pid_file.clone(),
            daemon: None,
            addr: how.addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        };
        let stdout = server.child.stdout.take().ok_or_else(|| failed("has no stdout".into()))?;
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
        let deadline = Instant::now() + how.start_timeout;
        let timeout = shrike_stats::duration::format_human_ns(how.start_timeout.as_nanos() as f64);
        let mut addr = how.addr;
        let mut exited: Option<ExitStatus> = None;
        loop {
            if addr.is_none() {
                addr = rx.recv_timeout(Duration::from_millis(50)).ok();
            }
            if exited.is_none() {
                exited = server.child.try_wait().ok().flatten();
            }
            if let Some(status) = exited {
                // A daemonizing server's `sh` exits 0 at once; whether that is what happened
                // is judged once the address answers (below).
                if !status.success() || addr.is_none() {
                    let before = match addr {
                        Some(_) => "accepting connections",
                        None => "printing its listen address",
                    };
                    return Err(failed(format!("exited ({status}) before {before}")));
                }
            }
            if let Some(a) = addr {
                if TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok() {
                    server.addr = a;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if stopped() {
                return Err(StartError::Interrupted);
            }
            if Instant::now() >= deadline {
                return Err(failed(match addr {
                    None => format!(
                        "printed no listen address (HOST:PORT) within {timeout} \
                         (--server-start-timeout); give the target URL, or make it print one; \
                         it was stopped"
                    ),
                    Some(a) => format!(
                        "did not accept a connection on {a} within {timeout} \
                         (--server-start-timeout); it was stopped"
                    ),
                }));
            }
        }
        // Up. A daemon is the process its pid file names (written, by nginx, before it
        // listens, but give it the rest of the start timeout).
        if let Some(file) = &how.pid_file {
            loop {
                if let Some(pid) = pid_in(file).filter(|p| resources::exists(*p)) {
                    server.daemon = Some(pid);
                    started().push(pid);
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(failed(format!(
                        "accepts connections, but {} names no running process within {timeout}",
                        file.display()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        } else if let Ok(Some(status)) = server.child.try_wait() {
            // Whatever it left listening there, started since it was, is stopped: nothing the
            // sweep started is left running, and a server that was there before is left be.
            let stray = listeners_started_since(server.addr, spawned);
            for &pid in &stray {
                signal(pid, "-TERM");
            }
            let deadline = Instant::now() + STOP_GRACE;
            while stray.iter().any(|p| resources::exists(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            for &pid in stray.iter().filter(|p| resources::exists(**p)) {
                signal(pid, "-KILL");
            }
            let stopped = match stray.is_empty() {
                true => String::new(),
                false => format!(" (the sweep stopped what it left listening: pid {stray:?})"),
            };
            return Err(failed(format!(
                "exited ({status}) while {} accepts connections: it daemonized{stopped}. Give \
                 --server-pid-file FILE so the sweep can sample and stop it, or run it in the \
                 foreground (nginx: -g 'daemon off;')",
                server.addr
            )));
        }
        Ok(server)
    }

    /// What the sampler reads: the daemon's pid file, or the process tree of `sh`.
    pub fn source(&self) -> Source {
        match &self.pid_file {
            Some(f) => Source::PidFile(f.clone()),
            None => Source::Tree(self.child.id()),
        }
    }

    /// `None` while it runs; else how it ended, in words.
    pub fn exited(&mut self) -> Option<String> {
        match (&self.pid_file, self.daemon) {
            (Some(file), Some(pid)) => {
                let now = pid_in(file);
                match now.filter(|p| resources::exists(*p)) {
                    Some(_) => None,
                    None => {
                        Some(format!("its process (pid {pid}, from {}) exited", file.display()))
                    }
                }
            }
            _ => match self.child.try_wait() {
                Ok(None) => None,
                Ok(Some(status)) => Some(format!("it exited ({status})")),
                Err(e) => Some(format!("it cannot be waited for: {e}")),
            },
        }
    }

    /// SIGTERM to the group (and the daemon), SIGKILL after the grace; forgotten only once
    /// stopped, so a second Ctrl-C meanwhile still reaches them.
    fn stop(&mut self) {
        let group = self.child.id();
        let daemon = self.daemon.filter(|p| resources::exists(*p));
        let running = |s: &mut ServerProcess| {
            matches!(s.child.try_wait(), Ok(None)) || daemon.is_some_and(resources::exists)
        };
        if running(self) {
            signal(group, "-TERM");
            if let Some(d) = daemon {
                signal(d, "-TERM");
            }
            let deadline = Instant::now() + STOP_GRACE;
            while running(self) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // The leader (sh) may be gone while what it started lives on in the group.
        signal(group, "-KILL");
        if let Some(d) = daemon {
            signal(d, "-KILL");
        }
        let _ = self.child.wait();
        started().retain(|&g| g != group && Some(g) != self.daemon);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Seconds since boot (the clock process start times count on).
fn uptime() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The processes listening on `addr` (TCP) that started at or after `since` (seconds since
/// boot): the listening sockets' inodes from /proc/net/tcp{,6}, then every process holding
/// one (as `ss -p` finds them).
fn listeners_started_since(addr: SocketAddr, since: f64) -> Vec<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT; state 0A is LISTEN; the inode is field 9.
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let port = local.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && port == Some(addr.port()) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    let mut pids = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return pids };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else { continue };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
        });
        if holds && started_at(pid).is_some_and(|t| t >= since - 0.01) {
            pids.push(pid);
        }
    }
    pids
}

/// When a process started, in seconds since boot (field 22 of its stat, in USER_HZ ticks).
fn started_at(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let start: f64 = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()?;
    Some(start / 100.0)
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
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
