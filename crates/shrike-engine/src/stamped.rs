//! A TCP stream that remembers when its newest received bytes reached the socket, by the
//! kernel's receive timestamp: `--read-coalesce` lets a worker read responses late, on
//! purpose, and this keeps that delay out of their latency.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Instant, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

#[derive(Debug)]
pub(crate) struct StampedTcp {
    stream: TcpStream,
    /// The kernel's stamp on the last receive; `None` when it had none.
    rx: Option<SystemTime>,
}

impl StampedTcp {
    pub fn new(stream: TcpStream) -> io::Result<StampedTcp> {
        shrike_uring::enable_rx_timestamps(stream.as_fd())?;
        Ok(StampedTcp { stream, rx: None })
    }

    /// When the bytes of the last receive arrived, on the monotonic clock. `None` when that
    /// receive was unstamped (stamping is still switching on): the caller's own clock read
    /// stands then. Callers clamp it to no earlier than the request's send, so a wall clock
    /// stepped between the stamp and now cannot move a response before its request.
    pub fn arrival(&self) -> Option<Instant> {
        self.rx.and_then(shrike_uring::arrival_instant)
    }
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let fd = this.stream.as_fd();
            match this
                .stream
                .try_io(Interest::READABLE, || shrike_uring::recv_stamped(fd, unfilled))
            {
                Ok((n, stamp)) => {
                    buf.advance(n);
                    this.rx = stamp;
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale (try_io cleared it): wait for the next.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
