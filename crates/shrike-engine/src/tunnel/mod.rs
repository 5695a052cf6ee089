//! HTTP `CONNECT` tunnels (RFC 9110 §9.3.6) through a terminating proxy, Nighthawk's
//! `tunnel_options`: every connection of the run is a tunnel to the target, and then the load's
//! own protocol, with the target's TLS inside the tunnel for `https://` targets. Over an
//! HTTP/1.1 proxy (this module) each is a TCP connection to the proxy (TLS to it when asked)
//! and a `CONNECT host:port` answered 2xx; over HTTP/2 ([`h2`]) and HTTP/3 ([`h3`]) it is a
//! stream of a connection to the proxy. HTTP/3 load rides CONNECT-UDP (RFC 9298): its QUIC
//! packets as datagrams through an HTTP/1.1 or HTTP/2 proxy ([`udp`]) or an HTTP/3 one
//! (`h3_udp`, with its own small QPACK encoder, `qpack`).
//!
//! Accounting: the connection counts (`upstream_cx_total`, pool limits) are the tunnelled
//! connections; a tunnel set up counts in `upstream_cx_tunnel_total` and its set-up time (the
//! `CONNECT` written to its 2xx read) in `benchmark_http_client.tunnel_setup`; a `CONNECT` the
//! proxy refuses, resets or garbles counts in `benchmark.tunnel_failure` with a message naming
//! the answer, not as a failure to connect to the target.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use shrike_stats::{Counter, StatId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub(crate) mod h2;
pub(crate) mod h3;
mod h3_udp;
mod qpack;
pub(crate) mod udp;

use crate::config::{Endpoint, Protocol};
use crate::pool::cx::PoolCx;
use crate::target::Target;
use crate::tls::TlsClient;
use crate::transport::{handshake, unless_stopped, Socket, Transport};

/// Where a run's connections are tunnelled.
#[derive(Debug)]
pub struct Tunnel {
    /// The proxy, resolved.
    pub(crate) proxy: Target,
    /// TLS to the proxy (offering HTTP/1.1 by ALPN); `None`: plain TCP.
    pub(crate) tls: Option<TlsClient>,
    /// The proxy as the user gave it, for messages.
    pub(crate) uri: String,
    /// HTTP/1.1 (a connection per tunnel), HTTP/2 or HTTP/3 (a stream per tunnel).
    pub(crate) protocol: Protocol,
}

impl Tunnel {
    pub(crate) fn new(
        proxy: Target,
        tls: Option<TlsClient>,
        uri: String,
        protocol: Protocol,
    ) -> Tunnel {
        Tunnel { proxy, tls, uri, protocol }
    }
}

/// A worker's connections to a proxy that carry many tunnels each (HTTP/2 and HTTP/3).
pub(crate) struct ProxyConns<C> {
    conns: RefCell<Vec<C>>,
    /// Held while a connection to the proxy is being opened: connections of the run that
    /// find no room meanwhile (all at once, with --prefetch-connections) wait for it rather
    /// than each opening one.
    opening: tokio::sync::Mutex<()>,
}

impl<C> Default for ProxyConns<C> {
    fn default() -> Self {
        ProxyConns { conns: RefCell::default(), opening: tokio::sync::Mutex::default() }
    }
}

impl<C> fmt::Debug for ProxyConns<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyConns({})", self.conns.borrow().len())
    }
}

impl<C: Clone> ProxyConns<C> {
    /// A connection that is `alive` and has `room` for another tunnel, or the one `open`
    /// makes (kept for the next tunnels).
    async fn get<F: std::future::Future<Output = Option<C>>>(
        &self,
        alive: impl Fn(&C) -> bool,
        room: impl Fn(&C) -> bool,
        open: impl FnOnce() -> F,
    ) -> Option<C> {
        let find = || {
            let mut conns = self.conns.borrow_mut();
            conns.retain(&alive);
            conns.iter().find(|c| room(c)).cloned()
        };
        if let Some(c) = find() {
            return Some(c);
        }
        let _one_at_a_time = self.opening.lock().await;
        if let Some(c) = find() {
            return Some(c);
        }
        let c = open().await?;
        self.conns.borrow_mut().push(c.clone());
        Some(c)
    }
}

/// A connection to the proxy that could not be set up: counted as a failed tunnel and noted.
fn proxy_failed<T>(cx: &PoolCx, t: &Tunnel, why: String) -> Option<T> {
    let mut st = cx.state.borrow_mut();
    st.counters.inc(Counter::TunnelFail);
    st.note_error(|| format!("proxy {}: {why}", t.uri));
    None
}

/// `host:port` of a `CONNECT` to `target` (the port always; IPv6 in brackets).
pub(crate) fn authority_of(target: &Target) -> String {
    match target.host.contains(':') {
        true => format!("[{}]:{}", target.host, target.port),
        false => format!("{}:{}", target.host, target.port),
    }
}

