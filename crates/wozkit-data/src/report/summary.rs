//! The descriptive part of a report, from the features of every selected session: interaction
//! statistics, dialogue-act distributions, the questionnaire table split by outcome, and the
//! correlations between the outcome and each act type's count.
//!
//! Questionnaire answers arrive already scored (reverse-coded items reversed, see
//! [`super::questionnaire`]); the table only says which items were.

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::Serialize;
use wozkit_core::event::Role;

use super::features::{ACT_TYPES, Outcome, SessionFeatures, act_type_name};
use super::questionnaire::Reversal;
use crate::stats::correlation::{Correlation, pearson, spearman};
use crate::stats::hypothesis::{Alternative, mann_whitney_u};
use crate::stats::{mean, median, mode, sd};

/// Mean and sample SD over sessions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeanSd {
    pub mean: Option<f64>,
    pub sd: Option<f64>,
    /// Sessions the value is defined for.
    pub n: usize,
}

impl MeanSd {
    pub fn of(values: &[f64]) -> MeanSd {
        MeanSd {
            mean: mean(values),
            sd: sd(values),
            n: values.len(),
        }
    }
}

/// Interaction features per session, as mean (SD).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interaction {
    pub turns: MeanSd,
    pub user_turns: MeanSd,
    pub wizard_turns: MeanSd,
    pub user_words_per_turn: MeanSd,
    pub wizard_typed_percent: MeanSd,
}

/// One label and how often it occurs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActCount {
    pub label: String,
    pub count: usize,
    /// Share of the role's labelled turns.
    pub percent: f64,
}

/// Descriptive statistics of one group of answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Describe {
    pub n: usize,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub mode: Option<f64>,
    pub sd: Option<f64>,
}

impl Describe {
    fn of(values: &[f64]) -> Describe {
        Describe {
            n: values.len(),
            mean: mean(values),
            median: median(values),
            mode: mode(values),
            sd: sd(values),
        }
    }
}

/// A Mann-Whitney U result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UTest {
    pub u: f64,
    pub p: f64,
}

/// One questionnaire item: overall and split by outcome, with a one-tailed Mann-Whitney U test
/// (reached > not reached), all over the scored answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Question {
    pub item: String,
    /// Set when the item is reverse-coded: its answers were reversed on this scale before
    /// every number here was computed.
    pub reversed: Option<Reversal>,
    pub overall: Describe,
    pub reached: Describe,
    pub not_reached: Describe,
    pub mann_whitney: Option<UTest>,
}

/// Pearson and Spearman between the outcome and one act type's per-session count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutcomeCorrelation {
    pub n: usize,
    pub pearson: Option<Correlation>,
    pub spearman: Option<Correlation>,
}

/// The descriptive sections of a report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Dialogue sessions (with at least one message).
    pub sessions: usize,
    pub interaction: Interaction,
    pub labelled_wizard_turns: usize,
    /// Share (%) of labelled wizard turns per act type.
    pub da_types: IndexMap<String, Option<f64>>,
    /// The most frequent labels per role (`user`, `wizard`).
    pub top_acts: IndexMap<String, Vec<ActCount>>,
    /// Sessions with a known outcome, and how many reached it.
    pub outcome_known: usize,
    pub outcome_reached: usize,
    pub questionnaire: Vec<Question>,
    pub correlations: IndexMap<String, OutcomeCorrelation>,
}

