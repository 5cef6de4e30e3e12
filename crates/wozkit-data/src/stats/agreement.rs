//! Inter-annotator agreement: Krippendorff's alpha (any number of annotators per unit, missing
//! ratings allowed) and Fleiss' kappa (a fixed number of annotators per unit), overall and per
//! category, Cohen's kappa of two raters (and of every pair of annotators of the same unit), and
//! the adjudicated (majority) label of a unit.
//!
//! Where a statistic is undefined the functions answer `None`:
//! - no unit rated by two annotators (one annotator only): nothing can be compared;
//! - every value in the data is the same: the annotators agree perfectly, but so would chance
//!   (expected disagreement D_e = 0, chance agreement P_e = 1), and 0/0 is not a number. A
//!   perfect agreement over data that does vary is 1.
//!
//! Per category, Krippendorff's alpha is the nominal alpha of the data recoded as "this category"
//! or "another one"; Fleiss' kappa is Fleiss' (1971) κ_j = 1 − Σ_i n_ij (m − n_ij) / (N m (m − 1)
//! p_j q_j), whose average weighted by p_j q_j is the overall kappa.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

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

/// Fleiss' kappa of each category (the columns of `table`, as in [`fleiss_kappa`]): κ_j = 1 −
/// Σ_i n_ij (m − n_ij) / (N m (m − 1) p_j q_j). `None` for the whole table where [`fleiss_kappa`]
/// is undefined for its shape (rows differing in total, fewer than two annotators); `None` for a
/// category that every annotator gave to every unit or that nobody gave (p_j q_j = 0).
pub fn fleiss_category_kappas(table: &[Vec<u64>]) -> Option<Vec<Option<f64>>> {
    let raters = table.first()?.iter().sum::<u64>();
    if raters < 2 || table.iter().any(|row| row.iter().sum::<u64>() != raters) {
        return None;
    }
    let (units, m) = (table.len() as f64, raters as f64);
    let categories = table.iter().map(Vec::len).max()?;
    let kappas = (0..categories)
        .map(|j| {
            let column = table
                .iter()
                .map(|row| row.get(j).copied().unwrap_or(0) as f64);
            let (mut total, mut disagreement) = (0.0, 0.0);
            for n in column {
                total += n;
                disagreement += n * (m - n);
            }
            let p = total / (units * m);
            let pq = p * (1.0 - p);
            (pq > 0.0).then(|| 1.0 - disagreement / (units * m * (m - 1.0) * pq))
        })
        .collect();
    Some(kappas)
}

