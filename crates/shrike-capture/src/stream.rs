//! One direction of a TCP connection, reassembled by sequence number: bytes in order, each run
//! stamped with the capture time of the segment that brought it.
//!
//! - Retransmitted bytes are dropped; overlapping segments keep the bytes seen first, so a
//!   capture reads the same however its duplicates differ.
//! - Out-of-order segments wait (up to [`MAX_PENDING`] bytes) until the hole before them fills.
//! - A connection seen without its SYN starts at its first segment; segments from before that
//!   are counted, not guessed at.
//! - A hole never filled is a gap: the stream ends there (its bytes after are counted as
//!   lost), because what follows cannot be placed.
//! - Sequence numbers are read relative to the next expected byte, so they wrap freely.

use std::collections::BTreeMap;
use std::time::Duration;

/// Out-of-order bytes one direction may hold while waiting for a hole to fill.
pub const MAX_PENDING: usize = 16 << 20;

#[derive(Debug, Default)]
pub struct Stream {
    /// The sequence number of byte 0.
    base: Option<u32>,
    data: Vec<u8>,
    /// (offset, capture time) where each run of new bytes began.
    marks: Vec<(u64, Duration)>,
    pending: BTreeMap<u64, (Vec<u8>, Duration)>,
    pending_bytes: usize,
    /// Set once a hole was given up on: nothing more is appended.
    gap: bool,
    pub stats: StreamStats,
}

/// What reassembly met in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes seen again (retransmissions, overlaps).
    pub duplicate_bytes: u64,
    /// Segments that arrived ahead of a hole, later filled.
    pub reordered: u64,
    /// Bytes from before the first segment seen (a connection the capture joined late).
    pub before_start: u64,
    /// Bytes after a hole that never filled, or beyond the out-of-order limit.
    pub lost_bytes: u64,
    pub gaps: u64,
}

impl Stream {
    /// Adds a segment's payload. `syn` segments set the start (their own sequence number
    /// counts one, before the data).
    pub fn add(&mut self, seq: u32, syn: bool, payload: &[u8], ts: Duration) {
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        let base = *self.base.get_or_insert(data_seq);
        if payload.is_empty() || self.gap {
            if self.gap {
                self.stats.lost_bytes += payload.len() as u64;
            }
            return;
        }
        let next = self.data.len() as u64;
        // Relative to the next expected byte: wraps are harmless within ±2 GiB.
        let delta = i64::from(data_seq.wrapping_sub(base.wrapping_add(next as u32)) as i32);
        let start = next as i64 + delta;
        let end = start + payload.len() as i64;
        if end <= 0 {
            self.stats.before_start += payload.len() as u64;
            return;
        }
        let (start, payload) = if start < 0 {
            self.stats.before_start += start.unsigned_abs();
            (0, &payload[start.unsigned_abs() as usize..])
        } else {
            (start as u64, payload)
        };
        if start > next {
            self.hold(start, payload, ts);
            return;
        }
        self.append(start, payload, ts);
        self.drain_pending();
    }

    /// Appends what of `payload` (starting at `start` ≤ the end) is new.
    fn append(&mut self, start: u64, payload: &[u8], ts: Duration) {
        let next = self.data.len() as u64;
        let skip = (next - start).min(payload.len() as u64) as usize;
        self.stats.duplicate_bytes += skip as u64;
        let new = &payload[skip..];
        if !new.is_empty() {
            self.marks.push((next, ts));
            self.data.extend_from_slice(new);
        }
    }

    fn hold(&mut self, start: u64, payload: &[u8], ts: Duration) {
        // First seen wins: a segment at an offset already held is a duplicate unless longer.
        if let Some((held, _)) = self.pending.get(&start) {
            if held.len() >= payload.len() {
                self.stats.duplicate_bytes += payload.len() as u64;
                return;
            }
        }
        if self.pending_bytes + payload.len() > MAX_PENDING {
            self.give_up();
            self.stats.lost_bytes += payload.len() as u64;
            return;
        }
        self.stats.reordered += 1;
        self.pending_bytes += payload.len();
        if let Some((old, _)) = self.pending.insert(start, (payload.to_vec(), ts)) {
            self.pending_bytes -= old.len();
            // The shorter copy seen first was kept for its bytes; the longer one has them too.
            self.stats.duplicate_bytes += old.len() as u64;
        }
    }

