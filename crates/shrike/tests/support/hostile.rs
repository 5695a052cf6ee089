//! A server that misbehaves on purpose, for the client's hardening tests
//! (`tests/integration/hostile_peers.rs`). Each [`Case`] is one way a peer can break HTTP/1.1 ([`H1`]) or
//! HTTP/2 ([`H2`], prior-knowledge h2c with frames written by hand, so the fixture can break
//! rules a server library would not let it break). It listens on 127.0.0.1:0 on a thread of
//! its own (one current-thread runtime, a task per connection), tallies what it did, and stops
//! when dropped.
#![allow(dead_code)]

#[path = "hostile/h1.rs"]
mod h1;
#[path = "hostile/h2.rs"]
mod h2;

pub use h1::{Close, H1};
pub use h2::H2;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};

/// What the server does to every connection.
#[derive(Clone, Copy, Debug)]
pub enum Case {
    H1(H1),
    H2(H2),
}

/// What the server did, read by the test after (or during) a run.
#[derive(Debug, Default)]
pub struct Tally {
    pub connections: AtomicU64,
    /// Connections whose handling has ended (the client gone, or the case done with it).
    pub closed: AtomicU64,
    /// Requests whose head arrived (HTTP/1.1) or streams opened (HTTP/2).
    pub requests: AtomicU64,
    /// Well-formed responses sent whole, within any client's limits: what a client may count
    /// as answered (a 200 every one).
    pub answers: AtomicU64,
    /// Bytes the kernel took from the server (a write cut short by the client's close counts
    /// what it wrote).
    pub bytes_sent: AtomicU64,
    /// Bytes the server read off its connections.
    pub bytes_received: AtomicU64,
}

/// The tally's counts at one moment; [`Counts::since`] is what happened between two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub connections: u64,
    pub requests: u64,
    pub answers: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl Counts {
    pub fn since(self, before: Counts) -> Counts {
        Counts {
            connections: self.connections - before.connections,
            requests: self.requests - before.requests,
            answers: self.answers - before.answers,
            bytes_sent: self.bytes_sent - before.bytes_sent,
            bytes_received: self.bytes_received - before.bytes_received,
        }
    }
}

impl Tally {
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    pub fn answers(&self) -> u64 {
        self.answers.load(Ordering::Relaxed)
    }
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Ordering::Relaxed)
    }
    pub fn bytes_received(&self) -> u64 {
        self.bytes_received.load(Ordering::Relaxed)
    }
    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    fn answered(&self) {
        self.answers.fetch_add(1, Ordering::Relaxed);
    }
    fn received(&self, n: usize) {
        self.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn now(&self) -> Counts {
        Counts {
            connections: self.connections(),
            requests: self.requests(),
            answers: self.answers(),
            bytes_sent: self.bytes_sent(),
            bytes_received: self.bytes_received(),
        }
    }

    /// The counts once every connection accepted so far has been handled to its end (the
    /// client gone, so every read and write is counted), waiting up to five seconds.
    fn settled(&self) -> Counts {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.closed.load(Ordering::Relaxed) < self.connections() {
            assert!(
                std::time::Instant::now() < deadline,
                "the hostile server still holds {} of {} connections 5 s after the client left",
                self.connections() - self.closed.load(Ordering::Relaxed),
                self.connections()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.now()
    }
}

pub struct Hostile {
    pub addr: SocketAddr,
    pub tally: Arc<Tally>,
    stop: Option<oneshot::Sender<()>>,
    /// Asks the server to accept every connection waiting in its listen queue, and to say when
    /// it has.
    catch_up: mpsc::UnboundedSender<std::sync::mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    pub fn start(case: Case) -> Hostile {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        // The same listening socket, read directly by a catch-up.
        let queue = listener.try_clone().expect("clone the listener");
        let tally = Arc::new(Tally::default());
        let (stop, stopped) = oneshot::channel();
        let (catch_up, catch_ups) = mpsc::unbounded_channel();
        let t = tally.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                tokio::select! {
                    _ = stopped => {}
                    _ = accept_loop(listener, queue, catch_ups, case, t) => {}
                }
            });
            // Dropping the runtime cancels every connection task and closes its socket.
        });
        Hostile { addr, tally, stop: Some(stop), catch_up, thread: Some(thread) }
    }

    /// The tally once the client has gone: every connection it made accepted (those still in
    /// the listen queue too) and handled to its end, so each is counted, and each byte read or
    /// written. Waits up to five seconds.
    pub fn settled(&self) -> Counts {
        let (done, caught_up) = std::sync::mpsc::channel();
        self.catch_up.send(done).expect("the hostile server runs");
        caught_up
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the hostile server accepted its listen queue");
        self.tally.settled()
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A panic in the fixture must fail the test that used it, not vanish with the thread.
        if let Some(t) = self.thread.take() {
            if let Err(p) = t.join() {
                if !std::thread::panicking() {
                    std::panic::resume_unwind(p);
                }
            }
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    queue: std::net::TcpListener,
    mut catch_ups: mpsc::UnboundedReceiver<std::sync::mpsc::Sender<()>>,
    case: Case,
    tally: Arc<Tally>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((sock, _)) => handle(sock, case, &tally),
                    Err(e) => eprintln!("hostile server: accept: {e}"),
                }
            }
            Some(done) = catch_ups.recv() => {
                // Asked of the socket itself: the runtime may not have seen these yet.
                loop {
                    match queue.accept() {
                        Ok((sock, _)) => {
                            sock.set_nonblocking(true).expect("nonblocking");
                            let sock = tokio::net::TcpStream::from_std(sock).expect("register");
                            handle(sock, case, &tally);
                        }
                        // One the client gave up on before it was taken: the next may be fine.
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
                        // WouldBlock: the queue is empty.
                        Err(_) => break,
                    }
                }
                let _ = done.send(());
            }
        }
    }
}

/// Counts a connection and does the case's thing to it on a task of its own.
fn handle(sock: tokio::net::TcpStream, case: Case, tally: &Arc<Tally>) {
    tally.connections.fetch_add(1, Ordering::Relaxed);
    let tally = tally.clone();
    tokio::spawn(async move {
        // The client hanging up mid-misbehaviour is expected: errors end the connection.
        let _ = match case {
            Case::H1(c) => h1::serve(sock, c, &tally).await,
            Case::H2(c) => h2::serve(sock, c, &tally).await,
        };
        tally.closed.fetch_add(1, Ordering::Relaxed);
    });
}

/// The sending half of a connection, counting what it sends.
struct Out<'a> {
    wr: OwnedWriteHalf,
    tally: &'a Tally,
}

impl Out<'_> {
    async fn send(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        // Write by write, so the bytes of a send the client's close cut short are counted.
        while !bytes.is_empty() {
            let n = self.wr.write(bytes).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.tally.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Sends `piece` over and over until the client goes away.
    async fn forever(&mut self, piece: &[u8]) -> std::io::Result<()> {
        loop {
            self.send(piece).await?;
        }
    }
}
