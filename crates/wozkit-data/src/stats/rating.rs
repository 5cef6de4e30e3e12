//! Rankings of systems from pairwise outcomes (arena votes, side-by-side comparisons): sequential
//! Elo as the CRSArena analysis computes it, and the Bradley-Terry model fitted by Hunter's MM
//! algorithm with percentile bootstrap intervals from a seeded resampling.

use indexmap::IndexMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::votes::Vote;

/// One comparison: the score of `first` against `second` (1 win, 0 loss, 0.5 tie).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub first: String,
    pub second: String,
    pub score: f64,
}

impl From<&Vote> for Outcome {
    fn from(vote: &Vote) -> Self {
        Outcome {
            first: vote.crs1.clone(),
            second: vote.crs2.clone(),
            score: vote.score(),
        }
    }
}

/// Sequential Elo in the order given: everyone starts at `start`; after each outcome both sides
/// move by `k` × (score − expected), the expectation being 1 / (1 + 10^((R_other − R_own)/400)).
/// The CRSArena analysis uses k = 16, start = 1000. Systems appear in order of first appearance.
pub fn elo(outcomes: &[Outcome], k: f64, start: f64) -> IndexMap<String, f64> {
    let mut ratings: IndexMap<String, f64> = IndexMap::new();
    for o in outcomes {
        let ra = *ratings.entry(o.first.clone()).or_insert(start);
        let rb = *ratings.entry(o.second.clone()).or_insert(start);
        let expected = 1.0 / (1.0 + 10f64.powf((rb - ra) / 400.0));
        ratings.insert(o.first.clone(), ra + k * (o.score - expected));
        ratings.insert(
            o.second.clone(),
            rb + k * ((1.0 - o.score) - (1.0 - expected)),
        );
    }
    ratings
}

/// Bradley-Terry strengths, normalised to sum to 1: P(i beats j) = s_i / (s_i + s_j).
#[derive(Clone, Debug, PartialEq)]
pub struct BradleyTerry {
    /// Systems in order of first appearance, each with its strength.
    pub strength: IndexMap<String, f64>,
    /// Iterations the MM algorithm needed.
    pub iterations: usize,
}

const MAX_ITERATIONS: usize = 100_000;
const TOLERANCE: f64 = 1e-12;

/// Fits Bradley-Terry by maximum likelihood with Hunter's (2004) MM algorithm; a tie counts as
/// half a win for each side. A system that never scores gets strength 0 (its maximum-likelihood
/// estimate). `None` when there are no outcomes.
pub fn bradley_terry(outcomes: &[Outcome]) -> Option<BradleyTerry> {
    fit_bradley_terry(outcomes, MAX_ITERATIONS)
}

/// Iterations allowed per bootstrap fit. A resample whose comparison graph falls apart (a
/// system that never loses, say) has no finite maximum and would run to [`MAX_ITERATIONS`];
/// a converging fit needs far fewer.
const BOOTSTRAP_ITERATIONS: usize = 2_000;

fn fit_bradley_terry(outcomes: &[Outcome], max_iterations: usize) -> Option<BradleyTerry> {
    let mut index: IndexMap<&str, usize> = IndexMap::new();
    for o in outcomes {
        let next = index.len();
        index.entry(o.first.as_str()).or_insert(next);
        let next = index.len();
        index.entry(o.second.as_str()).or_insert(next);
    }
    let m = index.len();
    if m == 0 {
        return None;
    }
    let mut wins = vec![0.0; m];
    let mut games = vec![vec![0.0; m]; m];
    for o in outcomes {
        let (i, j) = (index[o.first.as_str()], index[o.second.as_str()]);
        if i == j {
            continue;
        }
        wins[i] += o.score;
        wins[j] += 1.0 - o.score;
        games[i][j] += 1.0;
        games[j][i] += 1.0;
    }
    let mut strength = vec![1.0 / m as f64; m];
    let mut iterations = 0;
    while iterations < max_iterations {
        iterations += 1;
        let mut next: Vec<f64> = (0..m)
            .map(|i| {
                let denominator: f64 = (0..m)
                    .filter(|&j| games[i][j] > 0.0 && strength[i] + strength[j] > 0.0)
                    .map(|j| games[i][j] / (strength[i] + strength[j]))
                    .sum();
                if denominator > 0.0 {
                    wins[i] / denominator
                } else {
                    strength[i]
                }
            })
            .collect();
        let total: f64 = next.iter().sum();
        if total <= 0.0 {
            return None;
        }
        next.iter_mut().for_each(|s| *s /= total);
        let change = next
            .iter()
            .zip(&strength)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        strength = next;
        if change < TOLERANCE {
            break;
        }
    }
    let strength = index.keys().map(|k| k.to_string()).zip(strength).collect();
    Some(BradleyTerry {
        strength,
        iterations,
    })
}

