//! The connection's driver: the one task that owns the socket.

use std::future::poll_fn;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame::{self, Head};
use super::{conn_error, Conn, ConnError, Ended, Inner, DRIVER_BUDGET, READ_BUFFER};

/// The least room a read is given.
const MIN_READ: usize = 4096;

/// The read side's buffer: frames are dispatched in place from `buf[start..end]`.
pub(super) struct ReadBuffer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The last read filled all the room it had: more is likely waiting, so double.
    full: bool,
}

impl ReadBuffer {
    /// Nothing is allocated until the first read: an idle connection holds no read buffer.
    pub(super) fn new() -> ReadBuffer {
        ReadBuffer { buf: Vec::new(), start: 0, end: 0, full: false }
    }

    /// Room for the next read: for the rest of the frame in progress (its header tells its
    /// size) and at least [`MIN_READ`] bytes. The buffer doubles only when a frame needs it or a
    /// read filled it (small responses keep 4 KiB; bulk ones reach 32 KiB, so a read takes
    /// what a batch of responses holds), and compacts only when the frame in progress would
    /// not fit, so bulk bodies are rarely moved.
    pub(super) fn spare(&mut self) -> &mut [u8] {
        let pending = self.end - self.start;
        let frame = match self.buf.get(self.start..self.start + frame::HEADER_LEN) {
            Some(h) if pending >= frame::HEADER_LEN => {
                let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                frame::HEADER_LEN + len
            }
            _ => frame::HEADER_LEN,
        };
        // `dispatch` refused any frame larger than we accept, so this never exceeds the cap.
        let grown = if std::mem::take(&mut self.full) { 2 * self.buf.len() } else { 0 };
        let need = frame.max(pending + MIN_READ).max(grown).min(READ_BUFFER);
        if self.start > 0 && self.start + need > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end = pending;
            self.start = 0;
        }
        if need > self.buf.len() {
            self.buf.resize(need.next_power_of_two().min(READ_BUFFER), 0);
        }
        &mut self.buf[self.end..]
    }

    pub(super) fn filled(&mut self, n: usize) {
        self.end += n;
        self.full = self.end == self.buf.len();
    }
}

/// When the bytes of a stream's last read reached its socket, where the kernel stamped them
/// (`--read-coalesce`): a response's end is then when it arrived, not when the driver read it.
pub(crate) trait Arrival {
    fn arrival(&self) -> Option<Instant>;
}

/// Drives the connection until it ends: writes what streams queue, reads and dispatches the
/// server's frames, and closes once no handle is left and no stream is open.
pub(crate) async fn drive<T: AsyncRead + AsyncWrite + Arrival + Unpin>(
    conn: &Rc<Conn>,
    mut io: T,
) -> Ended {
    let mut d = DriverState { rd: ReadBuffer::new(), written: 0, unflushed: false, closing: None };
    let ended = poll_fn(|cx| d.poll(conn, &mut io, cx)).await;
    conn.inner.borrow_mut().end(&ended);
    ended
}

/// The driver's own state between polls.
struct DriverState {
    rd: ReadBuffer,
    /// Bytes of the queued frames already written.
    written: usize,
    /// Written since the last flush (TLS holds records until flushed).
    unflushed: bool,
    /// Our GOAWAY is queued: the connection ends this way once it is out.
    closing: Option<Ended>,
}

