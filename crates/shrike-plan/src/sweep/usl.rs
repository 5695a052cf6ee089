//! Gunther's Universal Scalability Law: X(N) = λN / (1 + σ(N−1) + κN(N−1)).
//!
//! σ is contention (serialization), κ coherency (crosstalk); with κ > 0 throughput peaks at
//! N* = √((1−σ)/κ) and then falls. The fit linearizes: N/X(N) = (1/λ)(1 + σ(N−1) + κN(N−1)),
//! a linear model in (N−1) and N(N−1) with intercept 1/λ, solved by least squares on the
//! 3×3 normal equations; negative σ or κ (noise) are clamped to 0 and the rest refitted.

/// Below this R² a fit does not describe the points: no peak is predicted from it.
pub const MIN_R2: f64 = 0.9;
/// Three parameters need at least this many distinct concurrency levels to be constrained
/// (with three, any three points fit exactly and the fit says nothing).
pub const MIN_LEVELS: usize = 4;

/// A fit as reports state it: the law when it describes the points, otherwise why not (and
/// the fit, if one was made, so its figures can still be shown for what they are).
#[derive(Clone, Debug, PartialEq)]
pub enum Assessed {
    Fits(Usl),
    DoesNotFit { fit: Option<Usl>, why: String },
}

impl Assessed {
    /// Fits `points` and judges the fit: enough distinct levels, and R² at least [`MIN_R2`].
    pub fn of(points: &[(f64, f64)]) -> Assessed {
        let mut levels: Vec<f64> =
            points.iter().filter(|(n, x)| *n >= 1.0 && *x > 0.0).map(|p| p.0).collect();
        levels.sort_by(f64::total_cmp);
        levels.dedup();
        if levels.len() < MIN_LEVELS {
            return Assessed::DoesNotFit {
                fit: None,
                why: format!(
                    "too few points: {} concurrency levels with responses cannot constrain λ, σ \
                     and κ (give {MIN_LEVELS} or more)",
                    levels.len()
                ),
            };
        }
        match Usl::fit(points) {
            None => Assessed::DoesNotFit {
                fit: None,
                why: "no law with non-negative contention and coherency fits the points".into(),
            },
            Some(u) if u.r2 < MIN_R2 => Assessed::DoesNotFit {
                fit: Some(u),
                why: format!(
                    "the law does not describe the points (R² {:.2} < {MIN_R2}): throughput \
                     is not limited by contention and coherency alone here, or the runs are \
                     too noisy",
                    u.r2
                ),
            },
            Some(u) => Assessed::Fits(u),
        }
    }

    pub fn fits(&self) -> Option<&Usl> {
        match self {
            Assessed::Fits(u) => Some(u),
            Assessed::DoesNotFit { .. } => None,
        }
    }
}

/// The fitted law.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usl {
    /// Throughput of one unit of concurrency without contention.
    pub lambda: f64,
    /// Contention σ.
    pub sigma: f64,
    /// Coherency κ.
    pub kappa: f64,
    /// Coefficient of determination of the throughput predictions.
    pub r2: f64,
}