/// Cohen's kappa of two raters who labelled the same units, one `(first, second)` pair per unit:
/// κ = (p_o − p_e) / (1 − p_e), p_o the share of units labelled alike and p_e = Σ_k p₁(k) p₂(k)
/// the agreement expected from each rater's own label shares. `None` for no units or when chance
/// agreement is already perfect (p_e = 1: both raters gave one and the same label throughout).
pub fn cohen_kappa<S: AsRef<str>>(pairs: &[(S, S)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let mut first: HashMap<&str, f64> = HashMap::new();
    let mut second: HashMap<&str, f64> = HashMap::new();
    let mut alike = 0.0;
    for (a, b) in pairs {
        let (a, b) = (a.as_ref(), b.as_ref());
        *first.entry(a).or_default() += 1.0;
        *second.entry(b).or_default() += 1.0;
        if a == b {
            alike += 1.0;
        }
    }
    let observed = alike / n;
    let chance: f64 = first
        .iter()
        .map(|(k, c)| c / n * second.get(k).copied().unwrap_or(0.0) / n)
        .sum();
    if chance >= 1.0 {
        return None;
    }
    Some((observed - chance) / (1.0 - chance))
}

/// Every pair of labels given to the same unit, each unordered pair of annotators once in each
/// order (so neither annotator of a pair is "first"): what [`cohen_kappa`] reads for the
/// agreement between two people of the same pool, and whose share of alike pairs is the raw
/// pairwise agreement.
pub fn label_pairs<'a, S: AsRef<str> + 'a>(
    units: impl IntoIterator<Item = &'a [S]>,
) -> Vec<(&'a str, &'a str)> {
    let mut pairs = Vec::new();
    for unit in units {
        for (i, a) in unit.iter().enumerate() {
            for b in &unit[i + 1..] {
                pairs.push((a.as_ref(), b.as_ref()));
                pairs.push((b.as_ref(), a.as_ref()));
            }
        }
    }
    pairs
}

/// The share of `(first, second)` pairs whose labels are the same; `None` for no pairs.
pub fn raw_agreement<S: AsRef<str>>(pairs: &[(S, S)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let alike = pairs
        .iter()
        .filter(|(a, b)| a.as_ref() == b.as_ref())
        .count();
    Some(alike as f64 / pairs.len() as f64)
}

/// Agreement on labels (nominal values) over units, overall and per label.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabelAgreement {
    /// Units labelled by at least two annotators (the others enter no number).
    pub units: usize,
    /// Labels given to those units (the pairable values).
    pub labels: usize,
    /// The fewest and most annotators of a pairable unit.
    pub raters_min: usize,
    pub raters_max: usize,
    /// Nominal Krippendorff's alpha over every label.
    pub krippendorff_alpha: Option<f64>,
    /// Fleiss' kappa; only when every pairable unit has the same number of annotators.
    pub fleiss_kappa: Option<f64>,
    /// Per label, in label order.
    pub categories: BTreeMap<String, CategoryAgreement>,
}

/// Agreement on one label against all others.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CategoryAgreement {
    /// How many times annotators gave the label (in pairable units).
    pub given: usize,
    /// Units where at least one annotator gave it.
    pub units: usize,
    /// Nominal alpha of the data recoded as this label or another one.
    pub krippendorff_alpha: Option<f64>,
    /// Fleiss' per-category kappa (see [`fleiss_category_kappas`]).
    pub fleiss_kappa: Option<f64>,
}

/// Agreement over `units`, each the labels its annotators gave (one label per annotator; missing
/// labels left out). `extra` names labels that exist but may not have been given: they get an
/// entry (with undefined statistics when nobody gave them) and a column in Fleiss' table.
pub fn label_agreement<S: AsRef<str>>(units: &[Vec<S>], extra: &[&str]) -> LabelAgreement {
    let pairable: Vec<Vec<&str>> = units
        .iter()
        .filter(|u| u.len() >= 2)
        .map(|u| u.iter().map(AsRef::as_ref).collect())
        .collect();
    let mut names: Vec<&str> = extra.to_vec();
    names.extend(pairable.iter().flatten().copied());
    names.sort_unstable();
    names.dedup();
    let code = |label: &str| names.binary_search(&label).map_or(-1.0, |i| i as f64);
    let coded: Vec<Vec<f64>> = pairable
        .iter()
        .map(|u| u.iter().map(|l| code(l)).collect())
        .collect();
    let table: Vec<Vec<u64>> = pairable
        .iter()
        .map(|u| {
            names
                .iter()
                .map(|n| u.iter().filter(|l| *l == n).count() as u64)
                .collect()
        })
        .collect();
    let per_kappa = fleiss_category_kappas(&table);
    let categories = names
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let binary: Vec<Vec<f64>> = pairable
                .iter()
                .map(|u| u.iter().map(|l| f64::from(u8::from(l == name))).collect())
                .collect();
            let category = CategoryAgreement {
                given: pairable.iter().flatten().filter(|l| *l == name).count(),
                units: pairable.iter().filter(|u| u.contains(name)).count(),
                krippendorff_alpha: krippendorff_alpha(&binary, Level::Nominal),
                fleiss_kappa: per_kappa.as_ref().and_then(|k| k.get(j).copied().flatten()),
            };
            (name.to_string(), category)
        })
        .collect();
    LabelAgreement {
        units: pairable.len(),
        labels: pairable.iter().map(Vec::len).sum(),
        raters_min: pairable.iter().map(Vec::len).min().unwrap_or(0),
        raters_max: pairable.iter().map(Vec::len).max().unwrap_or(0),
        krippendorff_alpha: krippendorff_alpha(&coded, Level::Nominal),
        fleiss_kappa: fleiss_kappa(&table),
        categories,
    }
}

