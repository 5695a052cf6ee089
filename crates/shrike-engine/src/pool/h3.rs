//! HTTP/3 (`h3` over `quinn`) for the multiplexing pool ([`super::mux`]): its policy over QUIC
//! connections.
//!
//! - One QUIC endpoint (UDP socket) per worker and address family, shared by its connections
//!   ([`QuicEndpoints`]); the rustls config behind it is built once per run ([`TlsClient`]).
//! - A request goes to the first open connection with fewer than `max_concurrent_streams`
//!   streams; when all are full a new connection opens, up to `connections`. The server's own
//!   stream limit is enforced by QUIC flow control: quinn holds a stream back until the server
//!   grants credit. Unlike h2, a connection at the server's limit still takes new requests,
//!   which wait for credit there (counted in `queue_to_connect`, not service time) rather than
//!   opening another connection: quinn does not expose the server's limit.
//! - The worker's in-flight budget is `max_active_requests`; beyond it the shared dispatch logic
//!   queues, overflows or blocks the pacer.
//! - `max_requests_per_connection` and the server's GOAWAY retire a connection exactly as in
//!   the h2 pool; a request the server refused unprocessed (GOAWAY, H3_REQUEST_REJECTED) is
//!   retried once.
//!
//! The QUIC handshake (which is the TLS handshake) happens inside the connect and so is part of
//! `queue_to_connect`. Response bodies are counted and dropped, never stored.
//!
//! `ssl.session_reused` is not counted: resumption works (rustls' session cache is shared with
//! quinn) but quinn does not report whether a handshake resumed.

use std::cell::RefCell;
use std::future::poll_fn;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, LocalError, StreamError};
use h3::quic::ConnectionErrorIncoming;
use http::{HeaderName, Request};
use shrike_stats::{Counter, Counters};

use super::mux::{with_trace, Answer, ConnState, Mux, MuxConn, MuxPool, StreamFailure};
use super::{capacity_freed, Pool, Pools};
use crate::requests::h2::{origin_latency, RequestTemplate};
use crate::requests::Renderer;
use crate::trace::TraceIds;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
/// The connection half that owns the QUIC connection (h3 calls it the driver): polled until
/// the connection closes.
type H3Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;

/// QPACK's per-entry overhead (RFC 9204 §3.2.1), used to size response headers as h2 does.
const QPACK_ENTRY_OVERHEAD: u64 = 32;

/// A worker's client endpoints, created on first use: one bound to `0.0.0.0:0` for IPv4
/// targets, one to `[::]:0` for IPv6.
#[derive(Default)]
pub(crate) struct QuicEndpoints(RefCell<[Option<quinn::Endpoint>; 2]>);

impl QuicEndpoints {
    fn for_addr(
        &self,
        addr: &SocketAddr,
        source: Option<std::net::IpAddr>,
    ) -> std::io::Result<quinn::Endpoint> {
        let i = usize::from(addr.is_ipv6());
        if let Some(e) = &self.0.borrow()[i] {
            return Ok(e.clone());
        }
        let bind: SocketAddr = match source {
            Some(ip) if ip.is_ipv6() == addr.is_ipv6() => (ip, 0).into(),
            Some(ip) => {
                return Err(std::io::Error::other(format!(
                    "bind address {ip} is of the other IP family than {addr}"
                )))
            }
            None if addr.is_ipv6() => (Ipv6Addr::UNSPECIFIED, 0).into(),
            None => (Ipv4Addr::UNSPECIFIED, 0).into(),
        };
        let e = quinn::Endpoint::client(bind)?;
        self.0.borrow_mut()[i] = Some(e.clone());
        Ok(e)
    }
}

impl QuicEndpoints {
    /// Closes every connection (CONNECTION_CLOSE, H3_NO_ERROR) and waits briefly for the
    /// close to go out; the run's results are already taken, so this never skews them.
    pub(crate) async fn close(&self) {
        let endpoints: Vec<quinn::Endpoint> = self.0.borrow().iter().flatten().cloned().collect();
        for e in &endpoints {
            e.close(quinn::VarInt::from_u32(0x100), b"run over");
        }
        for e in endpoints {
            let _ = tokio::time::timeout(CLOSE_GRACE, e.wait_idle()).await;
        }
    }
}

