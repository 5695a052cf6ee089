//! Statistics over iterations: mean ± standard deviation, and the change from a baseline with
//! a 95% confidence interval (Welch's t, which does not assume equal variances).

/// Mean and sample standard deviation (n − 1); the deviation is 0 for a single value.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The candidate's change relative to the baseline's mean, with a 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// (candidate − baseline) / baseline.
    pub relative: f64,
    pub low: f64,
    pub high: f64,
}

impl Change {
    /// Whether the interval holds 0: the difference is within the noise of the iterations.
    pub fn within_noise(&self) -> bool {
        self.low <= 0.0 && self.high >= 0.0
    }
}

/// Welch's interval for the difference of means, divided by the baseline mean (treated as
/// exact, which slightly narrows the interval when the baseline itself is noisy). Needs two
/// or more values on each side.
pub fn change(baseline: &[f64], candidate: &[f64]) -> Option<Change> {
    if baseline.len() < 2 || candidate.len() < 2 {
        return None;
    }
    let (mb, sb) = mean_sd(baseline);
    let (mc, sc) = mean_sd(candidate);
    if mb == 0.0 || !mb.is_finite() || !mc.is_finite() {
        return None;
    }
    let (vb, vc) = (sb * sb / baseline.len() as f64, sc * sc / candidate.len() as f64);
    let se = (vb + vc).sqrt();
    // Welch–Satterthwaite degrees of freedom (equal to n − 1 per side when one side is exact).
    let df = if se == 0.0 {
        f64::INFINITY
    } else {
        (vb + vc).powi(2)
            / (vb.powi(2) / (baseline.len() as f64 - 1.0)
                + vc.powi(2) / (candidate.len() as f64 - 1.0))
    };
    let half = t975(df) * se;
    let d = mc - mb;
    Some(Change { relative: d / mb, low: (d - half) / mb, high: (d + half) / mb })
}

/// The two-sided 95% quantile of Student's t (its 0.975 point), for `df` degrees of freedom:
/// the table for whole df up to 30, interpolated in 1/df between, and the normal's beyond.
fn t975(df: f64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if !df.is_finite() || df > 30.0 {
        // Between 30 and ∞, linear in 1/df towards 1.960.
        let f = if df.is_finite() { 30.0 / df } else { 0.0 };
        return 1.960 + (T[29] - 1.960) * f;
    }
    let lo = df.floor().max(1.0);
    let hi = df.ceil().max(1.0);
    let (tl, th) = (T[lo as usize - 1], T[hi as usize - 1]);
    if hi == lo {
        return tl;
    }
    // Interpolate in 1/df, in which t is close to linear.
    let w = (1.0 / lo - 1.0 / df) / (1.0 / lo - 1.0 / hi);
    tl + (th - tl) * w
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_deviation() {
        let (m, s) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - 2.138089935).abs() < 1e-9);
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
    }

    #[test]
    fn welch_interval_matches_a_worked_example() {
        // Baseline 100, 102, 98 (mean 100, s 2); candidate 80, 83, 77 (mean 80, s 3).
        // se = √(4/3 + 9/3) = 2.0817; df = 4.333…² / ((4/3)²/2 + 3²/2) = 3.5; t ≈ 2.9.
        let c = change(&[100.0, 102.0, 98.0], &[80.0, 83.0, 77.0]).unwrap();
        assert!((c.relative + 0.2).abs() < 1e-12);
        assert!(c.high < 0.0 && !c.within_noise(), "{c:?}");
        let half = (c.high - c.low) / 2.0 * 100.0;
        assert!((half - 2.0817 * 2.91).abs() < 0.1, "{half}");
        // The same server twice: within noise.
        let aa = change(&[100.0, 103.0, 97.0], &[101.0, 98.0, 102.0]).unwrap();
        assert!(aa.within_noise(), "{aa:?}");
        assert!(change(&[1.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t975(1.0), 12.706);
        assert_eq!(t975(10.0), 2.228);
        assert!((t975(f64::INFINITY) - 1.96).abs() < 1e-12);
        assert!(t975(3.5) < 3.182 && t975(3.5) > 2.776);
    }
}
