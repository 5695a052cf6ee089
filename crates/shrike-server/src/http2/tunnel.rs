//! The I/O of a connection's tunnels (`shrike serve --connect-proxy` over HTTP/2): opens the
//! destinations its `CONNECT` and CONNECT-UDP streams ask for, and carries bytes between each
//! destination and its stream, polled by the connection's own task with everything else it
//! waits for. The streams' side, flow control included, is [`super::conn`]'s.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use shrike_h2::{capsule, frame};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UdpSocket};

use super::conn::{Conn, Dest};
use crate::proxy::{self, Refusal};
use crate::server::Shared;
use crate::stats::ProxyEvent;

/// One read from a destination: a TCP read's worth, or the largest UDP payload.
const READ: usize = 64 * 1024;

type Opening = Pin<Box<dyn Future<Output = Result<Socket, Refusal>> + Send>>;

enum Socket {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

enum State {
    Opening(Opening),
    Open(Socket),
}

struct Entry {
    id: u32,
    state: State,
    /// Our write side to the destination is shut (the client ended its side).
    shut: bool,
}

/// A connection's tunnels.
#[derive(Default)]
pub(super) struct Tunnels {
    list: Vec<Entry>,
    /// Made on the first tunnel: most connections have none.
    buf: Vec<u8>,
}

impl Tunnels {
    /// Starts the destinations `conn` was asked for (refuses them once the server is
    /// `closing`), and moves every tunnel on as far as it can go now. Returns whether
    /// anything happened.
    pub(super) fn poll(
        &mut self,
        conn: &mut Conn,
        shared: &Arc<Shared>,
        closing: bool,
        cx: &mut Context<'_>,
    ) -> bool {
        for (id, dest) in conn.take_opens() {
            let Some(config) = shared.config.proxy().cloned() else { continue };
            if closing {
                conn.tunnel_refused(id, 503, "the server is shutting down");
                continue;
            }
            let opening: Opening = match dest {
                Dest::Tcp(authority) => {
                    Box::pin(
                        async move { proxy::open_tcp(&authority, &config).await.map(Socket::Tcp) },
                    )
                }
                Dest::Udp(path) => {
                    Box::pin(async move { proxy::open_udp(&path, &config).await.map(Socket::Udp) })
                }
            };
            self.list.push(Entry { id, state: State::Opening(opening), shut: false });
        }
        if self.list.is_empty() {
            return false;
        }
        if self.buf.is_empty() {
            self.buf = vec![0; READ];
        }
        let mut progressed = false;
        let mut i = 0;
        while i < self.list.len() {
            let (keep, moved) = step(&mut self.list[i], conn, shared, &mut self.buf, cx);
            progressed |= moved;
            if keep {
                i += 1;
            } else {
                self.list.swap_remove(i);
            }
        }
        progressed
    }

