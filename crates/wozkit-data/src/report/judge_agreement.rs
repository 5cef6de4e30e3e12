//! The report's model-judge section (`judge_agreement`): per model judge and question, the
//! judge against the people's majority and the people against each other, per system pair, the
//! rank correlation of the leaderboards built from each, and the judge's side bias. The rules
//! are in `docs/model-judges.md`.
//!
//! The people's judgments are the counted ones of the item pool (no gold, surplus, void or
//! onboarding; [`counts_for_item`]) of the judge's study; the judge's are its answered
//! `model_judged` events. A question is one of three kinds:
//!
//! - **comparison** (the `choice` question of a comparison): each item's label is the pair's
//!   alphabetically first system (`a`), the second (`b`) or `tie` (no choice, `tie`, `both_bad`).
//!   A judge asked in both orders (`swap: true`) gives an item a system only when both orders
//!   chose it, and `tie` when they disagree (MT-Bench's rule). Cohen's kappa.
//! - **category** (text or yes/no answers): the answer as the label; Cohen's kappa.
//! - **rating** (numeric answers): interval Krippendorff's alpha over the items, each with two
//!   values: the judge's and the mean of the people's ratings.
//!
//! For comparisons and categories the people's majority is the label most of the item's people
//! gave; an item whose top labels tie has no majority and is left out. Category and rating
//! questions read the judge's answer in the order shown (`swapped` false).
//!
//! People against people: every pair of two people's judgments of the same item, each pair once
//! in each order, for Cohen's kappa and the share of pairs alike (comparisons, categories); the
//! interval alpha over the items judged by two or more people (ratings).
//!
//! Intervals: percentile bootstrap over items ([`percentile_interval`], the report's
//! `--bootstrap` resamples and `--seed`), 95 %.
//!
//! Rank correlation: comparisons, the leaderboard of the people's counted battles (as the
//! report's `leaderboard`) against the one of the judge's answers (each order a vote, in answer
//! order), by Elo and by win rate; ratings, each system's mean rating by people against the
//! judge's. Spearman's rho (from 3 systems) and Kendall's tau-b over the systems in both.
//!
//! Side bias: the share of the judge's comparison answers choosing the dialogue shown first, with
//! the two-sided binomial test against one half; the flip rate, the share of items asked in both
//! orders whose chosen system changed with the order; and, for reference, the share of the
//! people's decided comparisons choosing the left side.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use wozkit_core::judges::CHOICE;

use super::evaluation::RankingOptions;
use super::html::{esc, num};
use crate::judgments::{JudgmentRow, answer_category, counts_for_item};
use crate::leaderboard::{Leaderboard, TIE, leaderboard, votes_from_rows};
use crate::stats::agreement::{
    Level, adjudicate, cohen_kappa, krippendorff_alpha, label_pairs, raw_agreement,
};
use crate::stats::bootstrap::percentile_interval;
use crate::stats::correlation::{Correlation, kendall_tau, spearman};
use crate::stats::hypothesis::binomial_test;
use crate::stats::mean;
use crate::votes::Vote;

/// The level of the intervals.
pub const LEVEL: f64 = 0.95;

/// The section: absent when the store holds no model judge's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JudgeAgreement {
    /// Bootstrap resamples and seed of the intervals.
    pub resamples: usize,
    pub seed: u64,
    /// One entry per judge and study, by study then judge name.
    pub judges: Vec<JudgeSummary>,
}

/// One model judge.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JudgeSummary {
    pub study: String,
    pub judge: String,
    /// Answers the judge gave (failed ones are not stored as answers).
    pub answers: usize,
    /// One entry per question the judge answered, by question id.
    pub questions: Vec<QuestionAgreement>,
    /// The judge's comparisons; absent when it answered none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_bias: Option<SideBias>,
}

/// How a question's answers are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    Comparison,
    Category,
    Rating,
}

