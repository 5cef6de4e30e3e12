//! Form values → typed answers, or one [`Fault`] per question, which the server words for the
//! participant in the page's language.
//!
//! The input is what a browser posts, as `(name, value)` pairs in order (a `multiple` question
//! posts its name once per ticked box). Field names: the question id; `<id>.<row>` for a matrix
//! row; `<id>.<i>` for the rank of option `i` of a ranking. Nothing here trusts the input: any
//! pairs give answers or messages, never a panic (property-tested below).

use std::collections::HashSet;

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::{MAX_TEXT_CHARS, Question, QuestionKind};

/// One question's answer, typed by its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A point of a `likert` scale, 1-based.
    Point(u32),
    /// The option picked in a `choice`.
    Choice(String),
    /// The options ticked in a `multiple`, in the written order.
    Choices(Vec<String>),
    /// A `text` or `comment`, trimmed.
    Text(String),
    /// A `number`.
    Number(f64),
    /// A `matrix`: row id → point, in the written order of the rows answered.
    Rows(IndexMap<String, u32>),
    /// A `ranking`: every option, best first.
    Ranking(Vec<String>),
}

/// A page's checked answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answers {
    /// Question id → answer, in question order; unanswered optional questions are absent.
    pub values: IndexMap<String, Answer>,
    /// Question id → the options (or matrix row ids) in the order shown, for shuffled questions.
    pub shown: IndexMap<String, Vec<String>>,
}

/// A problem with one question's answer, worded for the participant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub question: String,
    pub message: String,
}

/// What is wrong with one question's answer. The server words each in the page's language (the
/// `answer-*` messages of its catalogues), so a refused questionnaire speaks the study's language.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// A required question left unanswered.
    Missing,
    /// A required matrix left unanswered.
    MissingRows,
    /// A required ranking left unanswered.
    MissingRanks,
    /// Several different values where the form shows one field (only a hand-made request).
    Several(Single),
    /// A point outside a scale of `points`.
    Point { points: u32 },
    /// A matrix row's point outside its scale of `points`.
    RowPoint { points: u32 },
    /// A `choice` answered with something that is not one of its options.
    NotAnOption,
    /// A `multiple` ticked with something that is not one of its options.
    NotShown,
    /// A `multiple` with too few or too many options ticked (`min` may be 0).
    Choices { min: u32, max: Option<u32> },
    /// A text over `max` characters.
    TooLong { max: usize },
    /// A text of `wrote` words, outside the limits.
    Words {
        min: Option<u32>,
        max: Option<u32>,
        wrote: u32,
    },
    /// Not a number (a whole one when `integer`) within the limits.
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    /// A required matrix with `left` rows unanswered.
    RowsLeft { left: usize },
    /// A ranking whose ranks are not all different, or not from 1 to `options`.
    RankEach { options: usize },
    /// A ranking with some of its `options` ranked and others not.
    RankAll { options: usize },
}

/// Which field came several times (see [`Fault::Several`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Single {
    Point,
    Option,
    Answer,
    Number,
    RowPoint,
    Rank,
}

/// One question's fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Faulted {
    pub question: String,
    pub fault: Fault,
}

impl Answers {
    /// The answers as stored in the participant's log: one key per question (a matrix row per
    /// `<id>.<row>`, so each row is an item of its own, scored like a Likert question) and the
    /// order shown under `<id>:shown`.
    pub fn to_event(&self, questions: &[Question]) -> IndexMap<String, Value> {
        let mut out = IndexMap::new();
        for q in questions {
            if let Some(answer) = self.values.get(&q.id) {
                match answer {
                    Answer::Point(p) => {
                        out.insert(q.id.clone(), json!(p));
                    }
                    Answer::Choice(s) | Answer::Text(s) => {
                        out.insert(q.id.clone(), json!(s));
                    }
                    Answer::Choices(list) | Answer::Ranking(list) => {
                        out.insert(q.id.clone(), json!(list));
                    }
                    Answer::Number(n) => {
                        out.insert(q.id.clone(), number_value(*n));
                    }
                    Answer::Rows(rows) => {
                        for (row, p) in rows {
                            out.insert(format!("{}.{row}", q.id), json!(p));
                        }
                    }
                }
            }
            if let Some(order) = self.shown.get(&q.id) {
                out.insert(q.shown_key(), json!(order));
            }
        }
        out
    }

