//! Percentile bootstrap intervals over units (items): the report's seeded resampling
//! (`report --bootstrap N --seed S`) for one statistic, as the model-judge agreement uses it.
//! (The goal scores resample goals once for all their metrics, and the Bradley-Terry intervals
//! resample battles, each in its own loop with the same generator and cut.)

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rating::quantile;

/// The percentile interval at `level` (e.g. 0.95) of `statistic` over `resamples` resamples of
/// `units`, each drawing as many units as there are with replacement from a ChaCha8 generator
/// seeded with `seed`, cut at (1 − level)/2 and (1 + level)/2 with linear interpolation (numpy's
/// default). Resamples where the statistic is undefined are left out. `None` below two units, for
/// no resamples, or when no resample defines the statistic.
pub fn percentile_interval<T>(
    units: &[T],
    resamples: usize,
    level: f64,
    seed: u64,
    statistic: impl Fn(&[&T]) -> Option<f64>,
) -> Option<(f64, f64)> {
    if units.len() < 2 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draws: Vec<f64> = Vec::with_capacity(resamples);
    let mut sample: Vec<&T> = Vec::with_capacity(units.len());
    for _ in 0..resamples {
        sample.clear();
        for _ in 0..units.len() {
            sample.push(&units[rng.random_range(0..units.len())]);
        }
        if let Some(value) = statistic(&sample) {
            draws.push(value);
        }
    }
    draws.sort_by(f64::total_cmp);
    let (lo, hi) = ((1.0 - level) / 2.0, (1.0 + level) / 2.0);
    quantile(&draws, lo).zip(quantile(&draws, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(sample: &[&f64]) -> Option<f64> {
        (!sample.is_empty()).then(|| sample.iter().copied().sum::<f64>() / sample.len() as f64)
    }

    #[test]
    fn intervals_are_reproducible_and_hold_the_estimate() {
        let units: Vec<f64> = (0..20).map(f64::from).collect();
        let one = percentile_interval(&units, 500, 0.95, 3, mean).expect("interval");
        assert_eq!(Some(one), percentile_interval(&units, 500, 0.95, 3, mean));
        assert_ne!(Some(one), percentile_interval(&units, 500, 0.95, 4, mean));
        assert!(one.0 < 9.5 && 9.5 < one.1, "{one:?}");
        // Constant data: every resample gives the same value.
        assert_eq!(
            percentile_interval(&[2.0, 2.0, 2.0], 50, 0.95, 0, mean),
            Some((2.0, 2.0))
        );
        assert_eq!(percentile_interval(&[1.0], 50, 0.95, 0, mean), None);
        assert_eq!(percentile_interval(&units, 50, 0.95, 0, |_| None), None);
    }
}