/// Agreement on one question.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuestionAgreement {
    pub question: String,
    pub kind: QuestionKind,
    /// `cohen_kappa` (comparisons, categories) or `krippendorff_alpha` (ratings, interval).
    pub statistic: &'static str,
    /// Items the judge answered.
    pub judged_items: usize,
    /// The judge against the people's majority (or mean rating).
    pub model_vs_human: Paired,
    /// People against people, for reference.
    pub human_vs_human: Paired,
    /// The same per system pair (comparisons) or system (single dialogues), by systems.
    pub by_systems: Vec<SystemsAgreement>,
    /// The leaderboards of people and judge compared; empty for categories.
    pub rank_correlation: Vec<RankCorrelation>,
}

/// One agreement figure with its interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Items compared: judged items with a people's majority (model vs human); items with two or
    /// more people's judgments (human vs human).
    pub items: usize,
    /// Pairs of judgments compared: one per item (model vs human); every pair of two people's
    /// judgments of an item (human vs human).
    pub pairs: usize,
    /// The share of pairs alike; absent for ratings.
    pub agreement: Option<f64>,
    /// Cohen's kappa or Krippendorff's alpha (see `statistic`).
    pub value: Option<f64>,
    /// The 95 % percentile bootstrap interval over items.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// Agreement on the items of one system pair (or one system).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemsAgreement {
    pub systems: Vec<String>,
    pub model_vs_human: Paired,
    pub human_vs_human: Paired,
}

/// The correlation of the systems' scores by people and by the judge.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankCorrelation {
    /// `elo`, `win_rate` (comparisons) or `mean_rating`.
    pub score: &'static str,
    /// The systems scored by both, alphabetically; `human` and `model` in the same order.
    pub systems: Vec<String>,
    pub human: Vec<f64>,
    pub model: Vec<f64>,
    /// Spearman's rho and its p-value; from 3 systems.
    pub spearman: Option<Correlation>,
    /// Kendall's tau-b; from 2 systems.
    pub kendall_tau: Option<f64>,
}

/// Where the judge's comparisons lean.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SideBias {
    /// The judge's comparison answers, both orders.
    pub answers: usize,
    /// Those choosing the dialogue shown first (left, `A`).
    pub first: usize,
    pub first_rate: Option<f64>,
    /// Two-sided binomial test of `first` against one half.
    pub p: Option<f64>,
    /// Items the judge answered in both orders.
    pub swapped_items: usize,
    /// Of those, items whose chosen system changed with the order.
    pub flips: usize,
    pub flip_rate: Option<f64>,
    /// The people's decided comparisons of the study (a side chosen) and their share choosing
    /// the left side, for reference.
    pub human_decided: usize,
    pub human_first_rate: Option<f64>,
}

/// The section from the people's rows and the judges' rows; `None` without a judge's answer.
pub fn judge_agreement(
    human: &[JudgmentRow],
    model: &[JudgmentRow],
    ranking: RankingOptions,
) -> Option<JudgeAgreement> {
    if model.is_empty() {
        return None;
    }
    let mut judges: BTreeMap<(&str, &str), Vec<&JudgmentRow>> = BTreeMap::new();
    for row in model {
        let judge = row.judge.as_deref().unwrap_or_default();
        judges
            .entry((row.study.as_str(), judge))
            .or_default()
            .push(row);
    }
    let judges = judges
        .into_iter()
        .map(|((study, judge), rows)| {
            let people: Vec<&JudgmentRow> = human
                .iter()
                .filter(|r| r.study == study && counts_for_item(r))
                .collect();
            judge_summary(study, judge, &rows, &people, ranking)
        })
        .collect();
    Some(JudgeAgreement {
        resamples: ranking.bootstrap,
        seed: ranking.seed,
        judges,
    })
}

fn judge_summary(
    study: &str,
    judge: &str,
    rows: &[&JudgmentRow],
    people: &[&JudgmentRow],
    ranking: RankingOptions,
) -> JudgeSummary {
    let comparisons: Vec<&JudgmentRow> = rows
        .iter()
        .copied()
        .filter(|r| r.is_comparison() && r.choice.is_some())
        .collect();
    let mut questions = Vec::new();
    if !comparisons.is_empty() {
        questions.push(comparison_question(&comparisons, people, ranking));
    }
    let mut answered: BTreeMap<&str, Vec<&JudgmentRow>> = BTreeMap::new();
    for row in rows.iter().filter(|r| !r.swapped) {
        for question in row.answers.keys() {
            answered.entry(question).or_default().push(row);
        }
    }
    for (question, rows) in answered {
        questions.push(answer_question(question, &rows, people, ranking));
    }
    questions.sort_by(|a, b| a.question.cmp(&b.question));
    JudgeSummary {
        study: study.to_string(),
        judge: judge.to_string(),
        answers: rows.len(),
        questions,
        side_bias: (!comparisons.is_empty()).then(|| side_bias(&comparisons, people)),
    }
}

