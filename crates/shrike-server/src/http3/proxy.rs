//! `CONNECT` and CONNECT-UDP on the HTTP/3 port (`shrike serve --tls --http3 --connect-proxy`):
//! a `CONNECT host:port` request stream carries a TCP connection's bytes as its DATA (RFC 9114
//! §4.4); an extended CONNECT for `connect-udp` (RFC 9298 over RFC 9220) has its UDP payloads
//! travel as HTTP/3 datagrams (RFC 9297) on the QUIC connection, which [`Tunnels::carry`] sorts
//! by quarter stream id. The destination is opened by the code the other front ends share
//! ([`crate::proxy`]). A tunnel ends with its stream, with its destination, or when the server
//! shuts down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use h3::error::Code;
use h3::ext::Protocol;
use http::{HeaderValue, Response, StatusCode};
use shrike_h2::capsule;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::stream::{linger, send, Stream};
use crate::http2::response;
use crate::server::Shared;
use crate::stats::ProxyEvent;

/// A QUIC connection's tunnels, when the server is a proxy.
pub(super) struct Tunnels {
    /// CONNECT-UDP tunnels' destinations by quarter stream id.
    udp: Mutex<HashMap<u64, Arc<UdpSocket>>>,
    shutdown: watch::Receiver<()>,
}

impl Tunnels {
    pub(super) fn new(shutdown: watch::Receiver<()>) -> Tunnels {
        Tunnels { udp: Mutex::default(), shutdown }
    }

    /// Reads the connection's datagrams for as long as it lives, each to its tunnel's
    /// destination. One for no tunnel (gone already), of another context, or that the socket
    /// cannot take now is dropped, as UDP drops it.
    pub(super) async fn carry(self: Arc<Self>, quic: quinn::Connection, shared: Arc<Shared>) {
        while let Ok(d) = quic.read_datagram().await {
            let Some((quarter, n)) = capsule::varint(&d) else { continue };
            let Some(payload) = capsule::udp_payload(capsule::DATAGRAM, &d[n..]) else { continue };
            let socket = self.udp.lock().ok().and_then(|m| m.get(&quarter).cloned());
            if socket.is_some_and(|s| s.try_send(payload).is_ok()) {
                let stats = shared.state.stats();
                stats.proxy(ProxyEvent::DatagramsTo, 1);
                stats.proxy(ProxyEvent::BytesTo, payload.len() as u64);
            }
        }
    }
}

/// Serves a `CONNECT` request stream: a tunnel, or the refusal (405 when the server is not a
/// proxy).
pub(super) async fn serve(
    parts: http::request::Parts,
    mut stream: Stream,
    shared: Arc<Shared>,
    quic: quinn::Connection,
    tunnels: Option<Arc<Tunnels>>,
) {
    let stats = shared.state.stats();
    stats.request();
    let (Some(config), Some(tunnels)) = (shared.config.proxy(), tunnels) else {
        let why = "this server is not a proxy (start shrike serve with --connect-proxy)";
        return refuse(&mut stream, &shared, 405, why).await;
    };
    let protocol = parts.extensions.get::<Protocol>().copied();
    if protocol == Some(Protocol::CONNECT_UDP) {
        match crate::proxy::open_udp(parts.uri.path().as_bytes(), config).await {
            Ok(socket) => udp(stream, &shared, &quic, &tunnels, socket).await,
            Err((status, why)) => refuse(&mut stream, &shared, status, &why).await,
        }
        return;
    }
    if let Some(p) = protocol {
        let why = format!("this proxy speaks CONNECT and CONNECT-UDP, not {:?}", p.as_str());
        return refuse(&mut stream, &shared, 501, &why).await;
    }
    let authority = parts.uri.authority().map(|a| a.as_str()).unwrap_or_default();
    match crate::proxy::open_tcp(authority, config).await {
        Ok(tcp) => self::tcp(stream, &shared, &tunnels, tcp).await,
        Err((status, why)) => refuse(&mut stream, &shared, status, &why).await,
    }
}

async fn refuse(stream: &mut Stream, shared: &Shared, status: u16, why: &str) {
    let stats = shared.state.stats();
    stats.proxy(if status < 500 { ProxyEvent::Refused } else { ProxyEvent::Failed }, 1);
    stats.response(status, why.len() as u64 + 1);
    if send(stream, response::text(status, why, false)).await.is_ok() {
        linger(stream).await;
    }
}

/// The 200 that opens a tunnel; a CONNECT-UDP one speaks capsules (RFC 9297 §3.4).
async fn open(stream: &mut Stream, shared: &Shared, udp: bool) -> bool {
    let mut head = Response::new(());
    *head.status_mut() = StatusCode::OK;
    head.headers_mut().insert(http::header::SERVER, HeaderValue::from_static("shrike"));
    if udp {
        head.headers_mut().insert("capsule-protocol", HeaderValue::from_static("?1"));
    }
    if stream.send_response(head).await.is_err() {
        return false;
    }
    let stats = shared.state.stats();
    stats.response(200, 0);
    stats.proxy(ProxyEvent::Tunnel, 1);
    if udp {
        stats.proxy(ProxyEvent::UdpTunnel, 1);
    }
    true
}

