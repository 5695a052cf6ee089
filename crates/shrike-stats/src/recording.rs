//! [`RecordingStats`]: a worker's statistics while it records: per statistic, one flat count
//! per HdrHistogram bucket and exact integer sums, turned into [`Stats`] when taken.
//!
//! Why not record into [`Statistic`] directly: a saturating HTTP/1.1 response records eight
//! values, and each paid HdrHistogram's `record` (its range, resize and overflow checks) and
//! Welford's running mean and variance (with a division): a sixth of a request's instructions
//! (bench/results/hot-path-costs.md). Here a value costs its bucket's index (the same
//! arithmetic HdrHistogram does), one increment, and two integer sums. The counts use HdrHistogram's own layout for 3 significant digits, so the
//! histogram built from them at the end is the one direct recording builds, count for count
//! (tested below against the crate itself).
//!
//! The moments come out more exact than Welford's: the mean is the exact sum over the count,
//! and the variance comes from exact integer sums of values and of squares (one rounding at
//! the end, not one per value).

use crate::statistic::{StatId, Statistic, Stats};

/// HdrHistogram's layout for a lowest value of 1 at 3 significant digits: 2,048 sub-buckets
/// (the first power of two at or above 2 × 10³), the upper half of them per bucket after the
/// first, so each bucket doubles the range of the last at the same relative precision.
const SUB_BUCKET_MAGNITUDE: u32 = 11;
const HALF_MAGNITUDE: u32 = SUB_BUCKET_MAGNITUDE - 1;
const HALF_COUNT: usize = 1 << HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_MAGNITUDE) - 1;
/// `64 - log2(lowest) - SUB_BUCKET_MAGNITUDE`: a value's bucket is this less its leading zeros.
const LEADING_ZERO_BASE: u32 = 64 - SUB_BUCKET_MAGNITUDE;
/// Buckets kept flat: every value below [`FLAT_LIMIT`], 2^42 ns (73 minutes) or bytes (4 TiB),
/// in 33,792 counts (264 KiB), as many as a histogram sized for an hour has.
const BUCKETS: u32 = 32;
const COUNTS: usize = (BUCKETS as usize + 1) * HALF_COUNT;
/// Values from here on are recorded into a [`Statistic`] directly (and rarely are).
const FLAT_LIMIT: u64 = 1 << (BUCKETS + HALF_MAGNITUDE);

/// The flat index of `value`'s bucket (`value < FLAT_LIMIT`), as HdrHistogram computes it.
#[inline]
fn index_of(value: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    (((bucket + 1) as usize) << HALF_MAGNITUDE) + (value >> bucket) as usize - HALF_COUNT
}

/// The lowest value of the bucket at flat index `index`.
fn value_of(index: usize) -> u64 {
    let bucket = (index >> HALF_MAGNITUDE) as u32;
    let sub = (index & (HALF_COUNT - 1)) + HALF_COUNT;
    match bucket.checked_sub(1) {
        Some(b) => (sub as u64) << b,
        None => (sub - HALF_COUNT) as u64,
    }
}

/// One statistic being recorded.
#[derive(Clone, Debug)]
struct Flat {
    counts: Box<[u64]>,
    count: u64,
    /// Exact sums of the values and of their squares: each square is below 2^84, so the sum
    /// holds 2^44 of them (a worker would need 200 days at a million responses a second).
    sum: u128,
    squares: u128,
    min: u64,
    max: u64,
    /// Values at or beyond [`FLAT_LIMIT`], recorded directly.
    beyond: Option<Box<Statistic>>,
    /// A run of equal values not yet recorded (see [`RecordingStats::record_run`]): the value
    /// and how many times it came.
    run: (u64, u64),
}

impl Flat {
    fn new() -> Flat {
        let mut counts = vec![0u64; COUNTS].into_boxed_slice();
        // The allocator hands back untouched zero pages; writing one count per page faults
        // them in here, before the run, not on the hot path (about 66 faults per statistic).
        for page in counts.chunks_mut(512) {
            page[0] = std::hint::black_box(0);
        }
        let (sum, squares, run) = (0, 0, (0, 0));
        Flat { counts, count: 0, sum, squares, min: u64::MAX, max: 0, beyond: None, run }
    }

