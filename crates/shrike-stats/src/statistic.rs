//! One statistic: an HDR histogram for percentiles plus exact streaming moments.
//!
//! HdrHistogram alone reports mean/min/max at bucket resolution (3 significant digits). Users
//! compare means across runs, so we also keep exact moments (Welford on the hot path, Chan's
//! parallel formula when merging), as Nighthawk's StreamingStatistic does.

use std::io::Read as _;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Significant digits kept by every histogram (1 part in 1000 at any magnitude).
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// What a recording histogram is sized for up front (1 hour in ns): resizing (an allocation)
/// stays off the hot path for every realistic latency. Larger values still record: histograms
/// auto-resize.
const RECORDING_HIGHEST: u64 = 3_600_000_000_000;
/// HdrHistogram's smallest range at 3 digits (16 KiB of counts), where a statistic that is
/// only merged or read into starts, growing to what it receives. A histogram of the full hour
/// is 33,792 counts (264 KiB), and HdrHistogram writes every count: until glibc's mmap
/// threshold adapts it maps each one fresh, about 66 page faults, 0.1–0.25 ms here.
const EMPTY_HIGHEST: u64 = 2;

/// HdrHistogram's V2 encoding cookies (base cookie | 0x10 for 8-byte words, as every
/// implementation writes them) and its fixed header size (cookie, payload length, normalizing
/// offset, significant digits, lowest, highest, integer-to-double ratio).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
const V2_HEADER_BYTES: usize = 40;
/// A real histogram (3 digits, 1 ns … 1 h) decodes to well under 1 MiB.
const MAX_DECODED_BYTES: u64 = 16 << 20;

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether a statistic holds durations (ns) or sizes (bytes); decides how it is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatKind {
    Duration,
    Size,
}

macro_rules! stat_ids {
    ($( $variant:ident => $id:literal, $kind:ident, $title:literal; )*) => {
        /// The statistics a worker records. Ids are the names Nighthawk users already know.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum StatId { $( $variant, )* }

        impl StatId {
            pub const ALL: &'static [StatId] = &[ $( StatId::$variant, )* ];
            pub const COUNT: usize = Self::ALL.len();

            /// The id used in JSON and every machine-readable format.
            pub fn id(self) -> &'static str {
                match self { $( StatId::$variant => $id, )* }
            }
            pub fn kind(self) -> StatKind {
                match self { $( StatId::$variant => StatKind::$kind, )* }
            }
            /// The heading used in the human report.
            pub fn title(self) -> &'static str {
                match self { $( StatId::$variant => $title, )* }
            }
            pub fn from_id(id: &str) -> Option<StatId> {
                match id { $( $id => Some(StatId::$variant), )* _ => None }
            }
        }
    };
}

stat_ids! {
    QueueToConnect => "benchmark_http_client.queue_to_connect", Duration,
        "Queueing and connection setup latency";
    RequestToResponse => "benchmark_http_client.request_to_response", Duration,
        "Request start to response end (service time)";
    ScheduledToResponse => "benchmark_http_client.scheduled_to_response", Duration,
        "Scheduled start to response end (coordinated-omission-free latency)";
    Latency1xx => "benchmark_http_client.latency_1xx", Duration, "Latency of 1xx responses";
    Latency2xx => "benchmark_http_client.latency_2xx", Duration, "Latency of 2xx responses";
    Latency3xx => "benchmark_http_client.latency_3xx", Duration, "Latency of 3xx responses";
    Latency4xx => "benchmark_http_client.latency_4xx", Duration, "Latency of 4xx responses";
    Latency5xx => "benchmark_http_client.latency_5xx", Duration, "Latency of 5xx responses";
    LatencyXxx => "benchmark_http_client.latency_xxx", Duration,
        "Latency of responses with other status codes";
    ResponseHeaderSize => "benchmark_http_client.response_header_size", Size,
        "Response header size in bytes";
    ResponseBodySize => "benchmark_http_client.response_body_size", Size,
        "Response body size in bytes";
    OriginLatency => "benchmark_http_client.origin_latency_statistic", Duration,
        "Server-reported latency (origin latency header)";
    TunnelSetup => "benchmark_http_client.tunnel_setup", Duration,
        "Tunnel set-up (CONNECT written to its 2xx answer)";
    SequencerCallback => "sequencer.callback", Duration, "Initiation to completion";
    SequencerBlocking => "sequencer.blocking", Duration,
        "Blocking. Results are skewed when significant numbers are reported here.";
    SendLateness => "sequencer.send_lateness", Duration,
        "Send lateness (actual send minus scheduled send)";
    ScheduledToErrorResponse => "benchmark_http_client.scheduled_to_error_response", Duration,
        "Scheduled start to response end, of error responses (4xx, 5xx, other statuses)";
}

