//! How cheap can an HTTP/1.1 keep-alive client get on this kernel if it talks to its sockets
//! through io_uring instead of epoll? The smallest loops that answer it: N connections, each
//! request a send linked to a receive, every submission and every wait in one
//! `io_uring_enter`. It checks only the status line and that every response is as long as the
//! first (nginx's answers for one file are), so it measures a floor, not a client: it is the
//! evidence for (or against) an io_uring backend in the engine, run by `bench/uring_probe.py`
//! beside wrk and Shrike.
//!
//!     uring-probe HOST:PORT PATH CONNECTIONS SECONDS [BATCH TIMEOUT_US [RATE]]
//!
//! Without RATE (or 0) every connection sends again as soon as its response is in (closed
//! loop). BATCH > 1 then waits for that many completions, but never longer than TIMEOUT_US:
//! the most that batching could add to a measured latency.
//!
//! With RATE, requests are released on an even schedule at RATE per second over idle
//! connections (open loop), and the wait for completions carries the time to the next release
//! as its timeout: the release timer and the I/O wait in one system call. It prints the send
//! lateness p50/p99 against that schedule.

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
            eprintln!(
                "usage: uring-probe HOST:PORT PATH CONNECTIONS SECONDS [BATCH TIMEOUT_US [RATE]]"
            );
            exit(2)
        }
    }
}

/// The connections, their receive buffers, the ring, and what the responses looked like.
struct Probe {
    streams: Vec<TcpStream>,
    bufs: Vec<[u8; BUF]>,
    request: Vec<u8>,
    ring: IoUring,
    responses: u64,
    odd: u64,
    expected: i32,
}

impl Probe {
    fn new(addr: &str, path: &str, conns: usize) -> Probe {
        let streams: Vec<TcpStream> = (0..conns)
            .map(|_| {
                let s = TcpStream::connect(addr).unwrap_or_else(|e| die("connect", e));
                s.set_nodelay(true).unwrap_or_else(|e| die("TCP_NODELAY", e));
                s
            })
            .collect();
        // Completions run in this thread when it waits (DEFER_TASKRUN), not in interrupts or
        // kernel workers, so every cycle they cost is charged to this process.
        let mut builder = IoUring::builder();
        builder.setup_single_issuer();
        if std::env::var_os("URING_NO_DEFER").is_none() {
            builder.setup_defer_taskrun();
        }
        let ring = builder
            .build((2 * conns).next_power_of_two() as u32)
            .unwrap_or_else(|e| die("io_uring_setup", e));
        Probe {
            streams,
            bufs: vec![[0u8; BUF]; conns],
            request: format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
            ring,
            responses: 0,
            odd: 0,
            expected: 0,
        }
    }

    /// Queues connection `i`'s request and the receive of its response.
    fn push(&mut self, i: usize) {
        let fd = types::Fd(self.streams[i].as_raw_fd());
        let send = opcode::Send::new(fd, self.request.as_ptr(), self.request.len() as u32)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data((i as u64) << 1);
        let recv = opcode::Recv::new(fd, self.bufs[i].as_mut_ptr(), BUF as u32)
            .build()
            .user_data(((i as u64) << 1) | 1);
        // SAFETY: the request and `bufs` live as long as the probe, which waits for every
        // receive it queued before it returns, and a buffer is handed to the kernel again
        // only after its receive completed.
        unsafe {
            let mut sq = self.ring.submission();
            if sq.push(&send).is_err() || sq.push(&recv).is_err() {
                die("submission queue", "full");
            }
        }
    }

    /// Submits what is queued and waits for `want` completions or `timeout`, whichever
    /// comes first; then returns the connections whose response is in.
    fn wait(&mut self, want: usize, timeout: Option<Duration>, done: &mut Vec<usize>) {
        let waited = match timeout {
            None => self.ring.submit_and_wait(want),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
        };
        match waited {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) => die("io_uring_enter", e),
        }
        done.clear();
        let cqes: Vec<(u64, i32)> =
            self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (ud, res) in cqes {
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
            let whole = self.bufs[i].starts_with(b"HTTP/1.1 200");
            if !whole || (self.expected != 0 && res != self.expected) {
                self.odd += 1;
            }
            if self.expected == 0 {
                self.expected = res;
            }
            self.responses += 1;
            done.push(i);
        }
    }
}