    /// Ends every tunnel: the server is shutting down.
    pub(super) fn close_all(&mut self, conn: &mut Conn) {
        for e in self.list.drain(..) {
            conn.tunnel_close(e.id);
        }
    }
}

/// Moves one tunnel on: whether to keep it, and whether anything happened.
fn step(
    e: &mut Entry,
    conn: &mut Conn,
    shared: &Shared,
    buf: &mut [u8],
    cx: &mut Context<'_>,
) -> (bool, bool) {
    if !conn.tunnel_alive(e.id) {
        // Reset by the client, or done: the destination is dropped (closed).
        return (false, false);
    }
    let mut moved = false;
    if let State::Opening(opening) = &mut e.state {
        match opening.as_mut().poll(cx) {
            Poll::Pending => return (true, false),
            Poll::Ready(Err((status, why))) => {
                conn.tunnel_refused(e.id, status, &why);
                return (false, true);
            }
            Poll::Ready(Ok(socket)) => {
                e.state = State::Open(socket);
                conn.tunnel_opened(e.id);
                moved = true;
            }
        }
    }
    let State::Open(socket) = &mut e.state else { return (true, moved) };
    let stats = shared.state.stats();
    // The client's bytes to the destination.
    loop {
        let Some(view) = conn.tunnel_view(e.id) else { return (false, true) };
        let udp = matches!(socket, Socket::Udp(_));
        if udp && view.client_ended && capsule::parse(view.up) == Ok(None) && !view.up.is_empty() {
            // The client ended inside a capsule: the stream is malformed (RFC 9297 §3.3).
            conn.tunnel_lost(e.id, frame::PROTOCOL_ERROR);
            return (false, true);
        }
        if view.up.is_empty() {
            if view.client_ended && !e.shut {
                if let Socket::Tcp(tcp) = socket {
                    // A half-close: the destination sees the client's FIN.
                    let _ = Pin::new(tcp).poll_shutdown(cx);
                }
                e.shut = true;
            }
            break;
        }
        let sent = match socket {
            Socket::Tcp(tcp) => match Pin::new(tcp).poll_write(cx, view.up) {
                Poll::Ready(Ok(0)) => Err(()),
                Poll::Ready(Ok(n)) => {
                    stats.proxy(ProxyEvent::BytesTo, n as u64);
                    Ok(Some(n))
                }
                Poll::Ready(Err(_)) => Err(()),
                Poll::Pending => Ok(None),
            },
            Socket::Udp(udp) => send_capsules(udp, view.up, cx, shared),
        };
        match sent {
            Ok(Some(n)) => {
                conn.tunnel_wrote(e.id, n);
                moved = true;
            }
            Ok(None) => break,
            Err(()) => {
                let code = if matches!(socket, Socket::Tcp(_)) {
                    frame::CONNECT_ERROR
                } else {
                    frame::PROTOCOL_ERROR
                };
                conn.tunnel_lost(e.id, code);
                return (false, true);
            }
        }
    }
    // The destination's bytes to the client.
    while conn.tunnel_view(e.id).is_some_and(|v| v.wants_down) {
        match socket {
            Socket::Tcp(tcp) => {
                let mut rb = ReadBuf::new(buf);
                match Pin::new(tcp).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => conn.tunnel_eof(e.id),
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        stats.proxy(ProxyEvent::BytesFrom, n as u64);
                        conn.tunnel_received(e.id, &[&buf[..n]]);
                    }
                    Poll::Ready(Err(_)) => {
                        conn.tunnel_lost(e.id, frame::CONNECT_ERROR);
                        return (false, true);
                    }
                    Poll::Pending => break,
                }
            }
            Socket::Udp(udp) => {
                let mut rb = ReadBuf::new(buf);
                match udp.poll_recv(cx, &mut rb) {
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        stats.proxy(ProxyEvent::DatagramsFrom, 1);
                        stats.proxy(ProxyEvent::BytesFrom, n as u64);
                        let prefix = capsule::datagram_prefix(n);
                        conn.tunnel_received(e.id, &[prefix.as_slice(), &buf[..n]]);
                    }
                    // An ICMP error from an earlier datagram (nothing listens there): UDP
                    // loses it as the network would.
                    Poll::Ready(Err(_)) => {}
                    Poll::Pending => break,
                }
            }
        }
        moved = true;
    }
    (true, moved)
}

/// Sends the datagrams of the whole capsules at the start of `up`, as many as the socket takes
/// now: how many bytes of `up` are done with (`None`: none yet), `Err` for a capsule longer
/// than any datagram (RFC 9297 §3.3: the stream is malformed). Credit goes back once for all
/// of them, and `up` is drained once.
fn send_capsules(
    udp: &UdpSocket,
    up: &[u8],
    cx: &mut Context<'_>,
    shared: &Shared,
) -> Result<Option<usize>, ()> {
    let mut done = 0;
    while let Some((kind, value)) = capsule::parse(&up[done..]).map_err(|_| ())? {
        let end = done + value.end;
        // Another capsule type or context is skipped (RFC 9297 §3.2).
        if let Some(payload) = capsule::udp_payload(kind, &up[done + value.start..end]) {
            match udp.poll_send(cx, payload) {
                Poll::Pending => break,
                Poll::Ready(sent) => {
                    if sent.is_ok() {
                        let stats = shared.state.stats();
                        stats.proxy(ProxyEvent::DatagramsTo, 1);
                        stats.proxy(ProxyEvent::BytesTo, payload.len() as u64);
                    }
                    // A datagram the kernel refused (an ICMP error from an earlier one) is
                    // lost, as on the network.
                    let _: io::Result<usize> = sent;
                }
            }
        }
        done = end;
    }
    Ok((done > 0).then_some(done))
}