/// The adjudicated label of a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Adjudicated {
    /// The label most annotators gave; on a tie, the tied label given first.
    pub label: String,
    /// How many annotators gave it.
    pub votes: usize,
    /// How many labels the unit has.
    pub of: usize,
    /// Another label had as many votes (the tie was broken by order).
    pub tie: bool,
}

/// The majority label among `labels`, given in the order they were made (e.g. by submission
/// time): the label given most often, and among labels tied for most, the one whose first
/// occurrence comes earliest. `None` for no labels.
pub fn adjudicate<S: AsRef<str>>(labels: &[S]) -> Option<Adjudicated> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for label in labels.iter().map(AsRef::as_ref) {
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, c)) => *c += 1,
            None => counts.push((label, 1)),
        }
    }
    let most = counts.iter().map(|(_, c)| *c).max()?;
    let (label, votes) = counts.iter().find(|(_, c)| *c == most)?;
    Some(Adjudicated {
        label: label.to_string(),
        votes: *votes,
        of: labels.len(),
        tie: counts.iter().filter(|(_, c)| *c == most).count() > 1,
    })
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

    /// A 2×2 table of 50 units: both yes 20, first yes and second no 5, first no and second yes
    /// 10, both no 15. p_o = 35/50 = 0.7; the first says yes 25 times (0.5), the second 30
    /// (0.6), so p_e = 0.5·0.6 + 0.5·0.4 = 0.5 and κ = (0.7 − 0.5) / (1 − 0.5) = 0.4.
    #[test]
    fn cohen_kappa_of_a_known_two_by_two_table() {
        let mut pairs = Vec::new();
        for (a, b, n) in [
            ("yes", "yes", 20),
            ("yes", "no", 5),
            ("no", "yes", 10),
            ("no", "no", 15),
        ] {
            pairs.extend(std::iter::repeat_n((a, b), n));
        }
        let kappa = cohen_kappa(&pairs).expect("defined");
        assert!((kappa - 0.4).abs() < 1e-12, "{kappa}");
        assert_eq!(raw_agreement(&pairs), Some(0.7));
        // Perfect agreement on varied labels is 1; one label throughout is undefined; a rater
        // who always says the same thing while the other varies is at chance, 0.
        assert_eq!(cohen_kappa(&[("a", "a"), ("b", "b")]), Some(1.0));
        assert_eq!(cohen_kappa(&[("a", "a"), ("a", "a")]), None);
        assert_eq!(cohen_kappa(&[("t", "a"), ("t", "b")]), Some(0.0));
        assert_eq!(cohen_kappa::<&str>(&[]), None);
    }

    /// Units x x, x y, y y: the pairs in both orders are (x,x) twice, (x,y), (y,x), (y,y)
    /// twice; p_o = 4/6, each side says x half the time, p_e = 0.5, κ = (2/3 − 1/2) / (1/2) = 1/3.
    #[test]
    fn label_pairs_count_each_pair_of_annotators_in_both_orders() {
        let units = [vec!["x", "x"], vec!["x", "y"], vec!["y", "y"], vec!["z"]];
        let pairs = label_pairs(units.iter().map(Vec::as_slice));
        assert_eq!(pairs.len(), 6);
        let kappa = cohen_kappa(&pairs).expect("defined");
        assert!((kappa - 1.0 / 3.0).abs() < 1e-12, "{kappa}");
        assert_eq!(label_pairs([["a", "b", "c"].as_slice()]).len(), 6);
    }
}
