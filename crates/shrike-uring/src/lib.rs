//! TCP streams whose receives and sends go through one io_uring per thread, for a
//! single-threaded tokio runtime: Shrike's `--io-backend io_uring`.
//!
//! Why: on the epoll backend every request costs a `sendto`, a `recvfrom` (often two, the
//! second finding nothing) and a share of an `epoll_wait`. Here a stream's send and receive
//! become submission entries, queued where the connection's task asks for them and submitted
//! together, with every other connection's, in one `io_uring_enter` just before the thread
//! parks ([`park`], installed as tokio's `on_thread_park` hook). That same enter collects the
//! completions that have arrived; what arrives while the thread sleeps rings an eventfd that
//! tokio's epoll watches ([`reap`]). Closed loop at 64 connections, one loop turn carries many
//! requests for two system calls.
//!
//! Timestamps: nothing here waits to fill a batch. The thread parks exactly when it would on
//! epoll (no task ready), and a completion wakes it as a readable socket would, so responses
//! are seen, and stamped by the caller, as promptly as on epoll. A send goes to the kernel at
//! the end of the loop turn that queued it rather than at once: that delay (the rest of the
//! turn) falls inside the measured latency, never outside it.
//!
//! Layout: `ring.rs` is the one module with `unsafe` (the kernel owns a buffer from
//! submission to completion; the slots there keep it alive until then, even past the stream's
//! drop); `stream.rs` is the tokio `AsyncRead`/`AsyncWrite` face.

#![deny(unsafe_code)]

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

mod ring;
mod stream;

pub use ring::Driver;
pub use stream::UringStream;

thread_local! {
    /// This thread's driver, for the park hook and for streams opened on it.
    static CURRENT: RefCell<Option<Rc<Driver>>> = const { RefCell::new(None) };
}

/// Sets up this thread's ring (must be called inside the tokio runtime that will drive it:
/// its eventfd registers with the runtime's reactor). The caller spawns [`reap`] on the same
/// thread and builds the runtime with [`park`] as its `on_thread_park` hook. An error means
/// the kernel refused io_uring (too old, or disabled by `kernel.io_uring_disabled` or a
/// seccomp filter).
pub fn install() -> io::Result<Rc<Driver>> {
    let driver = Rc::new(Driver::new()?);
    CURRENT.with(|c| *c.borrow_mut() = Some(driver.clone()));
    Ok(driver)
}

/// Whether the kernel grants io_uring with the flags the driver uses, checked without
/// installing anything: a run asks before starting its workers, so a refusal is one clear
/// error rather than one per worker.
pub fn available() -> io::Result<()> {
    Driver::probe()
}

/// This thread's driver, if [`install`] was called here.
pub fn current() -> Option<Rc<Driver>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Ends this thread's driver: every operation still in flight is cancelled and waited for
/// (briefly), so no buffer is freed while the kernel may still write into it. Streams must
/// be dropped first.
pub fn uninstall() {
    if let Some(d) = CURRENT.with(|c| c.borrow_mut().take()) {
        d.shutdown();
    }
}

/// The `on_thread_park` hook: submit what this turn queued and collect what has completed,
/// in one system call. Completions wake their tasks, and a woken task keeps tokio from
/// blocking, so nothing waits for the next wake-up. A no-op on threads without a driver.
pub fn park() {
    if let Some(d) = current() {
        d.turn();
    }
}

/// For loops that yield rather than park (a spinning pacer): submits queued entries, if any,
/// so a send does not wait for the spin to end.
pub fn flush() {
    if let Some(d) = current() {
        if d.has_queued() {
            d.turn();
        }
    }
}

/// Collects completions that arrive while the thread is blocked in epoll: the kernel rings
/// the driver's eventfd, and this task (spawned on the driver's thread) hands them out. Runs
/// until the runtime drops it.
pub async fn reap(driver: Rc<Driver>) {
    loop {
        let Ok(mut ready) = driver.eventfd().readable().await else {
            return;
        };
        ready.clear_ready();
        driver.turn();
    }
}
