//! The evaluation part of a report: pairwise votes (win rates with a binomial test, Elo,
//! Bradley-Terry with bootstrap intervals), agreement between annotators, and per-system
//! satisfaction.
//!
//! Agreement is computed over units rated by several annotators:
//! - votes: each unordered pair of systems is a unit and each vote on it a rating (1 when the
//!   alphabetically first system won, 0 when it lost, 0.5 on a tie), nominal level;
//! - ratings: `rating` annotations (`{"target", "item", "value"}`, one per annotator), a unit
//!   per target and item, interval level.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Serialize;

use crate::stats::agreement::{Level, fleiss_kappa, krippendorff_alpha};
use crate::stats::hypothesis::binomial_test;
use crate::stats::rating::{Outcome, bradley_terry, bradley_terry_intervals, elo};
use crate::votes::Vote;

/// Wins, losses and ties of one system pair (`a` < `b` alphabetically).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairResult {
    pub a: String,
    pub b: String,
    pub a_wins: u64,
    pub b_wins: u64,
    pub ties: u64,
    /// a's share of the decided votes; `None` when all were ties.
    pub a_win_rate: Option<f64>,
    /// Two-sided binomial test of a's wins among decided votes against 0.5.
    pub p: Option<f64>,
}

/// Bradley-Terry strength with its bootstrap interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Strength {
    pub strength: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// Agreement over one kind of unit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Agreement {
    /// Units with at least two ratings.
    pub units: usize,
    pub krippendorff_alpha: Option<f64>,
    /// Only when every unit has the same number of ratings.
    pub fleiss_kappa: Option<f64>,
}

/// Satisfied share of one system's dialogues.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Satisfaction {
    pub dialogues: u64,
    pub satisfied: u64,
    pub rate: f64,
}

/// Settings of the rankings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RankingOptions {
    /// Elo's K factor.
    pub elo_k: f64,
    /// Every system's Elo rating before its first battle.
    pub elo_start: f64,
    /// Bootstrap resamples of the Bradley-Terry intervals.
    pub bootstrap: usize,
    /// Seed of the bootstrap.
    pub seed: u64,
}

/// Win counts per unordered system pair, pairs in alphabetical order.
pub fn win_rates(votes: &[Vote]) -> Vec<PairResult> {
    let mut pairs: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for vote in votes {
        if vote.crs1 == vote.crs2 {
            continue;
        }
        let flipped = vote.crs2 < vote.crs1;
        let (a, b) = if flipped {
            (&vote.crs2, &vote.crs1)
        } else {
            (&vote.crs1, &vote.crs2)
        };
        let score = if flipped {
            1.0 - vote.score()
        } else {
            vote.score()
        };
        let counts = pairs.entry((a.clone(), b.clone())).or_default();
        if score == 1.0 {
            counts.0 += 1;
        } else if score == 0.0 {
            counts.1 += 1;
        } else {
            counts.2 += 1;
        }
    }
    pairs
        .into_iter()
        .map(|((a, b), (a_wins, b_wins, ties))| {
            let decided = a_wins + b_wins;
            PairResult {
                a,
                b,
                a_wins,
                b_wins,
                ties,
                a_win_rate: (decided > 0).then(|| a_wins as f64 / decided as f64),
                p: binomial_test(a_wins, decided, 0.5),
            }
        })
        .collect()
}

/// Elo and Bradley-Terry over the votes in cast order.
pub fn rankings(
    votes: &[Vote],
    options: RankingOptions,
) -> (IndexMap<String, f64>, IndexMap<String, Strength>) {
    let outcomes: Vec<Outcome> = votes.iter().map(Outcome::from).collect();
    let ratings = elo(&outcomes, options.elo_k, options.elo_start);
    let Some(fit) = bradley_terry(&outcomes) else {
        return (ratings, IndexMap::new());
    };
    let intervals = bradley_terry_intervals(&outcomes, options.bootstrap, 0.95, options.seed);
    let strengths = fit
        .strength
        .into_iter()
        .map(|(system, strength)| {
            let ci = intervals.get(&system);
            let s = Strength {
                strength,
                ci_low: ci.map(|c| c.0),
                ci_high: ci.map(|c| c.1),
            };
            (system, s)
        })
        .collect();
    (ratings, strengths)
}

