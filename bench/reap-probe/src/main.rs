//! Does a paced client need to wake up for every response? The smallest open-loop HTTP/1.1
//! keep-alive loop over epoll and a timerfd, run two ways:
//!
//! - `wake`: every socket is in epoll (edge-triggered, as tokio registers it), so each
//!   response wakes the thread, which reads it and takes its time from the clock: two wake-ups
//!   per request at rates where the thread sleeps between releases. This is what Shrike does.
//! - `reap`: `SO_RCVLOWAT` is set far above a response's size, so TCP does not signal the
//!   socket readable and the thread sleeps through the response. It is read at the next
//!   wake-up (the next release, or `MAX_REAP_US` after the oldest unread request) with a
//!   non-blocking `recvmsg`, and its time is the kernel's receive timestamp (`SO_TIMESTAMPNS`),
//!   taken when the segment reached the socket, so reading it late does not make it late.
//!
//! It checks the status line and that every response is as long as the first, and prints CPU
//! per request, context switches, send lateness, and the latency from the scheduled send to
//! the response under each clock, so the two ways can be compared for cost and for fidelity.
//! Run by `bench/reap_probe.py` beside `shrike run` and fortio.
//!
//!     reap-probe HOST:PORT PATH CONNECTIONS SECONDS RATE wake|reap [MAX_REAP_US [LEAD_US]]
//!     reap-probe wake-cost PERIOD_US SECONDS
//!
//! `wake-cost` is the floor under both: a thread that does nothing but sleep on a timerfd
//! until the next period, re-armed each time (one-shot) or left periodic. It prints the CPU
//! per wake-up, which on a VM is mostly the halted vCPU being brought back.
//!
//! LEAD_US arms the release timer that much early and spins the rest, as Shrike's `poll`
//! strategy does with its learnt lead; 0 (the default) arms it at the due time.

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::exit;

const BUF: usize = 4096;
/// Far above any response here: below it, TCP does not wake a reader.
const LOWAT: libc::c_int = 1 << 20;

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("reap-probe: {what}: {e}");
    exit(1)
}

fn usage() -> ! {
    eprintln!(
        "usage: reap-probe HOST:PORT PATH CONNECTIONS SECONDS RATE wake|reap [MAX_REAP_US [LEAD_US]]\n       reap-probe wake-cost PERIOD_US SECONDS"
    );
    exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: Option<T>) -> T {
    match (args.get(i), default) {
        (Some(v), _) => v.parse().unwrap_or_else(|_| usage()),
        (None, Some(d)) => d,
        (None, None) => usage(),
    }
}

