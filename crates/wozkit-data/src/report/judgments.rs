//! The evaluation-study part of a report, read from the participants' own logs: ratings per
//! system and question, the ACUTE-Eval win-rate grid, agreement between workers judging the same
//! item, per-worker quality numbers, and the flow's onboarding, screening, surplus and returns.
//!
//! Only counted judgments of the item pool enter the ratings, the win rates and the agreement:
//! gold items (attention checks), surplus judgments and onboarding answers are left out there.
//! The per-worker numbers count every judgment of the worker.
//!
//! - ratings: judgments of one dialogue; every answer that is a number is a rating on its
//!   question; per system and question n, mean, sample SD and the Student-t 95% interval of the
//!   mean;
//! - win rates: comparisons of two dialogues of different systems, folded into unordered system
//!   pairs whichever side each was shown on; a comparison without a choice is a tie. The p-value
//!   is the two-sided exact binomial test of the first system's wins against 0.5 over the pair's
//!   decided comparisons, as ParlAI's ACUTE-Eval analysis computes it;
//! - agreement: Krippendorff's alpha over items judged by at least two workers, per rating
//!   question at the interval level, and for comparisons at the nominal level with the chosen
//!   system as each worker's value;
//! - label agreement: for each question answered with text or yes/no (a category, not a number),
//!   nominal Krippendorff's alpha and Fleiss' kappa over items answered by at least two workers,
//!   overall and per answer (the answer against all others), with the number of items and the
//!   fewest and most workers per item. A question none of whose answers repeats is free text and
//!   is left out; answers that are lists (several choices) are left out;
//! - turn-label agreement: for checkbox annotations of turns (dialogue acts, error labels), each
//!   turn of each item is a unit and each worker's ticked labels their value: overall, the exact
//!   set of labels ticked (nominal); per label, ticked or not (nominal alpha and Fleiss' kappa of
//!   that yes/no variable). A turn a worker saw and left unticked counts as "no label";
//! - span agreement: for span annotation (the `spans` answer: slot names on character ranges of
//!   utterances), each character of an item's utterance that at least one worker marked is a unit
//!   (whitespace left out), each worker of the item labels it with the slot of the span covering it
//!   or `(none)`; nominal agreement overall and per slot. Characters nobody marked are left out,
//!   so the numbers measure agreement on what was marked, not on the unmarked rest of the text;
//! - the leaderboard of the comparisons and arena battles is not here but in the report's own
//!   `leaderboard`, which ranks them with the imported votes ([`crate::leaderboard`]);
//! - a worker is flagged as straight-lining when they made at least three rating judgments with
//!   numeric answers and every one of those answers, on every question, is the same point.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use wozkit_core::evaluation::Span;
use wozkit_core::event::{Event, EventKind};

use super::evaluation::{Agreement, PairResult, RankingOptions, agreement, win_rates};
use super::judge_agreement::{JudgeAgreement, judge_agreement};
use crate::judgments::{JudgmentRow, categorical_answers};
use crate::stats::agreement::{CategoryAgreement, LabelAgreement, Level, label_agreement};
use crate::stats::{mean, mean_ci, median, sd};
use crate::votes::Vote;

/// The level of the rating intervals.
pub const CI_LEVEL: f64 = 0.95;

