//! The ring and the slots that own what the kernel is working on. The one module with
//! `unsafe`: a submitted receive or send points the kernel at a buffer, which must stay
//! allocated and unmoved until its completion arrives. Each buffer lives in its stream's slot
//! here, is never resized while an operation on it is in flight, and a slot whose stream was
//! dropped stays allocated (its operations cancelled) until the last completion comes back;
//! what is still in flight when the ring ends is leaked rather than freed.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use io_uring::types::{CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{opcode, squeue, IoUring};
use tokio::io::unix::AsyncFd;
use tokio::io::ReadBuf;

use crate::stamp::{stamp_of, Control};

/// Submission queue entries: a turn rarely queues more than two per connection; a fuller
/// queue is submitted early, never dropped.
const ENTRIES: u32 = 1024;
/// Completions can outnumber one queue's worth of submissions (they arrive across turns);
/// the kernel keeps any overflow (IORING_FEAT_NODROP) but that path is slow.
const CQ_ENTRIES: u32 = 4 * ENTRIES;

/// What a completion's `user_data` names, in its low bits; the slot index is above them.
const RECV: u64 = 1;
const SEND: u64 = 2;
const CANCEL: u64 = 3;
const KIND_BITS: u32 = 2;
/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h): the enter also runs deferred completion work.
const ENTER_GETEVENTS: u32 = 1;
/// `IORING_RECVSEND_POLL_FIRST` (linux/io_uring.h, 5.19+), in a receive's `ioprio`.
const RECVSEND_POLL_FIRST: u16 = 1;

/// A receive buffer is sized to what the reader asks for, within these bounds: a small
/// response fits the first, and an idle connection has none (memory per connection matters
/// at 100k connections). Large bodies are read 32 KiB at a time, as on epoll.
const MIN_RECV: usize = 1024;
const MAX_RECV: usize = 32 * 1024;
/// Bytes a stream may queue behind the send in flight before its writes wait.
const MAX_QUEUED: usize = 256 * 1024;

/// One thread's io_uring and the streams on it. Not `Send`: a ring set up with
/// `SINGLE_ISSUER` belongs to the thread that created it.
pub struct Ring {
    inner: RefCell<Inner>,
    /// Entries pushed since the last submit.
    queued: Cell<bool>,
    /// The thread waits for batches in [`Ring::park`] (`--read-coalesce`): a turn that only
    /// submits leaves the kernel's completion work for the next wait.
    coalescing: Cell<bool>,
    /// The driver task ([`crate::drive`]), woken when the first entry of a turn is queued.
    task: RefCell<Option<Waker>>,
    /// Rung by the kernel when completions are waiting; tokio's epoll watches it.
    eventfd: AsyncFd<OwnedFd>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish_non_exhaustive()
    }
}

struct Inner {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Operations submitted or queued whose completion has not arrived.
    in_flight: usize,
    /// Of those, receives.
    receiving: usize,
    /// Wakers to call once the borrow is released; kept for its capacity.
    wake: Vec<Waker>,
    /// Streams give back their buffers' memory once a receive is handed out or a send is
    /// done ([`Ring::frugal`]).
    frugal: bool,
}

#[derive(Default)]
struct Slot {
    /// Owns the socket; `None` for a free slot. Closed only when no operation is in flight:
    /// the kernel holds its own reference meanwhile, so closing earlier would not close it.
    sock: Option<TcpStream>,
    /// The stream was dropped; the slot is freed with its last completion.
    closing: bool,
    recv: Recv,
    send: Send,
}

#[derive(Default)]
struct Recv {
    buf: Vec<u8>,
    /// For a stream whose receives the kernel stamps (`--read-coalesce`): the message header
    /// the kernel reads and writes back, boxed so that it stays put while the receive is in
    /// flight (the slots' vector may grow meanwhile).
    msg: Option<Box<StampedMsg>>,
    /// The kernel's stamp on the receive whose bytes are being handed out.
    stamp: Option<SystemTime>,
    /// Received and not yet read: `buf[start..end]`.
    start: usize,
    end: usize,
    in_flight: bool,
    /// The last receive filled the buffer: more is likely waiting (a large body).
    filled: bool,
    eof: bool,
    err: Option<io::Error>,
    waker: Option<Waker>,
}

