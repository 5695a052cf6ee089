//! One direction of a TCP connection, reassembled by sequence number: bytes in order, each run
//! stamped with the capture time of the segment that brought it.
//!
//! Segments are kept as they come and put in order once the connection is over
//! ([`Stream::finish`]), so the order of the capture's records never matters: a capture
//! written out of time order (or backwards) reassembles exactly as an ordered one.
//!
//! - Retransmitted bytes are dropped; where segments overlap, the one with the lower sequence
//!   number (then the one seen first) gives the bytes, so a capture reads the same however its
//!   duplicates differ.
//! - The stream starts at its SYN; a connection seen without one starts at its lowest
//!   sequence number. Bytes from before the SYN are counted, not placed.
//! - A hole is a gap: the stream ends there, and the bytes after it are counted as lost,
//!   because what follows cannot be placed.
//! - Sequence numbers are unwrapped relative to the previous segment, so they wrap freely.

use std::time::Duration;

#[derive(Debug, Default)]
pub struct Stream {
    /// The last segment's sequence number and unwrapped offset (relative to the first's).
    last: Option<(u32, i64)>,
    /// Where the data begins (the SYN's sequence number + 1), if a SYN was seen, and the
    /// SYN's own sequence number.
    syn: Option<i64>,
    syn_seq: Option<u32>,
    /// Segments as they came: (offset, capture time, range in `raw`).
    segments: Vec<(i64, Duration, std::ops::Range<usize>)>,
    raw: Vec<u8>,
    // Set by `finish`:
    data: Vec<u8>,
    /// (offset, capture time) where each run of new bytes began.
    marks: Vec<(u64, Duration)>,
    gap: bool,
    pub stats: StreamStats,
}

/// What reassembly met in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes seen again (retransmissions, overlaps).
    pub duplicate_bytes: u64,
    /// Segments that came after the one following them in the stream (put back in order).
    pub reordered: u64,
    /// Bytes from before the SYN.
    pub before_start: u64,
    /// Bytes after a hole.
    pub lost_bytes: u64,
    pub gaps: u64,
}

impl Stream {
    /// Adds a segment. `syn` segments mark the start (their own sequence number counts one,
    /// before the data).
    pub fn add(&mut self, seq: u32, syn: bool, payload: &[u8], ts: Duration) {
        let offset = match self.last {
            None => 0,
            Some((s, o)) => o + i64::from(seq.wrapping_sub(s) as i32),
        };
        self.last = Some((seq, offset));
        let data_offset = if syn { offset + 1 } else { offset };
        if syn && self.syn.is_none() {
            self.syn = Some(data_offset);
            self.syn_seq = Some(seq);
        }
        if payload.is_empty() {
            return;
        }
        let start = self.raw.len();
        self.raw.extend_from_slice(payload);
        self.segments.push((data_offset, ts, start..self.raw.len()));
    }

    /// Puts the segments in order: [`Stream::data`] and the times are ready after this.
    pub fn finish(&mut self) {
        let segments = std::mem::take(&mut self.segments);
        let raw = std::mem::take(&mut self.raw);
        // By offset; equal offsets in the order they were seen.
        let mut order: Vec<(i64, usize)> =
            segments.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
        order.sort_unstable();
        let base = self.syn.or(order.first().map(|s| s.0)).unwrap_or(0);
        let mut next = base;
        // The arrival index of the last segment that brought new bytes.
        let mut last_arrival = None;
        for (_, i) in order {
            let (offset, ts, range) = segments[i].clone();
            let bytes = &raw[range];
            let end = offset + bytes.len() as i64;
            if self.gap {
                self.stats.lost_bytes += bytes.len() as u64;
                continue;
            }
            if offset > next {
                self.gap = true;
                self.stats.gaps += 1;
                self.stats.lost_bytes += bytes.len() as u64;
                continue;
            }
            if end <= next {
                if end <= base {
                    self.stats.before_start += bytes.len() as u64;
                } else {
                    self.stats.duplicate_bytes += bytes.len() as u64;
                }
                continue;
            }
            let skip = (next - offset) as usize;
            if offset < base {
                self.stats.before_start += (base - offset) as u64;
                self.stats.duplicate_bytes += (next - base) as u64;
            } else {
                self.stats.duplicate_bytes += skip as u64;
            }
            if last_arrival.is_some_and(|a| a > i) {
                self.stats.reordered += 1;
            }
            last_arrival = Some(i);
            self.marks.push((self.data.len() as u64, ts));
            self.data.extend_from_slice(&bytes[skip..]);
            next = end;
        }
    }

    /// The sequence number of the SYN that opened this direction, if captured.
    pub fn syn_seq(&self) -> Option<u32> {
        self.syn_seq
    }

    /// The bytes in order, up to the first gap.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Whether bytes beyond [`Stream::data`] were lost.
    pub fn has_gap(&self) -> bool {
        self.gap
    }

    /// When byte `offset` was captured (the segment that brought it).
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
    fn reorders_drops_duplicates_and_keeps_the_bytes_seen_first() {
        let mut s = Stream::default();
        s.add(999, true, b"", ms(0)); // SYN: data starts at 1000
        s.add(1005, false, b"FGHIJ", ms(2)); // ahead of a hole
        s.add(1000, false, b"ABCDE", ms(1)); // fills it
        s.add(1008, false, b"xyZ", ms(3)); // overlaps: the earlier "IJ" wins
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
    fn wraps_starts_at_the_lowest_without_a_syn_and_counts_gaps() {
        let mut s = Stream::default();
        // No SYN; the sequence wraps inside the stream; the first segment seen is not the
        // first in the stream.
        s.add(0, false, b"def", ms(1));
        s.add(u32::MAX - 2, false, b"abc", ms(0));
        // A hole that never fills.
        s.add(10, false, b"lost", ms(3));
        s.finish();
        assert_eq!(s.data(), b"abcdef");
        assert!(s.has_gap());
        assert_eq!((s.stats.gaps, s.stats.lost_bytes), (1, 4));
        // With a SYN, bytes from before it are counted, not placed.
        let mut s = Stream::default();
        s.add(100, false, b"old", ms(0));
        s.add(200, true, b"", ms(1));
        s.add(201, false, b"new", ms(2));
        s.finish();
        assert_eq!((s.data(), s.stats.before_start), (&b"new"[..], 3));
    }

    #[test]
    fn counts_bytes_by_time() {
        let mut s = Stream::default();
        s.add(0, true, b"", ms(0));
        s.add(1, false, b"1234", ms(10));
        s.add(5, false, b"56", ms(20));
        s.add(7, false, b"789", ms(30));
        s.finish();
        assert_eq!(s.bytes_between(ms(10), Some(ms(30))), 6);
        assert_eq!(s.bytes_between(ms(15), None), 5);
    }
}
