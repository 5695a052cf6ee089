//! TCP streams whose receives and sends go through one io_uring per thread, for a
//! single-threaded tokio runtime: Shrike's `--io-backend io_uring`.
//!
//! Why: on the epoll backend every request costs a `sendto`, a `recvfrom` and a share of an
//! `epoll_wait`. Here a stream's send and receive become submission entries, queued where the
//! connection's task asks for them. The first entry of a loop turn schedules the driver task
//! ([`drive`]), which runs after the tasks already ready, so every connection's entries of
//! that turn go to the kernel together in one `io_uring_enter`, which also collects what has
//! completed. Completions that arrive while the thread sleeps ring an eventfd that tokio's
//! epoll watches, and wake the same task. Closed loop at 64 connections, one turn carries
//! about 25 requests for two system calls (an enter and an epoll_wait).
//!
//! Timestamps: by default nothing here waits to fill a batch. The thread sleeps exactly when it
//! would on epoll (no task ready), and a completion wakes it as a readable socket would, so
//! responses are seen, and stamped by the caller, as promptly as on epoll. Under
//! `--read-coalesce` ([`Ring::coalesce`]) the idle thread waits in the ring for a batch
//! ([`park`]), and a stream opened with `stamp` receives with `recvmsg` so that the kernel's
//! receive timestamp says when each response arrived. A send goes to the kernel at
//! the end of the loop turn that queued it rather than at once: that delay (the rest of the
//! turn) falls inside the measured latency, never outside it.
//!
//! Layout: `ring.rs` holds the ring's `unsafe` (the kernel owns a buffer from submission to
//! completion; the slots there keep it alive until then, even past the stream's drop);
//! `stream.rs` is the tokio `AsyncRead`/`AsyncWrite` face. `stamp.rs`, the only other module
//! with `unsafe`, reads the kernel's receive timestamps, for epoll streams and the ring's
//! stamped receives alike (`--read-coalesce`).

#![deny(unsafe_code)]

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::task::Poll;

mod ring;
mod stamp;
mod stream;

pub use ring::Ring;
pub use stamp::{arrival_instant, enable_rx_timestamps, read_clocks, recv_stamped};
pub use stream::UringStream;

thread_local! {
    /// This thread's ring, for streams opened on it.
    static CURRENT: RefCell<Option<Rc<Ring>>> = const { RefCell::new(None) };
}

/// Sets up this thread's ring (must be called inside the tokio runtime that will drive it:
/// its eventfd registers with the runtime's reactor). The caller spawns [`drive`] on the same
/// thread. An error means
/// the kernel refused io_uring (too old, or disabled by `kernel.io_uring_disabled` or a
/// seccomp filter).
pub fn install() -> io::Result<Rc<Ring>> {
    let ring = Rc::new(Ring::new()?);
    CURRENT.with(|c| *c.borrow_mut() = Some(ring.clone()));
    Ok(ring)
}

/// Whether the kernel grants io_uring with the flags the ring uses, checked without
/// installing anything: a run asks before starting its workers, so a refusal is one clear
/// error rather than one per worker.
pub fn available() -> io::Result<()> {
    Ring::probe()
}

/// This thread's ring, if [`install`] was called here.
pub fn current() -> Option<Rc<Ring>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Ends this thread's ring: every operation still in flight is cancelled and waited for
/// (briefly), so no buffer is freed while the kernel may still write into it. Streams must
/// be dropped first.
pub fn uninstall() {
    if let Some(d) = CURRENT.with(|c| c.borrow_mut().take()) {
        d.shutdown();
    }
}

/// The thread is about to sleep with nothing to run (`--read-coalesce`, from the runtime's
/// park hook): waits in this thread's ring, at most `window`, for a batch of responses
/// ([`Ring::park`]). Returns false when the thread has no ring.
pub fn park(window: std::time::Duration) -> bool {
    CURRENT.with(|c| match &*c.borrow() {
        Some(d) => {
            d.park(window);
            true
        }
        None => false,
    })
}

/// The driver task: spawn it on the ring's thread (a `LocalSet`); it runs until the runtime
/// drops it. It is woken by the first entry a loop turn queues, and runs after the tasks that
/// were already ready, so their entries join the submission; and by the eventfd, which the
/// kernel rings when completions wait while the thread sleeps in epoll. Either way it does one
/// turn (submit, collect, wake the tasks concerned) per poll, then yields.
pub async fn drive(ring: Rc<Ring>) {
    std::future::poll_fn(|cx| {
        ring.set_task(cx.waker());
        let rang = match ring.eventfd().poll_read_ready(cx) {
            Poll::Ready(Ok(mut ready)) => {
                ready.clear_ready();
                // Polled again later to re-arm the readiness, after the tasks this turn wakes.
                cx.waker().wake_by_ref();
                true
            }
            Poll::Ready(Err(_)) => return Poll::Ready(()),
            Poll::Pending => false,
        };
        if rang || ring.has_queued() {
            ring.turn(rang || ring.collects_eagerly());
        }
        Poll::Pending
    })
    .await
}