/// How long the end of a run waits for QUIC close frames to be sent and acknowledged.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// The HTTP/3 protocol of the multiplexing pool.
pub(crate) struct H3;

type H3Conn = MuxConn<H3>;

/// The QUIC connection once established, for its UDP byte counts.
#[derive(Default)]
pub(crate) struct Quic(RefCell<Option<quinn::Connection>>);

impl H3Conn {
    /// Adds the connection's UDP bytes to the counters, once.
    fn count_bytes(&self, counters: &mut Counters) {
        if let Some(q) = self.data.0.take() {
            let s = q.stats();
            counters.add(Counter::CxRxBytesTotal, s.udp_rx.bytes);
            counters.add(Counter::CxTxBytesTotal, s.udp_tx.bytes);
        }
    }
}

impl Mux for H3 {
    type Sender = SendRequest;
    type ConnData = Quic;
    type PoolData = ();
    const NAME: &'static str = "h3";

    fn pool(pool: &Pool) -> Option<&MuxPool<H3>> {
        match pool {
            Pool::H3(p) => Some(p),
            _ => None,
        }
    }

    /// QUIC handshake, h3 setup, start the streams that waited, then drive the connection
    /// until it closes.
    async fn connection_task(pools: Rc<Pools>, conn: Rc<H3Conn>) {
        let p = MuxPool::<H3>::of(&pools, conn.pool);
        let Some((mut driver, sender)) = handshake(&pools, &conn).await else {
            p.connect_failed(&pools, &conn);
            return;
        };
        pools.cx.state.borrow_mut().counters.inc(Counter::CxHttp3Total);
        p.connected(&pools, &conn, sender);
        let err = poll_fn(|cx| driver.poll_close(cx)).await;
        let state = p.disconnected(&conn);
        connection_ended(&pools, &conn, state, &err);
        conn.count_bytes(&mut pools.cx.state.borrow_mut().counters);
        capacity_freed(&pools);
    }

    type Outgoing = (Request<()>, Bytes);

    fn outgoing(
        template: &RequestTemplate,
        renderer: &Renderer,
        trace: Option<TraceIds>,
    ) -> Self::Outgoing {
        with_trace(template.build(renderer), trace)
    }

    fn replayed(request: (Request<()>, Bytes)) -> Self::Outgoing {
        request
    }

    async fn exchange(
        sender: SendRequest,
        request: (Request<()>, Bytes),
        latency_header: Option<&HeaderName>,
        sent: &mut Instant,
    ) -> Result<Answer, StreamFailure> {
        exchange(sender, request, latency_header, sent).await.map_err(Failed::judge)
    }

    /// Counts the bytes of connections still open at the end of the run.
    fn flush_counters(pool: &MuxPool<H3>, counters: &mut Counters) {
        for c in pool.take_conns() {
            c.count_bytes(counters);
        }
    }
}