impl StatId {
    /// The per-status-class latency statistic for an HTTP status code.
    pub fn latency_for_status(status: u16) -> StatId {
        match status / 100 {
            1 => StatId::Latency1xx,
            2 => StatId::Latency2xx,
            3 => StatId::Latency3xx,
            4 => StatId::Latency4xx,
            5 => StatId::Latency5xx,
            _ => StatId::LatencyXxx,
        }
    }
}

/// One point of a percentile spectrum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentile {
    /// In `[0, 1]`.
    pub quantile: f64,
    /// Samples at or below `value`.
    pub count: u64,
    /// The histogram's value at this quantile (highest equivalent value of its bucket).
    pub value: u64,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistogramDecodeError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram payload is not a valid HdrHistogram V2 encoding: {0}")]
    Hdr(String),
}

/// A histogram plus exact moments. See the module docs.
#[derive(Clone, Debug)]
pub struct Statistic {
    hist: Histogram<u64>,
    count: u64,
    mean: f64,
    /// Sum of squared deviations from the mean (Welford's M2).
    m2: f64,
    min: u64,
    max: u64,
    /// `Some` for a statistic read from a summary without a histogram (Nighthawk's JSON): the
    /// percentile points as stored, which then answer every percentile question. Such a
    /// statistic cannot be merged exactly; see [`Statistic::has_histogram`].
    stored: Option<Vec<Percentile>>,
}

impl Default for Statistic {
    fn default() -> Self {
        Self::new()
    }
}

impl Statistic {
    /// An empty statistic to merge or read into: its histogram starts at its smallest and
    /// grows to what it receives.
    pub fn new() -> Self {
        Self::with_histogram(Self::empty_histogram(EMPTY_HIGHEST))
    }

    /// An empty statistic for a hot path to record into: sized for every value up to an hour,
    /// so recording never allocates. Its counts are written (and so faulted in) here, before
    /// the recording starts: make one ahead of time and [`reset`](Self::reset) it for reuse.
    pub fn presized() -> Self {
        Self::with_histogram(Self::empty_histogram(RECORDING_HIGHEST))
    }

