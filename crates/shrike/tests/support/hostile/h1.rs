//! HTTP/1.1 misbehaviour: each request head is read (bodies are not expected), then answered
//! badly, or not at all.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use super::{Out, Tally};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H1 {
    /// Half a response, then a TCP RST (SO_LINGER 0).
    ResetMidResponse,
    /// Answers, then closes the connection: at once, announced (`connection: close`), or once
    /// it has been idle for a few milliseconds, unannounced (with a FIN, or a RST).
    IdleClose(Close),
    /// Reads requests and never answers.
    Silent,
    /// A valid response, one byte per period (slowloris).
    Drip(Duration),
    /// A status line that is no status line.
    GarbageStatus,
    /// One header larger than any client buffer (64 KiB), then a complete response.
    HugeHead,
    /// Short header lines, forever.
    EndlessHead,
    /// `content-length: -1`.
    NegativeLength,
    /// `content-length` of 2^63 - 1, and a body that never ends.
    HugeLength,
    /// A chunked body cut off mid-chunk by a close.
    TruncatedChunked,
    /// Chunks, forever.
    EndlessChunked,
    /// A chunked body's end, then trailer lines forever.
    EndlessTrailers,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    Announced,
    Fin,
    Reset,
}

/// How long an idle connection lives under [`H1::IdleClose`]: far shorter than the gap between
/// the tests' requests, so nearly every reuse finds it closed.
const IDLE: Duration = Duration::from_millis(5);

pub(super) async fn serve(sock: TcpStream, case: H1, tally: &Tally) -> std::io::Result<()> {
    let (rd, wr) = sock.into_split();
    let mut rx = Requests { rd, buf: Vec::new(), tally };
    let mut out = Out { wr, tally };
    let mut idle_limit = None;
    while rx.next(idle_limit).await? {
        idle_limit = None;
        tally.request();
        match case {
            H1::ResetMidResponse => {
                out.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n").await?;
                out.send(&[b'r'; 100]).await?;
                // Let the first half reach the client before the reset overtakes it.
                tokio::time::sleep(Duration::from_millis(5)).await;
                let sock = rx.rd.reunite(out.wr).map_err(std::io::Error::other)?;
                sock.set_zero_linger()?;
                return Ok(());
            }
            H1::IdleClose(how) => {
                let notice = if how == Close::Announced { "connection: close\r\n" } else { "" };
                let response = format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{notice}\r\nok");
                out.send(response.as_bytes()).await?;
                tally.answered();
                if how == Close::Announced {
                    return Ok(());
                }
                idle_limit = Some(IDLE);
            }
            H1::Silent => {}
            H1::Drip(period) => {
                for &b in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" {
                    out.send(&[b]).await?;
                    tokio::time::sleep(period).await;
                }
                tally.answered();
            }
            H1::GarbageStatus => out.send(b"HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n").await?,
            H1::HugeHead => {
                let mut head = b"HTTP/1.1 200 OK\r\nx-huge: ".to_vec();
                head.resize(head.len() + 64 * 1024, b'h');
                head.extend_from_slice(b"\r\ncontent-length: 0\r\n\r\n");
                out.send(&head).await?;
            }
            H1::EndlessHead => {
                out.send(b"HTTP/1.1 200 OK\r\n").await?;
                out.forever(&b"x-again: and again\r\n".repeat(64)).await?;
            }
            H1::NegativeLength => {
                out.send(b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n").await?
            }
            H1::HugeLength => {
                out.send(b"HTTP/1.1 200 OK\r\ncontent-length: 9223372036854775807\r\n\r\n").await?;
                out.forever(&[b'b'; 64 * 1024]).await?;
            }
            H1::TruncatedChunked => {
                out.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nhello")
                    .await?;
                return Ok(());
            }
            H1::EndlessChunked => {
                out.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").await?;
                let mut chunk = b"10000\r\n".to_vec();
                chunk.resize(chunk.len() + 0x10000, b'c');
                chunk.extend_from_slice(b"\r\n");
                out.forever(&chunk).await?;
            }
            H1::EndlessTrailers => {
                out.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n")
                    .await?;
                out.forever(&b"x-trailer: and another\r\n".repeat(2048)).await?;
            }
        }
    }
    if case == H1::IdleClose(Close::Reset) {
        let sock = rx.rd.reunite(out.wr).map_err(std::io::Error::other)?;
        sock.set_zero_linger()?;
    }
    Ok(())
}

/// Request heads off one connection.
struct Requests<'a> {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
    tally: &'a Tally,
}

impl Requests<'_> {
    /// Waits for the next request head and consumes it. False when the client closed, or sent
    /// nothing for `idle` (when given).
    async fn next(&mut self, idle: Option<Duration>) -> std::io::Result<bool> {
        loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                self.buf.drain(..i + 4);
                return Ok(true);
            }
            let mut chunk = [0u8; 4096];
            let read = self.rd.read(&mut chunk);
            let n = match idle {
                None => read.await?,
                Some(d) => match tokio::time::timeout(d, read).await {
                    Ok(n) => n?,
                    Err(_) => return Ok(false),
                },
            };
            if n == 0 {
                return Ok(false);
            }
            self.tally.received(n);
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}
