//! The test server's fault dice, modelled from their specification so tests can predict a
//! seeded run's fault counts exactly, and the binomial interval those counts should fall in.
//!
//! The server (`shrike-server/src/behaviour/faults.rs`, `state.rs`) documents that with a
//! `seed`, "the n-th request to roll (server-wide) always gets the same outcome": request n
//! draws from SplitMix64 seeded with `seed ^ n·0xD1342543DE82EF95` (one output discarded), and
//! rolls a reset first (which pre-empts everything else), then a status. Every request in these
//! tests carries the same fault config, so which request gets which draw does not matter: on a
//! fresh server that answered `n` requests, the faults are exactly those of draws `0..n`.
//! This is a second, independent copy of that contract; if the server changes its dice, these
//! tests say so.
#![allow(dead_code)]

use std::ops::{Range, RangeInclusive};

struct SplitMix64(u64);

impl SplitMix64 {
    fn for_draw(seed: u64, draw: u64) -> SplitMix64 {
        let mut r = SplitMix64(seed ^ draw.wrapping_mul(0xD134_2543_DE82_EF95));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) from the top 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        p >= 1.0 || self.unit() < p
    }
}

/// The configured faults (`reset.probability`, one `status_faults` entry's probability).
#[derive(Clone, Copy, Debug, Default)]
pub struct Dice {
    pub seed: u64,
    pub reset: Option<f64>,
    pub status: Option<f64>,
}

/// How many of `draws` reset, and how many got the injected status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub resets: u64,
    pub statuses: u64,
}

impl Dice {
    pub fn count(&self, draws: Range<u64>) -> Faults {
        let mut out = Faults::default();
        for draw in draws {
            let mut rng = SplitMix64::for_draw(self.seed, draw);
            if let Some(p) = self.reset {
                if rng.chance(p) {
                    out.resets += 1;
                    continue;
                }
            }
            if let Some(p) = self.status {
                if rng.unit() < p {
                    out.statuses += 1;
                }
            }
        }
        out
    }
}

/// The central 99.99% interval of Binomial(n, p): the counts a fair die lands outside with
/// probability at most 1 in 10,000. Exact, from the pmf's recurrence.
pub fn binomial_9999(n: u64, p: f64) -> RangeInclusive<u64> {
    let tail = 0.00005;
    let mut pmf = (1.0 - p).powi(n as i32);
    let mut cdf = 0.0;
    let mut lo = None;
    for k in 0..=n {
        cdf += pmf;
        if lo.is_none() && cdf > tail {
            lo = Some(k);
        }
        if cdf >= 1.0 - tail {
            return lo.unwrap_or(k)..=k;
        }
        pmf *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
    }
    lo.unwrap_or(0)..=n
}

#[test]
fn binomial_interval_matches_known_values() {
    // Binomial(100, 0.5): P(X <= 30) ≈ 3.9e-5 and P(X <= 31) ≈ 8.9e-5 (scipy.stats.binom).
    assert_eq!(binomial_9999(100, 0.5), 31..=69);
    assert_eq!(binomial_9999(10, 0.0), 0..=0);
}