/// The evaluation part of a report (present only when the logs hold a judgment).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JudgmentsReport {
    /// Participant logs read (test participants left out unless asked for).
    pub participant_logs: usize,
    /// Every judgment, gold and surplus included.
    pub judgments: usize,
    /// Judgments counted towards their item (item pool, not surplus, not void).
    pub counted: usize,
    /// Void arena battles (a system failed a turn): kept, in no number.
    pub void: usize,
    /// Rating statistics by system, then by question.
    pub ratings: BTreeMap<String, BTreeMap<String, RatingSummary>>,
    /// The ACUTE-Eval grid: one entry per unordered pair of systems compared.
    pub win_rates: Vec<PairResult>,
    /// Agreement on each rating question (interval level).
    pub rating_agreement: BTreeMap<String, Agreement>,
    /// Agreement on the system chosen in comparisons (nominal level); `None` without comparisons.
    pub comparison_agreement: Option<Agreement>,
    /// Agreement on each categorical question (text or yes/no answers), overall and per answer.
    pub label_agreement: BTreeMap<String, LabelAgreement>,
    /// Agreement on the checkbox labels of turns; `None` without such labels.
    pub turn_label_agreement: Option<TurnLabelAgreement>,
    /// Agreement on the slots of marked characters in span annotation; `None` without spans.
    pub span_agreement: Option<LabelAgreement>,
    /// Agreement on the dialogue acts of turns (`task: turn_acts`, each labelled turn a unit):
    /// on the set of acts, and per act (ticked or not); `None` without act labels.
    pub act_agreement: Option<TurnLabelAgreement>,
    /// One entry per worker, by participant id.
    pub workers: Vec<WorkerSummary>,
    pub onboarding: Onboarding,
    /// Participants screened out, by reason (`onboarding`, `gold`, `blocklist`).
    pub screened_out: BTreeMap<String, usize>,
    /// Judgments submitted after their lease expired when the item was complete.
    pub surplus: usize,
    /// Items given back unjudged.
    pub returned: usize,
}

/// Agreement on the checkbox labels of turns (each turn of each item a unit).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnLabelAgreement {
    /// Agreement on the exact set of labels ticked (the set as one category); its `categories`
    /// are the sets, joined by `+`, with `(none)` for no label.
    pub sets: LabelAgreement,
    /// Per label: ticked or not, over the same units.
    pub labels: BTreeMap<String, CategoryAgreement>,
}

/// Ratings of one system on one question.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RatingSummary {
    pub n: usize,
    pub mean: Option<f64>,
    pub sd: Option<f64>,
    /// The Student-t 95% interval of the mean; `None` below two ratings.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// What one worker did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerSummary {
    pub participant: String,
    /// The platform's worker id, when known.
    pub worker_id: Option<String>,
    /// Judgments made, gold and surplus included.
    pub judgments: usize,
    pub gold_judged: usize,
    pub gold_correct: usize,
    /// `gold_correct / gold_judged`; `None` without gold judgments.
    pub gold_accuracy: Option<f64>,
    /// Median time from claim to submit, in seconds.
    pub median_seconds: Option<f64>,
    /// Every numeric answer of at least three rating judgments is the same point.
    pub straight_lining: bool,
}

/// The onboarding test.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Onboarding {
    pub taken: usize,
    pub passed: usize,
}

/// What the report keeps of the participant logs it has read.
#[derive(Default)]
pub struct JudgmentsCollector {
    logs: usize,
    rows: Vec<JudgmentRow>,
    /// Model judges' answers: in no number of this section (see [`super::judge_agreement`]).
    model_rows: Vec<JudgmentRow>,
    onboarding: Onboarding,
    screened_out: BTreeMap<String, usize>,
    returned: usize,
}

