//! TCP connections in a capture: which side is the server, both directions reassembled, and
//! when a connection is over.
//!
//! The server is the side on `--port` when given; else the side a SYN went to; else, for a
//! connection the capture joined late, the side with the lower port (servers listen on low,
//! well-known ports; clients get high ephemeral ones). A connection is over at RST, at FIN
//! from both sides, when a new SYN reuses its ports, or at the end of the capture. It is
//! handed on only a little later in capture time ([`LINGER`]), so late retransmissions of its
//! last bytes still join it instead of starting a bogus connection.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use crate::stream::Stream;

/// How long in capture time a finished connection waits for stragglers.
pub const LINGER: Duration = Duration::from_secs(2);

/// One TCP segment as captured.
#[derive(Debug)]
pub struct Segment<'a> {
    pub ts: Duration,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
}

/// A connection: client → server bytes (`up`) and server → client (`down`).
#[derive(Debug)]
pub struct Flow {
    pub client: SocketAddr,
    pub server: SocketAddr,
    /// The first packet's capture time.
    pub first: Duration,
    pub up: Stream,
    pub down: Stream,
    /// FIN seen from the client and from the server.
    fin: (bool, bool),
    /// Which side is the server is known (from `--port` or a SYN), not guessed from ports.
    sure: bool,
    /// When it was over (RST, both FINs), if it is.
    ended: Option<Duration>,
}

/// The connections of a capture.
type Key = (SocketAddr, SocketAddr);

#[derive(Debug, Default)]
pub struct Flows {
    port: Option<u16>,
    live: HashMap<Key, Flow>,
    /// Open connections by first-packet time, for [`Flows::earliest_open`].
    firsts: BTreeSet<(Duration, Key)>,
    /// Connections that ended, in the order they did, waiting out [`LINGER`].
    ending: VecDeque<(Duration, Key)>,
    /// The latest capture time seen.
    now: Duration,
    /// Segments on no port of interest (with `--port`).
    pub other_port: u64,
}

impl Flows {
    pub fn new(port: Option<u16>) -> Flows {
        Flows { port, ..Flows::default() }
    }

    /// Adds a segment; connections it ends, or that ended long enough ago, go to `done`.
    pub fn add(&mut self, seg: &Segment<'_>, done: &mut impl FnMut(Flow)) {
        self.now = self.now.max(seg.ts);
        let key = canonical(seg.src, seg.dst);
        // A SYN settles a side guessed from the ports (a capture read out of time order can
        // show a connection's later packets first).
        if seg.syn {
            if let Some(f) = self.live.get_mut(&key).filter(|f| !f.sure) {
                let from_server = seg.src == f.server;
                if seg.ack != from_server {
                    std::mem::swap(&mut f.client, &mut f.server);
                    std::mem::swap(&mut f.up, &mut f.down);
                    f.fin = (f.fin.1, f.fin.0);
                }
                f.sure = true;
            }
        }
        // A new connection on the ports of one that ended before it, or that opened with
        // another SYN: the old one is complete. (A SYN seen after the end of its own
        // connection, in a capture out of time order, is no new connection.)
        if seg.syn && !seg.ack {
            if let Some(old) = self.live.get(&key) {
                let after_end = old.ended.is_some_and(|e| seg.ts > e);
                let other_syn = old.up.syn_seq().is_some_and(|s| s != seg.seq);
                if after_end || other_syn {
                    if let Some(flow) = self.remove(&key) {
                        done(finish(flow));
                    }
                }
            }
        }
        if !self.live.contains_key(&key) {
            let Some((client, server)) = self.orient(seg) else {
                self.other_port += 1;
                return;
            };
            let flow = Flow {
                client,
                server,
                first: seg.ts,
                up: Stream::default(),
                down: Stream::default(),
                fin: (false, false),
                ended: None,
                sure: self.port.is_some() || seg.syn,
            };
            self.firsts.insert((seg.ts, key));
            self.live.insert(key, flow);
        }
        let Some(flow) = self.live.get_mut(&key) else { return };
        // A capture out of time order can show a connection's packets earlier than its first.
        if seg.ts < flow.first {
            self.firsts.remove(&(flow.first, key));
            self.firsts.insert((seg.ts, key));
            flow.first = seg.ts;
        }
        let from_client = seg.src == flow.client;
        let stream = if from_client { &mut flow.up } else { &mut flow.down };
        stream.add(seg.seq, seg.syn, seg.payload, seg.ts);
        if seg.fin {
            if from_client {
                flow.fin.0 = true;
            } else {
                flow.fin.1 = true;
            }
        }
        if (seg.rst || flow.fin == (true, true)) && flow.ended.is_none() {
            flow.ended = Some(seg.ts);
            self.ending.push_back((self.now, key));
        }
        self.expire(done);
    }

    fn remove(&mut self, key: &Key) -> Option<Flow> {
        let flow = self.live.remove(key)?;
        self.firsts.remove(&(flow.first, *key));
        Some(flow)
    }

    /// Hands on connections that ended more than [`LINGER`] ago.
    fn expire(&mut self, done: &mut impl FnMut(Flow)) {
        while let Some(&(at, key)) = self.ending.front() {
            if self.now.saturating_sub(at) <= LINGER {
                return;
            }
            self.ending.pop_front();
            // Still the connection that ended (not one reusing its ports since).
            if self.live.get(&key).is_some_and(|f| f.ended.is_some()) {
                if let Some(flow) = self.remove(&key) {
                    done(finish(flow));
                }
            }
        }
    }

    /// The capture ended: every connection is handed on.
    pub fn finish_all(&mut self, done: &mut impl FnMut(Flow)) {
        self.firsts.clear();
        self.ending.clear();
        let mut all: Vec<Flow> = self.live.drain().map(|(_, f)| f).collect();
        all.sort_by_key(|f| f.first);
        for f in all {
            done(finish(f));
        }
    }

    /// The earliest first-packet time of the connections still open: no connection handed
    /// on later can start before it (within the capture's own disorder).
    pub fn earliest_open(&self) -> Option<Duration> {
        self.firsts.first().map(|(t, _)| *t)
    }

    pub fn now(&self) -> Duration {
        self.now
    }

    pub fn open(&self) -> usize {
        self.live.len()
    }

    /// (client, server) for a segment opening a connection, or `None` when `--port` names
    /// neither side.
    fn orient(&self, seg: &Segment<'_>) -> Option<(SocketAddr, SocketAddr)> {
        if let Some(p) = self.port {
            return match (seg.src.port() == p, seg.dst.port() == p) {
                (_, true) => Some((seg.src, seg.dst)),
                (true, false) => Some((seg.dst, seg.src)),
                (false, false) => None,
            };
        }
        Some(match (seg.syn, seg.ack) {
            (true, false) => (seg.src, seg.dst),
            (true, true) => (seg.dst, seg.src),
            _ if seg.src.port() < seg.dst.port() => (seg.dst, seg.src),
            _ => (seg.src, seg.dst),
        })
    }
}

fn finish(mut f: Flow) -> Flow {
    f.up.finish();
    f.down.finish();
    f
}

fn canonical(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}