impl Usl {
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// The concurrency at which throughput peaks; `None` without coherency (κ = 0: it only
    /// flattens) or with σ ≥ 1.
    pub fn peak(&self) -> Option<f64> {
        (self.kappa > 0.0 && self.sigma < 1.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// Fits `(n, throughput)` points; needs at least three distinct n with throughput > 0.
    pub fn fit(points: &[(f64, f64)]) -> Option<Usl> {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(n, x)| *n >= 1.0 && *x > 0.0 && x.is_finite())
            .collect();
        let mut distinct: Vec<f64> = pts.iter().map(|p| p.0).collect();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        if distinct.len() < 3 {
            return None;
        }
        let rows: Vec<([f64; 3], f64)> =
            pts.iter().map(|&(n, x)| ([1.0, n - 1.0, n * (n - 1.0)], n / x)).collect();
        // Fit with every subset of {σ, κ} free, keep the best fit with both non-negative.
        let mut best: Option<Usl> = None;
        for free in [[true, true], [true, false], [false, true], [false, false]] {
            let Some(c) = least_squares(&rows, free) else { continue };
            if c[0] <= 0.0 || c[1] < 0.0 || c[2] < 0.0 {
                continue;
            }
            let lambda = 1.0 / c[0];
            let usl = Usl { lambda, sigma: c[1] * lambda, kappa: c[2] * lambda, r2: 0.0 };
            let usl = Usl { r2: r2(&pts, &usl), ..usl };
            if best.is_none_or(|b| usl.r2 > b.r2) {
                best = Some(usl);
            }
        }
        best
    }
}

/// Least squares for y ≈ c0 + c1·x1 + c2·x2 with the unfree coefficients held at 0.
fn least_squares(rows: &[([f64; 3], f64)], free: [bool; 2]) -> Option<[f64; 3]> {
    let cols: Vec<usize> = [0usize, 1, 2].into_iter().filter(|&j| j == 0 || free[j - 1]).collect();
    let k = cols.len();
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y) in rows {
        for (i, &ci) in cols.iter().enumerate() {
            for (j, &cj) in cols.iter().enumerate() {
                a[i][j] += x[ci] * x[cj];
            }
            a[i][k] += x[ci] * y;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..k {
        let pivot = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    let mut out = [0.0; 3];
    for (i, &ci) in cols.iter().enumerate() {
        out[ci] = a[i][k] / a[i][i];
    }
    Some(out)
}

fn r2(pts: &[(f64, f64)], usl: &Usl) -> f64 {
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let ss_tot: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let ss_res: f64 = pts.iter().map(|p| (p.1 - usl.throughput(p.0)).powi(2)).sum();
    if ss_tot == 0.0 {
        1.0
    } else {
        1.0 - ss_res / ss_tot
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn recovers_known_parameters_and_peak() {
        let truth = Usl { lambda: 1000.0, sigma: 0.05, kappa: 0.002, r2: 1.0 };
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
            .iter()
            .map(|&n| (n, truth.throughput(n)))
            .collect();
        let fit = Usl::fit(&pts).unwrap();
        assert!((fit.lambda - 1000.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.sigma - 0.05).abs() < 1e-9 && (fit.kappa - 0.002).abs() < 1e-9, "{fit:?}");
        assert!((fit.peak().unwrap() - (0.95f64 / 0.002).sqrt()).abs() < 1e-6);
        assert!(fit.r2 > 0.999_999);
    }

    #[test]
    fn noisy_flat_curves_clamp_to_no_coherency() {
        // Linear scaling then a flat ceiling, with noise: no peak to predict.
        let pts = [(1.0, 100.0), (2.0, 199.0), (4.0, 390.0), (8.0, 402.0), (16.0, 398.0)];
        let fit = Usl::fit(&pts).unwrap();
        assert!(fit.sigma >= 0.0 && fit.kappa >= 0.0, "{fit:?}");
        assert!(Usl::fit(&pts[..2]).is_none());
    }

    #[test]
    fn a_fit_that_does_not_describe_the_points_is_said_so() {
        let truth = Usl { lambda: 1000.0, sigma: 0.05, kappa: 0.002, r2: 1.0 };
        let pts: Vec<(f64, f64)> =
            [1.0, 2.0, 4.0, 8.0, 16.0].iter().map(|&n| (n, truth.throughput(n))).collect();
        assert!(matches!(Assessed::of(&pts), Assessed::Fits(_)));
        // Three levels fit exactly whatever they are: too few.
        match Assessed::of(&pts[..3]) {
            Assessed::DoesNotFit { fit: None, why } => assert!(why.contains("too few"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Throughput that jumps about with concurrency: R² far below 0.9.
        let noise = [(1.0, 500.0), (2.0, 90.0), (4.0, 700.0), (8.0, 60.0), (16.0, 650.0)];
        match Assessed::of(&noise) {
            Assessed::DoesNotFit { why, .. } => assert!(why.contains("R²"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
