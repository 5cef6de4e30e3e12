//! Goal-based scores in the report: each finished session with a user goal scored by
//! [`wozkit_core::goal_score::score`], then per system the success rate, the inform scores and
//! the turns to success with seeded bootstrap 95 % intervals, and pass^k over the trials of each
//! goal. The rules are in `docs/goal-scores.md`.
//!
//! - **System.** The bot that played the wizard (or a dataset's agent id), as the report's
//!   `system` elsewhere; a session played by a human wizard is grouped by its study, as
//!   `wizard:<study>` (the study is what a WoZ comparison varies); otherwise `wizard`.
//! - **Finished.** The session has a `session_ended` event; a session still running is left out.
//! - **Intervals.** Percentile bootstrap over goals (a resample draws goals with replacement and
//!   keeps all their sessions, so repeated trials of one goal are not counted as independent):
//!   the report's `resamples` and `seed` (`--bootstrap`, `--seed`), a ChaCha8 generator seeded
//!   per system from them, so a report is reproducible. No interval below two goals.
//! - **pass^k.** Per goal with n trials of which c succeeded, C(c,k)/C(n,k) (the chance that k
//!   trials drawn without replacement all succeed), averaged over the goals with at least k
//!   trials, for k from 1 to the most trials of any goal of the system (at most [`MAX_K`]).

use indexmap::IndexMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use wozkit_core::event::{Event, EventKind};
use wozkit_core::goal_score::{GoalScore, score};

use super::features::SessionFeatures;
use super::html::{esc, num};
use crate::stats::mean;
use crate::stats::rating::quantile;

/// The largest k of pass^k reported.
pub const MAX_K: usize = 10;

/// The interval's level.
const LEVEL: f64 = 0.95;

/// The section: absent from the report when no finished session has a goal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalScores {
    /// Finished sessions with a goal.
    pub sessions: usize,
    /// Bootstrap resamples and seed of the intervals.
    pub resamples: usize,
    pub seed: u64,
    pub systems: Vec<SystemScores>,
}

/// One system's scores.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemScores {
    pub system: String,
    pub sessions: usize,
    /// Distinct goals (fingerprints) among them.
    pub goals: usize,
    /// Share of sessions with success.
    pub success: Estimate,
    /// Means over the sessions where each is defined.
    pub inform_precision: Estimate,
    pub inform_recall: Estimate,
    pub inform_f1: Estimate,
    /// Mean over the successful sessions.
    pub turns_to_success: Estimate,
    pub pass_k: Vec<PassK>,
}

/// A mean with its bootstrap interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub value: Option<f64>,
    /// Sessions the mean is over.
    pub n: usize,
    /// `[low, high]`; absent below two goals or when no resample defines the mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<(f64, f64)>,
}

/// pass^k for one k.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassK {
    pub k: usize,
    pub value: f64,
    /// Goals with at least k trials, which the value averages.
    pub goals: usize,
}

/// Collects the scores of the sessions the report reads.
#[derive(Default)]
pub struct Collector {
    scored: Vec<(String, GoalScore)>,
}

impl Collector {
    /// Scores one session that passed the report's filters, if it finished and has a goal.
    pub fn add(&mut self, events: &[Event], features: &SessionFeatures) {
        let finished = events
            .iter()
            .any(|e| matches!(e.kind, EventKind::SessionEnded { .. }));
        if !finished {
            return;
        }
        if let Some(s) = score(events) {
            self.scored.push((system(features), s));
        }
    }

    pub fn report(self, resamples: usize, seed: u64) -> Option<GoalScores> {
        if self.scored.is_empty() {
            return None;
        }
        let sessions = self.scored.len();
        let mut by_system: IndexMap<String, Vec<GoalScore>> = IndexMap::new();
        for (system, s) in self.scored {
            by_system.entry(system).or_default().push(s);
        }
        by_system.sort_keys();
        let systems = by_system
            .into_iter()
            .enumerate()
            .map(|(i, (system, scores))| {
                let rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(i as u64));
                system_scores(system, &scores, resamples, rng)
            })
            .collect();
        Some(GoalScores {
            sessions,
            resamples,
            seed,
            systems,
        })
    }
}

/// The system a session is scored for (see the module docs).
pub fn system(features: &SessionFeatures) -> String {
    match (&features.system, &features.study) {
        (Some(system), _) => system.clone(),
        (None, Some(study)) => format!("wizard:{study}"),
        (None, None) => "wizard".to_string(),
    }
}