/// Runs the QUIC handshake against each resolved address in turn, then sets up HTTP/3.
/// The longest a QUIC handshake may take (or `--timeout`, when shorter): one on loopback or a
/// LAN takes milliseconds, and a lost Initial is resent within a second.
pub(crate) const QUIC_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn handshake(pools: &Pools, conn: &H3Conn) -> Option<(H3Driver, SendRequest)> {
    let endpoint = &pools.cfg.endpoints[conn.pool];
    let fail = |msg: String, protocol_error: bool, timed_out: bool| {
        let mut st = pools.cx.state.borrow_mut();
        st.counters.inc(Counter::CxConnectFail);
        if protocol_error {
            st.counters.inc(Counter::CxProtocolError);
        }
        if timed_out {
            st.counters.inc(Counter::CxConnectTimeout);
        }
        st.note_error(|| msg);
        None
    };
    // Invariant: `runner::prepare` refuses HTTP/3 endpoints without a QUIC client config.
    let Some((tls, quic_cfg)) = endpoint.tls.as_ref().and_then(|t| Some((t, t.quic.clone()?)))
    else {
        return fail(format!("{}: HTTP/3 needs TLS", endpoint.target.url()), false, false);
    };
    let name = tls.server_name_str();
    // A port with no QUIC listener never answers (ICMP's refusal does not reach quinn): the
    // handshake is bounded on its own, not by the 30 s request timeout, so a 1 s run against
    // it fails in seconds.
    let timeout = pools.cfg.timeout.min(QUIC_HANDSHAKE_TIMEOUT);
    // Through a CONNECT-UDP tunnel the proxy resolves the target: QUIC only needs an address
    // to call it by, and a name the proxy alone resolves gets a documentation address.
    let tunnel = pools.cx.connect.tunnel.as_deref();
    let fallback = [SocketAddr::from(([192, 0, 2, 1], endpoint.target.port))];
    let addrs = match (tunnel, endpoint.target.addrs.first()) {
        (Some(_), None) => &fallback[..],
        (Some(_), Some(_)) => &endpoint.target.addrs[..1],
        (None, _) => &endpoint.target.addrs[..],
    };
    let mut last = (String::new(), false);
    for addr in addrs {
        let describe = || format!("QUIC handshake with {addr} ({})", tls.describe_sni());
        let quic = match tunnel {
            // A failed tunnel is counted and noted as a refused CONNECT.
            Some(t) => crate::tunnel::udp_endpoint(&pools.cx, t, &endpoint.target, *addr).await?,
            None => match pools.quic.for_addr(addr, pools.cfg.bind_address) {
                Ok(e) => e,
                Err(e) => {
                    last = (format!("cannot open a UDP socket for {addr}: {e}"), false);
                    continue;
                }
            },
        };
        let connecting = match quic.connect_with(quic_cfg.clone(), *addr, &name) {
            Ok(c) => c,
            Err(e) => {
                last = (format!("{} failed: {e}", describe()), false);
                continue;
            }
        };
        let connecting = tokio::time::timeout(timeout, connecting);
        let connecting = crate::transport::unless_stopped(&pools.cx, connecting).await?;
        let connection = match connecting {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                let e = e.to_string();
                let advice = crate::tls::certificate_hint(&e, false);
                last = (format!("{} failed: {e}{advice}", describe()), false);
                continue;
            }
            Err(_) => {
                let msg = format!("{} timed out after {}s", describe(), timeout.as_secs_f64());
                last = (msg, true);
                continue;
            }
        };
        {
            let mut st = pools.cx.state.borrow_mut();
            st.counters.inc(Counter::CxTotal);
            st.counters.inc(Counter::SslHandshake);
        }
        *conn.data.0.borrow_mut() = Some(connection.clone());
        return match h3::client::new(h3_quinn::Connection::new(connection)).await {
            Ok(pair) => Some(pair),
            Err(e) => fail(format!("HTTP/3 setup with {addr}: {e}"), true, false),
        };
    }
    fail(last.0, false, last.1)
}

/// Counts why a connection ended: our close, the server's graceful close (the GOAWAY path),
/// an idle timeout, or an error.
fn connection_ended(
    pools: &Pools,
    conn: &Rc<H3Conn>,
    state: ConnState<SendRequest>,
    err: &ConnectionError,
) {
    let url = || pools.cfg.endpoints[conn.pool].target.url();
    let remote_graceful = matches!(
        err,
        ConnectionError::Remote { 0: ConnectionErrorIncoming::ApplicationClose { error_code }, .. }
            if *error_code == Code::H3_NO_ERROR.value()
    );
    if remote_graceful {
        // A server that closes with H3_NO_ERROR while we still use the connection is
        // draining it (GOAWAY, then close); counted once whether or not the GOAWAY was seen.
        if matches!(state, ConnState::Ready(_)) || conn.goaway.get() {
            note_goaway(pools, conn);
        }
        return;
    }
    if err.is_h3_no_error()
        || matches!(err, ConnectionError::Local { error: LocalError::Closing { .. }, .. })
    {
        // Our own close: the last sender dropped, or the run ended.
        return;
    }
    let mut st = pools.cx.state.borrow_mut();
    match err {
        ConnectionError::Remote { 0: ConnectionErrorIncoming::ApplicationClose { .. }, .. }
        | ConnectionError::Local { .. } => st.counters.inc(Counter::CxProtocolError),
        _ => st.counters.inc(Counter::CxDestroyRemote),
    }
    st.note_error(|| format!("HTTP/3 connection to {}: {err}", url()));
}