fn clock(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn mono() -> i64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn check(what: &str, rc: libc::c_int) {
    if rc < 0 {
        die(what, io::Error::last_os_error());
    }
}

fn setsockopt(fd: i32, level: i32, name: i32, value: libc::c_int) {
    // SAFETY: the option value is a c_int that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check("setsockopt", rc);
}

struct Conn {
    stream: TcpStream,
    /// The scheduled send time of the request in flight, if one is.
    due: Option<i64>,
}

struct Probe {
    conns: Vec<Conn>,
    epfd: i32,
    timerfd: i32,
    reap: bool,
    request: Vec<u8>,
    buf: [u8; BUF],
    expected: usize,
    responses: u64,
    odd: u64,
    /// Scheduled send to response, ns, by the clock this mode uses.
    latency: Vec<i64>,
    /// Reap mode: how long after its arrival a response was read, ns.
    seen_after: Vec<i64>,
}

impl Probe {
    fn new(addr: &str, path: &str, n: usize, reap: bool) -> Probe {
        // SAFETY: plain system calls on descriptors this probe owns.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        check("epoll_create1", epfd);
        let timerfd = unsafe {
            libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        };
        check("timerfd_create", timerfd);
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let stream = TcpStream::connect(addr).unwrap_or_else(|e| die("connect", e));
            stream.set_nodelay(true).unwrap_or_else(|e| die("TCP_NODELAY", e));
            stream.set_nonblocking(true).unwrap_or_else(|e| die("O_NONBLOCK", e));
            let fd = stream.as_raw_fd();
            if reap {
                setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, LOWAT);
                setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
            }
            // Both modes register every socket as tokio does; only the low-water mark differs.
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: i as u64,
            };
            check("epoll_ctl", unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) });
            conns.push(Conn { stream, due: None });
        }
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: u64::MAX };
        check("epoll_ctl", unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, timerfd, &mut ev) });
        Probe {
            conns,
            epfd,
            timerfd,
            reap,
            request: format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
            buf: [0; BUF],
            expected: 0,
            responses: 0,
            odd: 0,
            latency: Vec::new(),
            seen_after: Vec::new(),
        }
    }

    fn send(&mut self, i: usize, due: i64) {
        let fd = self.conns[i].stream.as_raw_fd();
        // SAFETY: the request outlives the call.
        let n = unsafe {
            libc::send(fd, self.request.as_ptr().cast(), self.request.len(), libc::MSG_NOSIGNAL)
        };
        if n != self.request.len() as isize {
            die("send", io::Error::last_os_error());
        }
        self.conns[i].due = Some(due);
    }

    /// Reads connection `i`'s response if it is in; true when it was.
    fn read(&mut self, i: usize) -> bool {
        let Some(due) = self.conns[i].due else { return false };
        let fd = self.conns[i].stream.as_raw_fd();
        let mut iov = libc::iovec { iov_base: self.buf.as_mut_ptr().cast(), iov_len: BUF };
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data; the fields set point at live buffers.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        let now = mono();
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return false;
            }
            die("recvmsg", e);
        }
        if n == 0 {
            die("recvmsg", format!("connection {i} closed"));
        }
        let n = n as usize;
        if self.expected == 0 {
            self.expected = n;
        }
        if !self.buf.starts_with(b"HTTP/1.1 200") || n != self.expected {
            self.odd += 1;
        }
        let at = if self.reap { self.arrival(&msg, now) } else { now };
        self.latency.push(at - due);
        self.responses += 1;
        self.conns[i].due = None;
        true
    }

    /// The kernel's receive timestamp (CLOCK_REALTIME) on the monotonic clock.
    fn arrival(&mut self, msg: &libc::msghdr, now: i64) -> i64 {
        let offset = clock(libc::CLOCK_REALTIME) - mono();
        // SAFETY: the CMSG macros walk the control buffer recvmsg filled, within its length.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
        while !c.is_null() {
            let h = unsafe { &*c };
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                let at = ts.tv_sec * 1_000_000_000 + ts.tv_nsec - offset;
                self.seen_after.push(now - at);
                return at;
            }
            c = unsafe { libc::CMSG_NXTHDR(msg, c) };
        }
        die("recvmsg", "no SCM_TIMESTAMPNS on a response")
    }

    fn arm(&self, at: i64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: at / 1_000_000_000, tv_nsec: at % 1_000_000_000 },
        };
        // SAFETY: the timerfd is ours; the spec outlives the call.
        let rc = unsafe {
            libc::timerfd_settime(
                self.timerfd,
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        check("timerfd_settime", rc);
    }

    /// Waits for the timer or a socket; wake mode reads the sockets that became readable.
    fn wait(&mut self, idle: &mut VecDeque<usize>) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: epoll_wait writes at most 64 events into the array.
        let n = unsafe { libc::epoll_wait(self.epfd, events.as_mut_ptr(), 64, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                die("epoll_wait", e);
            }
            return;
        }
        for ev in &events[..n as usize] {
            let i = ev.u64;
            if i != u64::MAX && self.read(i as usize) {
                idle.push_back(i as usize);
            }
        }
    }
}

fn run(p: &mut Probe, secs: f64, rate: f64, max_reap: i64, lead: i64) -> Vec<i64> {
    let period = 1e9 / rate;
    let total = (secs * rate) as u64;
    // Round robin, as a pool spreads requests: nginx closes a connection after 1,000.
    let mut idle: VecDeque<usize> = (0..p.conns.len()).collect();
    let mut late = Vec::with_capacity(total as usize);
    let start = mono() + 1_000_000;
    let due = |k: u64| start + (k as f64 * period) as i64;
    let mut released = 0u64;
    while released < total || idle.len() < p.conns.len() {
        if p.reap {
            for i in 0..p.conns.len() {
                if p.read(i) {
                    idle.push_back(i);
                }
            }
        }
        let mut now = mono();
        // The last stretch of the lead is spun, as `poll` yields through it.
        if released < total && !idle.is_empty() && due(released) - now <= lead {
            while now < due(released) {
                std::hint::spin_loop();
                now = mono();
            }
        }
        while released < total && due(released) <= now {
            let Some(i) = idle.pop_front() else { break };
            late.push(now - due(released));
            p.send(i, due(released));
            released += 1;
        }
        let mut wake =
            if released < total && !idle.is_empty() { due(released) - lead } else { i64::MAX };
        if p.reap && p.conns.iter().any(|c| c.due.is_some()) {
            // Responses do not wake the thread, so every release is also a reaping tick, even
            // with no connection idle; a release already due with none idle polls for one.
            wake = wake.min(now + max_reap);
            if released < total {
                let next = due(released);
                wake = wake.min(if next <= now { now + 10_000 } else { next - lead });
            }
        }
        if wake == i64::MAX {
            // Wake mode waiting for responses only; reap mode never gets here with one busy.
            p.arm(0);
        } else if wake <= mono() {
            continue;
        } else {
            p.arm(wake);
        }
        p.wait(&mut idle);
    }
    late
}

