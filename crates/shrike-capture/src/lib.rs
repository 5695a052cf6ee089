//! Shrike's capture import: packet captures turned into replay jobs, with no external tools
//! and no cleaning first.
//!
//! - [`packets`]: pcap and pcapng as a stream of timestamped frames (damage reported).
//! - [`link`]: the link layer stripped (Ethernet, Linux cooked v1/v2, loopback, raw IP).
//! - IP and TCP headers are read with `etherparse` (IPv4 and IPv6).
//! - [`flows`] and [`stream`]: Shrike's own TCP reassembly, by connection and direction.
//! - [`split`]: each connection's client bytes cut into HTTP requests, TCP messages or MySQL
//!   commands, stamped with the capture time of their first byte.
//! - Captures whose records are out of time order (several interfaces or capture threads
//!   interleaved, even a file written backwards) import as ordered ones: reassembly goes by
//!   sequence number, not record order, and jobs (one per connection) are handed on in start
//!   order: a job waits until no connection still open, nor one the capture might still show
//!   late (within [`REORDER_WINDOW`]), could start before it.

pub mod flows;
pub mod link;
pub mod packets;
pub mod report;
pub mod split;
pub mod stream;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use shrike_jobs::{Connection, Job, JobProtocol, Request};

use flows::{Flow, Flows, Segment};
pub use report::Report;
pub use split::Splitter;

/// One nanosecond: a pipelined request captured in the same instant as the one before it.
const NANO: Duration = Duration::from_nanos(1);

/// How far out of time order a capture's records may be and still import in order.
pub const REORDER_WINDOW: Duration = Duration::from_secs(10);

/// What to import.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub splitter: Splitter,
    /// The server's port; without it, the side a SYN went to (or the lower port).
    pub port: Option<u16>,
}

/// Imports the capture `input`, handing each job to `emit` in start order (ids from 1, starts
/// from the first job's). Returns what was found and left out.
pub fn import(input: impl Read + Send, options: &ImportOptions, emit: impl FnMut(Job)) -> Report {
    import_buffered(input, packets::BUFFER, options, emit)
}

/// [`import`] reading through a buffer of `buffer` bytes (the largest record it can hold).
fn import_buffered(
    input: impl Read + Send,
    buffer: usize,
    options: &ImportOptions,
    mut emit: impl FnMut(Job),
) -> Report {
    let mut state = Importer {
        options: options.clone(),
        flows: Flows::new(options.port),
        report: Report::default(),
        waiting: BinaryHeap::new(),
        seq: 0,
        origin: None,
        last_start: Duration::ZERO,
        next_id: 1,
    };
    let damage = packets::read_buffered(input, buffer, |p| state.packet(&p, &mut emit));
    state.report.damage = damage;
    let mut done = Vec::new();
    state.flows.finish_all(&mut |f| done.push(f));
    for f in done {
        state.connection(f);
    }
    state.release(None, &mut emit);
    state.report.other_port_segments = state.flows.other_port;
    state.report
}

/// The jobs of an in-memory capture (for tests and fuzzing: never panics, whatever the bytes).
pub fn import_bytes(bytes: &[u8], options: &ImportOptions) -> (Vec<Job>, Report) {
    let mut jobs = Vec::new();
    // No record is larger than the bytes that hold it: a small capture needs no 4 MiB buffer
    // (which dominated the cost of importing one, as a fuzzer does millions of times).
    let buffer = bytes.len().clamp(packets::MIN_BUFFER, packets::BUFFER);
    let report = import_buffered(bytes, buffer, options, |j| jobs.push(j));
    (jobs, report)
}

/// A finished job waiting for its turn, ordered by start (then arrival).
struct Waiting(Duration, u64, Job);