/// One item: its systems (sorted), the judge's value and the people's, in submission order.
struct Unit<T> {
    systems: Vec<String>,
    model: Option<T>,
    human: Vec<T>,
}

/// The systems of a row, sorted (one, or the pair).
fn systems_of(row: &JudgmentRow) -> Vec<String> {
    let mut systems: Vec<String> = if row.is_comparison() {
        [&row.left_system, &row.right_system]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    } else {
        row.system.iter().cloned().collect()
    };
    systems.sort();
    systems.dedup();
    systems
}

/// A comparison's label: `a` (the pair's alphabetically first system chosen), `b`, or `tie`.
fn comparison_label(row: &JudgmentRow) -> Option<String> {
    let systems = systems_of(row);
    let [a, b] = systems.as_slice() else {
        return None;
    };
    Some(
        match row.choice_system.as_deref() {
            Some(s) if s == a => "a",
            Some(s) if s == b => "b",
            _ => TIE,
        }
        .to_string(),
    )
}

/// People's rows in submission order (time, then participant), as adjudication reads them.
fn in_submission_order<'a>(people: &[&'a JudgmentRow]) -> Vec<&'a JudgmentRow> {
    let mut sorted = people.to_vec();
    sorted.sort_by(|a, b| {
        (a.submitted_at_ms, &a.participant).cmp(&(b.submitted_at_ms, &b.participant))
    });
    sorted
}

fn comparison_question(
    model: &[&JudgmentRow],
    people: &[&JudgmentRow],
    ranking: RankingOptions,
) -> QuestionAgreement {
    let mut units: BTreeMap<&str, Unit<String>> = BTreeMap::new();
    // The judge's label per item: one per order, combined.
    let mut orders: BTreeMap<&str, (Vec<String>, BTreeMap<bool, String>)> = BTreeMap::new();
    for row in model {
        if let Some(label) = comparison_label(row) {
            let entry = orders.entry(row.item.as_str()).or_default();
            entry.0 = systems_of(row);
            entry.1.insert(row.swapped, label);
        }
    }
    let judged_items = orders.len();
    for (item, (systems, labels)) in orders {
        let mut labels = labels.into_values();
        let first = labels.next();
        let model = match (first, labels.next()) {
            (Some(one), Some(other)) if one != other => Some(TIE.to_string()),
            (one, _) => one,
        };
        units.insert(
            item,
            Unit {
                systems,
                model,
                human: Vec::new(),
            },
        );
    }
    for row in in_submission_order(people) {
        if !row.is_comparison() {
            continue;
        }
        let Some(label) = comparison_label(row) else {
            continue;
        };
        let unit = units.entry(row.item.as_str()).or_insert_with(|| Unit {
            systems: systems_of(row),
            model: None,
            human: Vec::new(),
        });
        unit.human.push(label);
    }
    let units: Vec<Unit<String>> = units.into_values().collect();
    let human_votes: Vec<JudgmentRow> = people.iter().map(|r| (*r).clone()).collect();
    let human_board = leaderboard(&votes_from_rows(&human_votes), ranking);
    let model_board = leaderboard(&model_votes(model), ranking);
    let (model_vs_human, human_vs_human, by_systems) =
        measured(&units, ranking, labels_vs_majority, labels_between_people);
    QuestionAgreement {
        question: CHOICE.to_string(),
        kind: QuestionKind::Comparison,
        statistic: "cohen_kappa",
        judged_items,
        model_vs_human,
        human_vs_human,
        by_systems,
        rank_correlation: vec![
            board_correlation("elo", &human_board, &model_board, |s| Some(s.elo)),
            board_correlation("win_rate", &human_board, &model_board, |s| s.win_rate),
        ],
    }
}

