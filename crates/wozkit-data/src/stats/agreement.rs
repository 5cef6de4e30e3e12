//! Inter-annotator agreement: Krippendorff's alpha (any number of annotators per unit, missing
//! ratings allowed) and Fleiss' kappa (a fixed number of annotators per unit).

use std::collections::HashMap;

/// How differences between two values count in Krippendorff's alpha.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Values are categories: any two different values disagree equally.
    Nominal,
    /// Values are numbers on an interval scale: disagreement is the squared difference.
    Interval,
}

/// Krippendorff's alpha = 1 − D_o / D_e over the coincidences of values within units. Each unit
/// lists the values its annotators gave (missing ratings left out); units with fewer than two
/// values are not pairable and are ignored. `None` when fewer than two pairable values exist or
/// when they do not vary at all (D_e = 0).
pub fn krippendorff_alpha(units: &[Vec<f64>], level: Level) -> Option<f64> {
    let pairable: Vec<&Vec<f64>> = units.iter().filter(|u| u.len() >= 2).collect();
    let n: f64 = pairable.iter().map(|u| u.len() as f64).sum();
    if n < 2.0 {
        return None;
    }
    let observed: f64 = pairable
        .iter()
        .map(|u| pair_disagreement(u, level) / (u.len() as f64 - 1.0))
        .sum::<f64>()
        / n;
    let all: Vec<f64> = pairable.iter().flat_map(|u| u.iter().copied()).collect();
    let expected = pair_disagreement(&all, level) / (n * (n - 1.0));
    if expected == 0.0 {
        return None;
    }
    Some(1.0 - observed / expected)
}

/// The summed disagreement δ(v_i, v_j) over ordered pairs i ≠ j of the values.
fn pair_disagreement(values: &[f64], level: Level) -> f64 {
    let n = values.len() as f64;
    match level {
        Level::Nominal => {
            let mut counts: HashMap<u64, f64> = HashMap::new();
            for v in values {
                *counts.entry(category(*v)).or_default() += 1.0;
            }
            n * n - counts.values().map(|c| c * c).sum::<f64>()
        }
        Level::Interval => {
            // Σ_{i≠j} (x_i − x_j)² = 2 Σ_i (x_i − x̄)² · n, computed around the mean for accuracy.
            let mean = values.iter().sum::<f64>() / n;
            2.0 * n * values.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
        }
    }
}

/// A hashable category for a value; 0.0 and −0.0 are one category.
fn category(v: f64) -> u64 {
    if v == 0.0 { 0 } else { v.to_bits() }
}

/// Fleiss' kappa for a table with one row per unit and one column per category, each cell the
/// number of annotators who chose that category (statsmodels' `fleiss_kappa`). `None` when rows
/// differ in their total, fewer than two annotators rated each unit, or chance agreement is
/// already perfect.
pub fn fleiss_kappa(table: &[Vec<u64>]) -> Option<f64> {
    let raters = table.first()?.iter().sum::<u64>();
    if raters < 2 || table.iter().any(|row| row.iter().sum::<u64>() != raters) {
        return None;
    }
    let (units, r) = (table.len() as f64, raters as f64);
    let categories = table.iter().map(Vec::len).max()?;
    let mut totals = vec![0.0; categories];
    let mut agreement = 0.0;
    for row in table {
        for (total, &c) in totals.iter_mut().zip(row) {
            *total += c as f64;
        }
        let squares: f64 = row.iter().map(|&c| (c as f64).powi(2)).sum();
        agreement += (squares - r) / (r * (r - 1.0));
    }
    let observed = agreement / units;
    let chance: f64 = totals.iter().map(|t| (t / (units * r)).powi(2)).sum();
    if chance >= 1.0 {
        return None;
    }
    Some((observed - chance) / (1.0 - chance))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_agreement_is_one_and_constant_data_is_undefined() {
        let units = vec![vec![1.0, 1.0], vec![2.0, 2.0, 2.0], vec![3.0]];
        assert_eq!(krippendorff_alpha(&units, Level::Nominal), Some(1.0));
        assert_eq!(krippendorff_alpha(&units, Level::Interval), Some(1.0));
        assert_eq!(krippendorff_alpha(&[vec![1.0, 1.0]], Level::Nominal), None);
        assert_eq!(fleiss_kappa(&[vec![2, 0], vec![0, 2]]), Some(1.0));
        assert_eq!(fleiss_kappa(&[vec![2, 0], vec![1, 2]]), None);
    }
}
