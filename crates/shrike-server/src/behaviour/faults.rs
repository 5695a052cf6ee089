//! Fault injection and random delays: what may go wrong with a response, how likely it is, and
//! the per-request dice that decide it.
//!
//! Every probability is rolled independently per request with a fast seeded PRNG (SplitMix64,
//! no crypto): a server-wide draw counter gives each request its own stream, so with a `seed`
//! the n-th request to roll (server-wide) always gets the same outcome.

use std::sync::Arc;
use std::time::Duration;

use crate::config::ConfigError;

/// Which part of the exchange a reset tears down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResetScope {
    /// HTTP/2 RST_STREAM, HTTP/3 RESET_STREAM; HTTP/1.1 has no streams and resets the
    /// connection (TCP RST).
    Stream,
    /// HTTP/2 GOAWAY and close, HTTP/3 CONNECTION_CLOSE, HTTP/1.1 TCP RST.
    Connection,
}

/// A delay drawn per request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Distribution {
    Fixed(Duration),
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Memoryless, with a tail: P(delay > k·mean) = e^-k.
    Exponential {
        mean: Duration,
    },
    /// fortio-style weighted choice among fixed delays.
    Weighted(Arc<[(Duration, u32)]>),
}

impl Distribution {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Distribution::Uniform { min, max } if min > max => Err(ConfigError::InvalidFault {
                field: "delay_distribution.uniform",
                why: "min must not exceed max".into(),
            }),
            Distribution::Weighted(choices) => {
                if choices.is_empty() || choices.iter().all(|(_, w)| *w == 0) {
                    return Err(ConfigError::InvalidFault {
                        field: "delay_distribution.weighted",
                        why: "needs at least one choice with a weight above 0".into(),
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn sample(&self, rng: &mut Rng) -> Duration {
        match self {
            Distribution::Fixed(d) => *d,
            Distribution::Uniform { min, max } => {
                let span = (*max - *min).as_nanos() as f64;
                *min + Duration::from_nanos((span * rng.unit()) as u64)
            }
            Distribution::Exponential { mean } => {
                // 1 - u is in (0, 1], so the logarithm is finite: at most ~37 means.
                let k = -(1.0 - rng.unit()).ln();
                Duration::from_nanos((mean.as_nanos() as f64 * k) as u64)
            }
            Distribution::Weighted(choices) => {
                let total: u64 = choices.iter().map(|(_, w)| u64::from(*w)).sum();
                let mut pick = rng.below(total);
                for (delay, weight) in choices.iter() {
                    let w = u64::from(*weight);
                    if pick < w {
                        return *delay;
                    }
                    pick -= w;
                }
                Duration::ZERO
            }
        }
    }
}

/// A probability in [0, 1].
pub(crate) fn probability(field: &'static str, p: Option<f64>) -> Result<f64, ConfigError> {
    let p = p.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&p) {
        return Err(ConfigError::InvalidFault {
            field,
            why: format!("probability {p} is outside 0..=1"),
        });
    }
    Ok(p)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reset {
    pub(crate) scope: ResetScope,
    pub(crate) probability: f64,
}

/// Pause the response for `duration`: before the head, or after `after_bytes` body bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stall {
    pub(crate) duration: Duration,
    pub(crate) after_bytes: Option<u64>,
}

/// The configured faults; every field unset means a well-behaved server.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Faults {
    pub(crate) reset: Option<Reset>,
    /// Close after this many body bytes, with a probability.
    pub(crate) close_after_bytes: Option<(u64, f64)>,
    pub(crate) stall: Option<(Stall, f64)>,
    /// (status, probability): at most one applies, chosen as fortio does (cumulative).
    pub(crate) status: Arc<[(u16, f64)]>,
}

impl Faults {
    pub(crate) fn is_empty(&self) -> bool {
        self.reset.is_none()
            && self.close_after_bytes.is_none()
            && self.stall.is_none()
            && self.status.is_empty()
    }

    pub(crate) fn validate_status_sum(status: &[(u16, f64)]) -> Result<(), ConfigError> {
        let sum: f64 = status.iter().map(|(_, p)| p).sum();
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::InvalidFault {
                field: "status_faults",
                why: format!("probabilities add up to {sum}, more than 1"),
            });
        }
        Ok(())
    }

