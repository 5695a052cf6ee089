//! `CONNECT` (RFC 9113 §8.5) and CONNECT-UDP (RFC 9298 over RFC 8441's extended CONNECT)
//! streams, the connection's side: a stream asks for a destination, which the driver opens
//! ([`crate::http2::tunnel`]) and answers with [`Conn::tunnel_opened`] or
//! [`Conn::tunnel_refused`]; then the stream's DATA carries bytes (or DATAGRAM capsules) both
//! ways.
//!
//! Flow control ties the client to the destination: the client's bytes wait in the stream
//! until the driver has written them, and only then is their stream credit given back, so a
//! slow destination slows its client down instead of filling the server's memory. The
//! destination's bytes are read only while fewer than [`DOWN_HIGH`] wait for the client's
//! credit.

use shrike_h2::frame;

use super::{Conn, Phase, Stream, STREAM_WINDOW};
use crate::behaviour::Pacing;
use crate::http2::encode;
use crate::http2::response::Payload;
use crate::stats::ProxyEvent;

/// Destination bytes waiting for credit beyond which the driver stops reading it.
const DOWN_HIGH: usize = 64 * 1024;

/// A tunnel stream's state.
#[derive(Debug, Default)]
pub(in crate::http2) struct Tunnel {
    udp: bool,
    /// Our 200 is out.
    open: bool,
    /// The client's bytes not yet written to the destination.
    up: Vec<u8>,
    /// The destination's bytes waiting for the client's credit.
    down: Vec<u8>,
    /// Nothing more comes from the destination: END_STREAM once `down` is out.
    down_ended: bool,
    end_sent: bool,
}

impl Tunnel {
    /// Both ways are over: the destination's end is out and the client's bytes are written.
    pub(super) fn done(&self, client_ended: bool) -> bool {
        self.end_sent && client_ended && self.up.is_empty()
    }

    pub(super) fn wants_credit(&self) -> bool {
        self.open && (!self.down.is_empty() || (self.down_ended && !self.end_sent))
    }
}

/// A destination for the driver to open.
#[derive(Debug)]
pub(in crate::http2) enum Dest {
    /// `CONNECT`'s `:authority`.
    Tcp(String),
    /// CONNECT-UDP's `:path`.
    Udp(Vec<u8>),
}

/// What the driver needs of an open tunnel now.
pub(in crate::http2) struct View<'a> {
    /// Bytes for the destination.
    pub(in crate::http2) up: &'a [u8],
    /// The client has ended its side and every byte of it is in `up`.
    pub(in crate::http2) client_ended: bool,
    /// Room for more from the destination.
    pub(in crate::http2) wants_down: bool,
}

impl Conn {
    /// A `CONNECT` head, decoded into `self.request`: a destination for the driver, or a
    /// refusal.
    pub(super) fn connect_head(&mut self, id: u32, end_stream: bool) {
        let stats = self.shared.state.stats();
        stats.request();
        let dest = match (self.shared.config.proxy(), self.request.protocol()) {
            (None, _) => Err((
                405,
                "this server is not a proxy (start shrike serve with --connect-proxy)".to_string(),
            )),
            (Some(_), None) => {
                Ok(Dest::Tcp(String::from_utf8_lossy(self.request.authority()).into_owned()))
            }
            (Some(_), Some(b"connect-udp")) => Ok(Dest::Udp(self.request.path().to_vec())),
            (Some(_), Some(other)) => Err((
                501,
                format!(
                    "this proxy speaks CONNECT and CONNECT-UDP, not {:?}",
                    String::from_utf8_lossy(other)
                ),
            )),
        };
        let udp = matches!(dest, Ok(Dest::Udp(_)));
        let tunnel = Tunnel { udp, ..Tunnel::default() };
        let block = self.out_scratch();
        let s = Stream {
            phase: Phase::Tunnel(Box::new(tunnel)),
            ended: end_stream,
            declared: None,
            received: 0,
            active: false,
            refused: false,
            head_only: false,
            default: None,
            block,
            payload: Payload::EMPTY,
            pacing: Pacing::default(),
            send_window: self.peer_window,
            recv_window: i64::from(STREAM_WINDOW),
            recv_used: 0,
            queued: false,
            wake: None,
        };
        self.streams.insert(id, s);
        match dest {
            Ok(dest) => self.opens.push((id, dest)),
            Err((status, why)) => self.tunnel_refused(id, status, &why),
        }
    }

    /// The destinations asked for since the last call.
    pub(in crate::http2) fn take_opens(&mut self) -> Vec<(u32, Dest)> {
        std::mem::take(&mut self.opens)
    }

    /// Whether the tunnel's stream is still open; the driver drops a destination whose
    /// stream is gone (reset by the client, or done).
    pub(in crate::http2) fn tunnel_alive(&self, id: u32) -> bool {
        self.streams.get(&id).is_some_and(|s| matches!(s.phase, Phase::Tunnel(_)))
    }