/// A `recvmsg` header with its one buffer and room for the timestamp.
struct StampedMsg {
    hdr: libc::msghdr,
    iov: libc::iovec,
    control: Control,
}

impl StampedMsg {
    fn new() -> Box<StampedMsg> {
        // SAFETY: all-zero msghdr and iovec are valid (no name, no buffers); the pointers are
        // set before each submission.
        Box::new(StampedMsg {
            hdr: unsafe { std::mem::zeroed() },
            iov: libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
            control: Control([0; 64]),
        })
    }
}

#[derive(Default)]
struct Send {
    /// The bytes of the send in flight, `buf[off..]` still to go.
    buf: Vec<u8>,
    off: usize,
    in_flight: bool,
    /// Written while a send was in flight; goes next.
    queue: Vec<u8>,
    /// Shut the write side once the sends are done.
    shut: bool,
    err: Option<io::Error>,
    waker: Option<Waker>,
}

/// The ring with the flags the ring wants, or plainer ones on an older kernel
/// (`SINGLE_ISSUER` needs 6.0).
///
/// `COOP_TASKRUN` (with `TASKRUN_FLAG`): completion work runs at the thread's next entry into
/// the kernel, not by interrupting it. Not `DEFER_TASKRUN`, which runs it only inside our own
/// enter: on Linux 6.18.44 (2026-12-06) that work no longer rang the registered eventfd while
/// the thread slept in tokio's epoll, so a response was seen only at the thread's next
/// wake-up for something else (the pacer's: +14 ms per response at 50 rps, 20.7 against
/// 6.3 ms on epoll with the server's 6 ms delay; builds from before the kernel changed showed
/// the same). With `COOP_TASKRUN` the same run reads 6.4 ms, and a saturating run costs what
/// it cost with `DEFER_TASKRUN` (9.8 against 9.9 µs per request against nginx); the plain
/// ring cost 17.1.
fn build_ring() -> io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .setup_taskrun_flag()
        .setup_cqsize(CQ_ENTRIES)
        .build(ENTRIES)
        .or_else(|_| IoUring::builder().setup_cqsize(CQ_ENTRIES).build(ENTRIES))
}

impl Ring {
    /// Probes the kernel without touching a runtime.
    pub(crate) fn probe() -> io::Result<()> {
        build_ring().map(drop)
    }

    /// Must be called inside the tokio runtime that will drive it.
    pub(crate) fn new() -> io::Result<Ring> {
        let ring = build_ring()?;
        let flags = rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
        let efd = rustix::event::eventfd(0, flags)?;
        ring.submitter().register_eventfd(efd.as_raw_fd())?;
        // `AsyncFd::new` is deprecated for borrowed fds a caller could close while registered;
        // this AsyncFd owns its OwnedFd for its whole life.
        #[allow(deprecated)]
        let eventfd = AsyncFd::new(efd)?;
        let inner = Inner {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            receiving: 0,
            wake: Vec::new(),
            frugal: false,
        };
        Ok(Ring {
            inner: RefCell::new(inner),
            queued: Cell::new(false),
            coalescing: Cell::new(false),
            task: RefCell::new(None),
            eventfd,
        })
    }

    pub(crate) fn eventfd(&self) -> &AsyncFd<OwnedFd> {
        &self.eventfd
    }

    pub(crate) fn has_queued(&self) -> bool {
        self.queued.get()
    }

    /// From now on the thread collects completions in batches, in [`Ring::park`] (which the
    /// runtime's park hook must call): a turn that only submits leaves them to it, and the
    /// eventfd rings only while the thread sleeps after a wait that found nothing.
    /// From now on a stream holds buffers only while it has bytes in them: a receive's once
    /// it is handed out whole, a send's once the kernel took it. For many mostly idle
    /// connections (at 100k connections, buffers held between requests are most of the
    /// memory), at the price of a small allocation per read and per write.
    pub fn frugal(&self) {
        self.inner.borrow_mut().frugal = true;
    }