/// The judge's comparison answers as votes, in answer order (each order of an item a vote).
fn model_votes(model: &[&JudgmentRow]) -> Vec<Vote> {
    let mut rows: Vec<&&JudgmentRow> = model.iter().collect();
    rows.sort_by_key(|r| r.submitted_at_ms);
    rows.into_iter()
        .filter_map(|r| {
            Some(Vote {
                session_id: String::new(),
                user_id: r.judge.clone().unwrap_or_default(),
                crs1: r.left_system.clone()?,
                crs2: r.right_system.clone()?,
                vote: r.choice_system.clone().unwrap_or_else(|| TIE.to_string()),
                feedback: String::new(),
            })
        })
        .filter(|v| v.crs1 != v.crs2)
        .collect()
}

fn board_correlation(
    score: &'static str,
    human: &Leaderboard,
    model: &Leaderboard,
    value: fn(&crate::leaderboard::SystemRow) -> Option<f64>,
) -> RankCorrelation {
    let scores = |board: &Leaderboard| -> BTreeMap<String, f64> {
        board
            .systems
            .iter()
            .filter_map(|s| Some((s.name.clone(), value(s)?)))
            .collect()
    };
    correlation(score, &scores(human), &scores(model))
}

fn correlation(
    score: &'static str,
    human: &BTreeMap<String, f64>,
    model: &BTreeMap<String, f64>,
) -> RankCorrelation {
    let systems: Vec<String> = human
        .keys()
        .filter(|s| model.contains_key(*s))
        .cloned()
        .collect();
    let h: Vec<f64> = systems.iter().map(|s| human[s]).collect();
    let m: Vec<f64> = systems.iter().map(|s| model[s]).collect();
    RankCorrelation {
        score,
        spearman: spearman(&h, &m),
        kendall_tau: kendall_tau(&h, &m),
        systems,
        human: h,
        model: m,
    }
}

