//! How cheap can an HTTP/1.1 keep-alive client get on this kernel if it talks to its sockets
//! through io_uring instead of epoll? The smallest loop that answers it: N connections, each
//! with a send linked to a receive, resubmitted as each receive completes, every submission and
//! every wait in one `io_uring_enter`. It checks only the status line and that every response
//! is as long as the first (nginx's answers for one file are), so it measures a floor, not a
//! client: it is the evidence for (or against) an io_uring backend in the engine, run by
//! `bench/uring_probe.py` beside wrk and Shrike.
//!
//!     uring-probe HOST:PORT PATH CONNECTIONS SECONDS [BATCH TIMEOUT_US]
//!
//! BATCH > 1 waits for that many completions, but never longer than TIMEOUT_US: the most that
//! batching could add to a measured latency.

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::exit;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

const BUF: usize = 4096;

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("uring-probe: {what}: {e}");
    exit(1)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str, default: Option<T>) -> T {
    match (args.get(i), default) {
        (Some(v), _) => v.parse().unwrap_or_else(|_| {
            eprintln!("uring-probe: {name} must be a number, got {v:?}");
            exit(2)
        }),
        (None, Some(d)) => d,
        (None, None) => {
            eprintln!("usage: uring-probe HOST:PORT PATH CONNECTIONS SECONDS [BATCH TIMEOUT_US]");
            exit(2)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr: String = arg(&args, 1, "HOST:PORT", None);
    let path: String = arg(&args, 2, "PATH", None);
    let conns: usize = arg(&args, 3, "CONNECTIONS", None);
    let secs: u64 = arg(&args, 4, "SECONDS", None);
    let batch: usize = arg(&args, 5, "BATCH", Some(1));
    let timeout_us: u32 = arg(&args, 6, "TIMEOUT_US", Some(0));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();

    let streams: Vec<TcpStream> = (0..conns)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap_or_else(|e| die("connect", e));
            s.set_nodelay(true).unwrap_or_else(|e| die("TCP_NODELAY", e));
            s
        })
        .collect();
    let mut bufs = vec![[0u8; BUF]; conns];
    // Completions run in this thread when it waits (DEFER_TASKRUN), not in interrupts or
    // kernel workers, so every cycle they cost is charged to this process.
    let entries = (2 * conns).next_power_of_two() as u32;
    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .unwrap_or_else(|e| die("io_uring_setup", e));

    let push = |ring: &mut IoUring, i: usize, buf: *mut u8| {
        let fd = types::Fd(streams[i].as_raw_fd());
        let send = opcode::Send::new(fd, request.as_ptr(), request.len() as u32)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data((i as u64) << 1);
        let recv = opcode::Recv::new(fd, buf, BUF as u32).build().user_data(((i as u64) << 1) | 1);
        // SAFETY: the request and `bufs` outlive every operation on them: the loop below
        // waits for each connection's last receive before they are dropped, and a buffer is
        // only handed to the kernel again after its receive completed.
        unsafe {
            let mut sq = ring.submission();
            if sq.push(&send).is_err() || sq.push(&recv).is_err() {
                die("submission queue", "full");
            }
        }
    };
    for (i, b) in bufs.iter_mut().enumerate() {
        push(&mut ring, i, b.as_mut_ptr());
    }

    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut responses, mut bytes, mut odd, mut expected) = (0u64, 0u64, 0u64, 0i32);
    let mut inflight = conns;
    let mut done = Vec::with_capacity(entries as usize);
    while inflight > 0 {
        let want = batch.min(inflight);
        if timeout_us == 0 {
            ring.submit_and_wait(want).unwrap_or_else(|e| die("io_uring_enter", e));
        } else {
            let ts = types::Timespec::new().nsec(timeout_us * 1000);
            let wait = types::SubmitArgs::new().timespec(&ts);
            match ring.submitter().submit_with_args(want, &wait) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) => die("io_uring_enter", e),
            }
        }
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        let draining = Instant::now() >= deadline;
        for &(ud, res) in &done {
            let i = (ud >> 1) as usize;
            if ud & 1 == 0 {
                if res < 0 {
                    die("send", std::io::Error::from_raw_os_error(-res));
                }
                continue;
            }
            if res <= 0 {
                die("recv", format!("connection {i} returned {res}"));
            }
            if !bufs[i].starts_with(b"HTTP/1.1 200") || (expected != 0 && res != expected) {
                odd += 1;
            }
            if expected == 0 {
                expected = res;
            }
            responses += 1;
            bytes += res as u64;
            if draining {
                inflight -= 1;
            } else {
                push(&mut ring, i, bufs[i].as_mut_ptr());
            }
        }
    }
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
    println!("responses {responses} bytes {bytes} odd {odd} cpu {cpu:.3}");
    if odd > 0 {
        eprintln!("uring-probe: {odd} responses were not one whole 200 (a split read?)");
        exit(1);
    }
}
