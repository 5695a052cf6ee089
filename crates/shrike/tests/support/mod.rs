//! Helpers for end-to-end tests: run the real `shrike` binary with a hard time limit, start
//! its test server on 127.0.0.1:0, and read JSON results back.
// Each test binary uses a part of this.
#![allow(dead_code, unused_imports)]

pub mod capture;
pub mod dice;
pub mod h2_frames;
pub mod h2_wire;
pub mod hostile;
pub mod hosts;
pub mod mariadb;
pub mod nginx;
pub mod page;
pub mod squid;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How the `timing` binary's tests share the machine: one that needs it to itself runs
/// [`alone`]; searches that judge latency against a bound run [`quiet`], a few together but
/// never beside an `alone` test. (Cargo runs the `timing` binary after the `integration`
/// binary, never beside it.)
#[derive(Default)]
struct Machine {
    alone: bool,
    quiet: usize,
}

static MACHINE: std::sync::Mutex<Machine> =
    std::sync::Mutex::new(Machine { alone: false, quiet: 0 });
static MACHINE_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// `quiet` tests that may run together: two, as when each latency search had a test binary
/// of its own and cargo's two test threads.
const QUIET_AT_ONCE: usize = 2;

/// A test's hold on the machine, released when dropped (a failed test's too).
pub struct Hold {
    alone: bool,
}

fn machine() -> std::sync::MutexGuard<'static, Machine> {
    // A panic never happens while the lock is held; a poisoned lock is still consistent.
    MACHINE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn hold(alone: bool) -> Hold {
    let mut m = machine();
    loop {
        let free = !m.alone && if alone { m.quiet == 0 } else { m.quiet < QUIET_AT_ONCE };
        if free {
            break;
        }
        m = MACHINE_FREED.wait(m).unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    if alone {
        m.alone = true;
    } else {
        m.quiet += 1;
    }
    Hold { alone }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut m = machine();
        if self.alone {
            m.alone = false;
        } else {
            m.quiet -= 1;
        }
        MACHINE_FREED.notify_all();
    }
}

/// The machine to this test alone, for the whole of it.
pub fn alone() -> Hold {
    hold(true)
}

/// The machine shared with at most one other `quiet` test, and no `alone` one.
pub fn quiet() -> Hold {
    hold(false)
}

pub fn shrike() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shrike"))
}

#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
}

/// Waits for `child` up to `limit`, killing it (and failing the test) if it overruns.
pub fn wait_limited(mut child: Child, limit: Duration) -> Output {
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err_reader.join().unwrap_or_default();
            panic!("process did not finish within {limit:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// Starts `shrike <args>` with its output piped (for [`wait_limited`]), as a test that acts on
/// it meanwhile (a signal, a server it kills) needs it.
pub fn spawn(args: &[&str]) -> Child {
    shrike()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shrike")
}

/// Runs `shrike <args>` to completion within `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    wait_limited(spawn(args), limit)
}

/// Starts `shrike serve --listen 127.0.0.1:0 <args>`; its first two stdout lines (the bound
/// address, then `tls-ca: PATH` with a generated certificate) arrive trimmed on the channel.
fn spawn_serve(args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = shrike()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shrike serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        for _ in 0..2 {
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line.trim().to_string());
        }
    });
    (child, rx)
}

/// `shrike serve` on 127.0.0.1:0; the bound address is read from its first stdout line.
pub struct Server {
    child: Child,
    pub addr: String,
}

/// `args` with `--stats-path` [`WITNESS_STATS`] unless they name a stats path: every test
/// server can be asked what it counted.
fn with_stats<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    if !args.contains(&"--stats-path") {
        all.extend(["--stats-path", WITNESS_STATS]);
    }
    all
}

impl Server {
    /// Serves with `extra`, and its own counts at [`WITNESS_STATS`] unless `extra` names
    /// another `--stats-path`.
    pub fn start(extra: &[&str]) -> Server {
        let (child, lines) = spawn_serve(&with_stats(extra));
        let addr = lines.recv_timeout(Duration::from_secs(10)).expect("server printed its address");
        assert!(addr.starts_with("127.0.0.1:"), "unexpected first line {addr:?}");
        Server { child, addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the server now (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's own counts, fetched with curl from its `--stats-path` (`path`).
    pub fn stats(&self, path: &str) -> serde_json::Value {
        Counted::stats(self, path)
    }
}

/// A `shrike serve` whose `--stats-path` document a test reads with curl over HTTP/1.1 (so
/// each read is one HTTP/1.1 connection the server counts, and over TLS one handshake).
pub trait Counted {
    /// curl's arguments for `path`.
    fn curl_args(&self, path: &str) -> Vec<String>;
    /// Whether reads go over TLS.
    fn tls(&self) -> bool;

    fn stats(&self, path: &str) -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-s", "--http1.1", "--max-time", "5"])
            .args(self.curl_args(path))
            .output()
            .expect("curl runs");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("stats JSON at {path} ({e}): {}", String::from_utf8_lossy(&out.stdout))
        })
    }
}