    /// The destination is open: the 200 goes out.
    pub(in crate::http2) fn tunnel_opened(&mut self, id: u32) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        let Phase::Tunnel(t) = &mut s.phase else {
            self.streams.insert(id, s);
            return;
        };
        t.open = true;
        let udp = t.udp;
        let stats = self.shared.state.stats();
        stats.response(200, 0);
        stats.proxy(ProxyEvent::Tunnel, 1);
        if udp {
            stats.proxy(ProxyEvent::UdpTunnel, 1);
        }
        s.block.clear();
        encode::tunnel_head(&mut s.block, udp);
        self.put_head(id, &mut s, false);
        s.client_side();
        self.send_tunnel(id, &mut s);
        self.settle(id, s);
    }

    /// The tunnel cannot be opened: answered with `status` and `why`, as a refused request
    /// is answered (its body is read and dropped for a while).
    pub(in crate::http2) fn tunnel_refused(&mut self, id: u32, status: u16, why: &str) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        let stats = self.shared.state.stats();
        stats.proxy(if status < 500 { ProxyEvent::Refused } else { ProxyEvent::Failed }, 1);
        stats.response(status, why.len() as u64 + 1);
        s.block.clear();
        s.payload = encode::error(&mut s.block, status, why, false);
        s.phase = Phase::Body;
        s.refused = true;
        self.respond(id);
    }

    /// The tunnel as the driver sees it; `None` once its stream is gone.
    pub(in crate::http2) fn tunnel_view(&self, id: u32) -> Option<View<'_>> {
        let s = self.streams.get(&id)?;
        let Phase::Tunnel(t) = &s.phase else { return None };
        Some(View {
            up: &t.up,
            client_ended: s.ended,
            wants_down: t.open && !t.down_ended && t.down.len() < DOWN_HIGH,
        })
    }

    /// `n` bytes of `up` reached the destination (or, for CONNECT-UDP, were dropped as a
    /// lost datagram is): their credit goes back to the client.
    pub(in crate::http2) fn tunnel_wrote(&mut self, id: u32, n: usize) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        if let Phase::Tunnel(t) = &mut s.phase {
            t.up.drain(..n.min(t.up.len()));
            s.recv_used += n as u32;
            if s.recv_used >= STREAM_WINDOW / 2 && !s.ended {
                frame::put_window_update(&mut self.out, id, s.recv_used);
                s.recv_window += i64::from(s.recv_used);
                s.recv_used = 0;
            }
        }
        self.settle(id, s);
    }

    /// Bytes from the destination (a whole capsule, for CONNECT-UDP), sent as credit allows.
    pub(in crate::http2) fn tunnel_received(&mut self, id: u32, bytes: &[&[u8]]) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        if let Phase::Tunnel(t) = &mut s.phase {
            for b in bytes {
                t.down.extend_from_slice(b);
            }
        }
        self.send_tunnel(id, &mut s);
        self.settle(id, s);
    }

    /// The destination closed its side: END_STREAM once its bytes are out.
    pub(in crate::http2) fn tunnel_eof(&mut self, id: u32) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        if let Phase::Tunnel(t) = &mut s.phase {
            t.down_ended = true;
        }
        self.send_tunnel(id, &mut s);
        self.settle(id, s);
    }

    /// The destination failed (a reset, a write error) or the client broke the capsule
    /// protocol: the stream is reset with `code`.
    pub(in crate::http2) fn tunnel_lost(&mut self, id: u32, code: u32) {
        if self.tunnel_alive(id) {
            self.shared.state.stats().proxy(ProxyEvent::Failed, 1);
            self.reset(id, code);
        }
    }

    /// The server is shutting down: the tunnel ends now, its stream with END_STREAM and then
    /// RST_STREAM(NO_ERROR), as after any complete response the server no longer reads.
    pub(in crate::http2) fn tunnel_close(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        let Phase::Tunnel(t) = &mut s.phase else { return };
        if !t.open {
            // Still opening: answered, as any request the server will not serve.
            return self.tunnel_refused(id, 503, "the server is shutting down");
        }
        if !t.end_sent {
            frame::put(&mut self.out, frame::DATA, frame::END_STREAM, id, &[]);
        }
        self.reset(id, frame::NO_ERROR);
    }

    /// The client ended its side (END_STREAM or trailers).
    pub(super) fn tunnel_client_ended(&mut self, id: u32) {
        let Some(mut s) = self.streams.remove(&id) else { return };
        s.ended = true;
        s.client_side();
        self.send_tunnel(id, &mut s);
        self.settle(id, s);
    }

    /// Sends the destination's bytes while the windows and the buffer allow, then END_STREAM
    /// once the destination's side is over.
    pub(super) fn send_tunnel(&mut self, id: u32, s: &mut Stream) {
        let Phase::Tunnel(t) = &mut s.phase else { return };
        if !t.open {
            return;
        }
        // Taken out while `credit` borrows the stream.
        let mut down = std::mem::take(&mut t.down);
        let mut at = 0;
        while at < down.len() {
            let Some(credit) = self.credit(id, s) else { break };
            let n = (down.len() - at).min(credit).min(self.peer_max_frame);
            frame::put(&mut self.out, frame::DATA, 0, id, &down[at..at + n]);
            at += n;
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
        down.drain(..at);
        let Phase::Tunnel(t) = &mut s.phase else { return };
        t.down = down;
        if t.down.is_empty() && t.down_ended && !t.end_sent {
            frame::put(&mut self.out, frame::DATA, frame::END_STREAM, id, &[]);
            t.end_sent = true;
        }
    }
}

impl Stream {
    /// DATA from the client on a tunnel stream; its credit comes back once written.
    pub(super) fn tunnel_data(&mut self, body: &[u8]) {
        if let Phase::Tunnel(t) = &mut self.phase {
            t.up.extend_from_slice(body);
        }
    }

    /// After the client ended its side: a CONNECT-UDP tunnel ends with it, as UDP has no
    /// half-close to carry on with (the capsules already queued go first, whole).
    fn client_side(&mut self) {
        if let Phase::Tunnel(t) = &mut self.phase {
            if self.ended && t.udp && t.open {
                t.down_ended = true;
            }
        }
    }
}
