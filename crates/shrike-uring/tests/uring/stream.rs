//! The stream against real sockets on loopback: bytes in order both ways (small and large),
//! end of stream, a peer's reset, that dropping a stream with a receive in flight really
//! closes its connection, and that reads spend tokio's cooperative budget.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use shrike_uring::UringStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Runs `f` on a current-thread runtime driven the way Shrike's workers drive it.
fn on_ring<F: std::future::Future<Output = ()>>(f: impl FnOnce() -> F) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let driver = shrike_uring::install().unwrap();
        tokio::task::spawn_local(shrike_uring::drive(driver));
        tokio::time::timeout(Duration::from_secs(20), f()).await.unwrap();
    });
    drop(local);
    shrike_uring::uninstall();
}

/// A loopback listener, and a thread playing the peer on it.
fn peer<T: Send + 'static>(
    f: impl FnOnce(TcpListener) -> T + Send + 'static,
) -> (TcpListener, std::thread::JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let theirs = listener.try_clone().unwrap();
    (listener, std::thread::spawn(move || f(theirs)))
}

/// A peer that sends back whatever it reads, until the end of the stream.
fn echo_peer() -> (TcpListener, std::thread::JoinHandle<()>) {
    peer(|listener| {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0; 65536];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            s.write_all(&buf[..n]).unwrap();
        }
    })
}

fn connect(listener: &TcpListener) -> UringStream {
    let sock = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    UringStream::new(shrike_uring::current().unwrap(), sock, false).unwrap()
}

/// A frugal ring ([`shrike_uring::Ring::frugal`]) holds no buffer once each exchange is
/// done, where a plain one keeps its buffers for the next; both carry small messages and a
/// large one (read in buffer-filling chunks) intact.
#[test]
fn a_frugal_ring_holds_no_buffers_between_exchanges() {
    for frugal in [false, true] {
        let (listener, server) = echo_peer();
        on_ring(|| async move {
            let ring = shrike_uring::current().unwrap();
            if frugal {
                ring.frugal();
            }
            let mut s = connect(&listener);
            for msg in [b"ping\r\n".to_vec(), vec![7u8; 300_000], b"pong\r\n".to_vec()] {
                s.write_all(&msg).await.unwrap();
                let mut back = vec![0; msg.len()];
                s.read_exact(&mut back).await.unwrap();
                assert!(back == msg, "{} bytes came back changed", msg.len());
            }
            // The last send's completion may still be on its way: a loop turn or two.
            for _ in 0..100 {
                if !frugal || ring.held_bytes() == 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_eq!(ring.held_bytes() == 0, frugal, "held {}", ring.held_bytes());
            drop(s);
        });
        server.join().unwrap();
    }
}

#[test]
fn echoes_small_and_large_writes_in_order() {
    let (listener, server) = echo_peer();
    on_ring(|| async move {
        let mut s = connect(&listener);
        for i in 0..100u32 {
            let msg = format!("request {i}\r\n");
            s.write_all(msg.as_bytes()).await.unwrap();
            let mut back = vec![0; msg.len()];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(back, msg.as_bytes());
        }
        // 3 MiB, patterned so a reordered or repeated chunk shows: more than the send queue
        // holds, and many receive buffers' worth.
        let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let (mut r, mut w) = tokio::io::split(s);
        let writer = async {
            w.write_all(&big).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let reader = r.read_to_end(&mut got);
        let (_, n) = tokio::join!(writer, reader);
        assert_eq!(n.unwrap(), big.len());
        assert!(got == big, "echoed bytes differ");
    });
    server.join().unwrap();
}

#[test]
fn a_peer_reset_is_an_error_and_a_close_is_end_of_stream() {
    let (listener, server) = peer(|listener| {
        let (s, _) = listener.accept().unwrap();
        drop(s);
        let (s, _) = listener.accept().unwrap();
        // Unread bytes at close make it a reset.
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
    });
    on_ring(|| async move {
        let mut s = connect(&listener);
        let mut buf = [0; 16];
        assert_eq!(s.read(&mut buf).await.unwrap(), 0);
        assert_eq!(s.read(&mut buf).await.unwrap(), 0, "end of stream stays");
        let mut s = connect(&listener);
        s.write_all(b"unread").await.unwrap();
        let err = s.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    });
    server.join().unwrap();
}

#[test]
fn dropping_a_stream_mid_receive_closes_its_connection() {
    let (listener, server) = peer(|listener| {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0; 8];
        // The client's drop must reach us as end of stream, well before the timeout.
        s.read(&mut buf).unwrap()
    });
    on_ring(|| async move {
        let mut s = connect(&listener);
        let mut buf = [0; 8];
        let read = tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await;
        assert!(read.is_err(), "nothing was sent, so the read must still be waiting");
        drop(s);
        // Let a turn submit the cancellation.
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    assert_eq!(server.join().unwrap(), 0);
}

#[test]
fn reads_spend_tokios_cooperative_budget() {
    // A peer that sends faster than we read keeps every read ready at once; without the
    // budget the reading task never yields and the thread's timers (request timeouts, the
    // run's end) starve. Tokio's own sockets yield after 128 ready operations.
    let (listener, server) = peer(|listener| {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&vec![b'x'; 64 * 1024]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    on_ring(|| async move {
        let mut s = connect(&listener);
        let mut one = [0; 1];
        s.read_exact(&mut one).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Consecutive reads that return at once, 16 bytes each, from a fresh budget.
        let ready = std::future::poll_fn(|cx| {
            let mut n = 0u32;
            loop {
                let mut buf = [0; 16];
                let mut rb = tokio::io::ReadBuf::new(&mut buf);
                match std::pin::Pin::new(&mut s).poll_read(cx, &mut rb) {
                    std::task::Poll::Ready(r) => {
                        r.unwrap();
                        n += 1;
                    }
                    std::task::Poll::Pending => return std::task::Poll::Ready(n),
                }
            }
        })
        .await;
        assert!((1..=128).contains(&ready), "{ready} reads in one go");
    });
    server.join().unwrap();
}

#[test]
fn sends_go_out_while_other_tasks_keep_the_thread_busy() {
    // A spinning pacer (or any task that yields rather than waits) keeps the runtime from
    // ever parking; a send must not wait for that to end.
    let (listener, server) = peer(|listener| {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0; 4];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    on_ring(|| async move {
        let mut s = connect(&listener);
        let spin = Duration::from_millis(500);
        let spinner = tokio::task::spawn_local(async move {
            let start = std::time::Instant::now();
            while start.elapsed() < spin {
                tokio::task::yield_now().await;
            }
        });
        let start = std::time::Instant::now();
        s.write_all(b"ping").await.unwrap();
        let mut back = [0; 4];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ping");
        assert!(start.elapsed() < spin / 2, "answered after {:?}", start.elapsed());
        spinner.await.unwrap();
    });
    server.join().unwrap();
}