impl PartialEq for Waiting {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Waiting {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}

struct Importer {
    options: ImportOptions,
    flows: Flows,
    report: Report,
    waiting: BinaryHeap<Reverse<Waiting>>,
    seq: u64,
    /// The capture time of the first job written: the jobs file's time 0.
    origin: Option<Duration>,
    last_start: Duration,
    next_id: u64,
}

impl Importer {
    fn packet(&mut self, p: &packets::Packet<'_>, emit: &mut impl FnMut(Job)) {
        self.report.packets += 1;
        self.report.packet_bytes += p.data.len() as u64;
        if p.truncated {
            self.report.snapped_packets += 1;
        }
        let ip = match link::ip_payload(p.linktype, p.data) {
            Ok(ip) => ip,
            Err(why) => return self.report.skip(why),
        };
        let Ok(sliced) = SlicedPacket::from_ip(ip) else {
            return self.skipped("IP packets whose headers cannot be read");
        };
        let (src, dst) = match &sliced.net {
            Some(NetSlice::Ipv4(v4)) => {
                if v4.header().is_fragmenting_payload() {
                    return self.skipped("IP fragments (not reassembled)");
                }
                (IpAddr::V4(v4.header().source_addr()), IpAddr::V4(v4.header().destination_addr()))
            }
            Some(NetSlice::Ipv6(v6)) => {
                if v6.is_payload_fragmented() {
                    return self.skipped("IP fragments (not reassembled)");
                }
                (IpAddr::V6(v6.header().source_addr()), IpAddr::V6(v6.header().destination_addr()))
            }
            _ => return self.skipped("packets that are not IP"),
        };
        let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
            return self.skipped("IP packets that carry no TCP");
        };
        self.report.tcp_segments += 1;
        let seg = Segment {
            ts: p.ts,
            src: SocketAddr::new(src, tcp.source_port()),
            dst: SocketAddr::new(dst, tcp.destination_port()),
            seq: tcp.sequence_number(),
            syn: tcp.syn(),
            ack: tcp.ack(),
            fin: tcp.fin(),
            rst: tcp.rst(),
            payload: tcp.payload(),
        };
        let mut done = Vec::new();
        self.flows.add(&seg, &mut |f| done.push(f));
        for f in done {
            self.connection(f);
        }
        let bound = self.flows.now().saturating_sub(REORDER_WINDOW);
        let bound = self.flows.earliest_open().map_or(bound, |e| e.min(bound));
        self.release(Some(bound), emit);
    }

    fn skipped(&mut self, why: &str) {
        *self.report.skipped_packets.entry(why.to_string()).or_default() += 1;
    }

    /// A finished connection: its requests become a job, waiting for its turn.
    fn connection(&mut self, f: Flow) {
        self.report.connections += 1;
        self.report.add_stream(&f.up.stats);
        self.report.add_stream(&f.down.stats);
        let (found, login, answers, h2_from) = match &self.options.splitter {
            Splitter::Http => {
                let s = split::http::split(&f, &mut self.report);
                self.report.answers += s.answers.iter().flatten().count() as u64;
                (s.found, None, s.answers, s.h2_from)
            }
            Splitter::Mysql => {
                let (found, login) = split::mysql::split(&f, &mut self.report);
                (found, login, Vec::new(), None)
            }
            how => (split::tcp::split(&f, how, &mut self.report), None, Vec::new(), None),
        };
        let Some(&(start, _)) = found.first() else {
            self.report.empty_connections += 1;
            return;
        };
        let mut last = Duration::ZERO;
        let http = self.options.splitter == Splitter::Http;
        let mut previous: Option<Duration> = None;
        let mut answers = answers.into_iter();
        let requests: Vec<Request> = found
            .into_iter()
            .enumerate()
            .map(|(i, (ts, body))| {
                // Requests of one connection go in byte order; a capture out of time order
                // must not make one precede the one before it.
                last = last.max(ts.saturating_sub(start));
                self.report.requests += 1;
                self.report.request_bytes += body.data().len() as u64;
                // Pipelined: sent before the server answered anything since the previous one.
                let pipelined = http
                    && h2_from.is_none_or(|h2| i < h2)
                    && previous
                        .is_some_and(|p| f.down.bytes_between(p, Some(ts.max(p) + NANO)) == 0);
                previous = Some(ts);
                if pipelined {
                    self.report.pipelined += 1;
                }
                Request { at: last, body, pipelined, response: answers.next().flatten() }
            })
            .collect();
        let protocol = match self.options.splitter {
            Splitter::Http => JobProtocol::Http,
            Splitter::Mysql => JobProtocol::Mysql,
            _ => JobProtocol::Tcp,
        };
        // The client's SYN opened the connection (its first packet) this long before the
        // first request: a replay opens its connection as far ahead. A connection the capture
        // joined late has no SYN, and no open time to keep.
        let connect_ahead = f.up.syn_seq().map(|_| start.saturating_sub(f.first));
        let job = Job {
            id: 0,
            start,
            protocol,
            connection: Connection::Session,
            server: Some(f.server.to_string()),
            requests,
            login,
            connect_ahead,
        };
        self.seq += 1;
        self.waiting.push(Reverse(Waiting(start, self.seq, job)));
    }

    /// Hands on waiting jobs that start at or before `bound` (all of them without one).
    fn release(&mut self, bound: Option<Duration>, emit: &mut impl FnMut(Job)) {
        while let Some(Reverse(w)) = self.waiting.peek() {
            if bound.is_some_and(|b| w.0 > b) {
                return;
            }
            let Some(Reverse(Waiting(start, _, mut job))) = self.waiting.pop() else { return };
            let origin = *self.origin.get_or_insert(start);
            let mut start = start.saturating_sub(origin);
            if start < self.last_start {
                self.report.late_jobs += 1;
                start = self.last_start;
            }
            self.last_start = start;
            job.start = start;
            job.id = self.next_id;
            self.next_id += 1;
            self.report.jobs += 1;
            emit(job);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
