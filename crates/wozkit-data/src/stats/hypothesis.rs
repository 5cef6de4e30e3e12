//! Significance tests for survey tables and win counts: the Mann-Whitney U test and the exact
//! binomial test.

use statrs::distribution::{Binomial, ContinuousCDF, Discrete, Normal};

use super::{ranks, tie_sizes};

/// Which way the alternative hypothesis points, for the first sample against the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternative {
    /// The first sample tends to be larger (one-tailed).
    Greater,
    /// The first sample tends to be smaller (one-tailed).
    Less,
    TwoSided,
}

/// The result of a Mann-Whitney U test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: its rank sum minus n₁(n₁+1)/2 (what SciPy reports).
    pub u: f64,
    /// The standardised statistic used for the p-value.
    pub z: f64,
    pub p: f64,
}

/// The Mann-Whitney U test by the normal approximation with tie correction and continuity
/// correction — SciPy's `mannwhitneyu(x, y, alternative=…, method="asymptotic",
/// use_continuity=True)`. (No exact method: Likert answers are full of ties, where the exact
/// distribution does not hold.) `None` when a sample is empty or all values are equal.
pub fn mann_whitney_u(x: &[f64], y: &[f64], alternative: Alternative) -> Option<MannWhitney> {
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let rank_sum: f64 = ranks(&all).iter().take(x.len()).sum();
    let u1 = rank_sum - n1 * (n1 + 1.0) / 2.0;
    let u2 = n1 * n2 - u1;
    let (u, factor) = match alternative {
        Alternative::Greater => (u1, 1.0),
        Alternative::Less => (u2, 1.0),
        Alternative::TwoSided => (u1.max(u2), 2.0),
    };
    let n = n1 + n2;
    let ties: f64 = tie_sizes(&all)
        .into_iter()
        .map(|t| (t as f64).powi(3) - t as f64)
        .sum();
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 {
        return None;
    }
    let z = (u - n1 * n2 / 2.0 - 0.5) / variance.sqrt();
    let p = (factor * Normal::standard().sf(z)).clamp(0.0, 1.0);
    Some(MannWhitney { u: u1, z, p })
}

/// The two-sided exact binomial test of `k` successes in `n` trials against probability `p0`:
/// the total probability of outcomes no more likely than `k` (SciPy's `binomtest`, with its
/// relative tolerance of 1e-7 for "equally likely"). `None` when `k > n`, `n` is 0 or `p0` is
/// outside [0, 1].
pub fn binomial_test(k: u64, n: u64, p0: f64) -> Option<f64> {
    if k > n || n == 0 {
        return None;
    }
    let binomial = Binomial::new(p0, n).ok()?;
    if k as f64 == p0 * n as f64 {
        return Some(1.0);
    }
    let threshold = binomial.pmf(k) * (1.0 + 1e-7);
    let p: f64 = (0..=n)
        .map(|i| binomial.pmf(i))
        .filter(|&pmf| pmf <= threshold)
        .sum();
    Some(p.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_cases_are_none() {
        assert_eq!(mann_whitney_u(&[], &[1.0], Alternative::Greater), None);
        assert_eq!(
            mann_whitney_u(&[2.0, 2.0], &[2.0], Alternative::Greater),
            None
        );
        assert_eq!(binomial_test(3, 2, 0.5), None);
        assert_eq!(binomial_test(1, 2, 0.5), Some(1.0));
    }
}