/// A percentile bootstrap interval for each system's Bradley-Terry strength: `resamples` fits on
/// outcomes drawn with replacement by a ChaCha8 generator seeded with `seed` (so a report is
/// reproducible; each fit stops after a bounded number of iterations), cut at (1 − level)/2 and
/// (1 + level)/2 with linear interpolation (numpy's default). Systems absent from a resample are
/// left out of that draw.
pub fn bradley_terry_intervals(
    outcomes: &[Outcome],
    resamples: usize,
    level: f64,
    seed: u64,
) -> IndexMap<String, (f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draws: IndexMap<String, Vec<f64>> = IndexMap::new();
    for o in outcomes {
        draws.entry(o.first.clone()).or_default();
        draws.entry(o.second.clone()).or_default();
    }
    if outcomes.is_empty() {
        return IndexMap::new();
    }
    for _ in 0..resamples {
        let sample: Vec<Outcome> = (0..outcomes.len())
            .filter_map(|_| outcomes.get(rng.random_range(0..outcomes.len())).cloned())
            .collect();
        if let Some(fit) = fit_bradley_terry(&sample, BOOTSTRAP_ITERATIONS) {
            for (system, s) in fit.strength {
                draws.entry(system).or_default().push(s);
            }
        }
    }
    let (lo, hi) = ((1.0 - level) / 2.0, (1.0 + level) / 2.0);
    draws
        .into_iter()
        .filter_map(|(system, mut values)| {
            values.sort_by(f64::total_cmp);
            Some((system, (quantile(&values, lo)?, quantile(&values, hi)?)))
        })
        .collect()
}

/// The q-quantile of sorted values, interpolating linearly between order statistics.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let position = q.clamp(0.0, 1.0) * last as f64;
    let below = position.floor() as usize;
    let fraction = position - below as f64;
    let low = *sorted.get(below)?;
    let high = *sorted.get((below + 1).min(last))?;
    Some(low + fraction * (high - low))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(first: &str, second: &str, score: f64) -> Outcome {
        Outcome {
            first: first.into(),
            second: second.into(),
            score,
        }
    }

    #[test]
    fn elo_moves_both_sides_by_the_same_amount() {
        let ratings = elo(
            &[outcome("a", "b", 1.0), outcome("b", "a", 0.5)],
            16.0,
            1000.0,
        );
        assert_eq!(
            ratings["a"],
            1000.0 + 8.0 - 16.0 * (0.5 - 1.0 / (1.0 + 10f64.powf(16.0 / 400.0)))
        );
        assert!((ratings["a"] + ratings["b"] - 2000.0).abs() < 1e-9);
    }

    #[test]
    fn bootstrap_intervals_are_reproducible_and_ordered() {
        let outcomes: Vec<Outcome> = (0..30)
            .map(|i| {
                outcome(
                    ["a", "b", "c"][i % 3],
                    ["b", "c", "a"][i % 3],
                    [1.0, 0.0, 0.5][i % 2],
                )
            })
            .collect();
        let one = bradley_terry_intervals(&outcomes, 200, 0.95, 42);
        assert_eq!(one, bradley_terry_intervals(&outcomes, 200, 0.95, 42));
        assert_ne!(one, bradley_terry_intervals(&outcomes, 200, 0.95, 43));
        let fit = bradley_terry(&outcomes).expect("fit");
        for (system, (lo, hi)) in &one {
            assert!(lo <= hi && *lo <= fit.strength[system] && fit.strength[system] <= *hi);
        }
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
    }
}