    fn drain_pending(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            let start = *entry.key();
            if start > self.data.len() as u64 {
                return;
            }
            let (bytes, ts) = entry.remove();
            self.pending_bytes -= bytes.len();
            self.append(start, &bytes, ts);
        }
    }

    /// Ends the stream: held bytes past an unfilled hole are lost, and the stream has a gap.
    pub fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.give_up();
        }
    }

    fn give_up(&mut self) {
        if !self.gap {
            self.stats.gaps += 1;
        }
        self.gap = true;
        self.stats.lost_bytes += self.pending_bytes as u64;
        self.pending.clear();
        self.pending_bytes = 0;
    }

    /// The bytes in order, up to the first gap.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Whether bytes beyond [`Stream::data`] were lost.
    pub fn has_gap(&self) -> bool {
        self.gap
    }

    /// When byte `offset` was captured (the segment that first brought it).
    pub fn time_at(&self, offset: u64) -> Option<Duration> {
        let i = self.marks.partition_point(|(o, _)| *o <= offset);
        self.marks.get(i.checked_sub(1)?).map(|m| m.1)
    }

    /// How many bytes arrived in `[from, to)` of capture time.
    pub fn bytes_between(&self, from: Duration, to: Option<Duration>) -> u64 {
        let mut n = 0;
        for (i, (offset, ts)) in self.marks.iter().enumerate() {
            if *ts < from || to.is_some_and(|t| *ts >= t) {
                continue;
            }
            let end = self.marks.get(i + 1).map_or(self.data.len() as u64, |m| m.0);
            n += end - offset;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn reorders_drops_duplicates_and_keeps_first_seen_bytes() {
        let mut s = Stream::default();
        s.add(999, true, b"", ms(0)); // SYN: data starts at 1000
        s.add(1005, false, b"FGHIJ", ms(2)); // ahead of a hole
        s.add(1000, false, b"ABCDE", ms(1)); // fills it
        s.add(1008, false, b"xyZ", ms(3)); // overlaps: the first seen "IJ" wins
        s.add(1000, false, b"ABCDE", ms(4)); // retransmission
        s.finish();
        assert_eq!(s.data(), b"ABCDEFGHIJZ");
        assert!(!s.has_gap());
        assert_eq!(s.stats.reordered, 1);
        assert_eq!(s.stats.duplicate_bytes, 2 + 5);
        assert_eq!(s.time_at(0), Some(ms(1)));
        assert_eq!(s.time_at(7), Some(ms(2)));
        assert_eq!(s.time_at(10), Some(ms(3)));
    }

    #[test]
    fn wraps_and_joins_late_and_counts_gaps() {
        let mut s = Stream::default();
        // No SYN; the sequence wraps inside the stream.
        s.add(u32::MAX - 2, false, b"abc", ms(0));
        s.add(0, false, b"def", ms(1));
        assert_eq!(s.data(), b"abcdef");
        // A segment from before the first one seen is counted, not placed.
        s.add(u32::MAX - 10, false, b"zz", ms(2));
        assert_eq!(s.stats.before_start, 2);
        // A hole that never fills.
        s.add(10, false, b"lost", ms(3));
        s.finish();
        assert_eq!(s.data(), b"abcdef");
        assert!(s.has_gap());
        assert_eq!((s.stats.gaps, s.stats.lost_bytes), (1, 4));
    }

    #[test]
    fn counts_bytes_by_time() {
        let mut s = Stream::default();
        s.add(0, true, b"", ms(0));
        s.add(1, false, b"1234", ms(10));
        s.add(5, false, b"56", ms(20));
        s.add(7, false, b"789", ms(30));
        assert_eq!(s.bytes_between(ms(10), Some(ms(30))), 6);
        assert_eq!(s.bytes_between(ms(15), None), 5);
    }
}