/// Builds the summary of `sessions` (dialogues only); `reversed` names the questionnaire items
/// whose answers were reversed.
pub fn summarise(
    sessions: &[SessionFeatures],
    acts: &HashMap<(Role, String), usize>,
    reversed: &IndexMap<String, Reversal>,
    outcome: Outcome,
    top: usize,
) -> Summary {
    let dialogues: Vec<&SessionFeatures> = sessions.iter().filter(|s| s.is_dialogue()).collect();
    let values = |f: &dyn Fn(&SessionFeatures) -> Option<f64>| -> Vec<f64> {
        dialogues.iter().filter_map(|s| f(s)).collect()
    };
    let ratio = |a: usize, b: usize, scale: f64| (b > 0).then(|| a as f64 / b as f64 * scale);
    let interaction = Interaction {
        turns: MeanSd::of(&values(&|s| Some(s.turns as f64))),
        user_turns: MeanSd::of(&values(&|s| Some(s.user_turns as f64))),
        wizard_turns: MeanSd::of(&values(&|s| Some(s.wizard_turns as f64))),
        user_words_per_turn: MeanSd::of(&values(&|s| ratio(s.user_words, s.user_turns, 1.0))),
        wizard_typed_percent: MeanSd::of(&values(&|s| {
            ratio(s.wizard_typed, s.wizard_turns, 100.0)
        })),
    };
    let mut type_totals = [0usize; 4];
    for s in &dialogues {
        for (total, n) in type_totals.iter_mut().zip(s.act_types) {
            *total += n;
        }
    }
    let labelled: usize = type_totals.iter().sum();
    let da_types = ACT_TYPES
        .iter()
        .zip(type_totals)
        .map(|(t, n)| (act_type_name(*t).to_string(), ratio(n, labelled, 100.0)))
        .collect();
    let top_acts = [Role::User, Role::Wizard]
        .into_iter()
        .map(|role| (role.as_str().to_string(), top_labels(acts, role, top)))
        .collect();
    let judged: Vec<(&SessionFeatures, bool)> = dialogues
        .iter()
        .filter_map(|s| s.outcome(outcome).map(|o| (*s, o)))
        .collect();
    Summary {
        sessions: dialogues.len(),
        interaction,
        labelled_wizard_turns: labelled,
        da_types,
        top_acts,
        outcome_known: judged.len(),
        outcome_reached: judged.iter().filter(|(_, o)| *o).count(),
        questionnaire: questionnaire(sessions, reversed, outcome),
        correlations: correlations(&judged),
    }
}

fn top_labels(acts: &HashMap<(Role, String), usize>, role: Role, top: usize) -> Vec<ActCount> {
    let mut counts: Vec<(&str, usize)> = acts
        .iter()
        .filter(|((r, _), _)| *r == role)
        .map(|((_, label), n)| (label.as_str(), *n))
        .collect();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts
        .into_iter()
        .take(top)
        .map(|(label, count)| ActCount {
            label: label.to_string(),
            count,
            percent: count as f64 / total as f64 * 100.0,
        })
        .collect()
}

/// Every numeric item, in order of first appearance; a session answering an item twice counts
/// with the mean of its answers.
fn questionnaire(
    sessions: &[SessionFeatures],
    reversed: &IndexMap<String, Reversal>,
    outcome: Outcome,
) -> Vec<Question> {
    let mut items: IndexMap<&str, Vec<(f64, Option<bool>)>> = IndexMap::new();
    for session in sessions {
        let mut own: IndexMap<&str, Vec<f64>> = IndexMap::new();
        for answer in &session.answers {
            own.entry(answer.item.as_str())
                .or_default()
                .push(answer.value);
        }
        for (item, values) in own {
            if let Some(m) = mean(&values) {
                items
                    .entry(item)
                    .or_default()
                    .push((m, session.outcome(outcome)));
            }
        }
    }
    items
        .into_iter()
        .map(|(item, answers)| {
            let all: Vec<f64> = answers.iter().map(|a| a.0).collect();
            let group = |want: bool| -> Vec<f64> {
                answers
                    .iter()
                    .filter(|a| a.1 == Some(want))
                    .map(|a| a.0)
                    .collect()
            };
            let (reached, not_reached) = (group(true), group(false));
            let test = mann_whitney_u(&reached, &not_reached, Alternative::Greater);
            Question {
                item: item.to_string(),
                reversed: reversed.get(item).cloned(),
                overall: Describe::of(&all),
                reached: Describe::of(&reached),
                not_reached: Describe::of(&not_reached),
                mann_whitney: test.map(|t| UTest { u: t.u, p: t.p }),
            }
        })
        .collect()
}

fn correlations(judged: &[(&SessionFeatures, bool)]) -> IndexMap<String, OutcomeCorrelation> {
    let outcome: Vec<f64> = judged
        .iter()
        .map(|(_, o)| f64::from(u8::from(*o)))
        .collect();
    ACT_TYPES
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let counts: Vec<f64> = judged.iter().map(|(s, _)| s.act_types[i] as f64).collect();
            let c = OutcomeCorrelation {
                n: counts.len(),
                pearson: pearson(&outcome, &counts),
                spearman: spearman(&outcome, &counts),
            };
            (act_type_name(*t).to_string(), c)
        })
        .collect()
}
