//! Receive timestamps on TCP sockets (`SO_TIMESTAMPNS`): when a response's last segment
//! reached the socket, as the kernel saw it, however late the thread reads it.
//!
//! `unsafe`: `setsockopt` and `recvmsg` have no safe binding in the crates the tree already
//! uses (rustix's ancillary messages know descriptors and credentials, not timestamps). Both
//! calls only borrow buffers for their own duration; the control messages are walked with
//! libc's `CMSG_*` within the length the kernel returned.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Asks the kernel to stamp every receive on `fd` with the time its data arrived
/// (`CLOCK_REALTIME`). The kernel turns stamping on asynchronously (a static key), so the
/// first receives after this may still come without one.
pub fn enable_rx_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is open for the borrow; the option value outlives the call and its length
    // is its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Room for the control messages of one receive, aligned as `cmsghdr` requires. A TCP
/// receive carries at most the timestamp (32 bytes with its header).
#[repr(C, align(8))]
pub(crate) struct Control(pub(crate) [u8; 64]);

/// One non-blocking receive into `buf`: the bytes read, and when the newest of them reached
/// the socket if the kernel stamped it. `WouldBlock` when nothing is there.
pub fn recv_stamped(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = Control([0; 64]);
    // SAFETY: an all-zero msghdr is valid (no name, no buffers); the fields set below point
    // at `iov` and `control`, which outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: `fd` is open for the borrow; `msg` describes writable memory that outlives the
    // call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `msg_control` points at `control`, which the kernel wrote up to the length it
    // set in `msg_controllen`.
    Ok((n as usize, unsafe { stamp_of(&msg) }))
}

/// The receive timestamp among `msg`'s control messages, if the kernel put one there.
///
/// # Safety
/// `msg_control` must point at readable memory of at least `msg_controllen` bytes, aligned
/// as `cmsghdr`, that the kernel wrote control messages into (or that is zeroed).
pub(crate) unsafe fn stamp_of(msg: &libc::msghdr) -> Option<SystemTime> {
    let mut stamp = None;
    // SAFETY: the caller's promise; the kernel set `msg_controllen` to what it wrote into the control buffer (or it
    // is the zeroed buffer's whole length, whose first header then has length 0);
    // CMSG_FIRSTHDR and CMSG_NXTHDR stay within it and return null past its end or at a
    // header shorter than a header, and a timestamp message's data is a `timespec` (read
    // unaligned: CMSG_DATA makes no promise).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = u64::try_from(ts.tv_sec).ok().and_then(|s| {
                    UNIX_EPOCH
                        .checked_add(Duration::new(s, ts.tv_nsec.clamp(0, 999_999_999) as u32))
                });
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    stamp
}

/// A receive stamp (the realtime clock) on the monotonic clock: its distance from a reading of
/// both clocks, carried over to the monotonic one. The reading is this thread's latest from
/// [`read_clocks`], or one taken now. A step of the wall clock between the reading and the
/// stamp (rare; NTP slews both clocks alike rather than stepping) moves the result; callers
/// clamp it to no earlier than the request's send.
pub fn arrival_instant(rx: SystemTime) -> Option<Instant> {
    CLOCKS.get().unwrap_or_else(Clocks::read).instant_of(rx)
}

thread_local! {
    /// This thread's latest reading of both clocks, for [`arrival_instant`].
    static CLOCKS: Cell<Option<Clocks>> = const { Cell::new(None) };
}

/// Reads both clocks for this thread's later stamps ([`arrival_instant`]). A worker that reads
/// its responses late, in a batch (`--read-coalesce`, on either backend), calls it each time
/// it wakes, so that one reading serves the batch instead of two clock reads per response.
pub fn read_clocks() {
    CLOCKS.set(Some(Clocks::read()));
}

/// Both clocks, read together: what [`arrival_instant`] carries a stamp over from. One reading
/// serves every stamp of a batch of receives (a worker's wake-up), where a reading per
/// response was two of its six clock reads (`perf`: `clock_gettime` was 2.6 % of
/// the client's CPU). The two clocks advance together (NTP slews both), so a stamp's distance
/// from the reading is the same on either clock, whether it came before the reading or after.
#[derive(Clone, Copy, Debug)]
struct Clocks {
    now: Instant,
    wall: SystemTime,
}

impl Clocks {
    fn read() -> Clocks {
        Clocks { now: Instant::now(), wall: SystemTime::now() }
    }

    /// `rx` on the monotonic clock ([`arrival_instant`]).
    fn instant_of(&self, rx: SystemTime) -> Option<Instant> {
        match self.wall.duration_since(rx) {
            Ok(age) => self.now.checked_sub(age),
            // A stamp after the reading (bytes that arrived while a batch was being read).
            Err(later) => self.now.checked_add(later.duration()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A stamped receive returns the bytes sent and a stamp between the send and the read,
    /// even when the read comes long after the data arrived.
    #[test]
    fn stamps_when_data_arrived_not_when_it_was_read() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        enable_rx_timestamps(server.as_fd()).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            recv_stamped(server.as_fd(), &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        // Stamping is switched on asynchronously: retry until a receive carries a stamp.
        let began = Instant::now();
        loop {
            let before = SystemTime::now();
            client.write_all(b"ping").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let (n, stamp) = recv_stamped(server.as_fd(), &mut buf).unwrap();
            let after = SystemTime::now();
            assert_eq!(&buf[..n], b"ping");
            if let Some(stamp) = stamp {
                assert!(stamp >= before, "{stamp:?} before the send {before:?}");
                // Read 50 ms after the send; the stamp is the arrival, well before the read.
                assert!(after.duration_since(stamp).unwrap() >= Duration::from_millis(40));
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(5), "no receive was stamped");
        }
    }

    #[test]
    fn an_unstamped_socket_receives_without_a_stamp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut buf = [0u8; 4];
        assert_eq!(recv_stamped(server.as_fd(), &mut buf).unwrap(), (1, None));
    }

    /// A reading converts stamps before it and after it alike: a worker's reading at its
    /// wake-up serves responses that arrive while it reads the batch. Clamping the later ones
    /// to the reading (as an age of zero) would put them up to the batch's length too early.
    #[test]
    fn a_reading_converts_stamps_before_and_after_it() {
        let ms = Duration::from_millis;
        let c = Clocks::read();
        assert_eq!(c.instant_of(c.wall - ms(5)), Some(c.now - ms(5)));
        assert_eq!(c.instant_of(c.wall + ms(5)), Some(c.now + ms(5)));
        // Through the thread's reading: a stamp 30 ms after it lands 30 ms after it.
        read_clocks();
        let reading = Instant::now();
        std::thread::sleep(ms(30));
        let (stamp, now) = (SystemTime::now(), Instant::now());
        let arrival = arrival_instant(stamp).unwrap();
        assert!(arrival >= reading + ms(29), "{:?} after the reading", arrival - reading);
        assert!(arrival <= now + ms(2), "{:?} past now", arrival.saturating_duration_since(now));
    }
}