/// A category or rating question answered by the judge (in the order shown).
fn answer_question(
    question: &str,
    model: &[&JudgmentRow],
    people: &[&JudgmentRow],
    ranking: RankingOptions,
) -> QuestionAgreement {
    let numeric = model
        .iter()
        .all(|r| r.answers.get(question).is_some_and(|v| v.is_number()));
    let judged_items = model
        .iter()
        .map(|r| r.item.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    if numeric {
        let units = answer_units(question, model, people, |v| v.as_f64());
        let scores = |pick: fn(&Unit<f64>) -> Vec<f64>| -> BTreeMap<String, f64> {
            let mut by_system: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for unit in &units {
                by_system
                    .entry(unit.systems.join(" vs "))
                    .or_default()
                    .extend(pick(unit));
            }
            by_system
                .into_iter()
                .filter_map(|(s, xs)| Some((s, mean(&xs)?)))
                .collect()
        };
        let human_means = scores(|u| u.human.clone());
        let model_means = scores(|u| u.model.into_iter().collect());
        let (model_vs_human, human_vs_human, by_systems) =
            measured(&units, ranking, ratings_vs_mean, ratings_between_people);
        QuestionAgreement {
            question: question.to_string(),
            kind: QuestionKind::Rating,
            statistic: "krippendorff_alpha",
            judged_items,
            model_vs_human,
            human_vs_human,
            by_systems,
            rank_correlation: vec![correlation("mean_rating", &human_means, &model_means)],
        }
    } else {
        let units = answer_units(question, model, people, answer_category);
        let (model_vs_human, human_vs_human, by_systems) =
            measured(&units, ranking, labels_vs_majority, labels_between_people);
        QuestionAgreement {
            question: question.to_string(),
            kind: QuestionKind::Category,
            statistic: "cohen_kappa",
            judged_items,
            model_vs_human,
            human_vs_human,
            by_systems,
            rank_correlation: Vec::new(),
        }
    }
}

/// The items of a question: the judge's answer and the people's, read by `value`.
fn answer_units<T>(
    question: &str,
    model: &[&JudgmentRow],
    people: &[&JudgmentRow],
    value: impl Fn(&serde_json::Value) -> Option<T>,
) -> Vec<Unit<T>> {
    let mut units: BTreeMap<&str, Unit<T>> = BTreeMap::new();
    for row in model {
        let answer = row.answers.get(question).and_then(&value);
        units.insert(
            row.item.as_str(),
            Unit {
                systems: systems_of(row),
                model: answer,
                human: Vec::new(),
            },
        );
    }
    for row in in_submission_order(people) {
        let Some(x) = row.answers.get(question).and_then(&value) else {
            continue;
        };
        units
            .entry(row.item.as_str())
            .or_insert_with(|| Unit {
                systems: systems_of(row),
                model: None,
                human: Vec::new(),
            })
            .human
            .push(x);
    }
    units.into_values().collect()
}

type Measure<T> = fn(&[&Unit<T>], RankingOptions) -> Paired;

/// A measure over every item, and per system pair (or system), by systems.
fn measured<T>(
    units: &[Unit<T>],
    ranking: RankingOptions,
    model_vs_human: Measure<T>,
    human_vs_human: Measure<T>,
) -> (Paired, Paired, Vec<SystemsAgreement>) {
    let all: Vec<&Unit<T>> = units.iter().collect();
    let mut groups: BTreeMap<&[String], Vec<&Unit<T>>> = BTreeMap::new();
    for unit in units {
        groups.entry(&unit.systems).or_default().push(unit);
    }
    let by_systems = groups
        .into_iter()
        .map(|(systems, group)| SystemsAgreement {
            systems: systems.to_vec(),
            model_vs_human: model_vs_human(&group, ranking),
            human_vs_human: human_vs_human(&group, ranking),
        })
        .collect();
    (
        model_vs_human(&all, ranking),
        human_vs_human(&all, ranking),
        by_systems,
    )
}

/// The label most of the people gave; `None` when the top labels tie (or none was given).
fn majority(labels: &[String]) -> Option<String> {
    let a = adjudicate(labels)?;
    (!a.tie).then_some(a.label)
}

/// The report's bootstrap interval ([`LEVEL`], `ranking`'s resamples and seed) of `statistic`
/// over `units`, as its two bounds.
fn interval<T>(
    units: &[T],
    ranking: RankingOptions,
    statistic: impl Fn(&[&T]) -> Option<f64>,
) -> (Option<f64>, Option<f64>) {
    let bounds = percentile_interval(units, ranking.bootstrap, LEVEL, ranking.seed, statistic);
    (bounds.map(|b| b.0), bounds.map(|b| b.1))
}

/// Interval alpha of a resample of units (each unit the values given to one item).
fn interval_alpha(sample: &[&Vec<f64>]) -> Option<f64> {
    let units: Vec<Vec<f64>> = sample.iter().map(|u| (*u).clone()).collect();
    krippendorff_alpha(&units, Level::Interval)
}

/// Cohen's kappa of the judge's label against the people's majority, over the items with both.
fn labels_vs_majority(units: &[&Unit<String>], ranking: RankingOptions) -> Paired {
    let pairs: Vec<(String, String)> = units
        .iter()
        .filter_map(|u| Some((u.model.clone()?, majority(&u.human)?)))
        .collect();
    let (ci_low, ci_high) = interval(&pairs, ranking, |sample| {
        let sample: Vec<(&str, &str)> = sample
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        cohen_kappa(&sample)
    });
    Paired {
        items: pairs.len(),
        pairs: pairs.len(),
        agreement: raw_agreement(&pairs),
        value: cohen_kappa(&pairs),
        ci_low,
        ci_high,
    }
}

/// Cohen's kappa over every pair of two people's labels of the same item (both orders).
fn labels_between_people(units: &[&Unit<String>], ranking: RankingOptions) -> Paired {
    let items: Vec<&[String]> = units
        .iter()
        .map(|u| u.human.as_slice())
        .filter(|h| h.len() >= 2)
        .collect();
    let pairs = label_pairs(items.iter().copied());
    let (ci_low, ci_high) = interval(&items, ranking, |sample| {
        cohen_kappa(&label_pairs(sample.iter().map(|s| **s)))
    });
    Paired {
        items: items.len(),
        pairs: pairs.len() / 2,
        agreement: raw_agreement(&pairs),
        value: cohen_kappa(&pairs),
        ci_low,
        ci_high,
    }
}

/// Interval alpha of the judge's rating against the people's mean, over the items with both.
fn ratings_vs_mean(units: &[&Unit<f64>], ranking: RankingOptions) -> Paired {
    let pairs: Vec<Vec<f64>> = units
        .iter()
        .filter_map(|u| Some(vec![u.model?, mean(&u.human)?]))
        .collect();
    let (ci_low, ci_high) = interval(&pairs, ranking, interval_alpha);
    Paired {
        items: pairs.len(),
        pairs: pairs.len(),
        agreement: None,
        value: krippendorff_alpha(&pairs, Level::Interval),
        ci_low,
        ci_high,
    }
}

/// Interval alpha over the items rated by two or more people.
fn ratings_between_people(units: &[&Unit<f64>], ranking: RankingOptions) -> Paired {
    let items: Vec<Vec<f64>> = units
        .iter()
        .filter(|u| u.human.len() >= 2)
        .map(|u| u.human.clone())
        .collect();
    let (ci_low, ci_high) = interval(&items, ranking, interval_alpha);
    Paired {
        items: items.len(),
        pairs: items.iter().map(|u| u.len() * (u.len() - 1) / 2).sum(),
        agreement: None,
        value: krippendorff_alpha(&items, Level::Interval),
        ci_low,
        ci_high,
    }
}

/// The judge's side bias over its comparison answers, with the people's for reference.
fn side_bias(model: &[&JudgmentRow], people: &[&JudgmentRow]) -> SideBias {
    let first = model.iter().filter(|r| r.choice == r.left).count();
    let mut orders: BTreeMap<&str, BTreeMap<bool, Option<&str>>> = BTreeMap::new();
    for row in model {
        orders
            .entry(row.item.as_str())
            .or_default()
            .insert(row.swapped, row.choice_system.as_deref());
    }
    let both: Vec<&BTreeMap<bool, Option<&str>>> =
        orders.values().filter(|o| o.len() == 2).collect();
    let flips = both
        .iter()
        .filter(|o| o.get(&false) != o.get(&true))
        .count();
    let decided: Vec<&&JudgmentRow> = people
        .iter()
        .filter(|r| r.is_comparison() && r.choice.is_some())
        .filter(|r| r.choice == r.left || r.choice == r.right)
        .collect();
    let human_first = decided.iter().filter(|r| r.choice == r.left).count();
    let share = |k: usize, n: usize| (n > 0).then(|| k as f64 / n as f64);
    SideBias {
        answers: model.len(),
        first,
        first_rate: share(first, model.len()),
        p: binomial_test(first as u64, model.len() as u64, 0.5),
        swapped_items: both.len(),
        flips,
        flip_rate: share(flips, both.len()),
        human_decided: decided.len(),
        human_first_rate: share(human_first, decided.len()),
    }
}

/// The section of the page: per judge, a table of agreement per question and systems, the rank
/// correlations and the side bias (`data-testid="judge-agreement"`).
pub fn render(page: &mut String, section: &JudgeAgreement) {
    let _ = write!(
        page,
        "<h2>Model judges against people</h2><div data-testid=\"judge-agreement\"><p>Each \
         judge against the people's majority (comparisons and categories: Cohen's κ; ratings: \
         interval Krippendorff's α against the people's mean), and people against people for \
         reference (every pair of two people's judgments of an item). 95% intervals from {} \
         bootstrap resamples of items (seed {}). Rules: <code>docs/model-judges.md</code>.</p>",
        section.resamples, section.seed
    );
    for judge in &section.judges {
        let _ = write!(
            page,
            "<h3>{} <small>({}, {} answers)</small></h3>",
            esc(&judge.judge),
            esc(&judge.study),
            judge.answers
        );
        page.push_str(
            "<table><tr><th>question</th><th>systems</th><th>items</th><th>alike</th>\
             <th>judge vs people</th><th>95% CI</th><th>people pairs</th><th>alike</th>\
             <th>people vs people</th><th>95% CI</th></tr>",
        );
        for q in &judge.questions {
            let name = format!("{} ({})", q.question, q.statistic.replace('_', " "));
            row(page, &name, "all", &q.model_vs_human, &q.human_vs_human);
            for g in &q.by_systems {
                row(
                    page,
                    "",
                    &g.systems.join(" vs "),
                    &g.model_vs_human,
                    &g.human_vs_human,
                );
            }
        }
        page.push_str("</table>");
        rank_correlations(page, judge);
        if let Some(b) = &judge.side_bias {
            let _ = write!(
                page,
                "<p data-testid=\"side-bias\">Side bias: the dialogue shown first chosen in {} of \
                 {} comparisons ({}, binomial p {}); {} of {} items asked in both orders flipped \
                 with the order ({}). People chose the left side in {} of their decided \
                 comparisons.</p>",
                b.first,
                b.answers,
                num(b.first_rate),
                num(b.p),
                b.flips,
                b.swapped_items,
                num(b.flip_rate),
                num(b.human_first_rate)
            );
        }
    }
    page.push_str("</div>");
}

/// A judge's table of rank correlations with people, per question (none without any).
fn rank_correlations(page: &mut String, judge: &JudgeSummary) {
    let correlations: Vec<(&str, &RankCorrelation)> = judge
        .questions
        .iter()
        .flat_map(|q| q.rank_correlation.iter().map(|c| (q.question.as_str(), c)))
        .collect();
    if !correlations.is_empty() {
        page.push_str(
            "<table><tr><th>question</th><th>score</th><th>systems</th>\
             <th>Spearman ρ</th><th>p</th><th>Kendall τ</th></tr>",
        );
        for (question, c) in correlations {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(question),
                c.score,
                c.systems.len(),
                num(c.spearman.map(|s| s.r)),
                num(c.spearman.map(|s| s.p)),
                num(c.kendall_tau)
            );
        }
        page.push_str("</table>");
    }
}

