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

/// Kendall's tau-b: (C − D) / √((n₀ − n₁)(n₀ − n₂)) over the n₀ = n(n − 1)/2 pairs of
/// positions, C of them ordered alike by both samples, D ordered oppositely, n₁ and n₂ the pairs
/// tied in `x` and in `y` (SciPy's `kendalltau`, variant b). `None` when the samples differ in
/// length, have fewer than 2 pairs, or one of them is constant.
pub fn kendall_tau(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let sign = |a: f64, b: f64| i8::from(a > b) - i8::from(a < b);
    let (mut concordant, mut discordant) = (0.0, 0.0);
    let (mut tied_x, mut tied_y, mut all) = (0.0, 0.0, 0.0);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            all += 1.0;
            let (dx, dy) = (sign(x[i], x[j]), sign(y[i], y[j]));
            tied_x += f64::from(u8::from(dx == 0));
            tied_y += f64::from(u8::from(dy == 0));
            match dx * dy {
                1 => concordant += 1.0,
                -1 => discordant += 1.0,
                _ => {}
            }
        }
    }
    let denominator = ((all - tied_x) * (all - tied_y)).sqrt();
    (denominator > 0.0).then(|| (concordant - discordant) / denominator)
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

    /// x 1..5 against y 3 1 2 5 4: of the 10 pairs, 7 are ordered alike and 3 oppositely
    /// ((1,2), (1,3), (4,5)), so τ = (7 − 3) / 10 = 0.4; the rank differences −2 1 1 −1 1 give
    /// ρ = 1 − 6·8 / (5·24) = 0.6. With ties, x 1 2 2 3 against y 1 2 3 3: 4 concordant, no
    /// discordant, one pair tied in each, τ_b = 4 / √(5·5) = 0.8 (SciPy's `kendalltau`).
    #[test]
    fn kendall_and_spearman_by_hand() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [3.0, 1.0, 2.0, 5.0, 4.0];
        let tau = kendall_tau(&x, &y).expect("defined");
        assert!((tau - 0.4).abs() < 1e-12, "{tau}");
        let rho = spearman(&x, &y).expect("defined").r;
        assert!((rho - 0.6).abs() < 1e-12, "{rho}");
        let tau = kendall_tau(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 3.0]).expect("defined");
        assert!((tau - 0.8).abs() < 1e-12, "{tau}");
        assert_eq!(kendall_tau(&[1.0, 2.0], &[2.0, 1.0]), Some(-1.0));
        assert_eq!(kendall_tau(&[1.0, 1.0], &[2.0, 1.0]), None);
        assert_eq!(kendall_tau(&[1.0], &[1.0]), None);
    }
}