    fn empty_histogram(highest: u64) -> Histogram<u64> {
        // Invariant: both bounds are constants inside HdrHistogram's limits (low >= 1,
        // high >= 2 * low, 3 significant digits), so construction cannot fail.
        #[allow(clippy::expect_used)]
        let mut h = Histogram::new_with_bounds(1, highest, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        h.auto(true);
        h
    }

    /// Empties this statistic in place, keeping its histogram's memory (already faulted in):
    /// how a recorder reuses one rather than allocate a fresh one mid-run.
    pub fn reset(&mut self) {
        self.hist.reset();
        let Statistic { hist: _, count, mean, m2, min, max, stored } = self;
        (*count, *mean, *m2, *min, *max, *stored) = (0, 0.0, 0.0, u64::MAX, 0, None);
    }

    fn with_histogram(hist: Histogram<u64>) -> Self {
        Statistic { hist, count: 0, mean: 0.0, m2: 0.0, min: u64::MAX, max: 0, stored: None }
    }

    /// Records one sample. Never drops it: the histogram grows if the value is out of range.
    #[inline]
    pub fn record(&mut self, value: u64) {
        // With auto-resize on, recording only fails if the value exceeds what a u64-counted
        // histogram can index at all (> 2^63); saturate such a value instead of losing it.
        if self.hist.record(value).is_err() {
            let _ = self.hist.record(self.hist.high());
        }
        self.count += 1;
        let x = value as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Merges `other` into `self` exactly (histogram counts add; moments combine).
    ///
    /// If either side has no histogram ([`Statistic::has_histogram`]) the moments still combine
    /// exactly, but the merged percentiles are unknown: the result keeps no percentile points
    /// rather than invent some. Callers that print percentiles refuse such merges first.
    pub fn merge(&mut self, other: &Statistic) {
        if other.count == 0 {
            return;
        }
        let exact = self.stored.is_none() && other.stored.is_none();
        if !exact && self.count == 0 {
            // Merging into nothing is exact whatever `other` holds.
            *self = other.clone();
            return;
        }
        if exact {
            // Both histograms auto-resize, so `add` only fails on a value beyond u64 indexing,
            // which `record` never stores.
            let _ = self.hist.add(&other.hist);
        } else {
            self.stored = Some(Vec::new());
        }
        let (n1, n2) = (self.count as f64, other.count as f64);
        let n = n1 + n2;
        let delta = other.mean - self.mean;
        self.mean += delta * n2 / n;
        self.m2 += other.m2 + delta * delta * n1 * n2 / n;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// This statistic without the samples of `part`, which were recorded into both (the
    /// successful responses' latency: every response's less the errors'). Counts and the
    /// mean come out exact; min and max are the remaining histogram's (to its precision).
    /// `None` when `part` is not a part of this one, or either has no histogram.
    pub fn without(&self, part: &Statistic) -> Option<Statistic> {
        if part.count == 0 {
            return Some(self.clone());
        }
        if self.stored.is_some() || part.stored.is_some() || part.count > self.count {
            return None;
        }
        let mut hist = self.hist.clone();
        hist.subtract(&part.hist).ok()?;
        let count = self.count - part.count;
        if count == 0 {
            return Some(Statistic::with_histogram(hist));
        }
        let (n, k, m) = (self.count as f64, part.count as f64, count as f64);
        let mean = (n * self.mean - k * part.mean) / m;
        // Welford's merge run backwards: M2 = M2a + M2b + δ² · na · nb / n.
        let delta = part.mean - mean;
        let m2 = (self.m2 - part.m2 - delta * delta * m * k / n).max(0.0);
        let (min, max) = (hist.min(), hist.max());
        Some(Statistic { hist, count, mean, m2, min, max, stored: None })
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.mean
        }
    }
    /// Population standard deviation.
    pub fn pstdev(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.m2 / self.count as f64).max(0.0).sqrt()
        }
    }
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    /// The samples' histogram; empty for a statistic read without one (see
    /// [`Statistic::has_histogram`]).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Whether the statistic holds its samples' histogram, so that merging it is exact and any
    /// percentile can be computed. False for one read from a summary ([`Statistic::from_summary`]).
    pub fn has_histogram(&self) -> bool {
        self.stored.is_none()
    }

    /// Whether percentiles of this statistic mean anything: it has samples, and either its
    /// histogram or at least one stored point. Formats that print percentiles skip the rest, as
    /// Nighthawk prints none for a statistic it stored without any.
    pub fn has_percentiles(&self) -> bool {
        self.count > 0 && self.stored.as_ref().is_none_or(|p| !p.is_empty())
    }