/// A QUIC endpoint for HTTP/3 load whose packets all go through a new CONNECT-UDP tunnel to
/// `target` (to be addressed as `peer`), over the proxy's HTTP/2 or HTTP/3 connection; `None`
/// when the tunnel failed (counted in `benchmark.tunnel_failure` and noted).
pub(crate) async fn udp_endpoint(
    cx: &PoolCx,
    t: &Tunnel,
    target: &Target,
    peer: SocketAddr,
) -> Option<quinn::Endpoint> {
    match t.protocol {
        Protocol::Http3 => h3_udp::endpoint(cx, t, target, peer).await,
        _ => udp::endpoint(cx, t, target, peer).await,
    }
}

/// The rest of [`crate::transport::connect`] through a tunnel: `stream` is connected to the
/// proxy at `addr`.
pub(crate) async fn through(
    cx: &PoolCx,
    t: &Tunnel,
    endpoint: &Endpoint,
    addr: &SocketAddr,
    stream: Socket,
) -> Option<Transport> {
    let target = &endpoint.target;
    let authority = authority_of(target);
    let inner_tls = endpoint.tls.as_ref().map(|tls| (tls, target.authority.as_str()));
    match &t.tls {
        None => {
            let mut s = stream;
            establish(cx, t, &authority, &mut s).await?;
            Transport::over(cx, inner_tls, s).await
        }
        Some(proxy_tls) => {
            let peer = format!("proxy {addr}");
            let mut s = handshake(cx, proxy_tls, &peer, Protocol::Http1, stream).await?;
            establish(cx, t, &authority, &mut s).await?;
            Transport::over(cx, inner_tls, s).await
        }
    }
}

/// Sets up the tunnel on `s` and accounts for it; `None` when it failed (counted and noted).
async fn establish<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &PoolCx,
    t: &Tunnel,
    authority: &str,
    s: &mut S,
) -> Option<()> {
    let started = Instant::now();
    let attempt = tokio::time::timeout(cx.connect.timeout, exchange(s, authority));
    let outcome = unless_stopped(cx, attempt).await?;
    settle(cx, t, authority, started, outcome.map(|r| r.map_err(|e| e.to_string())))
}

/// Accounts for a `CONNECT` begun at `started` whose outcome (within the connect timeout) is
/// `outcome`: a tunnel up counts and its set-up is timed; a failure counts and is named.
pub(crate) fn settle<T>(
    cx: &PoolCx,
    t: &Tunnel,
    authority: &str,
    started: Instant,
    outcome: Result<Result<T, String>, tokio::time::error::Elapsed>,
) -> Option<T> {
    let mut st = cx.state.borrow_mut();
    let failure = match outcome {
        Ok(Ok(up)) => {
            st.counters.inc(Counter::TunnelTotal);
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            st.stats.record(StatId::TunnelSetup, took);
            return Some(up);
        }
        Ok(Err(why)) => why,
        Err(_) => format!("no answer within {}s", cx.connect.timeout.as_secs_f64()),
    };
    st.counters.inc(Counter::TunnelFail);
    let how = match t.protocol {
        Protocol::Http2 => " (HTTP/2)",
        Protocol::Http3 => " (HTTP/3)",
        Protocol::Http1 => "",
    };
    st.note_error(|| format!("CONNECT {authority} through proxy {}{how}: {failure}", t.uri));
    None
}

/// Why a `CONNECT` failed.
#[derive(Debug)]
enum Refusal {
    /// The proxy answered, and not 2xx (407, 403, 502, …).
    Status(u16, String),
    Closed,
    Io(io::Error),
    Malformed(String),
    /// Bytes after a 2xx, before anything was sent through the tunnel.
    Extra(usize),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Status(code, reason) => write!(f, "the proxy answered {code} {reason}"),
            Refusal::Closed => f.write_str("the proxy closed the connection without an answer"),
            Refusal::Io(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                write!(f, "the proxy reset the connection ({e})")
            }
            Refusal::Io(e) => write!(f, "{e}"),
            Refusal::Malformed(why) => write!(f, "the proxy's answer is not HTTP/1.1 ({why})"),
            Refusal::Extra(n) => {
                write!(f, "the proxy sent {n} bytes after its answer, before the tunnel was used")
            }
        }
    }
}

impl From<io::Error> for Refusal {
    fn from(e: io::Error) -> Self {
        Refusal::Io(e)
    }
}

/// The largest answer head read (the proxy's headers; its body, if it refused, is not read).
const MAX_HEAD: usize = 16 * 1024;

/// `CONNECT authority` and its answer. Once per connection, so plainly written: the hot path
/// is what the tunnel then carries.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    authority: &str,
) -> Result<(), Refusal> {
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    s.write_all(request.as_bytes()).await?;
    s.flush().await?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(Refusal::Closed);
        }
        head.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&head) {
            Ok(httparse::Status::Complete(len)) => {
                let code = answer.code.unwrap_or(0);
                if !(200..300).contains(&code) {
                    return Err(Refusal::Status(code, answer.reason.unwrap_or("").to_string()));
                }
                return match head.len() - len {
                    0 => Ok(()),
                    extra => Err(Refusal::Extra(extra)),
                };
            }
            Ok(httparse::Status::Partial) if head.len() > MAX_HEAD => {
                return Err(Refusal::Malformed(format!("no end of its head in {MAX_HEAD} bytes")))
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(Refusal::Malformed(e.to_string())),
        }
    }
}