/// The per-session values each estimate averages (None where undefined for a session).
type Metric = fn(&GoalScore) -> Option<f64>;

const METRICS: [Metric; 5] = [
    |s| Some(if s.success { 1.0 } else { 0.0 }),
    |s| s.inform_precision,
    |s| s.inform_recall,
    |s| s.inform_f1,
    |s| s.turns_to_success.map(f64::from),
];

fn system_scores(
    system: String,
    scores: &[GoalScore],
    resamples: usize,
    mut rng: ChaCha8Rng,
) -> SystemScores {
    // Sessions by goal, in order of first appearance.
    let mut by_goal: IndexMap<&str, Vec<&GoalScore>> = IndexMap::new();
    for s in scores {
        by_goal.entry(&s.fingerprint).or_default().push(s);
    }
    let goals: Vec<Vec<&GoalScore>> = by_goal.into_values().collect();
    let all: Vec<&GoalScore> = scores.iter().collect();
    let mut draws: Vec<Vec<f64>> = vec![vec![]; METRICS.len()];
    if goals.len() >= 2 {
        for _ in 0..resamples {
            let mut sample: Vec<&GoalScore> = vec![];
            for _ in 0..goals.len() {
                sample.extend(&goals[rng.random_range(0..goals.len())]);
            }
            for (metric, d) in METRICS.iter().zip(&mut draws) {
                if let Some(m) = mean_of(&sample, *metric).0 {
                    d.push(m);
                }
            }
        }
    }
    let mut estimates = METRICS.iter().zip(draws).map(|(metric, mut d)| {
        let (value, n) = mean_of(&all, *metric);
        d.sort_by(f64::total_cmp);
        let (lo, hi) = ((1.0 - LEVEL) / 2.0, (1.0 + LEVEL) / 2.0);
        Estimate {
            value,
            n,
            ci95: quantile(&d, lo).zip(quantile(&d, hi)),
        }
    });
    let mut next = || {
        estimates.next().unwrap_or(Estimate {
            value: None,
            n: 0,
            ci95: None,
        })
    };
    SystemScores {
        system,
        sessions: scores.len(),
        goals: goals.len(),
        success: next(),
        inform_precision: next(),
        inform_recall: next(),
        inform_f1: next(),
        turns_to_success: next(),
        pass_k: pass_k(&goals),
    }
}

/// The mean of a metric over the sessions where it is defined, and how many those are.
fn mean_of(sessions: &[&GoalScore], metric: Metric) -> (Option<f64>, usize) {
    let values: Vec<f64> = sessions.iter().filter_map(|s| metric(s)).collect();
    (mean(&values), values.len())
}

/// pass^k for k = 1 to the most trials of a goal (at most [`MAX_K`]).
fn pass_k(goals: &[Vec<&GoalScore>]) -> Vec<PassK> {
    let most = goals.iter().map(Vec::len).max().unwrap_or(0).min(MAX_K);
    (1..=most)
        .filter_map(|k| {
            let per_goal: Vec<f64> = goals
                .iter()
                .filter(|g| g.len() >= k)
                .map(|g| all_succeed(g.len(), g.iter().filter(|s| s.success).count(), k))
                .collect();
            Some(PassK {
                k,
                value: mean(&per_goal)?,
                goals: per_goal.len(),
            })
        })
        .collect()
}

/// C(c, k) / C(n, k): the chance that k of n trials drawn without replacement are all among the
/// c successes.
pub fn all_succeed(n: usize, c: usize, k: usize) -> f64 {
    if k > n || c < k {
        return 0.0;
    }
    (0..k).map(|i| (c - i) as f64 / (n - i) as f64).product()
}

