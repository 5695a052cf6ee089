//! What `--read-coalesce` asks of the ring, against real sockets on loopback: a stamped
//! stream's reads carry when the bytes arrived, not when they were read; and a thread that
//! waits for batches in `park` sleeps until every receive in flight has completed or the
//! window has passed, whichever is first, and reads the early responses only then.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use shrike_uring::UringStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs `f` on a current-thread runtime driven as a coalescing worker drives it: the ring's
/// completions are collected in `park`, waiting at most `window`.
fn on_coalescing_ring<F: std::future::Future<Output = ()>>(
    window: Duration,
    f: impl FnOnce() -> F,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(move || assert!(shrike_uring::park(window), "no ring on this thread"))
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let driver = shrike_uring::install().unwrap();
        driver.coalesce();
        tokio::task::spawn_local(shrike_uring::drive(driver));
        tokio::time::timeout(Duration::from_secs(20), f()).await.unwrap();
    });
    drop(local);
    shrike_uring::uninstall();
}

fn connect(listener: &TcpListener, stamp: bool) -> UringStream {
    let sock = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    UringStream::new(shrike_uring::current().unwrap(), sock, stamp).unwrap()
}

/// A peer that answers each 4-byte request on `conns` accepted connections, in order of
/// acceptance, the `i`th connection's answer `delays[i]` after its request.
fn peer(delays: Vec<Duration>) -> (TcpListener, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let theirs = listener.try_clone().unwrap();
    let handle = std::thread::spawn(move || {
        let conns: Vec<_> = delays.iter().map(|_| theirs.accept().unwrap().0).collect();
        let threads: Vec<_> = conns
            .into_iter()
            .zip(delays)
            .map(|(mut s, delay)| {
                std::thread::spawn(move || {
                    let mut req = [0; 4];
                    while s.read_exact(&mut req).is_ok() {
                        std::thread::sleep(delay);
                        if s.write_all(&req).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
    (listener, handle)
}

#[test]
fn a_stamped_read_carries_when_the_bytes_arrived() {
    let (listener, server) = peer(vec![Duration::ZERO, Duration::ZERO]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let driver = shrike_uring::install().unwrap();
        tokio::task::spawn_local(shrike_uring::drive(driver));
        let mut stamped = connect(&listener, true);
        let mut plain = connect(&listener, false);
        // The kernel switches stamping on asynchronously: retry until a read is stamped.
        let began = Instant::now();
        loop {
            for s in [&mut stamped, &mut plain] {
                s.write_all(b"ping").await.unwrap();
            }
            // The answers arrive now and wait in their sockets; no receive is in flight.
            // The wait is long so that a peer thread delayed on a loaded CI machine still
            // answers well before the read.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut back = [0; 4];
            plain.read_exact(&mut back).await.unwrap();
            assert_eq!(plain.arrival(), None, "an unstamped stream has no arrival");
            stamped.read_exact(&mut back).await.unwrap();
            let read = Instant::now();
            assert_eq!(&back, b"ping");
            if let Some(arrived) = stamped.arrival() {
                // Read 200 ms after it was sent; its arrival is the answer's, well before
                // (a stamp taken at the read would be microseconds before it).
                let waited = read - arrived;
                assert!(waited >= Duration::from_millis(50), "arrival only {waited:?} before");
                assert!(waited < Duration::from_secs(2), "arrival {waited:?} before the read");
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(5), "no receive was stamped");
        }
    });
    drop(local);
    shrike_uring::uninstall();
    server.join().unwrap();
}

#[test]
fn park_waits_for_every_receive_in_flight_or_the_window() {
    // Connection 0 is answered at once, connection 1 after 200 ms: long enough that a peer
    // thread delayed on a loaded CI machine still answers the fast one well before the slow.
    let slow = Duration::from_millis(200);
    let (listener, server) = peer(vec![Duration::ZERO, slow]);
    on_coalescing_ring(Duration::from_secs(5), || async move {
        let mut fast = connect(&listener, true);
        let mut slow_conn = connect(&listener, true);
        // Warm up until stamping is on for the fast connection (see the test above).
        let mut stamped = false;
        for _ in 0..50 {
            for s in [&mut fast, &mut slow_conn] {
                s.write_all(b"warm").await.unwrap();
            }
            let start = Instant::now();
            let (mut a, mut b) = ([0; 4], [0; 4]);
            let (ra, rb) = tokio::join!(
                async {
                    fast.read_exact(&mut a).await.unwrap();
                    (Instant::now(), fast.arrival())
                },
                async {
                    slow_conn.read_exact(&mut b).await.unwrap();
                    Instant::now()
                }
            );
            let (fast_read, fast_arrival) = ra;
            // Both receives were in flight: the fast answer is read with the slow one, not
            // before it, and not after the window (5 s).
            assert!(fast_read - start >= slow - Duration::from_millis(10), "read early");
            assert!(rb - start < Duration::from_secs(2), "waited for the window");
            if let Some(arrived) = fast_arrival {
                // Its stamp is when it arrived: well before it was read.
                assert!(fast_read - arrived >= slow / 2, "stamped {:?}", fast_read - arrived);
                stamped = true;
                break;
            }
        }
        assert!(stamped, "no receive was stamped");
    });
    server.join().unwrap();

    // Nothing else in flight: an answer alone is read after the window, not at once and not
    // never.
    let (listener, server) = peer(vec![Duration::ZERO, Duration::from_secs(30)]);
    let window = Duration::from_millis(150);
    on_coalescing_ring(window, || async move {
        let mut fast = connect(&listener, false);
        let mut never = connect(&listener, false);
        never.write_all(b"wait").await.unwrap();
        let start = Instant::now();
        fast.write_all(b"ping").await.unwrap();
        let mut a = [0; 4];
        let mut b = [0; 4];
        // Both receives in flight; only the first will complete within the test.
        let read_never = never.read_exact(&mut b);
        tokio::pin!(read_never);
        tokio::select! {
            r = fast.read_exact(&mut a) => { r.unwrap(); }
            _ = &mut read_never => panic!("the slow peer answered"),
        }
        let took = start.elapsed();
        assert!(took >= window - Duration::from_millis(20), "read after only {took:?}");
        assert!(took < Duration::from_secs(3), "read after {took:?}");
    });
    // The slow peer's thread is still sleeping on its 30 s answer; it is detached.
    drop(server);
}