    /// The value at quantile `q` in `[0, 1]`, as HdrHistogram reports it.
    ///
    /// Without a histogram: the stored point at the smallest quantile at or above `q` (a value
    /// at least `q` of the samples do not exceed), or, when no such point was stored, the
    /// exact min for `q` = 0 and otherwise the exact max, the only bound then known (see
    /// [`Statistic::has_percentiles`]).
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        match self.stored_point(q) {
            Some(p) => p.value,
            None if self.stored.is_some() && q <= 0.0 => self.min(),
            None if self.stored.is_some() => self.max,
            None => self.hist.value_at_quantile(q),
        }
    }

    /// [`Statistic::value_at_quantile`] clamped to the exact `[min, max]`: what a report that
    /// prints a percentile next to the exact min or max should show. HdrHistogram answers with
    /// the highest value of a sample's bucket (3 significant digits), which can lie above every
    /// sample: one sample of 1_016_957 ns reads p99 = 1_017_343 ns, above max. No sample lies
    /// outside `[min, max]`, so clamping only moves the value closer to the truth.
    pub fn clamped_quantile(&self, q: f64) -> u64 {
        // Not `clamp`, which panics if min > max (possible in a hand-built statistic).
        self.value_at_quantile(q).max(self.min()).min(self.max())
    }

    fn stored_point(&self, q: f64) -> Option<&Percentile> {
        self.stored.as_ref()?.iter().find(|p| p.quantile >= q)
    }

    /// One percentile point, with the number of samples at or below its value.
    pub fn percentile(&self, q: f64) -> Percentile {
        if self.stored.is_some() {
            let count = match self.stored_point(q) {
                Some(p) => p.count,
                None => self.count,
            };
            return Percentile { quantile: q, count, value: self.value_at_quantile(q) };
        }
        let value = self.value_at_quantile(q);
        let count = if self.count == 0 { 0 } else { self.hist.count_between(0, value) };
        Percentile { quantile: q, count, value }
    }

    /// [`Statistic::percentile`] at each of `quantiles`, in one walk over the histogram when
    /// they ascend (the spectrum's points do): per point, a walk each would cost a scan of
    /// the whole histogram per point.
    pub fn percentiles(&self, quantiles: &[f64]) -> Vec<Percentile> {
        if self.count == 0 || self.stored.is_some() || !quantiles.is_sorted() {
            return quantiles.iter().map(|&q| self.percentile(q)).collect();
        }
        let mut out: Vec<Percentile> =
            quantiles.iter().map(|&quantile| Percentile { quantile, count: 0, value: 0 }).collect();
        self.fill_points(&mut out);
        out
    }

    /// The HdrHistogram percentile spectrum (5 ticks per half distance, as Nighthawk and
    /// HdrHistogram's own logs use): 0, 0.1 … 0.5, 0.55 … 0.990625, 0.999023 …, 1.
    ///
    /// Without a histogram: the stored points, as stored.
    pub fn spectrum(&self) -> Vec<Percentile> {
        match &self.stored {
            Some(stored) if self.count > 0 => stored.clone(),
            _ => self.percentiles(&self.spectrum_quantiles()),
        }
    }

    /// The quantiles of [`Statistic::spectrum`]'s points, ascending, without repeats; for a
    /// caller that wants the points at quantiles of its own derived from these, without paying
    /// for the spectrum's values too.
    pub fn spectrum_quantiles(&self) -> Vec<f64> {
        if self.count == 0 {
            return Vec::new();
        }
        if let Some(stored) = &self.stored {
            return stored.iter().map(|p| p.quantile).collect();
        }
        // The points then come from `percentiles`, in one walk: a `percentile` call per point
        // scanned the histogram twice per point, about 50 points for each statistic at every
        // run's end (≈ 190 M instructions for a 1 s latency range).
        let mut quantiles = vec![0.0];
        quantiles.extend(
            self.hist
                .iter_quantiles(5)
                .map(|it| it.quantile_iterated_to())
                .filter(|&q| q > 0.0 && q < 1.0),
        );
        quantiles.push(1.0);
        quantiles.dedup();
        quantiles
    }

    /// Sets each point's value and count to what [`Statistic::percentile`] gives for its
    /// quantile (the points in ascending quantile order, the histogram non-empty), walking the
    /// recorded buckets once. As HdrHistogram's `value_at_quantile`: the point is reached in
    /// the first bucket whose running count is at least `max(1, ⌈q·total⌉)`, and it reads that
    /// bucket's highest equivalent value (its lowest at q = 0); its count is the running count
    /// through that bucket, which `count_between(0, value)` also sums.
    fn fill_points(&self, points: &mut [Percentile]) {
        let total = self.hist.len();
        let mut buckets = self.hist.iter_recorded();
        let (mut bucket, mut running) = (None, 0u64);
        for p in points.iter_mut() {
            let q = p.quantile.min(1.0);
            let target = ((q * total as f64).ceil() as u64).max(1);
            while bucket.is_none() || running < target {
                let Some(b) = buckets.next() else { break };
                running += b.count_at_value();
                bucket = Some(b.value_iterated_to());
            }
            let top = bucket.unwrap_or(0);
            let value = if q == 0.0 { self.hist.lowest_equivalent(top) } else { top };
            *p = Percentile { quantile: p.quantile, count: running, value };
        }
    }

    /// The histogram in HdrHistogram's standard compressed V2 encoding, base64 (the form
    /// HdrHistogram log files use), so any HdrHistogram implementation can read it back.
    pub fn encode_histogram(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.encode_histogram_bytes())
    }

    /// The histogram in HdrHistogram's compressed V2 encoding, as bytes (what binary protocols
    /// carry).
    pub fn encode_histogram_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        // Serializing into a Vec only fails on an internal invariant violation (it performs
        // no I/O); empty bytes then decode as an error rather than as wrong data.
        if V2DeflateSerializer::new().serialize(&self.hist, &mut buf).is_err() {
            return Vec::new();
        }
        buf
    }

    /// Decodes a histogram written by [`Statistic::encode_histogram`] (or any HdrHistogram V2
    /// encoding, compressed or not).
    ///
    /// Stored results come from files users pass around, so the input is untrusted. The
    /// hdrhistogram deserializer allocates whatever payload length the header claims (up to
    /// 4 GiB) before reading it; we decompress under a cap ourselves and check the claimed length
    /// against the bytes actually present before handing it the plain V2 payload.
    pub fn decode_histogram(encoded: &str) -> Result<Histogram<u64>, HistogramDecodeError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded.trim())?;
        Self::decode_histogram_bytes(&bytes)
    }

    /// [`Statistic::decode_histogram`] for bytes (untrusted: checked the same way).
    pub fn decode_histogram_bytes(bytes: &[u8]) -> Result<Histogram<u64>, HistogramDecodeError> {
        let bad = |why: &str| HistogramDecodeError::Hdr(why.to_string());
        let plain = match read_u32(bytes, 0) {
            Some(V2_COMPRESSED_COOKIE) => {
                let len = read_u32(bytes, 4).ok_or_else(|| bad("truncated header"))? as usize;
                let body = bytes.get(8..8 + len).ok_or_else(|| bad("truncated payload"))?;
                let mut out = Vec::new();
                flate2::read::ZlibDecoder::new(body)
                    .take(MAX_DECODED_BYTES + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(&format!("corrupt compressed payload: {e}")))?;
                if out.len() as u64 > MAX_DECODED_BYTES {
                    return Err(bad("decompressed histogram is implausibly large"));
                }
                out
            }
            Some(V2_COOKIE) => bytes.to_vec(),
            _ => return Err(bad("not an HdrHistogram V2 encoding")),
        };
        if read_u32(&plain, 0) != Some(V2_COOKIE) || plain.len() < V2_HEADER_BYTES {
            return Err(bad("not an HdrHistogram V2 encoding"));
        }
        let claimed = read_u32(&plain, 4).unwrap_or(u32::MAX) as usize;
        if claimed > plain.len() - V2_HEADER_BYTES {
            return Err(bad("counts payload is shorter than its header claims"));
        }
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut plain.as_slice())
            .map_err(|e| HistogramDecodeError::Hdr(format!("{e:?}")))?;
        h.auto(true);
        Ok(h)
    }

    /// Rebuilds a statistic from stored parts (a JSON result read back), so stored results
    /// merge exactly with each other.
    pub fn from_parts(
        hist: Histogram<u64>,
        count: u64,
        mean: f64,
        pstdev: f64,
        min: u64,
        max: u64,
    ) -> Self {
        let min = if count == 0 { u64::MAX } else { min };
        Self::from_moments(hist, count, mean, pstdev * pstdev * count as f64, min, max)
    }

    /// A statistic from its histogram and exact moments (`m2`: the sum of squared deviations
    /// from the mean), as a recorder that keeps them its own way hands them over.
    pub(crate) fn from_moments(
        hist: Histogram<u64>,
        count: u64,
        mean: f64,
        m2: f64,
        min: u64,
        max: u64,
    ) -> Self {
        let mut s = Self::with_histogram(hist);
        s.hist.auto(true);
        (s.count, s.mean, s.m2, s.min, s.max) = (count, mean, m2, min, max);
        s
    }

    /// An empty histogram that grows to what it receives, as [`Statistic::new`]'s.
    pub(crate) fn growing_histogram() -> Histogram<u64> {
        Self::empty_histogram(EMPTY_HIGHEST)
    }

    /// A statistic known only by its summary (Nighthawk's JSON, which stores no histogram):
    /// exact moments plus the percentile points as printed. Percentile questions are answered
    /// from `percentiles` (see [`Statistic::value_at_quantile`]); it cannot be merged exactly.
    pub fn from_summary(
        count: u64,
        mean: f64,
        pstdev: f64,
        min: u64,
        max: u64,
        percentiles: Vec<Percentile>,
    ) -> Self {
        let mut s =
            Self::from_parts(Self::empty_histogram(EMPTY_HIGHEST), count, mean, pstdev, min, max);
        let mut percentiles = percentiles;
        // Lookups take the first point at or above a quantile, which needs them in order.
        percentiles.sort_by(|a, b| a.quantile.total_cmp(&b.quantile));
        s.stored = Some(percentiles);
        s
    }
}

