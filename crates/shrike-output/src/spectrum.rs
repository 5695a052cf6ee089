//! The percentile spectrum as the machine-readable formats print it.

use shrike_stats::{Percentile, Statistic};

/// Decimal places kept in a printed quantile.
const QUANTILE_DECIMALS: f64 = 1e12;

/// [`Statistic::spectrum`] with each quantile rounded to 12 decimal places and its point
/// recomputed at the rounded quantile.
///
/// The spectrum's quantiles are accumulated in floating point (`0.9000000000000002`); rounding
/// prints them as HdrHistogram and Nighthawk do (`0.9`, `0.9990234375`). Recomputing each point
/// at the printed quantile keeps the promise readers rely on: `value_at_quantile(percentile)`
/// of the stored histogram gives exactly the printed value and count. Twelve decimals also keep
/// every quantile within the range any JSON parser reads back exactly.
pub(crate) fn spectrum(stat: &Statistic) -> Vec<Percentile> {
    // Rounding keeps the quantiles in ascending order, so the points come from one walk.
    let rounded: Vec<f64> = stat
        .spectrum_quantiles()
        .iter()
        .map(|q| (q * QUANTILE_DECIMALS).round() / QUANTILE_DECIMALS)
        .collect();
    let mut out = stat.percentiles(&rounded);
    out.dedup_by(|a, b| a.quantile == b.quantile);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_short_decimals_and_points_consistent() {
        let mut s = Statistic::new();
        for i in 1..=100_000u64 {
            s.record(i * 37 % 1_000_003);
        }
        let sp = spectrum(&s);
        assert!(sp.len() > 40);
        assert_eq!(sp.first().map(|p| p.quantile), Some(0.0));
        assert_eq!(sp.last().map(|p| p.quantile), Some(1.0));
        for p in &sp {
            let printed = p.quantile.to_string();
            assert!(printed.len() <= 14, "{printed}");
            assert_eq!(*p, s.percentile(p.quantile));
        }
        for w in sp.windows(2) {
            assert!(w[0].quantile < w[1].quantile);
        }
        assert!(sp.iter().any(|p| p.quantile == 0.9));
        assert!(sp.iter().any(|p| p.quantile == 0.9990234375));
        assert!(spectrum(&Statistic::new()).is_empty());
    }
}