/// Agreement of voters judging the same system pair.
pub fn vote_agreement(votes: &[Vote]) -> Agreement {
    let mut units: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for vote in votes.iter().filter(|v| v.crs1 != v.crs2) {
        let (key, score) = if vote.crs1 < vote.crs2 {
            ((vote.crs1.clone(), vote.crs2.clone()), vote.score())
        } else {
            ((vote.crs2.clone(), vote.crs1.clone()), 1.0 - vote.score())
        };
        units.entry(key).or_default().push(score);
    }
    agreement(
        units.into_values().collect(),
        Level::Nominal,
        &[0.0, 0.5, 1.0],
    )
}

/// Agreement over units of ratings (each unit: the values its annotators gave).
pub fn agreement(units: Vec<Vec<f64>>, level: Level, categories: &[f64]) -> Agreement {
    let pairable: Vec<Vec<f64>> = units.into_iter().filter(|u| u.len() >= 2).collect();
    let mut values: Vec<f64> = categories.to_vec();
    values.extend(pairable.iter().flatten().copied());
    values.sort_by(f64::total_cmp);
    values.dedup();
    let table: Vec<Vec<u64>> = pairable
        .iter()
        .map(|unit| {
            values
                .iter()
                .map(|v| unit.iter().filter(|x| *x == v).count() as u64)
                .collect()
        })
        .collect();
    Agreement {
        units: pairable.len(),
        krippendorff_alpha: krippendorff_alpha(&pairable, level),
        fleiss_kappa: fleiss_kappa(&table),
    }
}

/// Satisfied share per system from `(system, satisfied)` pairs, systems in alphabetical order.
pub fn satisfaction(judged: &[(String, bool)]) -> IndexMap<String, Satisfaction> {
    let mut counts: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (system, satisfied) in judged {
        let c = counts.entry(system.as_str()).or_default();
        c.0 += 1;
        c.1 += u64::from(*satisfied);
    }
    counts
        .into_iter()
        .map(|(system, (dialogues, satisfied))| {
            let rate = satisfied as f64 / dialogues as f64;
            let s = Satisfaction {
                dialogues,
                satisfied,
                rate,
            };
            (system.to_string(), s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(crs1: &str, crs2: &str, winner: &str) -> Vote {
        Vote {
            session_id: String::new(),
            user_id: String::new(),
            crs1: crs1.into(),
            crs2: crs2.into(),
            vote: winner.into(),
            feedback: String::new(),
        }
    }

    #[test]
    fn win_rates_fold_both_display_orders_into_one_pair() {
        let votes = [
            vote("b", "a", "b"),
            vote("a", "b", "a"),
            vote("a", "b", "tie"),
            vote("a", "b", "a"),
        ];
        let pairs = win_rates(&votes);
        assert_eq!(pairs.len(), 1);
        let pair = &pairs[0];
        assert_eq!((pair.a_wins, pair.b_wins, pair.ties), (2, 1, 1));
        assert_eq!(pair.a_win_rate, Some(2.0 / 3.0));
        assert_eq!(pair.p, binomial_test(2, 3, 0.5));
    }

    #[test]
    fn identical_ratings_agree_perfectly() {
        let units = vec![vec![1.0, 1.0], vec![3.0, 3.0], vec![2.0]];
        let a = agreement(units, Level::Interval, &[]);
        assert_eq!(a.units, 2);
        assert_eq!(a.krippendorff_alpha, Some(1.0));
        assert_eq!(a.fleiss_kappa, Some(1.0));
    }
}