    /// Bytes of buffer memory the ring's streams hold now (receive and send buffers).
    pub fn held_bytes(&self) -> usize {
        let inner = self.inner.borrow();
        inner
            .slots
            .iter()
            .map(|s| s.recv.buf.capacity() + s.send.buf.capacity() + s.send.queue.capacity())
            .sum()
    }

    pub fn coalesce(&self) {
        self.coalescing.set(true);
        self.inner.borrow_mut().ring.completion().disable_eventfd();
    }

    /// Whether a turn that only submits should also collect completions: always, except when
    /// the thread collects them in batches ([`Ring::park`]).
    pub(crate) fn collects_eagerly(&self) -> bool {
        !self.coalescing.get()
    }

    /// An entry was pushed: the first of a turn schedules the driver task, which runs after
    /// the tasks already ready (so their entries join the same submission) and submits.
    fn note_queued(&self) {
        if !self.queued.replace(true) {
            if let Some(w) = self.task.borrow().as_ref() {
                w.wake_by_ref();
            }
        }
    }

    /// Registers the driver task's waker.
    pub(crate) fn set_task(&self, waker: &Waker) {
        let mut task = self.task.borrow_mut();
        if !task.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *task = Some(waker.clone());
        }
    }

    /// Takes over a connected socket; the returned slot names it from now on. The socket is
    /// made blocking: the ring tries each operation without blocking first and waits for
    /// readiness itself, and a blocking socket never hands back EAGAIN to retry. `stamp`: the
    /// kernel stamps its receives with their arrival ([`Ring::arrival`]).
    pub(crate) fn open(&self, sock: TcpStream, stamp: bool) -> io::Result<u32> {
        sock.set_nonblocking(false)?;
        if stamp {
            crate::enable_rx_timestamps(std::os::fd::AsFd::as_fd(&sock))?;
        }
        let mut inner = self.inner.borrow_mut();
        let id = match inner.free.pop() {
            Some(id) => id,
            None => {
                let id = u32::try_from(inner.slots.len())
                    .map_err(|_| io::Error::other("too many io_uring streams"))?;
                inner.slots.push(Slot::default());
                id
            }
        };
        let slot = &mut inner.slots[id as usize];
        slot.sock = Some(sock);
        if stamp {
            slot.recv.msg = Some(StampedMsg::new());
        }
        Ok(id)
    }

    /// The stream was dropped: cancel what is in flight, and free the slot (closing the
    /// socket) now or with the last completion.
    pub(crate) fn close(&self, id: u32) {
        let mut inner = self.inner.borrow_mut();
        let slot = &mut inner.slots[id as usize];
        slot.closing = true;
        if !(slot.recv.in_flight || slot.send.in_flight) {
            inner.release(id);
            return;
        }
        let Some(fd) = slot.sock.as_ref().map(|s| Fd(s.as_raw_fd())) else {
            return;
        };
        let entry =
            opcode::AsyncCancel2::new(CancelBuilder::fd(fd).all()).build().user_data(CANCEL);
        // SAFETY: a cancellation points at no memory of ours.
        unsafe { inner.push(&entry) };
        self.note_queued();
    }

    pub(crate) fn poll_read(
        &self,
        id: u32,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let eager = {
            let mut inner = self.inner.borrow_mut();
            let inner = &mut *inner;
            let r = &mut inner.slots[id as usize].recv;
            if let Some(p) = r.take_into(dst, inner.frugal) {
                return Poll::Ready(p);
            }
            let eager = if !r.in_flight {
                let want = dst.remaining().clamp(MIN_RECV, MAX_RECV);
                if r.buf.len() < want {
                    r.buf.resize(want, 0);
                }
                let eager = r.filled;
                r.filled = false;
                inner.push_recv(id, !eager);
                self.note_queued();
                eager
            } else {
                false
            };
            let r = &mut inner.slots[id as usize].recv;
            if !r.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                r.waker = Some(cx.waker().clone());
            }
            eager
        };
        if eager {
            // The last receive filled its buffer, so more is probably there: submit now, as a
            // read() would, instead of a loop turn per 32 KiB of a large body.
            self.turn(true);
            let mut inner = self.inner.borrow_mut();
            let frugal = inner.frugal;
            let r = &mut inner.slots[id as usize].recv;
            if let Some(p) = r.take_into(dst, frugal) {
                r.waker = None;
                return Poll::Ready(p);
            }
        }
        Poll::Pending
    }

    /// When the bytes last handed out by a read reached the socket, by the kernel's stamp; `None`
    /// for an unstamped stream, or a receive the kernel did not stamp (stamping switches on
    /// asynchronously after `open`).
    pub(crate) fn arrival(&self, id: u32) -> Option<SystemTime> {
        self.inner.borrow().slots[id as usize].recv.stamp
    }

    /// Accepts the bytes (copies them) and queues their send; an error of an earlier send is
    /// returned here, as a socket would return it on the next write.
    pub(crate) fn poll_write(
        &self,
        id: u32,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let s = &mut inner.slots[id as usize].send;
        if let Some(e) = s.err.take() {
            return Poll::Ready(Err(e));
        }
        if !s.in_flight {
            s.buf.clear();
            s.off = 0;
            let n = copy_slices(&mut s.buf, bufs, usize::MAX);
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            inner.push_send(id);
            self.note_queued();
            return Poll::Ready(Ok(n));
        }
        if s.queue.len() < MAX_QUEUED {
            let room = MAX_QUEUED - s.queue.len();
            return Poll::Ready(Ok(copy_slices(&mut s.queue, bufs, room)));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Bytes accepted are the ring's to send, in order; only an earlier failure is news.
    pub(crate) fn poll_flush(&self, id: u32) -> Poll<io::Result<()>> {
        let mut inner = self.inner.borrow_mut();
        match inner.slots[id as usize].send.err.take() {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Shuts the write side once every accepted byte is sent: at once when none is in flight,
    /// else with the last send's completion. Like a write, it returns without waiting (a
    /// caller that shuts down and then reports must not be held up by the ring's turn).
    pub(crate) fn poll_shutdown(&self, id: u32) -> Poll<io::Result<()>> {
        let mut inner = self.inner.borrow_mut();
        let slot = &mut inner.slots[id as usize];
        if let Some(e) = slot.send.err.take() {
            return Poll::Ready(Err(e));
        }
        if slot.send.in_flight {
            slot.send.shut = true;
            return Poll::Ready(Ok(()));
        }
        Poll::Ready(shut_write(slot.sock.as_ref()))
    }

    /// One turn: submit what is queued and, when `collect`, run the completion work the kernel
    /// deferred to us and hand out every completion (waking the tasks they concern).
    ///
    /// A coalescing ring's turns that only submit leave the completions in the queue, for
    /// `park` to hand out as a batch: without DEFER_TASKRUN the kernel posts them as they
    /// arrive, and a submitting turn that reaped them read each early answer on its own,
    /// before the batch it was to join (seen in CI as an answer read 58 µs into a 150 ms
    /// window).
    pub(crate) fn turn(&self, collect: bool) {
        let mut wake = {
            let mut inner = self.inner.borrow_mut();
            self.queued.set(false);
            inner.enter_with(if collect { ENTER_GETEVENTS } else { 0 });
            if collect {
                inner.reap();
            }
            std::mem::take(&mut inner.wake)
        };
        // Entries pushed again by the reaping (a partial send, an interrupted receive).
        if !self.inner.borrow_mut().ring.submission().is_empty() {
            self.note_queued();
        }
        for w in wake.drain(..) {
            w.wake();
        }
        let mut inner = self.inner.borrow_mut();
        if inner.wake.capacity() < wake.capacity() {
            inner.wake = wake;
        }
    }

    /// The thread has nothing to run (`--read-coalesce`, from the runtime's park hook): wait
    /// in the ring until every receive in flight has completed or `window` has passed,
    /// whichever is first, so that one wake-up and one turn handle a batch of responses (the
    /// kernel's receive stamps time each as it arrived). Waiting on once nothing more can
    /// arrive would only delay the next requests.
    ///
    /// The eventfd stays switched off while the thread works, so completions do not ring it
    /// one by one and keep the driver task ready (the thread would then never park, only poll
    /// epoll). When the wait collects anything, the eventfd is rung once, tokio's park returns
    /// at once and the driver task reaps the batch. When it collects nothing, the eventfd is
    /// switched on before tokio parks, so a later completion wakes the thread.
    pub fn park(&self, window: Duration) {
        // The runtime parks between task polls, and no borrow of the ring outlives a poll, so
        // this does not fail. If it did, the eventfd might be off: ringing it keeps tokio from
        // sleeping, and the driver task's turn collects whatever is there.
        let Ok(mut inner) = self.inner.try_borrow_mut() else {
            self.ring_eventfd();
            return;
        };
        inner.ring.completion().disable_eventfd();
        // Every operation in flight counts, sends too, and so do the completions already in
        // the queue: the kernel counts all of them towards the wait. Counting receives alone,
        // a send this wait submits completed at once and ended the wait with the first answer
        // instead of the batch.
        let want = inner.in_flight + inner.ring.completion().len();
        if inner.receiving > 0 {
            let nanos = u32::try_from(window.as_nanos()).unwrap_or(u32::MAX).min(999_999_999);
            let ts = Timespec::new().nsec(nanos);
            let args = SubmitArgs::new().timespec(&ts);
            // A timeout (ETIME) or an interruption only ends the wait early; whatever has
            // completed is reaped either way.
            let _ = inner.ring.submitter().submit_with_args(want, &args);
        }
        let mut ready = !inner.ring.completion().is_empty();
        if !ready {
            inner.ring.completion().enable_eventfd();
            // The kernel rings the eventfd only for the first completion work queued after
            // the last run of it. Work queued while the eventfd was off rang nothing, and while
            // it is pending, later work will not ring it either: the thread would sleep
            // through every response. So run it now; from here on, new work rings.
            inner.enter();
            ready = !inner.ring.completion().is_empty();
        }
        drop(inner);
        if ready {
            self.ring_eventfd();
        }
    }

    /// Makes the eventfd readable, so that tokio's park returns at once and the driver task
    /// takes a collecting turn. A failed write (the counter cannot overflow in practice) only
    /// leaves the wake-up to the next completion.
    fn ring_eventfd(&self) {
        let _ = rustix::io::write(self.eventfd.get_ref(), &1u64.to_ne_bytes());
    }

    /// Cancels everything in flight and waits for the completions, a second at most, so no
    /// buffer is freed while the kernel could still write into it; whatever has not come back
    /// by then is leaked.
    pub(crate) fn shutdown(&self) {
        let mut inner = self.inner.borrow_mut();
        if inner.in_flight == 0 {
            return;
        }
        let entry = opcode::AsyncCancel2::new(CancelBuilder::any()).build().user_data(CANCEL);
        // SAFETY: a cancellation points at no memory of ours.
        unsafe { inner.push(&entry) };
        let ts = Timespec::new().nsec(50_000_000);
        for _ in 0..20 {
            if inner.in_flight == 0 {
                break;
            }
            let args = SubmitArgs::new().timespec(&ts);
            let _ = inner.ring.submitter().submit_with_args(1, &args);
            inner.reap();
        }
        inner.wake.clear();
        for slot in &mut inner.slots {
            if slot.recv.in_flight {
                std::mem::forget(std::mem::take(&mut slot.recv.buf));
                std::mem::forget(slot.recv.msg.take());
            }
            if slot.send.in_flight {
                std::mem::forget(std::mem::take(&mut slot.send.buf));
            }
        }
    }
}

impl Recv {
    /// What a read returns without waiting: buffered bytes, a stored error, or end of stream.
    /// `frugal`: once all is handed out, and the receive did not fill the buffer (a whole
    /// response, not a chunk of a large body), the buffer's memory goes back.
    fn take_into(&mut self, dst: &mut ReadBuf<'_>, frugal: bool) -> Option<io::Result<()>> {
        if self.start < self.end {
            let n = dst.remaining().min(self.end - self.start);
            dst.put_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            if frugal && self.start == self.end && !self.filled && !self.in_flight {
                self.buf = Vec::new();
                self.start = 0;
                self.end = 0;
            }
            return Some(Ok(()));
        }
        if let Some(e) = self.err.take() {
            return Some(Err(e));
        }
        self.eof.then_some(Ok(()))
    }
}

/// Shuts the write side of `sock`. A peer that already reset the connection left no write side
/// to shut: that is not an error (tokio's `TcpStream` treats it alike).
fn shut_write(sock: Option<&TcpStream>) -> io::Result<()> {
    match sock.map(|s| s.shutdown(Shutdown::Write)) {
        Some(Err(e)) if e.kind() != io::ErrorKind::NotConnected => Err(e),
        _ => Ok(()),
    }
}

/// Appends up to `limit` bytes of `bufs` to `out`; returns how many.
fn copy_slices(out: &mut Vec<u8>, bufs: &[IoSlice<'_>], limit: usize) -> usize {
    let mut n = 0;
    for b in bufs {
        let take = b.len().min(limit - n);
        out.extend_from_slice(&b[..take]);
        n += take;
        if n == limit {
            break;
        }
    }
    n
}

fn user_data(id: u32, kind: u64) -> u64 {
    (u64::from(id) << KIND_BITS) | kind
}

/// A result to try again rather than report.
fn retry(res: i32) -> bool {
    res == -libc::EAGAIN || res == -libc::EINTR
}

impl Inner {
    /// # Safety
    /// Whatever memory `entry` points at must stay valid until its completion is reaped.
    unsafe fn push(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: the caller's promise, passed on.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return;
            }
            // The queue is full: submit what it holds to make room.
            self.enter();
        }
    }

    /// `poll_first`: skip the attempt at submission and wait for data straight away. A
    /// receive queued right after its request was sent almost never finds its response there
    /// yet, and the failed attempt (socket lock, empty queue) was pure cost.
    fn push_recv(&mut self, id: u32, poll_first: bool) {
        let slot = &mut self.slots[id as usize];
        let Some(sock) = &slot.sock else { return };
        let r = &mut slot.recv;
        r.start = 0;
        r.end = 0;
        let fd = Fd(sock.as_raw_fd());
        let ioprio = if poll_first { RECVSEND_POLL_FIRST } else { 0 };
        let entry = match r.msg.as_deref_mut() {
            None => {
                let len = u32::try_from(r.buf.len()).unwrap_or(u32::MAX);
                opcode::Recv::new(fd, r.buf.as_mut_ptr(), len).ioprio(ioprio).build()
            }
            Some(m) => {
                m.iov = libc::iovec { iov_base: r.buf.as_mut_ptr().cast(), iov_len: r.buf.len() };
                // Zeroed, so a header the kernel did not write back reads as no message.
                m.control.0 = [0; 64];
                m.hdr.msg_iov = &mut m.iov;
                m.hdr.msg_iovlen = 1;
                m.hdr.msg_control = m.control.0.as_mut_ptr().cast();
                m.hdr.msg_controllen = m.control.0.len() as _;
                opcode::RecvMsg::new(fd, &mut m.hdr).ioprio(ioprio).build()
            }
        }
        .user_data(user_data(id, RECV));
        r.in_flight = true;
        self.in_flight += 1;
        self.receiving += 1;
        // SAFETY: `buf` (and a stamped receive's boxed header, vector and control buffer, which
        // point at each other and at `buf`) belong to the slot, and are neither freed, moved
        // nor resized while `in_flight` is set (only the completion clears it; see the module
        // docs).
        unsafe { self.push(&entry) };
    }

    fn push_send(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        let Some(sock) = &slot.sock else { return };
        let s = &mut slot.send;
        let rest = &s.buf[s.off..];
        let len = u32::try_from(rest.len()).unwrap_or(u32::MAX);
        // MSG_NOSIGNAL: a peer that closed is an EPIPE result, never a SIGPIPE.
        let entry = opcode::Send::new(Fd(sock.as_raw_fd()), rest.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(id, SEND));
        s.in_flight = true;
        self.in_flight += 1;
        // SAFETY: as for receives: `buf` is untouched while `in_flight` is set (writes go to
        // `queue` meanwhile).
        unsafe { self.push(&entry) };
    }

    /// Submits and runs deferred completion work, waiting for nothing. Failures (EINTR, EBUSY
    /// while the kernel flushes an overflow) are transient: the next turn tries again.
    fn enter(&mut self) {
        self.enter_with(ENTER_GETEVENTS);
    }

    fn enter_with(&mut self, flags: u32) {
        let to_submit = self.ring.submission().len() as u32;
        // SAFETY: no argument pointer is passed; the entries were pushed under `push`'s rules.
        let _ = unsafe { self.ring.submitter().enter::<()>(to_submit, 0, flags, None) };
    }

    fn reap(&mut self) {
        let Inner { ring, slots, in_flight, receiving, wake, free, frugal } = self;
        // Operations to submit again (a partial send, an interrupted receive): pushed once
        // the completion queue is released.
        let mut again: Vec<(u32, u64)> = Vec::new();
        for cqe in ring.completion() {
            let kind = cqe.user_data() & ((1 << KIND_BITS) - 1);
            if kind == CANCEL {
                continue;
            }
            let id = (cqe.user_data() >> KIND_BITS) as u32;
            let Some(slot) = slots.get_mut(id as usize) else { continue };
            let res = cqe.result();
            *in_flight -= 1;
            if kind == RECV {
                *receiving -= 1;
                let r = &mut slot.recv;
                r.in_flight = false;
                if slot.closing {
                } else if retry(res) {
                    again.push((id, RECV));
                } else if res < 0 {
                    r.err = Some(io::Error::from_raw_os_error(-res));
                } else {
                    r.end = res as usize;
                    r.eof = res == 0;
                    r.filled = r.end == r.buf.len();
                    // SAFETY: the completion has come, so the kernel is done with the header
                    // and its control buffer, which it wrote up to the `msg_controllen` it set.
                    r.stamp = r.msg.as_deref().and_then(|m| unsafe { stamp_of(&m.hdr) });
                }
                if let Some(w) = r.waker.take() {
                    wake.push(w);
                }
            } else {
                let s = &mut slot.send;
                s.in_flight = false;
                if slot.closing {
                } else if retry(res) {
                    again.push((id, SEND));
                } else if res <= 0 {
                    s.err = Some(match res {
                        0 => io::Error::from(io::ErrorKind::WriteZero),
                        _ => io::Error::from_raw_os_error(-res),
                    });
                    s.queue.clear();
                } else {
                    s.off += res as usize;
                    if s.off >= s.buf.len() && !s.queue.is_empty() {
                        std::mem::swap(&mut s.buf, &mut s.queue);
                        s.queue.clear();
                        s.off = 0;
                    }
                    if s.off < s.buf.len() {
                        again.push((id, SEND));
                    } else {
                        if *frugal {
                            // Sent: the bytes are the kernel's now.
                            s.buf = Vec::new();
                            s.off = 0;
                        }
                        if s.shut {
                            // Nobody waits on it (see `poll_shutdown`); a failure shows in
                            // reads.
                            let _ = shut_write(slot.sock.as_ref());
                        }
                    }
                }
                if let Some(w) = s.waker.take() {
                    wake.push(w);
                }
            }
            if slot.closing && !slot.recv.in_flight && !slot.send.in_flight {
                // Closes the socket and gives back the buffers' memory.
                *slot = Slot::default();
                free.push(id);
            }
        }
        for (id, kind) in again {
            if kind == RECV {
                self.push_recv(id, true);
            } else {
                self.push_send(id);
            }
        }
    }

    /// Closes the slot's socket and gives back its buffers' memory (an idle slot holds none).
    fn release(&mut self, id: u32) {
        self.slots[id as usize] = Slot::default();
        self.free.push(id);
    }
}
