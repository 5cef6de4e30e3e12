//! The statistics that dialogue papers print, for wozkit's reports: pure functions over numbers,
//! checked against SciPy, statsmodels and `krippendorff` (see `tests/reference/make_golden.py`).
//!
//! A function returns `None` where the statistic is undefined for the data (too few values, no
//! variance) rather than a NaN that would travel silently into a table.
//!
//! - descriptive (here): [`mean`], sample [`sd`], [`median`], [`mode`], average [`ranks`], the
//!   Student-t confidence interval of a mean [`mean_ci`];
//! - [`hypothesis`]: Mann-Whitney U (normal approximation), two-sided binomial test;
//! - [`correlation`]: Pearson and Spearman with two-sided p-values, Kendall's tau-b;
//! - [`rating`]: Elo and Bradley-Terry (with seeded bootstrap intervals) over pairwise outcomes;
//! - [`agreement`]: Krippendorff's alpha (nominal, interval) and Fleiss' kappa, overall and per
//!   category, Cohen's kappa, and the majority (adjudicated) label of a unit;
//! - [`bootstrap`]: seeded percentile bootstrap intervals over units.

pub mod agreement;
pub mod bootstrap;
pub mod correlation;
pub mod hypothesis;
pub mod rating;

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

/// The sample standard deviation (divisor n − 1, as `numpy.std(ddof=1)`); `None` below 2 values.
pub fn sd(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    let squares: f64 = values.iter().map(|v| (v - m).powi(2)).sum();
    Some((squares / (values.len() - 1) as f64).sqrt())
}

/// The two-sided Student-t confidence interval of the mean at `level` (e.g. 0.95): mean ± t ×
/// sd / √n with n − 1 degrees of freedom (SciPy's `stats.t.interval(level, n - 1, loc=mean,
/// scale=sem)`). `None` below 2 values or for a `level` outside (0, 1); a sample without variance
/// gives the mean twice.
pub fn mean_ci(values: &[f64], level: f64) -> Option<(f64, f64)> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let (m, s) = (mean(values)?, sd(values)?);
    let n = values.len() as f64;
    let t = StudentsT::new(0.0, 1.0, n - 1.0)
        .ok()?
        .inverse_cdf(0.5 + level / 2.0);
    let half = t * s / n.sqrt();
    Some((m - half, m + half))
}

/// The median (the mean of the two middle values for an even count); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted(values);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => sorted.get(n / 2).copied(),
        _ => Some((sorted.get(n / 2 - 1)? + sorted.get(n / 2)?) / 2.0),
    }
}

/// The most frequent value, the smallest one on a tie (as `scipy.stats.mode`); `None` for no
/// values.
pub fn mode(values: &[f64]) -> Option<f64> {
    let sorted = sorted(values);
    let mut best: Option<(f64, usize)> = None;
    for run in sorted.chunk_by(|a, b| a == b) {
        let (value, count) = (run.first().copied()?, run.len());
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((value, count));
        }
    }
    best.map(|(value, _)| value)
}

/// Ranks from 1, tied values sharing the mean of their ranks (`scipy.stats.rankdata`).
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut start = 0;
    for run in order.chunk_by(|&a, &b| values[a] == values[b]) {
        let average = start as f64 + (run.len() as f64 + 1.0) / 2.0;
        for &i in run {
            out[i] = average;
        }
        start += run.len();
    }
    out
}

/// The sizes of the groups of tied values (each value counted once per occurrence).
pub(crate) fn tie_sizes(values: &[f64]) -> Vec<usize> {
    sorted(values)
        .chunk_by(|a, b| a == b)
        .map(<[f64]>::len)
        .collect()
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptive_statistics_of_small_samples() {
        let values = [3.0, 1.0, 4.0, 1.0, 5.0];
        assert_eq!(mean(&values), Some(2.8));
        assert_eq!(median(&values), Some(3.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert_eq!(mode(&values), Some(1.0));
        assert_eq!(mode(&[2.0, 1.0]), Some(1.0));
        assert_eq!(ranks(&[10.0, 20.0, 10.0, 30.0]), vec![1.5, 3.0, 1.5, 4.0]);
        assert_eq!(sd(&[1.0]), None);
        assert_eq!((mean(&[]), median(&[]), mode(&[])), (None, None, None));
        assert_eq!(mean_ci(&[1.0], 0.95), None);
        assert_eq!(mean_ci(&[1.0, 2.0], 1.0), None);
        assert_eq!(mean_ci(&[2.0, 2.0, 2.0], 0.95), Some((2.0, 2.0)));
    }
}