/// The section of the HTML page.
pub fn render(page: &mut String, section: &GoalScores) {
    use std::fmt::Write as _;
    let _ = write!(
        page,
        "<h2>Goal-based scores</h2><p>{} finished sessions with a user goal; 95 % intervals \
         from {} bootstrap resamples of goals (seed {}). Rules: <code>docs/goal-scores.md</code>.\
         </p><table><tr><th>system</th><th>sessions</th><th>goals</th><th>success</th>\
         <th>inform precision</th><th>inform recall</th><th>inform F1</th>\
         <th>turns to success</th><th>pass^k</th></tr>",
        section.sessions, section.resamples, section.seed
    );
    for s in &section.systems {
        let pass: Vec<String> = s
            .pass_k
            .iter()
            .map(|p| format!("k={}: {:.3} ({} goals)", p.k, p.value, p.goals))
            .collect();
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&s.system),
            s.sessions,
            s.goals,
            estimate(&s.success),
            estimate(&s.inform_precision),
            estimate(&s.inform_recall),
            estimate(&s.inform_f1),
            estimate(&s.turns_to_success),
            pass.join("; "),
        );
    }
    page.push_str("</table>");
}

fn estimate(e: &Estimate) -> String {
    match e.ci95 {
        Some((lo, hi)) => format!("{} [{}, {}]", num(e.value), num(Some(lo)), num(Some(hi))),
        None => num(e.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(goal: &str, success: bool) -> GoalScore {
        GoalScore {
            success,
            constraints: 1,
            constraints_informed: 1,
            requests: 2,
            requests_answered: if success { 2 } else { 1 },
            subgoals: 1,
            subgoals_matched: 1,
            unrequested_informs: 0,
            inform_precision: Some(1.0),
            inform_recall: Some(if success { 1.0 } else { 0.5 }),
            inform_f1: None,
            turns: 6,
            turns_to_success: success.then_some(4),
            fingerprint: goal.into(),
        }
    }

    fn collector(scores: Vec<(&str, GoalScore)>) -> Collector {
        Collector {
            scored: scores
                .into_iter()
                .map(|(s, g)| (s.to_string(), g))
                .collect(),
        }
    }

    #[test]
    fn pass_k_is_the_chance_that_k_trials_all_succeed_averaged_over_goals() {
        assert_eq!(all_succeed(4, 2, 1), 0.5);
        assert!((all_succeed(4, 2, 2) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(all_succeed(4, 1, 2), 0.0);
        assert_eq!(all_succeed(3, 3, 3), 1.0);
        // Goal a: 2 of 3 trials succeed; goal b: 1 of 1.
        let r = collector(vec![
            ("bot", scored("a", true)),
            ("bot", scored("a", true)),
            ("bot", scored("a", false)),
            ("bot", scored("b", true)),
        ])
        .report(200, 1)
        .expect("scores");
        let s = &r.systems[0];
        assert_eq!((s.sessions, s.goals), (4, 2));
        let pass: Vec<(usize, f64, usize)> =
            s.pass_k.iter().map(|p| (p.k, p.value, p.goals)).collect();
        assert_eq!(pass.len(), 3);
        assert_eq!((pass[0].0, pass[0].2), (1, 2));
        assert!((pass[0].1 - (2.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
        assert!((pass[1].1 - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!((pass[2].1, pass[2].2), (0.0, 1));
        assert_eq!(s.success.value, Some(0.75));
        assert_eq!(s.turns_to_success.value, Some(4.0));
        assert_eq!(
            s.inform_f1,
            Estimate {
                value: None,
                n: 0,
                ci95: None
            }
        );
    }

    #[test]
    fn intervals_are_reproducible_hold_the_value_and_need_two_goals() {
        let scores: Vec<(&str, GoalScore)> = (0..20)
            .map(|i| ("wizard:s", scored(&format!("g{i}"), i % 4 != 0)))
            .chain([("solo", scored("x", true)), ("solo", scored("x", false))])
            .collect();
        let a = collector(scores.clone()).report(500, 7).expect("scores");
        let b = collector(scores).report(500, 7).expect("scores");
        assert_eq!(a, b);
        let systems: Vec<&str> = a.systems.iter().map(|s| s.system.as_str()).collect();
        assert_eq!(systems, ["solo", "wizard:s"]);
        let w = &a.systems[1];
        assert_eq!(w.success.value, Some(0.75));
        let (lo, hi) = w.success.ci95.expect("an interval");
        assert!(
            lo < 0.75 && 0.75 < hi && lo >= 0.0 && hi <= 1.0,
            "{lo} {hi}"
        );
        // One goal tried twice: no interval.
        assert_eq!(a.systems[0].success.ci95, None);
        assert_eq!(a.systems[0].success.value, Some(0.5));
    }

    #[test]
    fn nothing_scored_is_no_section() {
        assert_eq!(Collector::default().report(100, 0), None);
    }
}