    /// Rolls every fault for one request.
    pub(crate) fn roll(&self, rng: &mut Rng) -> Rolled {
        let mut out = Rolled::default();
        if let Some(reset) = self.reset {
            if rng.chance(reset.probability) {
                out.reset = Some(reset.scope);
                return out;
            }
        }
        if !self.status.is_empty() {
            let u = rng.unit();
            let mut acc = 0.0;
            for &(status, p) in self.status.iter() {
                acc += p;
                if u < acc {
                    out.status = Some(status);
                    break;
                }
            }
        }
        if let Some((stall, p)) = self.stall {
            if rng.chance(p) {
                out.stall = Some(stall);
            }
        }
        if let Some((bytes, p)) = self.close_after_bytes {
            if rng.chance(p) {
                out.close_after_bytes = Some(bytes);
            }
        }
        out
    }
}

/// The faults that fired for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rolled {
    pub(crate) reset: Option<ResetScope>,
    pub(crate) status: Option<u16>,
    pub(crate) stall: Option<Stall>,
    pub(crate) close_after_bytes: Option<u64>,
}

/// SplitMix64: tiny, fast and statistically sound for dice; never for secrets.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator for the `draw`-th roll under `seed`.
    pub(crate) fn new(seed: u64, draw: u64) -> Self {
        let mut r = Rng(seed ^ draw.wrapping_mul(0xD134_2543_DE82_EF95));
        r.next_u64();
        r
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p >= 1.0 || self.unit() < p
    }

    /// Uniform in [0, bound); 0 when `bound` is 0.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rng_is_seeded_and_uniform_enough() {
        let a: Vec<u64> = (0..4).map(|i| Rng::new(7, i).next_u64()).collect();
        let b: Vec<u64> = (0..4).map(|i| Rng::new(7, i).next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::new(7, 0).next_u64(), Rng::new(8, 0).next_u64());
        let hits = (0..100_000).filter(|&i| Rng::new(1, i).chance(0.3)).count();
        assert!((29_000..31_000).contains(&hits), "{hits}");
    }

    #[test]
    fn distributions_sample_in_range_with_the_right_mean() {
        let n = 50_000u64;
        let mean = |d: &Distribution| {
            let total: f64 =
                (0..n).map(|i| d.sample(&mut Rng::new(3, i)).as_secs_f64()).sum::<f64>();
            total / n as f64
        };
        let u = Distribution::Uniform { min: ms(2), max: ms(4) };
        for i in 0..1000 {
            let d = u.sample(&mut Rng::new(5, i));
            assert!(d >= ms(2) && d <= ms(4), "{d:?}");
        }
        assert!((mean(&u) - 0.003).abs() < 0.0001);
        let e = Distribution::Exponential { mean: ms(10) };
        assert!((mean(&e) - 0.010).abs() < 0.0005, "{}", mean(&e));
        let w = Distribution::Weighted(vec![(ms(1), 90), (ms(50), 10)].into());
        let slow = (0..n).filter(|&i| w.sample(&mut Rng::new(9, i)) == ms(50)).count();
        assert!((4_500..5_500).contains(&slow), "{slow}");
        assert_eq!(Distribution::Fixed(ms(3)).sample(&mut Rng::new(0, 0)), ms(3));
    }

    #[test]
    fn status_faults_are_cumulative_and_reset_preempts() {
        let f = Faults { status: vec![(503, 0.2), (429, 0.1)].into(), ..Faults::default() };
        let mut counts = [0u32; 3];
        for i in 0..100_000 {
            match f.roll(&mut Rng::new(11, i)).status {
                Some(503) => counts[0] += 1,
                Some(429) => counts[1] += 1,
                _ => counts[2] += 1,
            }
        }
        assert!((19_000..21_000).contains(&counts[0]), "{counts:?}");
        assert!((9_300..10_700).contains(&counts[1]), "{counts:?}");
        let f = Faults {
            reset: Some(Reset { scope: ResetScope::Stream, probability: 1.0 }),
            close_after_bytes: Some((3, 1.0)),
            ..Faults::default()
        };
        let r = f.roll(&mut Rng::new(0, 0));
        assert_eq!(r.reset, Some(ResetScope::Stream));
        assert_eq!(r.close_after_bytes, None);
        assert!(Faults::validate_status_sum(&[(500, 0.6), (503, 0.5)]).is_err());
    }
}
