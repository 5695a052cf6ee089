//! `CONNECT` (RFC 9110 §9.3.6) on an HTTP/1.1 connection: with `--connect-proxy`, the server
//! opens a TCP connection to the requested `host:port` (if `--proxy-allow` covers every address
//! it resolves to), answers 200 and carries bytes both ways until either side closes or the
//! server shuts down; without it, 405. Either way the connection speaks no more HTTP after a
//! `CONNECT`. Counted under `proxy` in `--stats-path`.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::response::{self, ConnectionHeader};
use crate::server::Shared;
use crate::stats::ProxyEvent;

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// Serves the `CONNECT authority` whose head has been read; `early` is what the client sent
/// after it (tunnel bytes already). The connection ends with the tunnel.
pub(super) async fn tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    early: &[u8],
    authority: &str,
    shared: &Shared,
    shutdown: &mut watch::Receiver<()>,
) -> io::Result<()> {
    let stats = shared.state.stats();
    stats.request();
    let opened = match shared.config.proxy() {
        None => Err((
            405,
            "this server is not a proxy (start shrike serve with --connect-proxy)".to_string(),
        )),
        Some(proxy) => crate::proxy::open_tcp(authority, proxy).await,
    };
    let mut upstream = match opened {
        Ok(s) => s,
        Err((status, why)) => {
            stats.proxy(if status < 500 { ProxyEvent::Refused } else { ProxyEvent::Failed }, 1);
            stats.response(status, why.len() as u64);
            let mut out = Vec::new();
            response::encode_text(&mut out, status, &why, false, ConnectionHeader::Close);
            stream.write_all(&out).await?;
            return stream.shutdown().await;
        }
    };
    stream.write_all(ESTABLISHED).await?;
    stats.response(200, 0);
    stats.proxy(ProxyEvent::Tunnel, 1);
    if !early.is_empty() {
        upstream.write_all(early).await?;
        stats.proxy(ProxyEvent::BytesTo, early.len() as u64);
    }
    tokio::select! {
        carried = tokio::io::copy_bidirectional(stream, &mut upstream) => {
            let (to, from) = carried?;
            stats.proxy(ProxyEvent::BytesTo, to);
            stats.proxy(ProxyEvent::BytesFrom, from);
        }
        // Shutting down: the tunnel ends with the server.
        _ = shutdown.changed() => {}
    }
    Ok(())
}