impl Counted for Server {
    fn curl_args(&self, path: &str) -> Vec<String> {
        vec![self.url(path)]
    }
    fn tls(&self) -> bool {
        false
    }
}

/// What a `shrike serve` counted of one run: its `--stats-path` document before and after,
/// subtracted (`requests`, `responses.2xx`, `faults.reset_stream`, `proxy.refused`, …).
pub struct Witness {
    before: serde_json::Value,
    after: serde_json::Value,
    tls: bool,
}

impl Witness {
    /// Reads `server`'s counts now; [`Witness::since`] reads them again and subtracts.
    pub fn before(server: &impl Counted) -> serde_json::Value {
        server.stats(WITNESS_STATS)
    }

    /// What `server` counted since `before` was read.
    pub fn since(server: &impl Counted, before: serde_json::Value) -> Witness {
        // A response's last bytes may reach the client a moment before the server counts it.
        std::thread::sleep(Duration::from_millis(100));
        Witness { before, after: server.stats(WITNESS_STATS), tls: server.tls() }
    }

    /// How much the server's count at JSON pointer `at` (`/requests`, `/responses/5xx`,
    /// `/connections/http2`, `/connections/accepted`, `/tls/handshakes`) grew, less the second
    /// stats read's own (TCP, HTTP/1.1) connection and TLS handshake.
    pub fn count(&self, at: &str) -> u64 {
        let n = |v: &serde_json::Value| {
            v.pointer(at)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or_else(|| panic!("{at} in {v}"))
        };
        let own = match at {
            "/connections/http1" | "/connections/accepted" => 1,
            "/tls/handshakes" => u64::from(self.tls),
            _ => 0,
        };
        n(&self.after) - n(&self.before) - own
    }

    /// Connections the server served, every protocol.
    pub fn connections(&self) -> u64 {
        ["http1", "http2", "http3"].iter().map(|p| self.count(&format!("/connections/{p}"))).sum()
    }

    /// Asserts the server counted what a client's `global` result says: every request sent
    /// (resends included) and each status class answered.
    pub fn agrees(&self, g: &serde_json::Value) {
        let sent = counter(g, "upstream_rq_total") + counter(g, "upstream_rq_retry");
        assert_eq!(self.count("/requests"), sent, "the server's requests against the client's");
        for c in 1..=5 {
            let (server, client) = (
                self.count(&format!("/responses/{c}xx")),
                counter(g, &format!("benchmark.http_{c}xx")),
            );
            assert_eq!(server, client, "{c}xx answered by the server against the client's count");
        }
    }
}

/// Runs `shrike <args>` (within `limit`) against `server` and reads what the server itself
/// counted meanwhile: the witness every count the run prints is compared with.
pub fn run_witnessed(server: &impl Counted, args: &[&str], limit: Duration) -> (Output, Witness) {
    let before = Witness::before(server);
    let out = run(args, limit);
    (out, Witness::since(server, before))
}

/// [`run_witnessed`] for a run that must exit 0, with `--output-format json`: its `global`
/// result, already checked against the server's requests and status classes.
pub fn run_agreed(server: &impl Counted, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, Duration::from_secs(60));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let g = global(&json(&out)).clone();
    w.agrees(&g);
    (g, w)
}

/// The stats path [`run_witnessed`] reads: start the server with `--stats-path` this.
pub const WITNESS_STATS: &str = "/.shrike/stats";

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A result's options without its run id: what a re-run of it must record alike (its id is
/// its own).
pub fn options_but_id(v: &serde_json::Value) -> serde_json::Value {
    let mut o = v["options"].clone();
    o.as_object_mut().expect("options").remove("execution_id");
    o
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!("stdout is not JSON ({e}); stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr)
    })
}

/// The `global` result of a JSON output.
pub fn global(v: &serde_json::Value) -> &serde_json::Value {
    v["results"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "global"))
        .expect("a global result")
}

/// A counter's value in a result (0 when absent: only non-zero counters are written).
pub fn counter(result: &serde_json::Value, name: &str) -> u64 {
    result["counters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .map(|c| c["value"].as_str().expect("uint64 as string").parse().expect("number"))
        .unwrap_or(0)
}

pub fn statistic<'a>(result: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    result["statistics"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or_else(|| panic!("statistic {id} present"))
}

/// The duration (seconds) at a percentile of a statistic, from the JSON percentile list.
pub fn percentile_secs(stat: &serde_json::Value, q: f64) -> f64 {
    let ps = stat["percentiles"].as_array().expect("percentiles");
    let p = ps
        .iter()
        .find(|p| p["percentile"].as_f64().expect("percentile") >= q)
        .expect("percentile point");
    secs(&p["duration"])
}

pub fn secs(v: &serde_json::Value) -> f64 {
    v.as_str().and_then(|s| s.strip_suffix('s')).and_then(|s| s.parse().ok()).expect("duration")
}