    /// The form a browser would post for these answers: the inverse of [`check`], for tests and
    /// simulated participants.
    pub fn to_form(&self, questions: &[Question]) -> Vec<(String, String)> {
        let mut out = vec![];
        for q in questions {
            let Some(answer) = self.values.get(&q.id) else {
                continue;
            };
            match answer {
                Answer::Point(p) => out.push((q.id.clone(), p.to_string())),
                Answer::Choice(s) | Answer::Text(s) => out.push((q.id.clone(), s.clone())),
                Answer::Number(n) => out.push((q.id.clone(), n.to_string())),
                Answer::Choices(list) => {
                    out.extend(list.iter().map(|s| (q.id.clone(), s.clone())));
                }
                Answer::Rows(rows) => {
                    for row in &q.rows {
                        if let Some(p) = rows.get(&row.id) {
                            out.push((q.row_field(row), p.to_string()));
                        }
                    }
                }
                Answer::Ranking(list) => {
                    for (rank, option) in list.iter().enumerate() {
                        if let Some(i) = q.options.iter().position(|o| o == option) {
                            out.push((q.rank_field(i), (rank + 1).to_string()));
                        }
                    }
                }
            }
        }
        out
    }
}

/// A whole number as a JSON integer (`42`, not `42.0`), anything else as a float.
fn number_value(n: f64) -> Value {
    // 2^53: beyond it not every whole f64 is exact, so the conversion would be a lie.
    if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_992.0 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// Checks a page's posted form against its questions; every fault is reported at once, one per
/// question. `seed` gives the order shuffled questions were shown in (see
/// [`Question::shown_order`]), recorded in the answers.
pub fn check(
    questions: &[Question],
    fields: &[(String, String)],
    seed: u64,
) -> Result<Answers, Vec<Faulted>> {
    let mut answers = Answers::default();
    let mut problems = vec![];
    for q in questions {
        if q.shuffle && q.kind.can_shuffle() {
            let order = q.shown_order(seed).into_iter();
            let shown = if q.kind == QuestionKind::Matrix {
                order
                    .filter_map(|i| q.rows.get(i))
                    .map(|r| r.id.clone())
                    .collect()
            } else {
                order.filter_map(|i| q.options.get(i)).cloned().collect()
            };
            answers.shown.insert(q.id.clone(), shown);
        }
        match answer(q, fields) {
            Ok(Some(a)) => {
                answers.values.insert(q.id.clone(), a);
            }
            Ok(None) if q.is_required() => problems.push(Faulted {
                question: q.id.clone(),
                fault: missing(q),
            }),
            Ok(None) => {}
            Err(fault) => problems.push(Faulted {
                question: q.id.clone(),
                fault,
            }),
        }
    }
    if problems.is_empty() {
        Ok(answers)
    } else {
        Err(problems)
    }
}

/// The fault of a required question left unanswered.
fn missing(q: &Question) -> Fault {
    match q.kind {
        QuestionKind::Multiple => Fault::Choices {
            min: q.min_choices.unwrap_or(1).max(1),
            max: q.max_choices,
        },
        QuestionKind::Matrix => Fault::MissingRows,
        QuestionKind::Ranking => Fault::MissingRanks,
        _ => Fault::Missing,
    }
}

/// The non-empty values posted under `name`, trimmed.
fn values<'a>(fields: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The one value posted under `name`: `None` when empty, an error when several differ (a form
/// shows one field; several come only from a hand-made request).
fn single<'a>(
    fields: &'a [(String, String)],
    name: &str,
    several: Single,
) -> Result<Option<&'a str>, Fault> {
    let vs = values(fields, name);
    match vs.as_slice() {
        [] => Ok(None),
        [first, rest @ ..] if rest.iter().all(|v| v == first) => Ok(Some(first)),
        _ => Err(Fault::Several(several)),
    }
}

/// A point from 1 to `points`.
fn point(raw: &str, points: u32) -> Option<u32> {
    raw.parse::<u32>().ok().filter(|p| (1..=points).contains(p))
}

