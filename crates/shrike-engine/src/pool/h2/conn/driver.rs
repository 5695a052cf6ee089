//! The connection's driver: the one task that owns the socket.

use std::future::poll_fn;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame::{self, Head};
use super::{conn_error, Conn, ConnError, Ended, Inner, DRIVER_BUDGET, READ_BUFFER};

/// The read side's buffer: frames are dispatched in place from `buf[start..end]`.
pub(super) struct ReadBuffer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuffer {
    pub(super) fn new() -> ReadBuffer {
        ReadBuffer { buf: vec![0; READ_BUFFER], start: 0, end: 0 }
    }

    /// Room for the next read; compacts first, so a whole frame of the largest size we accept
    /// always fits.
    pub(super) fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() - self.end < frame::HEADER_LEN + frame::DEFAULT_MAX_FRAME {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    pub(super) fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

/// Drives the connection until it ends: writes what streams queue, reads and dispatches the
/// server's frames, and closes once no handle is left and no stream is open.
pub(crate) async fn drive<T: AsyncRead + AsyncWrite + Unpin>(conn: &Rc<Conn>, mut io: T) -> Ended {
    let mut rd = ReadBuffer::new();
    let mut written = 0usize;
    let mut unflushed = false;
    let mut closing: Option<Ended> = None;
    let ended = poll_fn(|cx| {
        drive_some(conn, &mut io, cx, &mut rd, &mut written, &mut unflushed, &mut closing)
    })
    .await;
    conn.inner.borrow_mut().end(&ended);
    ended
}

/// One poll of the driver: up to [`DRIVER_BUDGET`] rounds of writing and reading.
fn drive_some<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &Rc<Conn>,
    io: &mut T,
    cx: &mut Context<'_>,
    rd: &mut ReadBuffer,
    written: &mut usize,
    unflushed: &mut bool,
    closing: &mut Option<Ended>,
) -> Poll<Ended> {
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