fn row(page: &mut String, question: &str, systems: &str, model: &Paired, human: &Paired) {
    let ci = |p: &Paired| format!("{} – {}", num(p.ci_low), num(p.ci_high));
    let _ = write!(
        page,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{}</td></tr>",
        esc(question),
        esc(systems),
        model.items,
        num(model.agreement),
        num(model.value),
        ci(model),
        human.pairs,
        num(human.agreement),
        num(human.value),
        ci(human)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judgments::{HUMAN, MODEL};
    use serde_json::json;

    const RANKING: RankingOptions = RankingOptions {
        elo_k: 16.0,
        elo_start: 1000.0,
        bootstrap: 200,
        seed: 1,
    };

    fn row(
        who: &str,
        item: &str,
        system: &str,
        answers: &[(&str, serde_json::Value)],
    ) -> JudgmentRow {
        let model = who.starts_with("judge");
        JudgmentRow {
            participant: (!model).then(|| who.to_string()),
            kind: if model { MODEL } else { HUMAN },
            judge: model.then(|| who.to_string()),
            counted: !model,
            ..JudgmentRow::rated(who, item, system, answers)
        }
    }

    /// People rate r1 4 and 5 (mean 4.5), r2 2 and 2, r3 3 and 4 (3.5); the judge 5, 2, 3.
    /// Interval alpha over the units (5, 4.5), (2, 2), (3, 3.5): D_o = (0.5 + 0 + 0.5) / 6, the
    /// six values' squared differences over ordered pairs sum to 94, D_e = 94 / 30, so
    /// α = 1 − 30 / (6 · 94) = 89/94. By system, people give s1 a mean of 3.25 and s2 3.5, the
    /// judge 3.5 and 3: opposite orders, τ = −1.
    #[test]
    fn a_rating_question_is_alpha_against_the_people_mean() {
        let human = vec![
            row("w1", "r1", "s1", &[("q", json!(4))]),
            row("w2", "r1", "s1", &[("q", json!(5))]),
            row("w1", "r2", "s1", &[("q", json!(2))]),
            row("w2", "r2", "s1", &[("q", json!(2))]),
            row("w1", "r3", "s2", &[("q", json!(3))]),
            row("w2", "r3", "s2", &[("q", json!(4))]),
        ];
        let model = vec![
            row("judge", "r1", "s1", &[("q", json!(5))]),
            row("judge", "r2", "s1", &[("q", json!(2))]),
            row("judge", "r3", "s2", &[("q", json!(3))]),
        ];
        let section = judge_agreement(&human, &model, RANKING).expect("section");
        let judge = &section.judges[0];
        assert_eq!((judge.judge.as_str(), judge.answers), ("judge", 3));
        assert!(judge.side_bias.is_none());
        let q = &judge.questions[0];
        assert_eq!(
            (q.kind, q.statistic),
            (QuestionKind::Rating, "krippendorff_alpha")
        );
        assert_eq!((q.judged_items, q.model_vs_human.items), (3, 3));
        let alpha = q.model_vs_human.value.expect("alpha");
        assert!((alpha - 89.0 / 94.0).abs() < 1e-12, "{alpha}");
        let (lo, hi) = (
            q.model_vs_human.ci_low.expect("low"),
            q.model_vs_human.ci_high.expect("high"),
        );
        assert!(lo <= hi);
        // People against people: the units (4, 5), (2, 2), (3, 4), three pairs.
        assert_eq!((q.human_vs_human.items, q.human_vs_human.pairs), (3, 3));
        assert_eq!(
            q.human_vs_human.value,
            krippendorff_alpha(
                &[vec![4.0, 5.0], vec![2.0, 2.0], vec![3.0, 4.0]],
                Level::Interval
            )
        );
        let systems: Vec<&[String]> = q.by_systems.iter().map(|g| g.systems.as_slice()).collect();
        assert_eq!(systems, [["s1".to_string()], ["s2".to_string()]]);
        assert_eq!(q.by_systems[0].model_vs_human.items, 2);
        let rank = &q.rank_correlation[0];
        assert_eq!(rank.score, "mean_rating");
        assert_eq!(
            (rank.human.clone(), rank.model.clone()),
            (vec![3.25, 3.5], vec![3.5, 3.0])
        );
        assert_eq!(rank.kendall_tau, Some(-1.0));
        assert_eq!(rank.spearman, None, "two systems");
    }

    /// A category question: people's majorities yes, no, (tie), yes; the judge yes, yes, no, yes.
    /// The tied item is left out: pairs (yes, yes), (yes, no), (yes, yes): p_o = 2/3, the
    /// judge always says yes, so p_e = 2/3 and κ = 0.
    #[test]
    fn a_category_question_leaves_tied_majorities_out() {
        let human = vec![
            row("w1", "i1", "s", &[("ok", json!("yes"))]),
            row("w2", "i1", "s", &[("ok", json!("yes"))]),
            row("w1", "i2", "s", &[("ok", json!("no"))]),
            row("w2", "i2", "s", &[("ok", json!("no"))]),
            row("w1", "i3", "s", &[("ok", json!("yes"))]),
            row("w2", "i3", "s", &[("ok", json!("no"))]),
            row("w1", "i4", "s", &[("ok", json!("yes"))]),
        ];
        let model = vec![
            row("judge", "i1", "s", &[("ok", json!("yes"))]),
            row("judge", "i2", "s", &[("ok", json!("yes"))]),
            row("judge", "i3", "s", &[("ok", json!("no"))]),
            row("judge", "i4", "s", &[("ok", json!("yes"))]),
        ];
        let section = judge_agreement(&human, &model, RANKING).expect("section");
        let q = &section.judges[0].questions[0];
        assert_eq!(
            (q.kind, q.statistic),
            (QuestionKind::Category, "cohen_kappa")
        );
        assert_eq!(q.model_vs_human.items, 3);
        assert_eq!(q.model_vs_human.agreement, Some(2.0 / 3.0));
        assert_eq!(q.model_vs_human.value, Some(0.0));
        // People: pairs (yes, yes), (no, no), (yes, no) in both orders: p_o = 2/3, each side
        // yes half the time, κ = (2/3 − 1/2) / (1/2) = 1/3.
        assert_eq!((q.human_vs_human.items, q.human_vs_human.pairs), (3, 3));
        let kappa = q.human_vs_human.value.expect("kappa");
        assert!((kappa - 1.0 / 3.0).abs() < 1e-12, "{kappa}");
        assert!(q.rank_correlation.is_empty());
        assert!(judge_agreement(&human, &[], RANKING).is_none());
    }
}