/// `Ok(None)`: nothing was answered. `Err`: what is wrong, shown next to the question.
fn answer(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    match q.kind {
        QuestionKind::Likert => {
            let n = q.points();
            let Some(raw) = single(fields, &q.id, Single::Point)? else {
                return Ok(None);
            };
            point(raw, n)
                .map(|p| Some(Answer::Point(p)))
                .ok_or(Fault::Point { points: n })
        }
        QuestionKind::Choice => {
            let Some(raw) = single(fields, &q.id, Single::Option)? else {
                return Ok(None);
            };
            q.options
                .iter()
                .find(|o| o.trim() == raw)
                .map(|o| Some(Answer::Choice(o.clone())))
                .ok_or(Fault::NotAnOption)
        }
        QuestionKind::Multiple => multiple(q, fields),
        QuestionKind::Text | QuestionKind::Comment => text(q, fields),
        QuestionKind::Number => number(q, fields),
        QuestionKind::Matrix => matrix(q, fields),
        QuestionKind::Ranking => ranking(q, fields),
    }
}

fn multiple(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    let picked: HashSet<&str> = values(fields, &q.id).into_iter().collect();
    if picked.is_empty() {
        return Ok(None);
    }
    if picked
        .iter()
        .any(|p| !q.options.iter().any(|o| o.trim() == *p))
    {
        return Err(Fault::NotShown);
    }
    let chosen: Vec<String> = q
        .options
        .iter()
        .filter(|o| picked.contains(o.trim()))
        .cloned()
        .collect();
    let count = u32::try_from(chosen.len()).unwrap_or(u32::MAX);
    let min = q.min_choices.unwrap_or(0);
    if count < min || q.max_choices.is_some_and(|max| count > max) {
        return Err(Fault::Choices {
            min,
            max: q.max_choices,
        });
    }
    Ok(Some(Answer::Choices(chosen)))
}

fn text(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    let Some(raw) = single(fields, &q.id, Single::Answer)? else {
        return Ok(None);
    };
    if raw.chars().count() > MAX_TEXT_CHARS {
        return Err(Fault::TooLong {
            max: MAX_TEXT_CHARS,
        });
    }
    let n = u32::try_from(raw.split_whitespace().count()).unwrap_or(u32::MAX);
    let too_few = q.min_words.is_some_and(|min| n < min);
    let too_many = q.max_words.is_some_and(|max| n > max);
    if too_few || too_many {
        return Err(Fault::Words {
            min: q.min_words,
            max: q.max_words,
            wrote: n,
        });
    }
    Ok(Some(Answer::Text(raw.to_string())))
}

fn number(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    let Some(raw) = single(fields, &q.id, Single::Number)? else {
        return Ok(None);
    };
    let wrong = || Fault::Number {
        integer: q.integer,
        min: q.min,
        max: q.max,
    };
    let n: f64 = raw.parse().map_err(|_| wrong())?;
    let whole = n.fract() == 0.0;
    let in_range = q.min.is_none_or(|min| n >= min) && q.max.is_none_or(|max| n <= max);
    if !n.is_finite() || (q.integer && !whole) || !in_range {
        return Err(wrong());
    }
    Ok(Some(Answer::Number(n)))
}

fn matrix(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    let n = q.points();
    let mut rows = IndexMap::new();
    for row in &q.rows {
        let name = q.row_field(row);
        let Some(raw) = single(fields, &name, Single::RowPoint)? else {
            continue;
        };
        let p = point(raw, n).ok_or(Fault::RowPoint { points: n })?;
        rows.insert(row.id.clone(), p);
    }
    let left = q.rows.len() - rows.len();
    if rows.is_empty() {
        Ok(None)
    } else if q.is_required() && left > 0 {
        Err(Fault::RowsLeft { left })
    } else {
        Ok(Some(Answer::Rows(rows)))
    }
}

fn ranking(q: &Question, fields: &[(String, String)]) -> Result<Option<Answer>, Fault> {
    let n = q.options.len();
    let wrong = || Fault::RankEach { options: n };
    let mut ranked: Vec<(usize, &String)> = vec![];
    for (i, option) in q.options.iter().enumerate() {
        let name = q.rank_field(i);
        if let Some(raw) = single(fields, &name, Single::Rank)? {
            let rank = raw
                .parse::<usize>()
                .ok()
                .filter(|r| (1..=n).contains(r))
                .ok_or_else(wrong)?;
            ranked.push((rank, option));
        }
    }
    if ranked.is_empty() {
        return Ok(None);
    }
    if ranked.len() < n {
        return Err(Fault::RankAll { options: n });
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    if ranked.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(wrong());
    }
    Ok(Some(Answer::Ranking(
        ranked.into_iter().map(|(_, o)| o.clone()).collect(),
    )))
}