impl DriverState {
    /// One poll of the driver: up to [`DRIVER_BUDGET`] rounds of writing and reading.
    fn poll<T: AsyncRead + AsyncWrite + Arrival + Unpin>(
        &mut self,
        conn: &Rc<Conn>,
        io: &mut T,
        cx: &mut Context<'_>,
    ) -> Poll<Ended> {
        let DriverState { rd, written, unflushed, closing } = self;
        let mut io = Pin::new(io);
        for _ in 0..DRIVER_BUDGET {
            let mut i = conn.inner.borrow_mut();
            if !i.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                i.driver = Some(cx.waker().clone());
            }
            // Write what is queued.
            while *written < i.out.len() {
                match io.as_mut().poll_write(cx, &i.out[*written..]) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Ended::Io("the socket took no bytes".into()))
                    }
                    Poll::Ready(Ok(n)) => {
                        *written += n;
                        *unflushed = true;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(io_ended(&i, &e)),
                    Poll::Pending => break,
                }
            }
            if *written == i.out.len() && *written > 0 {
                i.out.clear();
                *written = 0;
                i.queue_bodies();
                if !i.out.is_empty() {
                    continue;
                }
            }
            // TLS holds records until flushed; plain TCP's flush is a no-op.
            if *unflushed && i.out.is_empty() {
                match io.as_mut().poll_flush(cx) {
                    Poll::Ready(Ok(())) => *unflushed = false,
                    Poll::Ready(Err(e)) => return Poll::Ready(io_ended(&i, &e)),
                    Poll::Pending => {}
                }
            }
            if let Some(how) = closing.as_ref().filter(|_| i.out.is_empty() && !*unflushed) {
                // Our GOAWAY is out: close the write side, best effort.
                let _ = io.as_mut().poll_shutdown(cx);
                return Poll::Ready(how.clone());
            }
            if closing.is_none() && i.open == 0 {
                let idle = Rc::strong_count(conn) == 1;
                if idle || i.exhausted {
                    let last = i.next_id.saturating_sub(2);
                    frame::put_goaway(&mut i.out, last, frame::NO_ERROR);
                    *closing = Some(Ended::Local);
                    continue;
                }
                if let Some((_, code)) = i.goaway {
                    return Poll::Ready(Ended::GoAway(code));
                }
            }
            // Read and dispatch.
            let mut b = ReadBuf::new(rd.spare());
            match io.as_mut().poll_read(cx, &mut b) {
                Poll::Ready(Ok(())) if b.filled().is_empty() => {
                    return Poll::Ready(match i.goaway {
                        Some((_, code)) => Ended::GoAway(code),
                        None => Ended::Io("the server closed the connection".into()),
                    });
                }
                Poll::Ready(Ok(())) => {
                    let n = b.filled().len();
                    rd.filled(n);
                    i.rx_at = io.as_ref().get_ref().arrival();
                }
                Poll::Ready(Err(e)) => return Poll::Ready(io_ended(&i, &e)),
                Poll::Pending => return Poll::Pending,
            }
            if let Err((code, msg)) = dispatch(&mut i, rd) {
                // Our GOAWAY goes out with whatever is queued; the connection is over either way.
                i.out.drain(..*written);
                *written = 0;
                let last = i.next_id.saturating_sub(2);
                frame::put_goaway(&mut i.out, last, code);
                let _ = io.as_mut().poll_write(cx, &i.out);
                let _ = io.as_mut().poll_flush(cx);
                return Poll::Ready(Ended::Protocol(code, msg));
            }
        }
        // Out of budget: let the worker's other tasks run, then carry on.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// An I/O error ends the connection; after a GOAWAY it is the server's close.
fn io_ended(i: &Inner, e: &std::io::Error) -> Ended {
    match i.goaway {
        Some((_, code)) => Ended::GoAway(code),
        None => Ended::Io(e.to_string()),
    }
}

/// Dispatches every whole frame in the read buffer.
pub(super) fn dispatch(i: &mut Inner, rd: &mut ReadBuffer) -> Result<(), ConnError> {
    while rd.end - rd.start >= frame::HEADER_LEN {
        let head: &[u8; frame::HEADER_LEN] = rd.buf[rd.start..rd.start + frame::HEADER_LEN]
            .try_into()
            .map_err(|_| (frame::PROTOCOL_ERROR, String::from("frame header")))?;
        let h = Head::parse(head);
        if h.len > frame::DEFAULT_MAX_FRAME {
            if !i.settings_seen && rd.buf[rd.start..].starts_with(b"HTTP/") {
                return conn_error(
                    frame::PROTOCOL_ERROR,
                    "the server answered in HTTP/1.x: it does not speak HTTP/2 here \
                     (h2c needs prior knowledge; over TLS, ALPN h2)",
                );
            }
            return conn_error(frame::FRAME_SIZE_ERROR, format!("a {}-byte frame", h.len));
        }
        let whole = frame::HEADER_LEN + h.len;
        if rd.end - rd.start < whole {
            break;
        }
        let payload = &rd.buf[rd.start + frame::HEADER_LEN..rd.start + whole];
        i.on_frame(h, payload)?;
        rd.start += whole;
    }
    if rd.start == rd.end {
        rd.start = 0;
        rd.end = 0;
    }
    Ok(())
}