/// Every statistic a worker records, indexed by [`StatId`].
#[derive(Clone, Debug)]
pub struct Stats {
    stats: Vec<Statistic>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty statistics to merge or read into (see [`Statistic::new`]).
    pub fn new() -> Self {
        Stats { stats: (0..StatId::COUNT).map(|_| Statistic::new()).collect() }
    }
    /// Empties every statistic in place (see [`Statistic::reset`]).
    pub fn reset(&mut self) {
        self.stats.iter_mut().for_each(Statistic::reset);
    }
    #[inline]
    pub fn record(&mut self, id: StatId, value: u64) {
        self.stats[id as usize].record(value);
    }
    pub fn get(&self, id: StatId) -> &Statistic {
        &self.stats[id as usize]
    }
    pub fn set(&mut self, id: StatId, stat: Statistic) {
        self.stats[id as usize] = stat;
    }
    pub fn merge(&mut self, other: &Stats) {
        for (a, b) in self.stats.iter_mut().zip(&other.stats) {
            a.merge(b);
        }
    }
    /// The first statistic with samples but no histogram, which an exact merge cannot take.
    pub fn without_histogram(&self) -> Option<StatId> {
        self.iter().find(|(_, s)| s.count() > 0 && !s.has_histogram()).map(|(id, _)| id)
    }
    /// Statistics in their canonical order.
    pub fn iter(&self) -> impl Iterator<Item = (StatId, &Statistic)> {
        StatId::ALL.iter().copied().zip(self.stats.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamped_quantile_never_leaves_the_exact_range() {
        let mut s = Statistic::new();
        s.record(1_016_957);
        // The bucket's highest equivalent value is above the only sample...
        assert!(s.value_at_quantile(0.99) > s.max(), "{}", s.value_at_quantile(0.99));
        // ...and the clamped value is the sample itself.
        assert_eq!(s.clamped_quantile(0.99), 1_016_957);
        assert_eq!(s.clamped_quantile(0.0), 1_016_957);
        assert_eq!(Statistic::new().clamped_quantile(0.5), 0);
    }

    #[test]
    fn without_a_part_is_exactly_the_rest() {
        // Every response's latency, and the errors' among them: the rest is the successes'.
        let (mut all, mut errors, mut ok) =
            (Statistic::presized(), Statistic::new(), Statistic::new());
        for v in 1..=1000u64 {
            all.record(v * 1000);
            if v % 10 == 0 {
                errors.record(v * 1000);
            } else {
                ok.record(v * 1000);
            }
        }
        let rest = all.without(&errors).unwrap();
        assert_eq!(rest.count(), ok.count());
        assert!((rest.mean() - ok.mean()).abs() < 1e-6, "{} {}", rest.mean(), ok.mean());
        assert!((rest.pstdev() - ok.pstdev()).abs() < 1e-3, "{} {}", rest.pstdev(), ok.pstdev());
        for q in [0.5, 0.9, 0.99, 0.999] {
            assert_eq!(rest.value_at_quantile(q), ok.value_at_quantile(q), "q {q}");
        }
        // Nothing to take away, or more than there is.
        assert_eq!(all.without(&Statistic::new()).unwrap().count(), 1000);
        assert!(errors.without(&all).is_none());
    }

    fn summary() -> Statistic {
        let p = |quantile, count, value| Percentile { quantile, count, value };
        // Out of order on purpose: lookups must not depend on the stored order.
        let points = vec![p(1.0, 4, 40), p(0.0, 1, 10), p(0.5, 2, 20)];
        Statistic::from_summary(4, 25.0, 5.0, 10, 40, points)
    }

    #[test]
    fn a_summary_answers_from_its_points_and_merges_only_its_moments() {
        let s = summary();
        assert!(!s.has_histogram() && s.has_percentiles());
        assert_eq!(s.value_at_quantile(0.0), 10);
        assert_eq!(s.value_at_quantile(0.3), 20);
        assert_eq!(s.percentile(0.6), Percentile { quantile: 0.6, count: 4, value: 40 });
        assert_eq!(s.spectrum().iter().map(|p| p.value).collect::<Vec<_>>(), [10, 20, 40]);

        // Into an empty statistic: nothing to combine, so the points stay.
        let mut empty = Statistic::new();
        empty.merge(&s);
        assert_eq!(empty.value_at_quantile(0.3), 20);
        assert!(!empty.has_histogram());

        // With samples on both sides: moments exact, points unknown.
        let mut both = summary();
        both.merge(&summary());
        assert_eq!((both.count(), both.mean(), both.min(), both.max()), (8, 25.0, 10, 40));
        assert!((both.pstdev() - 5.0).abs() < 1e-9);
        assert!(!both.has_histogram() && !both.has_percentiles());
        // With no point left, q = 0 is still the exact min and anything else the max bound.
        assert_eq!((both.value_at_quantile(0.0), both.value_at_quantile(0.5)), (10, 40));
        let mut exact = Statistic::new();
        exact.record(7);
        exact.merge(&summary());
        assert!(!exact.has_histogram() && exact.count() == 5);
    }

    #[test]
    fn moments_are_exact() {
        let mut s = Statistic::new();
        for v in [1u64, 2, 3, 4, 1_000_000_007] {
            s.record(v);
        }
        assert_eq!(s.count(), 5);
        assert_eq!(s.min(), 1);
        assert_eq!(s.max(), 1_000_000_007);
        let mean = (1.0 + 2.0 + 3.0 + 4.0 + 1_000_000_007.0) / 5.0;
        assert!((s.mean() - mean).abs() < 1e-6);
    }

    #[test]
    fn merge_equals_single_histogram() {
        let mut all = Statistic::new();
        let mut a = Statistic::new();
        let mut b = Statistic::new();
        for i in 0..10_000u64 {
            let v = (i * 7919) % 1_000_003 + i * i;
            all.record(v);
            if i % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
        assert!((a.mean() - all.mean()).abs() / all.mean() < 1e-12);
        assert!((a.pstdev() - all.pstdev()).abs() / all.pstdev() < 1e-9);
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.value_at_quantile(q), all.value_at_quantile(q), "q={q}");
        }
        assert_eq!(a.histogram(), all.histogram());
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut s = Statistic::new();
        for i in 1..5000u64 {
            s.record(i * 1013);
        }
        let enc = s.encode_histogram();
        assert!(!enc.is_empty());
        let h = Statistic::decode_histogram(&enc).expect("decode");
        assert_eq!(&h, s.histogram());
        assert!(Statistic::decode_histogram("not base64!").is_err());
        assert!(Statistic::decode_histogram("aGVsbG8=").is_err());
    }

    #[test]
    fn forged_lengths_are_rejected_without_allocating() {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        // An uncompressed V2 header claiming a 4 GiB counts payload, followed by nothing.
        let mut forged = Vec::new();
        forged.extend_from_slice(&V2_COOKIE.to_be_bytes());
        forged.extend_from_slice(&u32::MAX.to_be_bytes());
        forged.extend_from_slice(&0u32.to_be_bytes());
        forged.extend_from_slice(&3u32.to_be_bytes());
        forged.extend_from_slice(&1u64.to_be_bytes());
        forged.extend_from_slice(&1_000_000u64.to_be_bytes());
        forged.extend_from_slice(&1.0f64.to_be_bytes());
        let err = Statistic::decode_histogram(&b64(&forged)).expect_err("forged length");
        assert!(err.to_string().contains("shorter than its header claims"), "{err}");
        // The compressed wrapper claiming more bytes than present.
        let mut wrapper = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        wrapper.extend_from_slice(&1000u32.to_be_bytes());
        wrapper.extend_from_slice(b"short");
        assert!(Statistic::decode_histogram(&b64(&wrapper)).is_err());
        // Every truncation of a real encoding is an error, never a panic.
        let mut s = Statistic::new();
        for i in 1..100u64 {
            s.record(i * 12345);
        }
        let raw =
            base64::engine::general_purpose::STANDARD.decode(s.encode_histogram()).expect("b64");
        for cut in 0..raw.len() {
            assert!(Statistic::decode_histogram(&b64(&raw[..cut])).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn huge_values_are_not_dropped() {
        let mut s = Statistic::new();
        s.record(u64::MAX / 4);
        s.record(0);
        assert_eq!(s.count(), 2);
        assert_eq!(s.histogram().len(), 2);
    }

    #[test]
    fn spectrum_is_monotonic_and_ends_at_max() {
        let mut s = Statistic::new();
        for i in 1..=1000u64 {
            s.record(i * 1000);
        }
        let sp = s.spectrum();
        assert!(sp.len() > 10);
        assert_eq!(sp[0].quantile, 0.0);
        assert_eq!(sp.last().map(|p| p.quantile), Some(1.0));
        assert_eq!(sp.last().map(|p| p.count), Some(1000));
        for w in sp.windows(2) {
            assert!(w[0].quantile < w[1].quantile);
            assert!(w[0].value <= w[1].value);
            assert!(w[0].count <= w[1].count);
        }
    }

    #[test]
    fn the_one_pass_spectrum_matches_each_point_computed_alone() {
        // Shapes that stress the walk: one value, one value many times, a wide range with a
        // long tail, zeros, and the extremes of u64.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let shapes: Vec<Vec<u64>> = vec![
            vec![42],
            vec![7; 1000],
            vec![0, 0, 5],
            vec![0, u64::MAX / 4],
            (1..=3000).map(|i| i * 997).collect(),
            (0..20_000).map(|_| 1_000 + next() % 5_000_000).collect(),
            (0..5_000).map(|_| 1u64 << (next() % 40)).collect(),
            // A minimum in a wide bucket: its lowest and highest equivalents differ.
            (0..1_000).map(|_| 10_000_000 + next() % 1_000_000_000).collect(),
        ];
        for values in shapes {
            let mut s = Statistic::new();
            for &v in &values {
                s.record(v);
            }
            let got = s.spectrum();
            assert!(got.len() >= 2, "{values:?}");
            for p in &got {
                assert_eq!(*p, s.percentile(p.quantile), "{} values", values.len());
            }
            // Any ascending list, repeats included, and a descending one (walked per point).
            let mut qs = vec![0.0, 0.0, 0.25, 0.5, 0.5, 0.9, 0.99, 0.999, 0.99999, 1.0, 1.5];
            let alone = |qs: &[f64]| qs.iter().map(|&q| s.percentile(q)).collect::<Vec<_>>();
            assert_eq!(s.percentiles(&qs), alone(&qs), "{} values", values.len());
            qs.reverse();
            assert_eq!(s.percentiles(&qs), alone(&qs), "{} values", values.len());
        }
    }

    /// A statistic that starts small answers exactly as a presized one for the same values,
    /// however far it had to grow, and merges grow it to what they bring; a reset one is as
    /// good as new (its counts gone, not only its moments).
    #[test]
    fn small_presized_and_reset_statistics_agree() {
        let values = [1u64, 7, 999, 1_000, 64_123, 5_000_000, 2_000_000_000, 7_200_000_000_000];
        let qs = [0.0, 0.1, 0.5, 0.9, 0.99, 1.0];
        let summary = |s: &Statistic| (s.count(), s.mean(), s.min(), s.max(), s.percentiles(&qs));
        let mut small = Statistic::new();
        let mut presized = Statistic::presized();
        let mut reused = Statistic::presized();
        for v in [3, 5_000, 4_000_000_000_000] {
            reused.record(v);
        }
        reused.reset();
        assert_eq!(reused.count(), 0);
        for &v in &values {
            small.record(v);
            presized.record(v);
            reused.record(v);
        }
        assert_eq!(summary(&small), summary(&presized));
        assert_eq!(summary(&reused), summary(&presized));
        let mut merged = Statistic::new();
        merged.merge(&presized);
        assert_eq!(summary(&merged), summary(&presized));
        for s in [&small, &presized] {
            let decoded = Statistic::decode_histogram(&s.encode_histogram()).ok();
            assert_eq!(decoded.map(|h| h.len()), Some(values.len() as u64));
        }
    }

    #[test]
    fn stat_ids_round_trip() {
        for &id in StatId::ALL {
            assert_eq!(StatId::from_id(id.id()), Some(id));
        }
        assert_eq!(StatId::latency_for_status(204), StatId::Latency2xx);
        assert_eq!(StatId::latency_for_status(99), StatId::LatencyXxx);
    }
}
