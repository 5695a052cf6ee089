//! Statistics over iterations: mean ± standard deviation, and the change from a baseline with
//! a 95% confidence interval (Welch's t, which does not assume equal variances), computed on
//! logarithms so that a relative change and its interval stay above −100%.

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

/// The candidate's change relative to the baseline, with a 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// candidate / baseline − 1, of their geometric means.
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

/// Welch's interval for the difference of the mean logarithms, turned back into a ratio: the
/// change is multiplicative (a server half as fast is −50%, twice as fast +100%), and an
/// interval on the log scale cannot reach −100% however noisy the iterations, which an
/// interval on the difference of means divided by the baseline can. Needs two or more values
/// on each side, all above zero (a zero has no logarithm: no such change can be stated).
pub fn change(baseline: &[f64], candidate: &[f64]) -> Option<Change> {
    if baseline.len() < 2 || candidate.len() < 2 {
        return None;
    }
    let positive = |xs: &[f64]| xs.iter().all(|x| *x > 0.0 && x.is_finite());
    if !positive(baseline) || !positive(candidate) {
        return None;
    }
    let logs = |xs: &[f64]| xs.iter().map(|x| x.ln()).collect::<Vec<f64>>();
    let (lb, lc) = (logs(baseline), logs(candidate));
    let (mb, sb) = mean_sd(&lb);
    let (mc, sc) = mean_sd(&lc);
    let (vb, vc) = (sb * sb / lb.len() as f64, sc * sc / lc.len() as f64);
    let se = (vb + vc).sqrt();
    // Welch–Satterthwaite degrees of freedom.
    let df = if se == 0.0 {
        f64::INFINITY
    } else {
        (vb + vc).powi(2)
            / (vb.powi(2) / (lb.len() as f64 - 1.0) + vc.powi(2) / (lc.len() as f64 - 1.0))
    };
    let half = t975(df) * se;
    let d = mc - mb;
    Some(Change {
        relative: d.exp() - 1.0,
        low: (d - half).exp() - 1.0,
        high: (d + half).exp() - 1.0,
    })
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
    fn welch_interval_on_logs_matches_a_worked_example() {
        // Baseline 100, 102, 98; candidate 80, 83, 77. Logs: means 4.60504 and 4.38117
        // (geometric means 99.99 and 79.96), deviations 0.02000 and 0.03752; se = 0.02455,
        // df = 3.05, t ≈ 3.155: d = −0.22348 ± 0.07745.
        let c = change(&[100.0, 102.0, 98.0], &[80.0, 83.0, 77.0]).unwrap();
        assert!((c.relative - ((-0.22348f64).exp() - 1.0)).abs() < 1e-4, "{c:?}");
        assert!(c.high < 0.0 && !c.within_noise(), "{c:?}");
        assert!((c.low - ((-0.22348f64 - 0.07745).exp() - 1.0)).abs() < 3e-3, "{c:?}");
        assert!((c.high - ((-0.22348f64 + 0.07745).exp() - 1.0)).abs() < 3e-3, "{c:?}");
        // The same server twice: within noise.
        let aa = change(&[100.0, 103.0, 97.0], &[101.0, 98.0, 102.0]).unwrap();
        assert!(aa.within_noise(), "{aa:?}");
        assert!(change(&[1.0], &[1.0, 2.0]).is_none());
        assert!(change(&[1.0, 0.0], &[1.0, 2.0]).is_none(), "a zero has no logarithm");
    }

    #[test]
    fn a_noisy_collapse_stays_above_minus_100_percent() {
        // Differences of means over the baseline gave −95.6% (−122.1% to −69.1%) for runs
        // like these: a change no throughput can make.
        let c = change(&[900.0, 1500.0, 1200.0], &[20.0, 90.0, 40.0]).unwrap();
        assert!(c.low > -1.0 && c.relative > -1.0 && c.high < 0.0, "{c:?}");
        assert!(c.low < c.relative && c.relative < c.high, "{c:?}");
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t975(1.0), 12.706);
        assert_eq!(t975(10.0), 2.228);
        assert!((t975(f64::INFINITY) - 1.96).abs() < 1e-12);
        assert!(t975(3.5) < 3.182 && t975(3.5) > 2.776);
    }
}