fn quantiles(v: &mut [i64]) -> (f64, f64) {
    v.sort_unstable();
    let q = |f: f64| v.get(((v.len().max(1) - 1) as f64 * f) as usize).copied().unwrap_or(0);
    (q(0.5) as f64 / 1e3, q(0.99) as f64 / 1e3)
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Sleeps on a timerfd from one period to the next for `secs`, one-shot or periodic; prints
/// the CPU per wake-up and how late the wake-ups came.
fn wake_cost(period_us: i64, secs: f64) {
    let period = period_us * 1000;
    for periodic in [false, true] {
        // SAFETY: plain system calls on a descriptor this function owns.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        check("timerfd_create", fd);
        let spec = |at: i64, every: i64| libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: every / 1_000_000_000,
                tv_nsec: every % 1_000_000_000,
            },
            it_value: libc::timespec { tv_sec: at / 1_000_000_000, tv_nsec: at % 1_000_000_000 },
        };
        let arm = |at: i64, every: i64| {
            let s = spec(at, every);
            check("timerfd_settime", unsafe {
                libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &s, std::ptr::null_mut())
            });
        };
        let start = mono() + period;
        let total = (secs * 1e9 / period as f64) as i64;
        let mut late = Vec::with_capacity(total as usize);
        let before = cpu_seconds();
        if periodic {
            arm(start, period);
        }
        let (mut k, mut wakes) = (0i64, 0u64);
        while k < total {
            if !periodic {
                arm(start + k * period, 0);
            }
            let mut count = 0u64;
            // SAFETY: reads the 8-byte expiry count into a u64.
            let n = unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
            if n != 8 {
                die("read timerfd", io::Error::last_os_error());
            }
            k += count as i64;
            late.push(mono() - (start + (k - 1) * period));
            wakes += 1;
        }
        let cpu = cpu_seconds() - before;
        let (l50, l99) = quantiles(&mut late);
        println!(
            "wake_cost {} period_us {period_us} wakes {wakes} cpu_us_per_wake {:.2} late_p50_us {l50:.1} late_p99_us {l99:.1}",
            if periodic { "periodic" } else { "one-shot" },
            cpu / wakes as f64 * 1e6
        );
        // SAFETY: closes the descriptor opened above.
        unsafe { libc::close(fd) };
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("wake-cost") {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        wake_cost(arg(&args, 2, None), arg(&args, 3, None));
        return;
    }
    let addr: String = arg(&args, 1, None);
    let path: String = arg(&args, 2, None);
    let conns: usize = arg(&args, 3, None);
    let secs: f64 = arg(&args, 4, None);
    let rate: f64 = arg(&args, 5, None);
    let mode: String = arg(&args, 6, None);
    let max_reap_us: i64 = arg(&args, 7, Some(1000));
    let lead_us: i64 = arg(&args, 8, Some(0));
    let reap = match mode.as_str() {
        "wake" => false,
        "reap" => true,
        _ => usage(),
    };
    // As Shrike's workers do: the kernel's default 50 µs timer slack would be the lateness.
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let mut p = Probe::new(&addr, &path, conns, reap);
    let mut late = run(&mut p, secs, rate, max_reap_us * 1000, lead_us * 1000);
    let cpu = cpu_seconds();
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let (l50, l99) = quantiles(&mut late);
    let (r50, r99) = quantiles(&mut p.latency);
    let (s50, s99) = quantiles(&mut p.seen_after);
    println!(
        "responses {} odd {} cpu {cpu:.3} csw {} late_p50_us {l50:.1} late_p99_us {l99:.1} \
         latency_p50_us {r50:.1} latency_p99_us {r99:.1} seen_after_p50_us {s50:.1} \
         seen_after_p99_us {s99:.1}",
        p.responses,
        p.odd,
        ru.ru_nvcsw + ru.ru_nivcsw,
    );
    if p.odd > 0 {
        eprintln!("reap-probe: {} responses were not one whole 200", p.odd);
        exit(1);
    }
}
