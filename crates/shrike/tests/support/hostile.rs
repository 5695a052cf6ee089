//! A server that misbehaves on purpose, for the client's hardening tests
//! (`tests/integration/hostile_peers.rs`). Each [`Case`] is one way a peer can break HTTP/1.1 ([`H1`]) or
//! HTTP/2 ([`H2`], prior-knowledge h2c with frames written by hand, so the fixture can break
//! rules a server library would not let it break). It listens on 127.0.0.1:0 on a thread of
//! its own (one current-thread runtime, a task per connection), tallies what it did, and stops
//! when dropped.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

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
use tokio::sync::oneshot;

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
    /// Requests whose head arrived (HTTP/1.1) or streams opened (HTTP/2).
    pub requests: AtomicU64,
    pub bytes_sent: AtomicU64,
}

impl Tally {
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Ordering::Relaxed)
    }
    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Hostile {
    pub addr: SocketAddr,
    pub tally: Arc<Tally>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    pub fn start(case: Case) -> Hostile {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let tally = Arc::new(Tally::default());
        let (stop, stopped) = oneshot::channel();
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
                    _ = accept_loop(listener, case, t) => {}
                }
            });
            // Dropping the runtime cancels every connection task and closes its socket.
        });
        Hostile { addr, tally, stop: Some(stop), thread: Some(thread) }
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

async fn accept_loop(listener: tokio::net::TcpListener, case: Case, tally: Arc<Tally>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else { continue };
        tally.connections.fetch_add(1, Ordering::Relaxed);
        let tally = tally.clone();
        tokio::spawn(async move {
            // The client hanging up mid-misbehaviour is expected: errors end the connection.
            let _ = match case {
                Case::H1(c) => h1::serve(sock, c, &tally).await,
                Case::H2(c) => h2::serve(sock, c, &tally).await,
            };
        });
    }
}

/// The sending half of a connection, counting what it sends.
struct Out<'a> {
    wr: OwnedWriteHalf,
    tally: &'a Tally,
}

impl Out<'_> {
    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.wr.write_all(bytes).await?;
        self.tally.bytes_sent.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Sends `piece` over and over until the client goes away.
    async fn forever(&mut self, piece: &[u8]) -> std::io::Result<()> {
        loop {
            self.send(piece).await?;
        }
    }
}
