//! One accepted connection: the TLS handshake when configured, then the choice of protocol.
//!
//! Over TLS, ALPN decides: `h2` gets HTTP/2. Otherwise (plaintext, or TLS that negotiated
//! `http/1.1` or nothing) the first bytes decide: the HTTP/2 connection preface means HTTP/2 with
//! prior knowledge, as `curl --http2-prior-knowledge` and `h2load` send it; anything else is
//! HTTP/1.1. The bytes read to decide are handed on, so neither protocol loses any and HTTP/1.1
//! pays no extra read: detection is its first read.
//!
//! `Upgrade: h2c` (what `curl --http2` sends to an http:// URL) is ignored and answered in
//! HTTP/1.1, as RFC 9110 §7.8 allows; RFC 9113 deprecated that upgrade, and clients that want
//! HTTP/2 in plaintext use prior knowledge.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::rewind::Rewind;
use crate::server::Shared;
use crate::state::Totals;
use crate::stats::LimitKind;
use crate::{h1, http2, tls};

/// Ends a connection abruptly: the next close sends a TCP RST instead of a FIN (SO_LINGER 0),
/// which is how an HTTP/1.1 server "resets" a request.
pub(crate) trait Abort {
    fn abort(&self);
}

impl Abort for TcpStream {
    fn abort(&self) {
        let _ = self.set_zero_linger();
    }
}

impl Abort for tokio_rustls::server::TlsStream<TcpStream> {
    fn abort(&self) {
        let _ = self.get_ref().0.set_zero_linger();
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(crate) async fn serve(stream: TcpStream, shared: Arc<Shared>, shutdown: watch::Receiver<()>) {
    // Responses are batched per read (HTTP/1.1) or per flush (HTTP/2); Nagle would only hold
    // back the last segment of a response until the peer acknowledges the previous one.
    let _ = stream.set_nodelay(true);
    // A connection that has sent nothing is idle, not slow: load generators open connections
    // ahead of their first request (prefetching, a scheduled start). The TLS handshake has its
    // own timeout, so over TLS the clock starts once it is done.
    let (idle_timeout, header_timeout) = {
        let limits = shared.config.limits();
        (limits.idle_timeout, limits.header_timeout)
    };
    match &shared.tls {
        None => detect(stream, shared, shutdown, Instant::now() + idle_timeout).await,
        Some(acceptor) => {
            let Some(stream) = handshake(acceptor, stream, &shared, shutdown.clone()).await else {
                return;
            };
            if stream.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
                // HTTP/2 clients send their preface and first request with the handshake's
                // last flight: the first request is due a header timeout from here.
                Totals::count(&shared.state.totals().http2);
                let deadline = Instant::now() + header_timeout;
                http2::serve(stream, shared, shutdown, deadline).await;
            } else {
                detect(stream, shared, shutdown, Instant::now() + idle_timeout).await;
            }
        }
    }
}

async fn handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    shared: &Shared,
    mut shutdown: watch::Receiver<()>,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let totals = shared.state.totals();
    let timeout = shared.config.tls_handshake_timeout();
    let outcome = tokio::select! {
        biased;
        // Nothing has been served on this connection yet, so shutdown can drop it outright.
        _ = shutdown.changed() => return None,
        outcome = tokio::time::timeout(timeout, acceptor.accept(stream)) => outcome,
    };
    match outcome {
        Ok(Ok(stream)) => {
            Totals::count(&totals.tls_handshakes);
            Some(stream)
        }
        // A peer that is not speaking TLS, distrusts our certificate or stalls: only this
        // connection is affected, and it is counted rather than logged (a misconfigured
        // client would otherwise flood stderr with one line per connection).
        Ok(Err(_)) | Err(_) => {
            Totals::count(&totals.tls_handshake_failures);
            None
        }
    }
}

/// Reads until the first bytes tell HTTP/2's preface from an HTTP/1.1 request, then serves.
/// A peer silent until `idle_by` is closed as idle; from its first byte, the first request
/// head (or HTTP/2 request) is due within the header timeout, and a peer dribbling a preface
/// past it is closed as a header timeout.
async fn detect<S>(
    mut stream: S,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
    idle_by: Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + Abort + 'static,
{
    let mut buf = Vec::with_capacity(h1::READ_BUF);
    let mut head_by = None;
    let http2 = loop {
        let deadline = head_by.unwrap_or(idle_by);
        let read = tokio::select! {
            biased;
            read = stream.read_buf(&mut buf) => read,
            // An idle connection closes at once on shutdown, as HTTP/1.1 keep-alive ones do.
            _ = shutdown.changed() => return,
            // Nothing that could be answered has arrived, so no 408: just close.
            () = tokio::time::sleep_until(deadline) => {
                let kind = match head_by {
                    None => LimitKind::IdleTimeout,
                    Some(_) => LimitKind::HeaderTimeout,
                };
                shared.state.stats().limit(kind);
                return;
            }
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        head_by.get_or_insert_with(|| Instant::now() + shared.config.limits().header_timeout);
        if let Some(http2) = is_preface(&buf) {
            break http2;
        }
    };
    let deadline = head_by.unwrap_or(idle_by);
    if http2 {
        Totals::count(&shared.state.totals().http2);
        http2::serve(Rewind::new(buf, stream), shared, shutdown, deadline).await;
    } else {
        Totals::count(&shared.state.totals().http1);
        h1::serve(stream, buf, deadline, shared, shutdown).await;
    }
}

/// `Some(true)` for the HTTP/2 preface, `Some(false)` as soon as the bytes diverge from it,
/// `None` while they are a strict prefix of it. No HTTP/1.1 method starts with "PRI ", so one
/// read nearly always decides.
fn is_preface(buf: &[u8]) -> Option<bool> {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        Some(false)
    } else if n == PREFACE.len() {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preface_detection() {
        assert_eq!(is_preface(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(is_preface(b"P"), None);
        assert_eq!(is_preface(b"POST / HTTP/1.1\r\n"), Some(false));
        assert_eq!(is_preface(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(is_preface(PREFACE), Some(true));
        let mut with_settings = PREFACE.to_vec();
        with_settings.extend_from_slice(&[0, 0, 0, 4]);
        assert_eq!(is_preface(&with_settings), Some(true));
        assert_eq!(is_preface(b"PRI * HTTP/1.1\r\n\r\n"), Some(false));
    }
}