fn note_goaway(pools: &Pools, conn: &Rc<H3Conn>) {
    MuxPool::<H3>::of(pools, conn.pool).note_goaway(pools, conn);
}

/// A stream's failure, and whether the response head had arrived.
struct Failed {
    err: StreamError,
    responded: bool,
}

impl From<StreamError> for Failed {
    fn from(err: StreamError) -> Self {
        Failed { err, responded: false }
    }
}

impl Failed {
    fn judge(self) -> StreamFailure {
        let err = &self.err;
        let goaway = matches!(err, StreamError::RemoteClosing { .. });
        let rejected = matches!(
            err,
            StreamError::RemoteTerminate { code, .. } if *code == Code::H3_REQUEST_REJECTED
        );
        StreamFailure {
            responded: self.responded,
            goaway,
            refused: goaway || rejected,
            // QUIC's transport parameters carry the stream limit before any stream opens.
            before_limit: false,
            // Only errors our h3 codec found in the server's frames are protocol errors;
            // resets are stream-level and connection errors are counted by the connection.
            protocol_error: matches!(
                err,
                StreamError::StreamError { .. } | StreamError::HeaderTooBig { .. }
            ),
            message: describe(err),
        }
    }
}

/// Names the HTTP/3 error code so distinct failures stay distinct in the error summary.
fn describe(err: &StreamError) -> String {
    match err {
        StreamError::RemoteTerminate { code, .. } => {
            format!("HTTP/3 stream reset by the server: {code}")
        }
        StreamError::RemoteClosing { .. } => "HTTP/3 stream refused: the server sent GOAWAY".into(),
        StreamError::ConnectionError { 0: e, .. } => {
            format!("HTTP/3 stream ended with its connection: {e}")
        }
        other => format!("HTTP/3 stream: {other}"),
    }
}

/// Sends the request (and body), then reads the response to its end. Returns (status, header
/// bytes, body bytes); header bytes are the QPACK size of the head (name + value + 32 per
/// field, `:status` included), independent of how well the server compressed it. `sent` is
/// set when the stream is actually opened.
async fn exchange(
    mut sender: SendRequest,
    (request, body): (Request<()>, Bytes),
    latency_header: Option<&HeaderName>,
    sent: &mut Instant,
) -> Result<Answer, Failed> {
    let mut stream = sender.send_request(request).await?;
    // The stream is open (and its headers are queued in quinn): waiting for the server's stream
    // credit was queueing, not service time, as waiting for `ready()` is in the h2 pool.
    *sent = Instant::now();
    drop(sender);
    // A server may answer (say 413) without reading the body and stop the stream: then the
    // send fails but the response is what counts, so a send error only surfaces if no
    // response comes.
    let mut send_err = None;
    if !body.is_empty() {
        if let Err(e) = stream.send_data(body).await {
            send_err = Some(e);
        }
    }
    if send_err.is_none() {
        if let Err(e) = stream.finish().await {
            send_err = Some(e);
        }
    }
    let response = match stream.recv_response().await {
        Ok(r) => r,
        Err(e) => return Err(send_err.unwrap_or(e).into()),
    };
    let status = response.status().as_u16();
    let origin = origin_latency(response.headers(), latency_header);
    let header_bytes = response
        .headers()
        .iter()
        .fold(":status".len() as u64 + 3 + QPACK_ENTRY_OVERHEAD, |acc, (k, v)| {
            acc + (k.as_str().len() + v.len()) as u64 + QPACK_ENTRY_OVERHEAD
        });
    let mut body_bytes = 0u64;
    loop {
        match stream.recv_data().await {
            Ok(Some(chunk)) => body_bytes += chunk.remaining() as u64,
            Ok(None) => break,
            Err(err) => return Err(Failed { err, responded: true }),
        }
    }
    Ok((status, header_bytes, body_bytes, origin, None))
}