/// Runs `shrike <args> --output-format json`, asserts exit code 0, and returns the JSON.
pub fn run_json_ok(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let out = run(&all, Duration::from_secs(30));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    json(&out)
}

/// `shrike serve --listen 127.0.0.1:0 <args>` with TLS. The bound address is stdout line 1;
/// a generated certificate is announced on line 2 as `tls-ca: PATH` (empty `ca` when the
/// certificate was given instead).
pub struct TlsServer {
    pub child: Child,
    pub port: String,
    pub ca: String,
}

impl TlsServer {
    /// Serves with `args`, and its own counts at [`WITNESS_STATS`] unless `args` name another
    /// `--stats-path`.
    pub fn start(args: &[&str]) -> TlsServer {
        let (child, rx) = spawn_serve(&with_stats(args));
        let addr = rx.recv_timeout(Duration::from_secs(10)).expect("address line");
        let ca = match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) if line.starts_with("tls-ca: ") => line["tls-ca: ".len()..].to_string(),
            _ => String::new(),
        };
        let port = addr.rsplit(':').next().expect("port").to_string();
        TlsServer { child, port, ca }
    }

    /// The certificates these tests use name localhost.
    pub fn url(&self) -> String {
        format!("https://localhost:{}/", self.port)
    }

    /// The `--stats-path` document at `path`.
    pub fn stats(&self, path: &str) -> serde_json::Value {
        Counted::stats(self, path)
    }
}

impl Counted for TlsServer {
    fn curl_args(&self, path: &str) -> Vec<String> {
        let url = format!("https://localhost:{}{path}", self.port);
        if self.ca.is_empty() {
            vec!["--insecure".into(), url]
        } else {
            vec!["--cacert".into(), self.ca.clone(), url]
        }
    }
    fn tls(&self) -> bool {
        true
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Go toolchain: `go` on PATH, or the official install's /usr/local/go/bin/go (.ci/run
/// installs golang-go when there is neither).
pub fn go() -> std::path::PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("go")).find(|g| g.is_file()));
    on_path
        .or_else(|| Some(std::path::PathBuf::from("/usr/local/go/bin/go")).filter(|g| g.is_file()))
        .expect("Go toolchain (go on PATH or /usr/local/go/bin/go; .ci/run installs golang-go)")
}

/// Builds Go packages from the module in `tests/DIR` (its versions pinned in go.mod and
/// go.sum) into a directory under the Cargo target dir, with the build and module caches there
/// too, so later runs only relink; returns the directory. `what` names the build in errors.
pub fn go_build(dir: &str, packages: &[&str], what: &str) -> std::path::PathBuf {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let bin = tmp.join(format!("{dir}-bin"));
    std::fs::create_dir_all(&bin).expect("mkdir");
    let child = Command::new(go())
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(dir))
        .args(["build", "-o"])
        .arg(&bin)
        .args(packages)
        // One build cache for every Go build of the tests, so the standard library is shared.
        .env("GOCACHE", tmp.join("gocache"))
        .env("GOMODCACHE", tmp.join("gomodcache"))
        // Go makes its module cache read-only by default, which would break `cargo clean`.
        .env("GOFLAGS", "-modcacherw -mod=readonly")
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn go build");
    // A cold build compiles the programs and their dependencies; leave room for a slower
    // machine and the module download.
    let out = wait_limited(child, Duration::from_secs(300));
    if out.code() != 0 {
        // What Go prints when the proxy is unreachable, refuses, or is turned off.
        let fetch = ["GOPROXY", "dial tcp", "no such host", "reading https://", "go: downloading"]
            .iter()
            .any(|s| out.stderr.contains(s));
        let why = if fetch {
            format!("could not fetch {what} (and its go.sum dependencies) from the Go module proxy")
        } else {
            format!("go build of tests/{dir} ({what}) failed")
        };
        panic!(
            "{why}; go said:
{}",
            out.stderr
        );
    }
    bin
}

/// A fresh directory for one test's files, named after the test binary's process, `name` and
/// a count (every test of the binary shares the process, and two may pick the same name).
pub fn scratch(name: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("shrike-test-{pid}-{n}-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// `shrike service --listen 127.0.0.1:0 <args>` (loopback: no token needed); the bound
/// address is its first stdout line. Killed on drop.
pub struct Service {
    pub child: Child,
    pub addr: String,
}

impl Service {
    pub fn start(args: &[&str]) -> Service {
        Service::start_with(shrike().args(["service", "--listen", "127.0.0.1:0"]).args(args))
    }

    /// A service from a prepared `shrike service` command (extra environment, say).
    pub fn start_with(cmd: &mut Command) -> Service {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn shrike service");
        let mut addr = String::new();
        BufReader::new(child.stdout.take().expect("stdout piped"))
            .read_line(&mut addr)
            .expect("the service printed its address");
        Service { child, addr: addr.trim().to_string() }
    }

    /// The address as Nighthawk's flags take it.
    pub fn uri(&self) -> String {
        format!("grpc://{}", self.addr)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