/// Which end of a tunnel failed.
enum Side {
    /// The client reset or stopped its stream: the tunnel just ends.
    Client,
    /// The destination failed: the stream is reset with H3_CONNECT_ERROR (RFC 9114 §4.4) and
    /// counted as a failed tunnel.
    Destination,
}

/// Carries bytes both ways until both sides have ended, either fails, or the server shuts
/// down.
async fn tcp(mut stream: Stream, shared: &Shared, tunnels: &Tunnels, tcp: tokio::net::TcpStream) {
    if !open(&mut stream, shared, false).await {
        return;
    }
    let stats = shared.state.stats();
    let (mut send, mut recv) = stream.split();
    let (mut from, mut to) = tcp.into_split();
    let up = async {
        loop {
            match recv.recv_data().await {
                Ok(Some(mut chunk)) => {
                    let n = chunk.remaining() as u64;
                    while chunk.has_remaining() {
                        let piece = chunk.chunk();
                        to.write_all(piece).await.map_err(|_| Side::Destination)?;
                        let len = piece.len();
                        chunk.advance(len);
                    }
                    stats.proxy(ProxyEvent::BytesTo, n);
                }
                // A half-close: the destination sees the client's FIN.
                Ok(None) => return to.shutdown().await.map_err(|_| Side::Destination),
                Err(_) => return Err(Side::Client),
            }
        }
    };
    let down = async {
        let mut buf = vec![0; 32 * 1024];
        loop {
            let n = from.read(&mut buf).await.map_err(|_| Side::Destination)?;
            if n == 0 {
                return send.finish().await.map_err(|_| Side::Client);
            }
            let data = Bytes::copy_from_slice(&buf[..n]);
            send.send_data(data).await.map_err(|_| Side::Client)?;
            stats.proxy(ProxyEvent::BytesFrom, n as u64);
        }
    };
    let mut shutdown = tunnels.shutdown.clone();
    let failed = tokio::select! {
        carried = async { tokio::try_join!(up, down) } => carried.err(),
        // Shutting down: the tunnel ends with the server, as HTTP/1.1's does.
        _ = shutdown.changed() => None,
    };
    let code = match failed {
        None => return,
        Some(Side::Client) => Code::H3_REQUEST_CANCELLED,
        Some(Side::Destination) => {
            stats.proxy(ProxyEvent::Failed, 1);
            Code::H3_CONNECT_ERROR
        }
    };
    send.stop_stream(code);
    recv.stop_sending(code);
}

/// Forwards the destination's datagrams to the client until the request stream ends (the
/// client's datagrams go the other way through [`Tunnels::carry`]).
async fn udp(
    mut stream: Stream,
    shared: &Shared,
    quic: &quinn::Connection,
    tunnels: &Tunnels,
    socket: UdpSocket,
) {
    let quarter = stream.id().into_inner() / 4;
    let socket = Arc::new(socket);
    if let Ok(mut m) = tunnels.udp.lock() {
        m.insert(quarter, socket.clone());
    }
    if !open(&mut stream, shared, true).await {
        if let Ok(mut m) = tunnels.udp.lock() {
            m.remove(&quarter);
        }
        return;
    }
    let stats = shared.state.stats();
    let (mut send, mut recv) = stream.split();
    let (prefix, n) = capsule::encode_varint(quarter);
    let down = async {
        let mut buf = vec![0; 65_536];
        loop {
            // An error is an ICMP report about an earlier datagram: lost, as on the network.
            let Ok(len) = socket.recv(&mut buf).await else { continue };
            let mut d = BytesMut::with_capacity(n + 1 + len);
            d.extend_from_slice(&prefix[..n]);
            // Context id 0: a UDP payload (RFC 9298 §5).
            d.extend_from_slice(&[0]);
            d.extend_from_slice(&buf[..len]);
            match quic.send_datagram(d.freeze()) {
                Ok(()) => {
                    stats.proxy(ProxyEvent::DatagramsFrom, 1);
                    stats.proxy(ProxyEvent::BytesFrom, len as u64);
                }
                // Larger than the connection's DATAGRAM frames: dropped, as a link drops it.
                Err(quinn::SendDatagramError::TooLarge) => {}
                Err(_) => return,
            }
        }
    };
    // The stream carries no capsules we use; its end ends the tunnel.
    let held = async { while let Ok(Some(_)) = recv.recv_data().await {} };
    let mut shutdown = tunnels.shutdown.clone();
    tokio::select! {
        _ = down => {}
        _ = held => {}
        _ = shutdown.changed() => {}
    }
    if let Ok(mut m) = tunnels.udp.lock() {
        m.remove(&quarter);
    }
    let _ = send.finish().await;
}
