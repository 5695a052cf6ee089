//! One share of a run split over N processes or machines: `--shard i/N`.
//!
//! Indexes are 0-based (`0/4` … `3/4`), like Kubernetes' `JOB_COMPLETION_INDEX`, so an
//! Indexed Job's pods can pass `--shard $(JOB_COMPLETION_INDEX)/N` without arithmetic (their
//! distroless image has no shell to do it in).
//!
//! A sharded run sends its share of the load: the rate plan divided by N, its share of
//! `total_requests`, and its workers' pacer phases offset so that N shards of W workers release
//! like one run of N×W workers (one even stream, not N clumps). An unpaced run's load is its
//! concurrency, so its shards share the connections (and HTTP/2-3 requests in flight) instead. Replay shards jobs the same
//! way: every N-th job from the i-th.

use std::fmt;

/// Shard `index` of `count` (0 ≤ index < count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Validates `index < count`.
    pub fn try_new(index: u32, count: u32) -> Option<Shard> {
        (index < count).then_some(Shard { index, count })
    }

    /// Parses `i/N` with 0 ≤ i < N.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?}: expected i/N with 0 ≤ i < N (0-based), e.g. 0/4 … 3/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) =
            (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        Shard::try_new(index, count).ok_or_else(bad)
    }

    pub fn index(self) -> u32 {
        self.index
    }

    pub fn count(self) -> u32 {
        self.count
    }

    /// Whether the item at `position` (0-based) is this shard's: every N-th from the i-th.
    pub fn holds(self, position: u64) -> bool {
        position % u64::from(self.count) == u64::from(self.index)
    }

    /// Where local worker `worker` of `workers` stands among all shards' workers, and how many
    /// there are in all: shard i's workers follow shard i−1's.
    pub fn global_worker(self, worker: usize, workers: usize) -> (usize, usize) {
        (self.index as usize * workers + worker, self.count as usize * workers)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_zero_based_and_partitions() {
        let s = Shard::parse("1/3").unwrap();
        assert_eq!((s.index(), s.count(), s.to_string()), (1, 3, "1/3".to_string()));
        for bad in ["3/3", "0/0", "1", "a/2", "-1/2", ""] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        let shards: Vec<Shard> = (0..3).map(|i| Shard::try_new(i, 3).unwrap()).collect();
        for p in 0..30u64 {
            assert_eq!(shards.iter().filter(|s| s.holds(p)).count(), 1);
        }
        assert_eq!(shards[2].global_worker(1, 4), (9, 12));
    }

    #[test]
    fn unpaced_shards_share_the_concurrency_paced_ones_the_rate() {
        let spec = |rate: serde_json::Value, shard: &str| {
            crate::RunSpec::from_json(&serde_json::json!({
                "uri": "http://127.0.0.1:1/", "requests_per_second": rate, "connections": 10,
                "max_active_requests": 5, "shard": shard,
            }))
            .unwrap()
        };
        let of = |i: u32, n: u32| spec("max".into(), &format!("{i}/{n}"));
        let c: Vec<u32> = (0..3).map(|i| of(i, 3).connections().get()).collect();
        assert_eq!(c, vec![4, 3, 3]);
        let a: Vec<u32> = (0..3).map(|i| of(i, 3).streams().max_active_requests.get()).collect();
        assert_eq!(a, vec![2, 2, 1]);
        // Never below one per worker; the stored options keep the run's own figures.
        assert_eq!(of(15, 20).connections().get(), 1);
        assert_eq!(of(1, 3).to_json()["connections"], 10);
        // A paced shard shares the rate and keeps its connections.
        let paced = spec(90.into(), "1/3");
        assert_eq!(paced.connections().get(), 10);
        assert_eq!(paced.plan().peak(), Some(30.0));
    }
}