    #[inline]
    fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    #[inline]
    fn record_n(&mut self, value: u64, n: u64) {
        if value >= FLAT_LIMIT {
            return self.record_beyond(value, n);
        }
        self.counts[index_of(value)] += n;
        self.count += n;
        let (v, n) = (u128::from(value), u128::from(n));
        self.sum += v * n;
        self.squares += v * v * n;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    #[cold]
    fn record_beyond(&mut self, value: u64, n: u64) {
        let beyond = self.beyond.get_or_insert_with(Box::default);
        (0..n).for_each(|_| beyond.record(value));
    }

    #[inline]
    fn record_run(&mut self, value: u64) {
        match self.run {
            (v, n) if v == value && n > 0 => self.run.1 += 1,
            _ => {
                self.end_run();
                self.run = (value, 1);
            }
        }
    }

    fn end_run(&mut self) {
        let (value, n) = std::mem::take(&mut self.run);
        if n > 0 {
            self.record_n(value, n);
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0 && self.beyond.is_none() && self.run.1 == 0
    }

    fn clear(&mut self) {
        self.counts.fill(0);
        (self.count, self.sum, self.squares, self.min, self.max) = (0, 0, 0, u64::MAX, 0);
        (self.beyond, self.run) = (None, (0, 0));
    }

    /// What was recorded, as a [`Statistic`]; leaves this empty.
    fn take(&mut self) -> Statistic {
        self.end_run();
        let mut out = match self.count {
            0 => Statistic::new(),
            n => {
                let mut hist = Statistic::growing_histogram();
                // Only between the extremes' buckets: the rest of the 33,792 are zero.
                let (low, high) = (index_of(self.min), index_of(self.max));
                for (i, &c) in self.counts.iter().enumerate().take(high + 1).skip(low) {
                    if c > 0 {
                        // Auto-resizing: only a value beyond u64 indexing fails; none is here.
                        let _ = hist.record_n(value_of(i), c);
                    }
                }
                let (mean, m2) = moments(n, self.sum, self.squares);
                Statistic::from_moments(hist, n, mean, m2, self.min, self.max)
            }
        };
        if let Some(beyond) = &self.beyond {
            out.merge(beyond);
        }
        self.clear();
        out
    }
}

/// The mean and the sum of squared deviations from it (Welford's M2) of `n` values with these
/// exact sums: `M2 = Σv² − (Σv)²/n`, in integers while `(Σv)²` fits (it is never below zero
/// there: n·Σv² ≥ (Σv)²), so the only rounding is the final conversion.
fn moments(n: u64, sum: u128, squares: u128) -> (f64, f64) {
    let n128 = u128::from(n);
    let mean = sum as f64 / n as f64;
    let m2 = match sum.checked_mul(sum) {
        Some(s2) => (squares - s2 / n128) as f64 - (s2 % n128) as f64 / n as f64,
        // Sums past 2^64 (over 4 million values near an hour each): floating point.
        None => (squares as f64 - mean * sum as f64).max(0.0),
    };
    (mean, m2)
}

/// Every statistic a worker records (see the module docs). Reading goes through
/// [`RecordingStats::take`].
#[derive(Clone, Debug)]
pub struct RecordingStats {
    stats: Box<[Flat]>,
    /// `twin_of[b] == Some(a)`: `b` has received exactly `a`'s values so far and holds none
    /// of its own (see [`RecordingStats::twin`]); `twin_at[a] == Some(b)` the other way.
    twin_of: [Option<StatId>; StatId::COUNT],
    twin_at: [Option<StatId>; StatId::COUNT],
    /// The declared pairs, which a `take` or `clear` restores.
    pairs: Vec<(StatId, StatId)>,
}

impl Default for RecordingStats {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordingStats {
    pub fn new() -> Self {
        RecordingStats {
            stats: (0..StatId::COUNT).map(|_| Flat::new()).collect(),
            twin_of: [None; StatId::COUNT],
            twin_at: [None; StatId::COUNT],
            pairs: Vec::new(),
        }
    }

    /// Declares that `b` usually receives exactly the values `a` does, one for one (a
    /// latency measured from an instant that usually is another's, or kept for the usual
    /// status class): until one differs, `b` is not recorded at all, and [`take`] gives it
    /// a copy of `a`. The first difference (through [`record_pair`] or a recording into
    /// either alone) copies `a`'s counts into `b`, and from then on each is recorded
    /// separately. What `take` returns is exactly what recording both would give.
    ///
    /// Why: each recording is an increment in a 264 KiB array whose line the kernel's TCP
    /// path has usually evicted since the last response; an unpaced HTTP/1.1 response records
    /// three such pairs, identical value for value.
    ///
    /// A statistic takes part in one pair at most; a pair with one already taken is ignored,
    /// as is one declared after values were recorded.
    ///
    /// [`take`]: RecordingStats::take
    /// [`record_pair`]: RecordingStats::record_pair
    pub fn twin(&mut self, a: StatId, b: StatId) {
        let taken =
            |id: StatId| self.twin_of[id as usize].is_some() || self.twin_at[id as usize].is_some();
        let empty = |id: StatId| self.stats[id as usize].is_empty();
        if a == b || taken(a) || taken(b) || !empty(a) || !empty(b) {
            return;
        }
        self.twin_of[b as usize] = Some(a);
        self.twin_at[a as usize] = Some(b);
        self.pairs.push((a, b));
    }

    #[inline]
    pub fn record(&mut self, id: StatId, value: u64) {
        self.alone(id).record(value);
    }

    /// `id`'s own statistic, to record into alone: parted from its twin first, if it has one.
    #[inline]
    fn alone(&mut self, id: StatId) -> &mut Flat {
        let i = id as usize;
        if self.twin_of[i].is_some() || self.twin_at[i].is_some() {
            self.part(id);
        }
        &mut self.stats[i]
    }

    /// Records `value` into `a` and `b_value` (if any) into `b`: a single recording while `b`
    /// is `a`'s twin and gets the same value.
    #[inline]
    pub fn record_pair(&mut self, a: StatId, value: u64, b: StatId, b_value: Option<u64>) {
        if self.twin_of[b as usize] == Some(a) && b_value == Some(value) {
            self.stats[a as usize].record(value);
            return;
        }
        self.record(a, value);
        if let Some(v) = b_value {
            self.record(b, v);
        }
    }

    /// Ends the pair `id` belongs to: the twin gets a copy of what the pair holds.
    #[cold]
    fn part(&mut self, id: StatId) {
        let (a, b) = match (self.twin_of[id as usize], self.twin_at[id as usize]) {
            (Some(a), _) => (a, id),
            (None, Some(b)) => (id, b),
            (None, None) => return,
        };
        self.twin_of[b as usize] = None;
        self.twin_at[a as usize] = None;
        let copy = self.stats[a as usize].clone();
        self.stats[b as usize] = copy;
    }

    /// [`RecordingStats::record`] for a statistic whose values mostly repeat (response
    /// sizes): a value equal to the last costs one increment, and the run enters the counts
    /// when it ends. Nothing changes in what [`RecordingStats::take`] returns.
    #[inline]
    pub fn record_run(&mut self, id: StatId, value: u64) {
        self.alone(id).record_run(value);
    }

    /// Every value recorded so far, as [`Stats`]; leaves this empty, ready to record again
    /// (its pairs declared again).
    pub fn take(&mut self) -> Stats {
        let mut out = Stats::new();
        for (&id, flat) in StatId::ALL.iter().zip(self.stats.iter_mut()) {
            flat.end_run();
            if flat.count > 0 || flat.beyond.is_some() {
                out.set(id, flat.take());
            }
        }
        for &id in StatId::ALL {
            if let Some(a) = self.twin_of[id as usize] {
                out.set(id, out.get(a).clone());
            }
        }
        self.restore_pairs();
        out
    }

    /// Drops every value recorded so far (a warm-up's), and declares the pairs again.
    pub fn clear(&mut self) {
        self.stats.iter_mut().for_each(Flat::clear);
        self.restore_pairs();
    }

    fn restore_pairs(&mut self) {
        (self.twin_of, self.twin_at) = ([None; StatId::COUNT], [None; StatId::COUNT]);
        for (a, b) in std::mem::take(&mut self.pairs) {
            self.twin(a, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flat layout is HdrHistogram's: every value's index names a bucket whose lowest
    /// value HdrHistogram puts in the same bucket as the value, and the indexes run without
    /// gaps up to the limit.
    #[test]
    fn flat_buckets_are_hdrhistograms_buckets() {
        let hist = Statistic::growing_histogram();
        let mut values: Vec<u64> = (0..5000).collect();
        for shift in 11..42 {
            let base = 1u64 << shift;
            values.extend([base - 1, base, base + 1, base + base / 3, base + base / 2 + 7]);
        }
        values.push(FLAT_LIMIT - 1);
        for v in values {
            let low = value_of(index_of(v));
            assert_eq!(low, hist.lowest_equivalent(v), "value {v}");
            assert_eq!(index_of(low), index_of(v), "value {v}");
        }
        assert_eq!(index_of(FLAT_LIMIT - 1), COUNTS - 1);
        for i in 1..COUNTS {
            assert!(value_of(i) > value_of(i - 1), "index {i}");
            assert_eq!(index_of(value_of(i)), i);
        }
    }

    /// A deterministic spread of values: small sizes, latencies, some equal, a few beyond
    /// the flat range.
    fn values(n: u64) -> impl Iterator<Item = u64> {
        (0..n).map(|i| match i % 7 {
            0 => i % 300,
            1 => 115,
            6 if i % 1000 == 6 => FLAT_LIMIT + i * 1_000_003,
            _ => (i * 7_919) % 1_000_003 * (1 + i % 50) + 1,
        })
    }

    /// Recording here gives what recording into a `Statistic` directly gives: the same
    /// histogram count for count, the same count, min and max, and the moments within
    /// rounding (here from exact sums, there from Welford's running updates).
    #[test]
    fn recording_equals_direct_recording() {
        for n in [0, 1, 2, 63, 64, 1000, 20_011] {
            let mut direct = Stats::new();
            let mut flat = RecordingStats::new();
            for (i, v) in values(n).enumerate() {
                direct.record(StatId::RequestToResponse, v);
                flat.record(StatId::RequestToResponse, v);
                // Sizes come in runs of equal values, some past the flat range.
                let size = match i / 5 % 4 {
                    3 if i % 97 == 0 => FLAT_LIMIT + 5,
                    k => k as u64 * 1000,
                };
                direct.record(StatId::ResponseBodySize, size);
                flat.record_run(StatId::ResponseBodySize, size);
            }
            let got = flat.take();
            for &id in StatId::ALL {
                let (a, b) = (direct.get(id), got.get(id));
                assert_eq!(a.count(), b.count(), "{id:?} n={n}");
                assert_eq!(a.histogram(), b.histogram(), "{id:?} n={n}");
                assert_eq!((a.min(), a.max()), (b.min(), b.max()), "{id:?} n={n}");
                let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
                assert!(close(a.mean(), b.mean()), "{id:?} n={n}: {} {}", a.mean(), b.mean());
                assert!(close(a.pstdev(), b.pstdev()), "{id:?} n={n}");
                assert_eq!(a.value_at_quantile(0.99), b.value_at_quantile(0.99), "{id:?} n={n}");
            }
            // Taken means gone: a second take is empty.
            assert_eq!(flat.take().get(StatId::RequestToResponse).count(), 0);
        }
    }

    /// The moments are the exact ones: for values whose mean and variance are known in
    /// closed form, and where Welford's per-value roundings would show.
    #[test]
    fn moments_are_exact() {
        let mut s = RecordingStats::new();
        // 1e9 + k for k in 0..1000: mean 1e9 + 499.5, population variance (1000² − 1)/12.
        for k in 0..1000u64 {
            s.record(StatId::RequestToResponse, 1_000_000_000 + k);
        }
        let got = s.take();
        let stat = got.get(StatId::RequestToResponse);
        assert_eq!(stat.mean(), 1_000_000_499.5);
        let var = (1000.0f64 * 1000.0 - 1.0) / 12.0;
        assert!((stat.pstdev() - var.sqrt()).abs() < 1e-9, "{}", stat.pstdev());
        assert_eq!(moments(3, 6, 14), (2.0, 2.0));
        // Sums past 2^64 take the floating-point path and stay sane.
        // Eight values of 2^62: sum 2^65, squares 2^127, the square of the sum past u128.
        let (mean, m2) = moments(8, 1 << 65, 1 << 127);
        assert_eq!(mean, (1u64 << 62) as f64);
        assert!(m2.abs() <= 1e-9 * (1u128 << 127) as f64, "{m2}");
    }

    /// Twins give exactly what recording each gives, whether they never part, part through a
    /// pair that differs, through a value into either alone, or after a take or a clear.
    #[test]
    fn twins_equal_recording_each() {
        let (a, b) = (StatId::QueueToConnect, StatId::SendLateness);
        let (c, d) = (StatId::RequestToResponse, StatId::Latency2xx);
        // Where the streams part: never, by a different value, by `b` alone, by `a` alone.
        for part_at in [None, Some((500, 0)), Some((700, 1)), Some((900, 2))] {
            let mut direct = Stats::new();
            let mut twins = RecordingStats::new();
            twins.twin(a, b);
            twins.twin(c, d);
            for (i, v) in values(2000).enumerate() {
                let (va, vb) = match part_at {
                    Some((at, 0)) if i >= at => (v, Some(v / 2 + 1)),
                    Some((at, 1)) if i == at => (v, None),
                    _ => (v, Some(v)),
                };
                direct.record(a, va);
                if let Some(vb) = vb {
                    direct.record(b, vb);
                }
                twins.record_pair(a, va, b, vb);
                if let Some((at, 2)) = part_at.filter(|&(at, _)| i == at) {
                    direct.record(a, at as u64);
                    twins.record(a, at as u64);
                }
                // The second pair: c's twin d misses every 0th of 997 values.
                let vd = (i % 997 != 0 || i == 0).then_some(v);
                direct.record(c, v);
                if let Some(vd) = vd {
                    direct.record(d, vd);
                }
                twins.record_pair(c, v, d, vd);
            }
            let got = twins.take();
            for id in [a, b, c, d] {
                let (x, y) = (direct.get(id), got.get(id));
                assert_eq!(x.count(), y.count(), "{id:?} {part_at:?}");
                assert_eq!(x.histogram(), y.histogram(), "{id:?} {part_at:?}");
                assert_eq!((x.min(), x.max()), (y.min(), y.max()), "{id:?} {part_at:?}");
            }
            // Taken, the pairs hold again: equal values record once, and a take gives both.
            twins.record_pair(a, 5, b, Some(5));
            let again = twins.take();
            assert_eq!((again.get(a).count(), again.get(b).count()), (1, 1));
        }
        // A pair declared over a statistic already holding values, or reusing one, is ignored.
        let mut s = RecordingStats::new();
        s.record(a, 1);
        s.twin(a, b);
        s.twin(c, d);
        s.twin(c, b);
        s.record_pair(a, 2, b, Some(2));
        s.record_pair(c, 3, d, Some(3));
        let got = s.take();
        assert_eq!((got.get(a).count(), got.get(b).count()), (2, 1));
        assert_eq!((got.get(c).count(), got.get(d).count()), (1, 1));
        assert_eq!(got.get(d).max(), 3);
    }

    #[test]
    fn clear_drops_values_recorded_so_far() {
        let mut s = RecordingStats::new();
        for v in 1..=10 {
            s.record(StatId::RequestToResponse, v);
        }
        s.record(StatId::RequestToResponse, FLAT_LIMIT * 2);
        s.record_run(StatId::ResponseBodySize, 64);
        s.clear();
        s.record(StatId::RequestToResponse, 42);
        let got = s.take();
        assert_eq!(got.get(StatId::RequestToResponse).count(), 1);
        assert_eq!(got.get(StatId::RequestToResponse).max(), 42);
        assert_eq!(got.get(StatId::ResponseBodySize).count(), 0);
    }
}