impl JudgmentsCollector {
    /// Adds one participant log (or model judge's log): its rows (from
    /// [`crate::judgments::log_rows`]) and its events.
    pub fn add(&mut self, events: &[Event], rows: Vec<JudgmentRow>) {
        if crate::judgments::judge_log_owner(events).is_some() {
            self.model_rows
                .extend(rows.into_iter().filter(|r| r.is_model()));
            return;
        }
        self.logs += 1;
        for event in events {
            match &event.kind {
                EventKind::OnboardingDone { passed, .. } => {
                    self.onboarding.taken += 1;
                    self.onboarding.passed += usize::from(*passed);
                }
                EventKind::ScreenedOut { reason } => {
                    let name = serde_json::to_value(reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    *self.screened_out.entry(name).or_default() += 1;
                }
                EventKind::ItemReturned { .. } => self.returned += 1,
                _ => {}
            }
        }
        self.rows
            .extend(rows.into_iter().filter(|r| !r.onboarding && !r.is_model()));
    }

    /// The model judges' agreement with the people read so far; `None` without a judge's answer.
    pub fn judge_agreement(&self, ranking: RankingOptions) -> Option<JudgeAgreement> {
        judge_agreement(&self.rows, &self.model_rows, ranking)
    }

    /// The people's judgment rows read so far (onboarding answers left out).
    pub fn rows(&self) -> &[JudgmentRow] {
        &self.rows
    }

    /// The report part; `None` when no judgment was read.
    pub fn report(self) -> Option<JudgmentsReport> {
        if self.rows.is_empty() {
            return None;
        }
        let counted: Vec<&JudgmentRow> = self
            .rows
            .iter()
            .filter(|r| r.counted && !r.gold && !r.surplus && !r.void)
            .collect();
        let (ratings, rating_agreement) = rating_numbers(&counted);
        let (win_rates, comparison_agreement) = comparison_numbers(&counted);
        Some(JudgmentsReport {
            participant_logs: self.logs,
            judgments: self.rows.len(),
            counted: counted.len(),
            void: self.rows.iter().filter(|r| r.void).count(),
            ratings,
            win_rates,
            rating_agreement,
            comparison_agreement,
            label_agreement: answer_agreement(&counted),
            turn_label_agreement: turn_label_agreement(&counted),
            span_agreement: span_agreement(&counted),
            act_agreement: act_agreement(&counted),
            workers: workers(&self.rows),
            onboarding: self.onboarding,
            screened_out: self.screened_out,
            surplus: self.rows.iter().filter(|r| r.surplus).count(),
            returned: self.returned,
        })
    }
}

/// The numeric answers of a rating judgment, by question.
fn numeric_answers(row: &JudgmentRow) -> impl Iterator<Item = (&String, f64)> {
    row.answers
        .iter()
        .filter_map(|(q, v)| v.as_f64().map(|x| (q, x)))
}

type RatingNumbers = (
    BTreeMap<String, BTreeMap<String, RatingSummary>>,
    BTreeMap<String, Agreement>,
);

/// Per system and question: the summary; per question: agreement over items.
fn rating_numbers(counted: &[&JudgmentRow]) -> RatingNumbers {
    let mut values: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut units: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for row in counted.iter().filter(|r| !r.is_comparison()) {
        let Some(system) = &row.system else { continue };
        for (question, x) in numeric_answers(row) {
            values
                .entry((system.clone(), question.clone()))
                .or_default()
                .push(x);
            units
                .entry(question.clone())
                .or_default()
                .entry(row.item.clone())
                .or_default()
                .push(x);
        }
    }
    let mut ratings: BTreeMap<String, BTreeMap<String, RatingSummary>> = BTreeMap::new();
    for ((system, question), xs) in values {
        let ci = mean_ci(&xs, CI_LEVEL);
        let summary = RatingSummary {
            n: xs.len(),
            mean: mean(&xs),
            sd: sd(&xs),
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
        };
        ratings.entry(system).or_default().insert(question, summary);
    }
    let agreements = units
        .into_iter()
        .map(|(question, by_item)| {
            let a = agreement(by_item.into_values().collect(), Level::Interval, &[]);
            (question, a)
        })
        .collect();
    (ratings, agreements)
}

/// The win-rate grid and the agreement on the chosen system.
fn comparison_numbers(counted: &[&JudgmentRow]) -> (Vec<PairResult>, Option<Agreement>) {
    let comparisons: Vec<&JudgmentRow> = counted
        .iter()
        .copied()
        .filter(|r| r.is_comparison())
        .collect();
    if comparisons.is_empty() {
        return (Vec::new(), None);
    }
    let votes: Vec<Vote> = comparisons
        .iter()
        .filter_map(|r| {
            Some(Vote {
                session_id: String::new(),
                user_id: r.participant.clone().unwrap_or_default(),
                crs1: r.left_system.clone()?,
                crs2: r.right_system.clone()?,
                vote: r.choice_system.clone().unwrap_or_else(|| "tie".into()),
                feedback: String::new(),
            })
        })
        .collect();
    let systems: BTreeSet<&str> = comparisons
        .iter()
        .flat_map(|r| [r.left_system.as_deref(), r.right_system.as_deref()])
        .flatten()
        .collect();
    let code = |s: &str| systems.iter().position(|x| *x == s).map(|i| i as f64);
    let mut units: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for row in &comparisons {
        if let Some(value) = row.choice_system.as_deref().and_then(code) {
            units.entry(row.item.as_str()).or_default().push(value);
        }
    }
    let categories: Vec<f64> = (0..systems.len()).map(|i| i as f64).collect();
    let agreement = agreement(units.into_values().collect(), Level::Nominal, &categories);
    (win_rates(&votes), Some(agreement))
}

/// Per categorical question: agreement over items (free-text questions left out).
fn answer_agreement(counted: &[&JudgmentRow]) -> BTreeMap<String, LabelAgreement> {
    categorical_answers(counted.iter().copied())
        .into_iter()
        .map(|(question, by_item)| {
            let units: Vec<Vec<String>> = by_item.into_values().collect();
            (question, label_agreement(&units, &[]))
        })
        .collect()
}

/// The label of a character no span of a worker covers.
pub const NO_SLOT: &str = "(none)";

/// Agreement on the slot of each marked character of span annotations; `None` when no counted
/// judgment has a `spans` answer with a span.
fn span_agreement(counted: &[&JudgmentRow]) -> Option<LabelAgreement> {
    // Per item: each worker's spans; the characters anyone marked.
    type Marked = (Vec<Vec<Span>>, BTreeSet<(u32, u32)>);
    let mut items: BTreeMap<&str, Marked> = BTreeMap::new();
    for row in counted {
        let Some(value) = row.answers.get("spans") else {
            continue;
        };
        let Ok(spans) = serde_json::from_value::<Vec<Span>>(value.clone()) else {
            continue;
        };
        let (workers, marked) = items.entry(row.item.as_str()).or_default();
        for span in &spans {
            let chars = span.text.chars().map(char::is_whitespace);
            for (offset, space) in (span.start_index..span.end_index).zip(chars) {
                if !space {
                    marked.insert((span.turn, offset));
                }
            }
        }
        workers.push(spans);
    }
    if items.values().all(|(_, marked)| marked.is_empty()) {
        return None;
    }
    let mut units: Vec<Vec<&str>> = Vec::new();
    for (workers, marked) in items.values() {
        for &(turn, offset) in marked {
            let unit = workers
                .iter()
                .map(|spans| {
                    spans
                        .iter()
                        .find(|s| s.turn == turn && s.start_index <= offset && offset < s.end_index)
                        .map_or(NO_SLOT, |s| s.slot.as_str())
                })
                .collect();
            units.push(unit);
        }
    }
    Some(label_agreement(&units, &[]))
}

/// The name of a set of ticked labels as one category.
pub fn label_set(labels: &[String]) -> String {
    if labels.is_empty() {
        return "(none)".into();
    }
    let mut sorted: Vec<&str> = labels.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.join("+")
}

/// Agreement on the checkbox labels of turns; `None` when no judgment has any.
fn turn_label_agreement(counted: &[&JudgmentRow]) -> Option<TurnLabelAgreement> {
    let mut units: BTreeMap<(&str, &str, u32), Vec<&[String]>> = BTreeMap::new();
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for row in counted {
        for turn in row.turns.iter().filter(|t| t.score.is_none()) {
            names.extend(turn.labels.iter().map(String::as_str));
            units
                .entry((row.item.as_str(), turn.dialogue.as_str(), turn.turn))
                .or_default()
                .push(&turn.labels);
        }
    }
    set_agreement(&units, &names)
}

/// Agreement on the dialogue acts of `turn_acts` judgments (their `acts` answer): each item (a
/// turn) a unit, labelled by each of its counted judgments with the acts ticked; `None` when no
/// judgment has acts.
fn act_agreement(counted: &[&JudgmentRow]) -> Option<TurnLabelAgreement> {
    let mut acts: BTreeMap<&str, Vec<Vec<String>>> = BTreeMap::new();
    for row in counted {
        let Some(Value::Array(list)) = row.answers.get("acts") else {
            continue;
        };
        let ticked = list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        acts.entry(row.item.as_str()).or_default().push(ticked);
    }
    let names: BTreeSet<&str> = acts
        .values()
        .flatten()
        .flatten()
        .map(String::as_str)
        .collect();
    let units: BTreeMap<&str, Vec<&[String]>> = acts
        .iter()
        .map(|(item, labels)| (*item, labels.iter().map(Vec::as_slice).collect()))
        .collect();
    set_agreement(&units, &names)
}

/// Agreement on sets of labels over units (each a list of the label sets its annotators gave):
/// on the set as one category, and per label, ticked or not. `None` without any label.
fn set_agreement<K>(
    units: &BTreeMap<K, Vec<&[String]>>,
    names: &BTreeSet<&str>,
) -> Option<TurnLabelAgreement> {
    if names.is_empty() {
        return None;
    }
    let sets: Vec<Vec<String>> = units
        .values()
        .map(|u| u.iter().map(|labels| label_set(labels)).collect())
        .collect();
    let labels = names
        .iter()
        .map(|name| {
            let ticked: Vec<Vec<&str>> = units
                .values()
                .map(|u| {
                    u.iter()
                        .map(|labels| {
                            if labels.iter().any(|l| l == name) {
                                "yes"
                            } else {
                                "no"
                            }
                        })
                        .collect()
                })
                .collect();
            let mut yes = label_agreement(&ticked, &["yes", "no"]);
            let category = yes.categories.remove("yes")?;
            Some((name.to_string(), category))
        })
        .collect::<Option<BTreeMap<_, _>>>()?;
    Some(TurnLabelAgreement {
        sets: label_agreement(&sets, &[]),
        labels,
    })
}

/// Per-worker numbers, by participant id.
fn workers(rows: &[JudgmentRow]) -> Vec<WorkerSummary> {
    let mut by_worker: BTreeMap<&str, Vec<&JudgmentRow>> = BTreeMap::new();
    for row in rows {
        let id = row.participant.as_deref().unwrap_or_default();
        by_worker.entry(id).or_default().push(row);
    }
    by_worker
        .into_iter()
        .map(|(id, rows)| {
            let gold: Vec<&&JudgmentRow> = rows.iter().filter(|r| r.gold).collect();
            let gold_correct = gold.iter().filter(|r| r.gold_correct == Some(true)).count();
            let seconds: Vec<f64> = rows.iter().filter_map(|r| r.seconds).collect();
            WorkerSummary {
                participant: id.to_string(),
                worker_id: rows.iter().find_map(|r| r.worker_id.clone()),
                judgments: rows.len(),
                gold_judged: gold.len(),
                gold_correct,
                gold_accuracy: (!gold.is_empty()).then(|| gold_correct as f64 / gold.len() as f64),
                median_seconds: median(&seconds),
                straight_lining: straight_lining(&rows),
            }
        })
        .collect()
}

/// At least three rating judgments with numeric answers, and all those answers one value.
fn straight_lining(rows: &[&JudgmentRow]) -> bool {
    let rated: Vec<Vec<f64>> = rows
        .iter()
        .filter(|r| !r.is_comparison() && !r.gold)
        .map(|r| numeric_answers(r).map(|(_, x)| x).collect::<Vec<f64>>())
        .filter(|xs| !xs.is_empty())
        .collect();
    let mut all = rated.iter().flatten();
    let Some(first) = all.next() else {
        return false;
    };
    rated.len() >= 3 && all.all(|x| x == first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rating(worker: &str, item: &str, answers: &[(&str, serde_json::Value)]) -> JudgmentRow {
        JudgmentRow {
            page: Some("rate".into()),
            claimed_at_ms: Some(0),
            submitted_at_ms: 1000,
            seconds: Some(1.0),
            ..JudgmentRow::rated(worker, item, "sys", answers)
        }
    }

    #[test]
    fn straight_lining_needs_three_judgments_all_on_one_point() {
        let same = [("a", json!(3)), ("b", json!(3)), ("note", json!("ok"))];
        let rows: Vec<JudgmentRow> = ["i1", "i2", "i3"]
            .iter()
            .map(|i| rating("w", i, &same))
            .collect();
        let refs: Vec<&JudgmentRow> = rows.iter().collect();
        assert!(straight_lining(&refs));
        assert!(!straight_lining(&refs[..2]));
        let varied = rating("w", "i4", &[("a", json!(3)), ("b", json!(4))]);
        let mut more = refs.clone();
        more.push(&varied);
        assert!(!straight_lining(&more));
    }
}
