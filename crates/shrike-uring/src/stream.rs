//! A connected TCP stream on the thread's [`Ring`], as tokio's `AsyncRead` + `AsyncWrite`,
//! so codecs and TLS run over it unchanged.

use std::io::{self, IoSlice};
use std::net::TcpStream;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Ring;

/// Writes are accepted into the stream's own buffer and sent at the end of the loop turn
/// (see the crate docs); a send's failure is returned by the next write, flush or shutdown.
/// Dropping the stream cancels what is in flight and closes the socket once the kernel has
/// let go of it.
#[derive(Debug)]
pub struct UringStream {
    ring: Rc<Ring>,
    id: u32,
}

impl UringStream {
    /// Moves a connected socket onto `ring` (this thread's, from [`crate::install`]).
    /// `stamp`: the kernel stamps each receive with its arrival ([`UringStream::arrival`]).
    pub fn new(ring: Rc<Ring>, sock: TcpStream, stamp: bool) -> io::Result<UringStream> {
        let id = ring.open(sock, stamp)?;
        Ok(UringStream { ring, id })
    }

    /// When the bytes of the last read arrived, on the monotonic clock, for a stream opened
    /// with `stamp`; `None` when the receive was unstamped (the caller's clock read stands).
    pub fn arrival(&self) -> Option<Instant> {
        self.ring.arrival(self.id).and_then(crate::arrival_instant)
    }

    fn write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        budgeted(cx, |cx| self.ring.poll_write(self.id, cx, bufs))
    }
}

/// Runs `op` within tokio's cooperative budget, as tokio's own sockets do: a peer that never
/// stops sending would otherwise keep a reading task ready forever, and starve the thread's
/// timers (the request timeout, the run's end).
fn budgeted<T>(cx: &mut Context<'_>, op: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
    let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
    let out = op(cx);
    if out.is_ready() {
        coop.made_progress();
    }
    out
}

impl Drop for UringStream {
    fn drop(&mut self) {
        self.ring.close(self.id);
    }
}

impl AsyncRead for UringStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        budgeted(cx, |cx| self.ring.poll_read(self.id, cx, buf))
    }
}

impl AsyncWrite for UringStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.ring.poll_flush(self.id)
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.ring.poll_shutdown(self.id)
    }
}
