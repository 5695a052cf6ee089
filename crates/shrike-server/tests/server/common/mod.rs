//! Test harness: an in-process server on 127.0.0.1:0 running on its own runtime thread, and a
//! blocking raw-socket HTTP/1.1 client. Every wait is bounded.

// A panic is how a helper fails the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shrike_server::{ServerConfig, ServerConfigBuilder, ServerTotals};

pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn build(builder: ServerConfigBuilder) -> ServerConfig {
    builder.build().expect("valid test config")
}

pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<io::Result<ServerTotals>>>,
    /// What `run` returned, once joined.
    pub totals: Option<ServerTotals>,
}

impl TestServer {
    /// A server on a current-thread runtime, as the load client embeds it.
    pub fn start(config: ServerConfig) -> Self {
        Self::start_on(config, None, false)
    }

    /// A server on a multi-thread runtime, as `shrike serve` runs it.
    pub fn start_multi(config: ServerConfig, workers: usize) -> Self {
        Self::start_on(config, Some(workers), false)
    }

    /// A server that also serves HTTP/3 on the same port number over UDP, as `shrike serve
    /// --http3` runs it. `config` must have TLS.
    pub fn start_h3(config: ServerConfig, workers: Option<usize>) -> Self {
        Self::start_on(config, workers, true)
    }

    fn start_on(config: ServerConfig, workers: Option<usize>, h3: bool) -> Self {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = match workers {
                None => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
                Some(n) => tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(n)
                    .enable_all()
                    .build()?,
            };
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let udp = if h3 { Some(std::net::UdpSocket::bind(addr)?) } else { None };
                addr_tx.send(addr).map_err(io::Error::other)?;
                let shutdown = async move {
                    // A dropped sender (the test panicked) also means stop.
                    let _ = stopped.await;
                };
                shrike_server::run_with_udp(listener, udp, Arc::new(config), shutdown).await
            })
        });
        let addr = addr_rx.recv_timeout(IO_TIMEOUT).expect("server did not start");
        Self { addr, stop: Some(stop), thread: Some(thread), totals: None }
    }

    /// Completes the shutdown future.
    pub fn signal_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits (bounded) for `run` to return and reports how long that took.
    pub fn join(&mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        let thread = self.thread.take().expect("already joined");
        while !thread.is_finished() {
            assert!(started.elapsed() < limit, "server did not stop within {limit:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        match thread.join() {
            Ok(result) => self.totals = Some(result.expect("run returned an error")),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        started.elapsed()
    }

    pub fn stop(mut self) -> Duration {
        self.signal_shutdown();
        self.join(IO_TIMEOUT)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.signal_shutdown();
        if self.thread.is_some() && !std::thread::panicking() {
            self.join(IO_TIMEOUT);
        }
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// An HTTP/2 or HTTP/3 response (from the `http2` and `http3` clients), in the same form.
    pub fn from_http(status: http::StatusCode, headers: &http::HeaderMap, body: Vec<u8>) -> Self {
        let headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        Response { status: status.as_u16(), headers, body }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn assert_filler(&self, len: usize) {
        assert_eq!(self.status, 200, "{}", self.text());
        assert_eq!(self.header("content-length"), Some(len.to_string().as_str()));
        assert_eq!(self.body.len(), len);
        assert!(self.body.iter().all(|&b| b == b'a'), "body is not all 'a'");
    }
}

/// A blocking HTTP/1.1 client over one connection that keeps unread bytes between responses,
/// so pipelined responses can be read one by one.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        Self::try_connect(addr).expect("connect")
    }

    /// `None` when the server refused the connection by resetting it, which can happen
    /// before `connect` returns: the kernel completes the handshake, and the server's RST
    /// lands before this thread runs again. Any other connect error fails the test.
    pub fn connect_unless_reset(addr: SocketAddr) -> Option<Self> {
        match Self::try_connect(addr) {
            Ok(c) => Some(c),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("connect: {e}"),
        }
    }

    fn try_connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self { stream, buf: Vec::new() })
    }

    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.stream.write_all(bytes.as_ref()).expect("write");
    }

    /// Sends `GET /` with `extra` header lines (each ending in CRLF).
    pub fn get(&mut self, extra: &str) -> Response {
        self.send(format!("GET / HTTP/1.1\r\nhost: test\r\n{extra}\r\n"));
        self.response()
    }

    /// Line breaks in `json` (readable test literals) are folded into spaces.
    pub fn get_with_config(&mut self, json: &str) -> Response {
        let json = json.replace('\n', " ");
        self.get(&format!("x-nighthawk-test-server-config: {json}\r\n"))
    }

    pub fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Reads one response; `head_request` says the body is absent whatever the length says.
    pub fn read_response(&mut self, head_request: bool) -> Response {
        let (status, headers, head_len) = loop {
            let mut slots = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut slots);
            match parsed.parse(&self.buf).expect("malformed response head") {
                httparse::Status::Complete(n) => {
                    let headers = parsed
                        .headers
                        .iter()
                        .map(|h| {
                            let value = String::from_utf8_lossy(h.value).into_owned();
                            (h.name.to_string(), value)
                        })
                        .collect::<Vec<_>>();
                    break (parsed.code.expect("status"), headers, n);
                }
                httparse::Status::Partial => {
                    assert!(self.fill() > 0, "connection closed before a complete response head");
                }
            }
        };
        self.buf.drain(..head_len);
        let mut response = Response { status, headers, body: Vec::new() };
        let no_body = head_request || matches!(status, 100..=199 | 204 | 304);
        if !no_body {
            let len: usize = response
                .header("content-length")
                .expect("response without content-length")
                .parse()
                .expect("numeric content-length");
            while self.buf.len() < len {
                assert!(self.fill() > 0, "connection closed inside a response body");
            }
            response.body = self.buf.drain(..len).collect();
        }
        response
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk).expect("read (timed out?)");
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// True when the server closed the connection (EOF or reset) with nothing left unread.
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
        }
    }
}

/// Finds a peer tool, failing with the Debian package to install when it is missing.
pub fn require_tool(binary: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|dir| dir.join(binary)).find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("`{binary}` is not installed: install the Debian package `{package}` (apt-get install {package})")
    })
}

/// Runs a command to completion within `limit`, killing it and failing otherwise.
pub fn run_tool(command: &mut Command, limit: Duration) -> Output {
    run_tool_with_input(command, &[], limit)
}

/// [`run_tool`] with `input` written to the command's stdin, which is then closed.
pub fn run_tool_with_input(command: &mut Command, input: &[u8], limit: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn peer tool");
    let mut stdin = child.stdin.take().expect("stdin");
    // A tool that exits without reading its input is not an error here.
    let _ = stdin.write_all(input);
    drop(stdin);
    // Drain the pipes concurrently so a chatty tool cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}
