//! Correlations between two paired samples (e.g. human ratings against an automatic metric, or a
//! system's rank in two settings), each with its two-sided p-value from Student's t with n − 2
//! degrees of freedom — the same test as SciPy's `pearsonr` and `spearmanr`.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{mean, ranks};

/// A correlation coefficient and its two-sided p-value.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Correlation {
    pub r: f64,
    pub p: f64,
}

/// Pearson's r. `None` when the samples differ in length, have fewer than 3 pairs, or one of
/// them has no variance.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<Correlation> {
    if x.len() != y.len() || x.len() < 3 {
        return None;
    }
    let (mx, my) = (mean(x)?, mean(y)?);
    let norm = |v: &[f64], m: f64| v.iter().map(|a| (a - m).powi(2)).sum::<f64>().sqrt();
    let (nx, ny) = (norm(x, mx), norm(y, my));
    if nx == 0.0 || ny == 0.0 {
        return None;
    }
    // Normalise before multiplying, as SciPy does, so perfect correlations come out as exactly ±1.
    let r: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| ((a - mx) / nx) * ((b - my) / ny))
        .sum::<f64>()
        .clamp(-1.0, 1.0);
    Some(Correlation {
        r,
        p: two_sided_p(r, x.len()),
    })
}

/// Spearman's rho: Pearson's r of the average ranks. `None` as for [`pearson`].
pub fn spearman(x: &[f64], y: &[f64]) -> Option<Correlation> {
    if x.len() != y.len() {
        return None;
    }
    pearson(&ranks(x), &ranks(y))
}

/// The p-value of r under H₀: ρ = 0, by t = r √((n − 2) / (1 − r²)).
fn two_sided_p(r: f64, n: usize) -> f64 {
    let df = (n - 2) as f64;
    if r.abs() >= 1.0 {
        return 0.0;
    }
    let t = r * (df / ((1.0 - r) * (1.0 + r))).sqrt();
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).min(1.0),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_and_undefined_correlations() {
        let c = pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).expect("defined");
        // SciPy gives the same rounding: r = 0.9999999999999998, p = 1.34e-8.
        assert!((c.r - 1.0).abs() < 1e-15 && c.p < 1e-7);
        assert_eq!(pearson(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman(&[1.0, 2.0], &[1.0, 2.0]), None);
    }
}
