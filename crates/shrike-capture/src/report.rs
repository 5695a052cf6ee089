//! What an import found, and everything it could not use, by reason: so a capture never needs
//! cleaning first, and a user sees what was left out and why.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::link::Skip;
use crate::packets::Damage;
use crate::stream::StreamStats;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub packets: u64,
    /// Captured bytes of all packets.
    pub packet_bytes: u64,
    pub tcp_segments: u64,
    /// Packets that carry no TCP: other link types, other protocols, fragments.
    pub skipped_packets: BTreeMap<String, u64>,
    /// Packets cut by the capture's snap length (their payload is incomplete).
    pub snapped_packets: u64,
    /// TCP segments on no port of interest (`--port`).
    pub other_port_segments: u64,
    pub connections: u64,
    /// Connections in which no request was found.
    pub empty_connections: u64,
    pub requests: u64,
    /// HTTP requests sent before the previous one's answer (pipelined).
    pub pipelined: u64,
    /// HTTP requests whose captured answer was read whole (kept for the canary diff).
    pub answers: u64,
    /// Connections that spoke cleartext HTTP/2 (prior knowledge or h2c Upgrade), and their
    /// streams opened before the previous one was answered (replayed one after another).
    pub http2_connections: u64,
    pub http2_concurrent: u64,
    /// Client bytes in the requests found.
    pub request_bytes: u64,
    pub jobs: u64,
    /// Reassembly, summed over every direction.
    pub reassembly: StreamStats,
    /// Client bytes no request could be made of.
    pub unparsed_bytes: u64,
    pub skipped_commands: u64,
    /// Jobs that started more than the reorder window before one already written (a capture
    /// far out of time order), written at that one's start.
    pub late_jobs: u64,
    /// What could not be used, by reason.
    pub problems: BTreeMap<String, u64>,
    /// Why the capture was not read to its end.
    pub damage: Option<Damage>,
}

impl Report {
    pub fn problem(&mut self, why: impl Into<String>, n: u64) {
        *self.problems.entry(why.into()).or_default() += n;
    }

    pub(crate) fn skip(&mut self, why: Skip) {
        let key = match why {
            Skip::Short => "frames too short for their link header".to_string(),
            Skip::NotIp => "frames that carry no IP".to_string(),
            Skip::LinkType(t) => format!("frames of link type {t}, which Shrike does not read"),
        };
        *self.skipped_packets.entry(key).or_default() += 1;
    }

    pub(crate) fn add_stream(&mut self, s: &StreamStats) {
        let r = &mut self.reassembly;
        r.duplicate_bytes += s.duplicate_bytes;
        r.reordered += s.reordered;
        r.before_start += s.before_start;
        r.lost_bytes += s.lost_bytes;
        r.gaps += s.gaps;
    }

    /// The report as people read it.
    pub fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "imported {} job(s) with {} request(s) ({} bytes) from {} connection(s); {} packets \
             ({} bytes) read, {} of them TCP segments",
            self.jobs,
            self.requests,
            self.request_bytes,
            self.connections,
            self.packets,
            self.packet_bytes,
            self.tcp_segments
        );
        if self.answers > 0 && self.answers < self.requests {
            let _ = writeln!(
                s,
                "  {} of {} request(s) have their answer in the capture (a replay compares only those)",
                self.answers, self.requests
            );
        }
        if self.http2_connections > 0 {
            let _ = writeln!(
                s,
                "  {} connection(s) spoke HTTP/2 (cleartext){}",
                self.http2_connections,
                match self.http2_concurrent {
                    0 => String::new(),
                    n => format!(
                        "; {n} stream(s) ran beside an earlier one and replay one after another"
                    ),
                }
            );
        }
        if self.pipelined > 0 {
            let _ = writeln!(
                s,
                "  {} request(s) pipelined (sent before the previous answer)",
                self.pipelined
            );
        }
        if let Some(d) = &self.damage {
            let _ = writeln!(
                s,
                "  the capture was not read to its end: {d}; what came before it is imported"
            );
        }
        let r = &self.reassembly;
        if r.reordered + r.duplicate_bytes + r.before_start > 0 {
            let _ = writeln!(
                s,
                "  reassembly: {} out-of-order segment(s) put in order, {} duplicate byte(s) \
                 (retransmissions, overlaps) dropped, {} byte(s) from before a connection's \
                 first captured segment left out",
                r.reordered, r.duplicate_bytes, r.before_start
            );
        }
        if r.gaps > 0 {
            let _ = writeln!(
                s,
                "  {} connection direction(s) with packets missing from the capture: {} byte(s) \
                 after the holes could not be placed",
                r.gaps, r.lost_bytes
            );
        }
        for (why, n) in &self.skipped_packets {
            let _ = writeln!(s, "  skipped {n} {why}");
        }
        if self.snapped_packets > 0 {
            let _ = writeln!(
                s,
                "  {} packet(s) cut short by the capture's snap length",
                self.snapped_packets
            );
        }
        if self.other_port_segments > 0 {
            let _ = writeln!(
                s,
                "  skipped {} TCP segment(s) on other ports (--port)",
                self.other_port_segments
            );
        }
        if self.empty_connections > 0 {
            let _ = writeln!(s, "  {} connection(s) without a request", self.empty_connections);
        }
        for (why, n) in &self.problems {
            let _ = writeln!(s, "  {n} × {why}");
        }
        if self.unparsed_bytes > 0 {
            let _ = writeln!(
                s,
                "  {} client byte(s) could not be made into requests",
                self.unparsed_bytes
            );
        }
        if self.late_jobs > 0 {
            let _ = writeln!(
                s,
                "  {} job(s) started long before jobs already written (the capture is far out of \
                 time order): written at the latest start written",
                self.late_jobs
            );
        }
        s
    }
}
