//! The author's mistakes in a list of questions, found when the study loads: bounds the wrong way
//! round, scales too short or too long, duplicate or missing options, keys that do not apply to the
//! question's kind. Each problem names a JSON Pointer, which the loader turns into
//! `FILE:LINE:COL`, so any page that holds questions is checked the same way.

use std::collections::HashMap;

use super::{Question, QuestionKind, SCALE_POINTS};

/// One mistake, at a JSON Pointer into the study.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProblem {
    pub pointer: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Form field names the questionnaire form uses itself, which no question may take.
pub const RESERVED_IDS: &[&str] = &["step"];

use QuestionKind::{Choice, Comment, Likert, Matrix, Multiple, Number, Ranking, Text};

/// Which kinds each optional key applies to.
const KEYS: &[(&str, &[QuestionKind])] = &[
    ("points", &[Likert, Matrix]),
    ("low", &[Likert, Matrix]),
    ("mid", &[Likert, Matrix]),
    ("high", &[Likert, Matrix]),
    ("labels", &[Likert, Matrix]),
    ("reverse", &[Likert, Matrix]),
    ("options", &[Choice, Multiple, Ranking]),
    ("shuffle", &[Choice, Multiple, Ranking, Matrix]),
    ("min_choices", &[Multiple]),
    ("max_choices", &[Multiple]),
    ("min_words", &[Text]),
    ("max_words", &[Text, Comment]),
    ("min", &[Number]),
    ("max", &[Number]),
    ("integer", &[Number]),
    ("rows", &[Matrix]),
];

/// The optional keys a question sets (to a value other than the default).
fn keys_set(q: &Question) -> Vec<&'static str> {
    let set = [
        ("points", q.points.is_some()),
        ("low", q.low.is_some()),
        ("mid", q.mid.is_some()),
        ("high", q.high.is_some()),
        ("labels", !q.labels.is_empty()),
        ("reverse", q.reverse),
        ("options", !q.options.is_empty()),
        ("shuffle", q.shuffle),
        ("min_choices", q.min_choices.is_some()),
        ("max_choices", q.max_choices.is_some()),
        ("min_words", q.min_words.is_some()),
        ("max_words", q.max_words.is_some()),
        ("min", q.min.is_some()),
        ("max", q.max.is_some()),
        ("integer", q.integer),
        ("rows", !q.rows.is_empty()),
    ];
    set.into_iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| k)
        .collect()
}

