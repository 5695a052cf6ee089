//! `CONNECT` (RFC 9110 §9.3.6) on an HTTP/1.1 connection: with `--connect-proxy`, the server
//! opens a TCP connection to the requested `host:port` (if `--proxy-allow` covers every address
//! it resolves to), answers 200 and carries bytes both ways until either side closes or the
//! server shuts down; without it, 405. Either way the connection speaks no more HTTP after a
//! `CONNECT`. Counted under `proxy` in `--stats-path`.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
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
        Some(proxy) => open(authority, proxy).await,
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

/// The connection to `authority`, or the status and reason to refuse with.
async fn open(authority: &str, proxy: &crate::ProxyConfig) -> Result<TcpStream, (u16, String)> {
    let addrs: Vec<_> = match tokio::net::lookup_host(authority).await {
        Ok(a) => a.collect(),
        Err(e) => return Err((400, format!("CONNECT needs HOST:PORT, got {authority:?}: {e}"))),
    };
    if addrs.is_empty() {
        return Err((502, format!("{authority} resolves to no address")));
    }
    if let Some(a) = addrs.iter().find(|a| !proxy.allows(a.ip())) {
        return Err((
            403,
            format!("{authority} resolves to {}, outside this proxy's --proxy-allow", a.ip()),
        ));
    }
    match tokio::time::timeout(proxy.connect_timeout, TcpStream::connect(&addrs[..])).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err((502, format!("connect to {authority}: {e}"))),
        Err(_) => Err((504, format!("connect to {authority}: no answer in time"))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::ProxyConfig;

    #[test]
    fn allowed_networks_match_by_prefix_and_family() {
        let p = ProxyConfig {
            allow: vec![
                ("127.0.0.0".parse().unwrap(), 8),
                ("10.1.0.0".parse().unwrap(), 16),
                ("::1".parse().unwrap(), 128),
            ],
            connect_timeout: Duration::from_secs(1),
        };
        for ok in ["127.9.9.9", "10.1.255.1", "::1"] {
            assert!(p.allows(ok.parse().unwrap()), "{ok}");
        }
        for no in ["128.0.0.1", "10.2.0.1", "::2", "::ffff:127.0.0.1"] {
            assert!(!p.allows(no.parse().unwrap()), "{no}");
        }
        let all = ProxyConfig { allow: vec![("0.0.0.0".parse().unwrap(), 0)], ..p };
        assert!(all.allows("192.0.2.1".parse().unwrap()));
    }
}