/// Closed loop: every connection sends again as soon as its response is in.
fn saturate(p: &mut Probe, run: Duration, batch: usize, timeout_us: u32) {
    let conns = p.streams.len();
    for i in 0..conns {
        p.push(i);
    }
    let deadline = Instant::now() + run;
    let timeout = (timeout_us > 0).then(|| Duration::from_micros(timeout_us.into()));
    let mut inflight = conns;
    let mut done = Vec::with_capacity(conns);
    while inflight > 0 {
        p.wait(batch.min(inflight), timeout, &mut done);
        let draining = Instant::now() >= deadline;
        for &i in &done {
            if draining {
                inflight -= 1;
            } else {
                p.push(i);
            }
        }
    }
}

/// Open loop at `rate`: returns each release's lateness against the schedule, in ns.
fn paced(p: &mut Probe, run: Duration, rate: f64) -> Vec<u64> {
    let conns = p.streams.len();
    let period = Duration::from_secs_f64(1.0 / rate);
    let total = (run.as_secs_f64() * rate) as u64;
    let mut idle: Vec<usize> = (0..conns).rev().collect();
    let mut late = Vec::with_capacity(total as usize);
    let mut done = Vec::with_capacity(conns);
    let start = Instant::now();
    let mut released = 0u64;
    while released < total || idle.len() < conns {
        let now = Instant::now();
        while released < total {
            let due = start + period * released as u32;
            if due > now {
                break;
            }
            // Every connection busy: the release waits (and its lateness shows it).
            let Some(i) = idle.pop() else { break };
            late.push((now - due).as_nanos() as u64);
            p.push(i);
            released += 1;
        }
        // Sleep until the next release or the next response, in the same call that submits.
        let next = start + period * released as u32;
        let timeout = (released < total && !idle.is_empty())
            .then(|| next.saturating_duration_since(Instant::now()));
        if timeout == Some(Duration::ZERO) {
            continue;
        }
        p.wait(1, timeout, &mut done);
        idle.extend_from_slice(&done);
    }
    late
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr: String = arg(&args, 1, "HOST:PORT", None);
    let path: String = arg(&args, 2, "PATH", None);
    let conns: usize = arg(&args, 3, "CONNECTIONS", None);
    let secs: u64 = arg(&args, 4, "SECONDS", None);
    let batch: usize = arg(&args, 5, "BATCH", Some(1));
    let timeout_us: u32 = arg(&args, 6, "TIMEOUT_US", Some(0));
    let rate: f64 = arg(&args, 7, "RATE", Some(0.0));
    // As Shrike's workers do: the kernel's default 50 µs timer slack would be the lateness.
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };

    let mut probe = Probe::new(&addr, &path, conns);
    let run = Duration::from_secs(secs);
    let mut lateness = String::new();
    if rate > 0.0 {
        let mut late = paced(&mut probe, run, rate);
        late.sort_unstable();
        let q = |f: f64| late.get(((late.len() - 1) as f64 * f) as usize).copied().unwrap_or(0);
        lateness = format!(
            " late_p50_us {:.1} late_p99_us {:.1}",
            q(0.5) as f64 / 1e3,
            q(0.99) as f64 / 1e3
        );
    } else {
        saturate(&mut probe, run, batch, timeout_us);
    }
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
    println!("responses {} odd {} cpu {cpu:.3}{lateness}", probe.responses, probe.odd);
    if probe.odd > 0 {
        eprintln!("uring-probe: {} responses were not one whole 200 (a split read?)", probe.odd);
        exit(1);
    }
}