/// Letters, digits, `_` and `-`: safe as a form field name, an HTML id and a report column, and
/// free of the `.` and `:` that answer keys add.
fn id_ok(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct Rules {
    problems: Vec<RuleProblem>,
}

impl Rules {
    fn err(&mut self, pointer: String, message: String, hint: Option<&str>) {
        self.problems.push(RuleProblem {
            pointer,
            message,
            hint: hint.map(str::to_string),
        });
    }

    /// Reports ids that are not usable or not unique; `what` names them in the message.
    fn ids<'a>(&mut self, what: &str, base: &str, ids: impl Iterator<Item = &'a str>) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, id) in ids.enumerate() {
            if !id_ok(id) {
                self.err(
                    format!("{base}/{i}/id"),
                    format!("{what} id `{id}` may use only letters, digits, `_` and `-`"),
                    Some("it names the form field and the answer"),
                );
            } else if what == "question" && RESERVED_IDS.contains(&id) {
                self.err(
                    format!("{base}/{i}/id"),
                    format!("question id `{id}` is reserved for the form itself"),
                    Some("choose another id"),
                );
            }
            if let Some(first) = seen.insert(id, i) {
                self.err(
                    format!("{base}/{i}/id"),
                    format!("duplicate {what} id `{id}`"),
                    Some(&format!("the first is {base}/{first}; ids must be unique")),
                );
            }
        }
    }

    fn question(&mut self, q: &Question, at: &str) {
        let kind = q.kind.as_str();
        for key in keys_set(q) {
            let Some((_, kinds)) = KEYS.iter().find(|(k, _)| *k == key) else {
                continue;
            };
            if !kinds.contains(&q.kind) {
                let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
                let message = if key == "reverse" {
                    format!("`reverse` applies only to scale questions, not to a `{kind}` question")
                } else {
                    format!("`{key}` does not apply to a `{kind}` question")
                };
                self.err(
                    format!("{at}/{key}"),
                    message,
                    Some(&format!("it applies to: {}", names.join(", "))),
                );
            }
        }
        if q.kind == Comment && q.required == Some(true) {
            self.err(
                format!("{at}/required"),
                "a comment box is always optional".into(),
                Some("use `kind: text` for an answer that is required"),
            );
        }
        if q.kind.is_scale() {
            self.scale(q, at);
        }
        if q.kind.has_options() {
            self.options(q, at);
        }
        match q.kind {
            Multiple => self.bounds(
                at,
                "min_choices",
                q.min_choices,
                "max_choices",
                q.max_choices,
            ),
            Text | Comment => self.bounds(at, "min_words", q.min_words, "max_words", q.max_words),
            Number => {
                if let (Some(min), Some(max)) = (q.min, q.max)
                    && min > max
                {
                    self.err(
                        format!("{at}/min"),
                        format!("`min` ({min}) is more than `max` ({max})"),
                        None,
                    );
                }
            }
            Matrix => {
                if q.rows.is_empty() {
                    self.err(
                        format!("{at}/rows"),
                        "a matrix question needs rows".into(),
                        Some("add `rows:` with an `id` and a `text` for each"),
                    );
                }
                self.ids(
                    "row",
                    &format!("{at}/rows"),
                    q.rows.iter().map(|r| r.id.as_str()),
                );
            }
            _ => {}
        }
        if q.kind == Multiple {
            let n = q.options.len();
            if let Some(min) = q.min_choices.filter(|m| *m as usize > n) {
                self.err(
                    format!("{at}/min_choices"),
                    format!("`min_choices` is {min} but there are only {n} options"),
                    None,
                );
            }
        }
    }

    fn bounds(&mut self, at: &str, lo: &str, min: Option<u32>, hi: &str, max: Option<u32>) {
        if max == Some(0) {
            self.err(
                format!("{at}/{hi}"),
                format!("`{hi}` must be at least 1"),
                None,
            );
        }
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            self.err(
                format!("{at}/{lo}"),
                format!("`{lo}` ({min}) is more than `{hi}` ({max})"),
                None,
            );
        }
    }

    fn scale(&mut self, q: &Question, at: &str) {
        let n = q.points();
        if !SCALE_POINTS.contains(&n) {
            self.err(
                format!("{at}/points"),
                format!(
                    "a scale needs {} to {} points, not {n}",
                    SCALE_POINTS.start(),
                    SCALE_POINTS.end()
                ),
                None,
            );
        }
        if !q.labels.is_empty() {
            if q.low.is_some() || q.mid.is_some() || q.high.is_some() {
                self.err(
                    format!("{at}/labels"),
                    "give either `labels` or `low`/`mid`/`high`, not both".into(),
                    None,
                );
            }
            if q.labels.len() != n as usize {
                self.err(
                    format!("{at}/labels"),
                    format!("{} labels for a scale of {n} points", q.labels.len()),
                    Some("give one label per point, low to high"),
                );
            }
        }
        if q.mid.is_some() && n.is_multiple_of(2) {
            self.err(
                format!("{at}/mid"),
                format!("a `mid` label needs an odd number of points, not {n}"),
                Some("label every point with `labels` instead"),
            );
        }
    }

    fn options(&mut self, q: &Question, at: &str) {
        let min = if q.kind == Ranking { 2 } else { 1 };
        if q.options.len() < min {
            self.err(
                format!("{at}/options"),
                format!(
                    "a `{}` question needs at least {min} options",
                    q.kind.as_str()
                ),
                None,
            );
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, o) in q.options.iter().enumerate() {
            let text = o.trim();
            if text.is_empty() {
                self.err(
                    format!("{at}/options/{i}"),
                    "an option needs a text".into(),
                    None,
                );
            } else if let Some(first) = seen.insert(text, i) {
                self.err(
                    format!("{at}/options/{i}"),
                    format!("duplicate option `{text}`"),
                    Some(&format!(
                        "the first is {at}/options/{first}; options must differ"
                    )),
                );
            }
        }
    }
}

/// Every mistake in `questions`, which sit at the JSON Pointer `base` (e.g. `/survey/questions`).
pub fn check(questions: &[Question], base: &str) -> Vec<RuleProblem> {
    let mut rules = Rules { problems: vec![] };
    rules.ids("question", base, questions.iter().map(|q| q.id.as_str()));
    for (i, q) in questions.iter().enumerate() {
        rules.question(q, &format!("{base}/{i}"));
    }
    rules.problems
}
