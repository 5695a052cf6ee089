//! [`BatchedStats`]: a worker's [`Stats`], written a batch at a time.
//!
//! Recording a latency is one increment in its histogram's counts, a 264 KiB array per
//! statistic, at an index that moves with every response. Between two responses the kernel's
//! TCP path evicts those lines, so each of the five latencies recorded per response was a cache
//! miss: `perf` of a saturating run put the histograms' increments at 4.6 % of the client's
//! CPU, 89 % of it on the one load of the count (2026-11-28, `docs/hot-path-profile.md`).
//! Here values wait in a short array per statistic and enter their histogram [`BATCH`] at a
//! time, one statistic after another: the loads no longer wait on each other and repeated
//! lines hit.
//!
//! Nothing is lost or reordered: each statistic's values enter in the order they came, so the
//! moments (whose floating-point sums depend on order) are exactly what direct recording gives,
//! and [`BatchedStats::take`] flushes before it hands the statistics over.

use crate::statistic::{StatId, Stats};

/// Values held per statistic before they go into its histogram: 64 × 8 bytes, eight cache
/// lines, written in order.
pub const BATCH: usize = 64;

#[derive(Clone, Debug)]
struct Pending {
    len: usize,
    values: [u64; BATCH],
}

/// [`Stats`] with a write-behind batch per statistic. Reading goes through [`take`], which
/// flushes first, so no caller can see a statistic without its latest values.
///
/// [`take`]: BatchedStats::take
#[derive(Clone, Debug)]
pub struct BatchedStats {
    stats: Stats,
    pending: Box<[Pending]>,
}

impl Default for BatchedStats {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchedStats {
    pub fn new() -> Self {
        let empty = Pending { len: 0, values: [0; BATCH] };
        BatchedStats { stats: Stats::presized(), pending: vec![empty; StatId::COUNT].into() }
    }

    #[inline]
    pub fn record(&mut self, id: StatId, value: u64) {
        let p = &mut self.pending[id as usize];
        p.values[p.len] = value;
        p.len += 1;
        if p.len == BATCH {
            self.flush(id);
        }
    }

    fn flush(&mut self, id: StatId) {
        let p = &mut self.pending[id as usize];
        for &v in &p.values[..p.len] {
            self.stats.record(id, v);
        }
        p.len = 0;
    }

    /// Every value recorded so far, as [`Stats`]; leaves this empty, and no longer presized.
    pub fn take(&mut self) -> Stats {
        for &id in StatId::ALL {
            self.flush(id);
        }
        std::mem::take(&mut self.stats)
    }

    /// Drops every value recorded so far (a warm-up's).
    pub fn clear(&mut self) {
        for p in self.pending.iter_mut() {
            p.len = 0;
        }
        self.stats.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recording through a batch gives exactly what recording directly gives: counts,
    /// histogram, and the order-dependent floating-point moments, at every batch boundary.
    #[test]
    fn batched_recording_equals_direct_recording() {
        for n in [0, 1, BATCH - 1, BATCH, BATCH + 1, 5 * BATCH + 7] {
            let mut direct = Stats::new();
            let mut batched = BatchedStats::new();
            for i in 0..n as u64 {
                // Two statistics interleaved, with values that make the moments order-sensitive.
                let v = (i * 7_919) % 1_000_003 + 1;
                direct.record(StatId::RequestToResponse, v);
                batched.record(StatId::RequestToResponse, v);
                direct.record(StatId::ResponseBodySize, i);
                batched.record(StatId::ResponseBodySize, i);
            }
            let got = batched.take();
            for &id in StatId::ALL {
                let (a, b) = (direct.get(id), got.get(id));
                assert_eq!(a.count(), b.count(), "{id:?} n={n}");
                assert_eq!(a.mean().to_bits(), b.mean().to_bits(), "{id:?} n={n}");
                assert_eq!(a.pstdev().to_bits(), b.pstdev().to_bits(), "{id:?} n={n}");
                assert_eq!((a.min(), a.max()), (b.min(), b.max()), "{id:?} n={n}");
                assert_eq!(a.value_at_quantile(0.99), b.value_at_quantile(0.99), "{id:?} n={n}");
            }
            // Taken means gone: a second take is empty.
            assert_eq!(batched.take().get(StatId::RequestToResponse).count(), 0);
        }
    }

    #[test]
    fn clear_drops_pending_values_too() {
        let mut s = BatchedStats::new();
        for v in 1..=10 {
            s.record(StatId::RequestToResponse, v);
        }
        s.clear();
        s.record(StatId::RequestToResponse, 42);
        let got = s.take();
        assert_eq!(got.get(StatId::RequestToResponse).count(), 1);
        assert_eq!(got.get(StatId::RequestToResponse).max(), 42);
    }
}
