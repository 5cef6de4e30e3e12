//! A simulated user's answers to the questions after a conversation (a chat or arena page's
//! `questions`): one prompt per question, showing the goal, the conversation, the question and
//! what its answer may be; the reply read into the form a participant would post, and checked
//! by the same rules as a person's answers ([`crate::questions::check`]). A matrix is asked for
//! one `STATEMENT: POINT` line per statement, a ranking for every option once, best first.

use super::{SimulatedUser, render, transcript};
use crate::event::Role;
use crate::questions::{Answer, Answers, Question, QuestionKind};

/// The placeholders of a simulated user's answer prompt.
pub const ANSWER_PLACEHOLDERS: [&str; 4] = ["goal", "conversation", "question", "choices"];

/// The answer prompt used when a simulated user gives none.
pub const DEFAULT_ANSWER_PROMPT: &str = "You played a user talking to an assistant, to reach \
this goal:\n{goal}\n\nThe conversation:\n{conversation}\n\nAs that user, answer this question \
about the conversation:\n{question}\n\n{choices}";

/// Why a reply could not be read as an answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadAnswer {
    #[error("question `{question}`: the reply holds no number from 1 to {points}: `{reply}`")]
    Point {
        question: String,
        points: u32,
        reply: String,
    },
    #[error("question `{question}`: the reply names none of the options: `{reply}`")]
    NoOption { question: String, reply: String },
    #[error("question `{question}`: the reply holds no number: `{reply}`")]
    NoNumber { question: String, reply: String },
    #[error("question `{question}`: the reply is empty")]
    Empty { question: String },
    #[error(
        "question `{question}`: the reply does not give each of the {rows} statements a point \
         from 1 to {points} (one `STATEMENT: POINT` line each, or {rows} numbers in order): `{reply}`"
    )]
    Rows {
        question: String,
        rows: usize,
        points: u32,
        reply: String,
    },
    #[error(
        "question `{question}`: the reply does not order all {options} options (missing: {missing}): `{reply}`"
    )]
    Order {
        question: String,
        options: usize,
        missing: String,
        reply: String,
    },
    /// Read, but refused by the question's own rules (word limits, bounds, how many options).
    #[error("question `{question}`: the answer `{reply}` breaks the question's rules ({fault})")]
    Rules {
        question: String,
        reply: String,
        fault: String,
    },
}

/// What an answer to `q` may be, in words for the prompt (every kind of question is asked).
pub fn choices(q: &Question) -> String {
    let list = |options: &[String]| {
        options
            .iter()
            .map(|o| format!("- {o}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match q.kind {
        QuestionKind::Likert => {
            format!(
                "Answer with one number from 1 to {}{}, and nothing else.",
                q.points(),
                scale(q)
            )
        }
        QuestionKind::Matrix => {
            let rows = q
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| format!("{}. {}", i + 1, r.text))
                .collect::<Vec<_>>()
                .join("\n");
            format!(
                "Rate each of these statements with one number from 1 to {}{}. Answer with one \
                 line per statement, its number, a colon and your rating (e.g. `1: 4`), and \
                 nothing else:\n{rows}",
                q.points(),
                scale(q)
            )
        }
        QuestionKind::Ranking => format!(
            "Order these options from best to worst: write every option once, as written, one \
             per line, best first, and nothing else:\n{}",
            list(&q.options)
        ),
        QuestionKind::Choice => format!(
            "Answer with exactly one of these options, as written, and nothing else:\n{}",
            list(&q.options)
        ),
        QuestionKind::Multiple => format!(
            "Answer with the options that apply, as written, one per line, and nothing else:\n{}",
            list(&q.options)
        ),
        QuestionKind::Number => {
            let mut what = if q.integer {
                "Answer with one whole number".to_string()
            } else {
                "Answer with one number".to_string()
            };
            match (q.min, q.max) {
                (Some(lo), Some(hi)) => what.push_str(&format!(" from {lo} to {hi}")),
                (Some(lo), None) => what.push_str(&format!(" of at least {lo}")),
                (None, Some(hi)) => what.push_str(&format!(" of at most {hi}")),
                (None, None) => {}
            }
            what.push_str(", and nothing else.");
            what
        }
        QuestionKind::Text => {
            let mut what = "Answer in a few words".to_string();
            match (q.min_words, q.max_words) {
                (Some(lo), Some(hi)) => what.push_str(&format!(" ({lo} to {hi} words)")),
                (Some(lo), None) => what.push_str(&format!(" (at least {lo} words)")),
                (None, Some(hi)) => what.push_str(&format!(" (at most {hi} words)")),
                (None, None) => {}
            }
            what.push('.');
            what
        }
        QuestionKind::Comment => {
            "Answer in one short sentence, or with the word none if you have nothing to add."
                .to_string()
        }
    }
}

/// The named points of `q`'s scale, as ` (1 = Low, 5 = High)`, or nothing.
fn scale(q: &Question) -> String {
    let named: Vec<String> = (1..=q.points())
        .filter_map(|p| q.point_label(p).map(|l| format!("{p} = {l}")))
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    }
}

impl SimulatedUser {
    /// The prompt asking for the answer to `q` after the conversation `dialogue`, given the
    /// goal's text.
    pub fn answer_prompt(&self, goal: &str, dialogue: &[(Role, String)], q: &Question) -> String {
        render(
            &self.answer_prompt,
            &[
                ("goal", goal),
                ("conversation", &transcript(dialogue)),
                ("question", &q.text),
                ("choices", &choices(q)),
            ],
        )
    }
}

/// Folds case and strips the quotes, bullets and punctuation a model puts around an option.
fn bare(text: &str) -> String {
    text.trim()
        .trim_start_matches(['-', '*', '•', ' '])
        .trim_matches(|c: char| c.is_whitespace() || "\"'“”‘’`.!,;:".contains(c))
        .to_lowercase()
}

/// The words of `text`, lower-cased, each with a space before and after (so that a phrase is
/// found only as whole words).
fn words(text: &str) -> String {
    let mut out = String::from(" ");
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        out.push_str(&w.to_lowercase());
        out.push(' ');
    }
    out
}

/// The option of `q` that `line` names: the option itself (case and quotes aside), else the one
/// option whose words the line holds (as whole words: "No" is not in "not sure").
fn option_in(q: &Question, line: &str) -> Option<String> {
    let bare_line = bare(line);
    if bare_line.is_empty() {
        return None;
    }
    if let Some(o) = q.options.iter().find(|o| bare(o) == bare_line) {
        return Some(o.clone());
    }
    let line = words(line);
    let mut found = q.options.iter().filter(|o| {
        let o = words(o);
        o.trim() != "" && line.contains(&o)
    });
    match (found.next(), found.next()) {
        (Some(o), None) => Some(o.clone()),
        _ => None,
    }
}

/// An optional question left unanswered: nothing, or for a matrix and a ranking each of its
/// fields empty (a form that posts one field per row or option posts them all).
fn unanswered(q: &Question) -> Vec<(String, String)> {
    match q.kind {
        QuestionKind::Matrix => q
            .rows
            .iter()
            .map(|r| (q.row_field(r), String::new()))
            .collect(),
        QuestionKind::Ranking => (0..q.options.len())
            .map(|i| (q.rank_field(i), String::new()))
            .collect(),
        _ => vec![],
    }
}

/// The whole numbers written in `text`, in order.
fn whole_numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|d| d.parse().ok())
        .collect()
}

/// A matrix's rows read from `text`: lines `STATEMENT: POINT` (the statement's number as
/// listed, then the point, e.g. `2: 4` or `2. 4`), else exactly one number per line, one line
/// per statement in the order listed. `None` when neither reading gives every row a point in
/// range.
fn matrix_rows(q: &Question, text: &str) -> Option<indexmap::IndexMap<String, u32>> {
    let points = u64::from(q.points());
    let lines: Vec<Vec<u64>> = text
        .lines()
        .map(whole_numbers)
        .filter(|n| !n.is_empty())
        .collect();
    let mut by_row: Vec<Option<u64>> = vec![None; q.rows.len()];
    if lines.iter().all(|n| n.len() >= 2) {
        for n in &lines {
            let (row, point) = (n[0], n[n.len() - 1]);
            let slot = usize::try_from(row)
                .ok()
                .and_then(|r| r.checked_sub(1))
                .and_then(|r| by_row.get_mut(r))?;
            *slot = Some(point);
        }
    } else if lines.len() == q.rows.len() && lines.iter().all(|n| n.len() == 1) {
        for (slot, n) in by_row.iter_mut().zip(&lines) {
            *slot = Some(n[0]);
        }
    }
    q.rows
        .iter()
        .zip(by_row)
        .map(|(r, p)| {
            let p = p.filter(|p| (1..=points).contains(p))?;
            Some((r.id.clone(), p as u32))
        })
        .collect()
}

/// A ranking read from `text`: the options named one per line (or separated by commas), best
/// first, each once. An option left out alone is put last (naming all but one orders them
/// all); `Err` names the options missing otherwise.
fn ranking(q: &Question, text: &str) -> Result<Vec<String>, Vec<String>> {
    let mut order: Vec<String> = vec![];
    for part in text.split(['\n', ',', ';']) {
        if let Some(o) = option_in(q, part)
            && !order.contains(&o)
        {
            order.push(o);
        }
    }
    let missing: Vec<String> = q
        .options
        .iter()
        .filter(|o| !order.contains(o))
        .cloned()
        .collect();
    match missing.as_slice() {
        [] => Ok(order),
        [last] if order.len() + 1 == q.options.len() => {
            order.push(last.clone());
            Ok(order)
        }
        _ => Err(missing),
    }
}

/// The first number written in `text`.
fn first_number(text: &str) -> Option<f64> {
    let mut start = None;
    for (i, c) in text.char_indices() {
        let digit = c.is_ascii_digit();
        match start {
            None if digit => {
                let signed = i > 0 && text[..i].ends_with('-');
                start = Some(if signed { i - 1 } else { i });
            }
            Some(s) if !(digit || c == '.') => {
                return text[s..i].trim_end_matches('.').parse().ok();
            }
            _ => {}
        }
    }
    start.and_then(|s| text[s..].trim_end_matches('.').parse().ok())
}

/// Reads the reply to `q` into the fields a participant's form would post for it, checked by
/// the question's own rules. An empty list answers an optional question with nothing.
pub fn read_answer(q: &Question, reply: &str) -> Result<Vec<(String, String)>, BadAnswer> {
    let question = q.id.clone();
    let text = reply.trim();
    let short = || text.chars().take(60).collect::<String>();
    if text.is_empty() && !q.is_required() {
        return Ok(unanswered(q));
    }
    let answer = match q.kind {
        QuestionKind::Likert => {
            let points = q.points();
            let p = first_number(text)
                .filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= f64::from(points))
                .ok_or_else(|| BadAnswer::Point {
                    question: question.clone(),
                    points,
                    reply: short(),
                })?;
            Answer::Point(p as u32)
        }
        QuestionKind::Choice => {
            let first = text.lines().next().unwrap_or_default();
            let o = option_in(q, first)
                .or_else(|| option_in(q, text))
                .ok_or_else(|| BadAnswer::NoOption {
                    question: question.clone(),
                    reply: short(),
                })?;
            Answer::Choice(o)
        }
        QuestionKind::Multiple => {
            let mut picked: Vec<String> = vec![];
            for part in text.split(['\n', ',', ';']) {
                if let Some(o) = option_in(q, part)
                    && !picked.contains(&o)
                {
                    picked.push(o);
                }
            }
            if picked.is_empty() && !bare(text).starts_with("none") {
                return Err(BadAnswer::NoOption {
                    question,
                    reply: short(),
                });
            }
            Answer::Choices(picked)
        }
        QuestionKind::Number => {
            let n = first_number(text).ok_or_else(|| BadAnswer::NoNumber {
                question: question.clone(),
                reply: short(),
            })?;
            Answer::Number(n)
        }
        QuestionKind::Text | QuestionKind::Comment => {
            let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if q.kind == QuestionKind::Comment && (words.is_empty() || bare(&words) == "none") {
                return Ok(vec![]);
            }
            if words.is_empty() {
                return Err(BadAnswer::Empty { question });
            }
            Answer::Text(words)
        }
        QuestionKind::Matrix => {
            let rows = matrix_rows(q, text).ok_or_else(|| BadAnswer::Rows {
                question: question.clone(),
                rows: q.rows.len(),
                points: q.points(),
                reply: short(),
            })?;
            Answer::Rows(rows)
        }
        QuestionKind::Ranking => {
            let order = ranking(q, text).map_err(|missing| BadAnswer::Order {
                question: question.clone(),
                options: q.options.len(),
                missing: missing.join(", "),
                reply: short(),
            })?;
            Answer::Ranking(order)
        }
    };
    let mut answers = Answers::default();
    answers.values.insert(q.id.clone(), answer);
    let form = answers.to_form(std::slice::from_ref(q));
    match crate::questions::check(std::slice::from_ref(q), &form, 0) {
        Ok(_) => Ok(form),
        Err(faults) => Err(BadAnswer::Rules {
            question,
            reply: short(),
            fault: faults
                .iter()
                .map(|f| format!("{:?}", f.fault))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(yaml: &str) -> Question {
        serde_saphyr::from_str(yaml).expect("a question")
    }

    #[test]
    fn a_scale_is_read_from_the_first_number_in_range() {
        let q = question(
            "{id: helpful, text: How helpful?, kind: likert, points: 5, low: Not at all, high: Very}",
        );
        let asked = choices(&q);
        assert_eq!(
            asked,
            "Answer with one number from 1 to 5 (1 = Not at all, 5 = Very), and nothing else."
        );
        assert_eq!(
            read_answer(&q, "4").unwrap(),
            [("helpful".into(), "4".into())]
        );
        assert_eq!(
            read_answer(&q, "I'd say 2, it missed things.").unwrap(),
            [("helpful".into(), "2".into())]
        );
        assert!(matches!(
            read_answer(&q, "7"),
            Err(BadAnswer::Point { points: 5, .. })
        ));
        assert!(matches!(
            read_answer(&q, "quite"),
            Err(BadAnswer::Point { .. })
        ));
    }

    #[test]
    fn options_are_read_as_written_or_named_once() {
        let q = question("{id: again, text: Again?, kind: choice, options: [Yes, Not sure, No]}");
        assert_eq!(
            read_answer(&q, "\"not sure\".").unwrap(),
            [("again".into(), "Not sure".into())]
        );
        assert_eq!(
            read_answer(&q, "My answer: Not sure\nbecause…").unwrap(),
            [("again".into(), "Not sure".into())]
        );
        assert!(matches!(
            read_answer(&q, "Maybe"),
            Err(BadAnswer::NoOption { .. })
        ));
        let m = question(
            "{id: liked, text: What did you like?, kind: multiple, options: [Speed, Tone, Facts], max_choices: 2}",
        );
        assert_eq!(
            read_answer(&m, "- Tone\n- speed").unwrap(),
            [
                ("liked".into(), "Tone".into()),
                ("liked".into(), "Speed".into())
            ]
        );
        assert!(matches!(
            read_answer(&m, "Speed, Tone, Facts"),
            Err(BadAnswer::Rules { .. })
        ));
    }

    #[test]
    fn numbers_texts_and_comments_keep_the_questions_rules() {
        let n = question("{id: age, text: Age?, kind: number, min: 18, max: 99, integer: true}");
        assert_eq!(
            read_answer(&n, "I am 34.").unwrap(),
            [("age".into(), "34".into())]
        );
        assert!(matches!(
            read_answer(&n, "12"),
            Err(BadAnswer::Rules { .. })
        ));
        assert!(matches!(
            read_answer(&n, "old"),
            Err(BadAnswer::NoNumber { .. })
        ));
        let t = question("{id: why, text: Why?, kind: text, min_words: 3}");
        assert_eq!(
            read_answer(&t, "  It  answered\nquickly. ").unwrap(),
            [("why".into(), "It answered quickly.".into())]
        );
        assert!(matches!(
            read_answer(&t, "Fine"),
            Err(BadAnswer::Rules { .. })
        ));
        let c = question("{id: more, text: Anything else?, kind: comment}");
        assert_eq!(read_answer(&c, "None."), Ok(vec![]));
    }

    #[test]
    fn a_matrix_is_read_by_statement_numbers_or_in_order() {
        let q = question(
            "{id: ux, text: About the assistant, kind: matrix, points: 5, low: Disagree, high: Agree, \
             rows: [{id: clear, text: It was clear}, {id: quick, text: It was quick}, {id: kind, text: It was kind}]}",
        );
        let asked = choices(&q);
        assert!(
            asked.contains("1 to 5 (1 = Disagree, 5 = Agree)"),
            "{asked}"
        );
        assert!(
            asked.ends_with("1. It was clear\n2. It was quick\n3. It was kind"),
            "{asked}"
        );
        let fields = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        // Numbered lines, in any order, with words around them.
        assert_eq!(
            read_answer(&q, "3: 2\n1. 5\n2 - I'd say 4").unwrap(),
            fields(&[("ux.clear", "5"), ("ux.quick", "4"), ("ux.kind", "2")])
        );
        // One number per line, in the order listed.
        assert_eq!(
            read_answer(&q, "4\n4\n1").unwrap(),
            fields(&[("ux.clear", "4"), ("ux.quick", "4"), ("ux.kind", "1")])
        );
        let optional = question(
            "{id: more, text: More, kind: matrix, required: false, rows: [{id: a, text: A}, {id: b, text: B}]}",
        );
        assert_eq!(
            read_answer(&optional, " ").unwrap(),
            fields(&[("more.a", ""), ("more.b", "")])
        );
        // A statement left out, a point out of range, or a statement that is not listed.
        for reply in [
            "1: 4\n2: 4",
            "1: 4\n2: 9\n3: 1",
            "1: 4\n2: 4\n7: 1",
            "fine",
            "",
        ] {
            assert!(
                matches!(
                    read_answer(&q, reply),
                    Err(BadAnswer::Rows {
                        rows: 3,
                        points: 5,
                        ..
                    })
                ),
                "{reply:?}"
            );
        }
    }

    #[test]
    fn a_ranking_names_every_option_once_best_first() {
        let q = question(
            "{id: order, text: Rank the replies, kind: ranking, options: [Speed, Tone, Facts]}",
        );
        let asked = choices(&q);
        assert!(asked.ends_with("- Speed\n- Tone\n- Facts"), "{asked}");
        let fields = |list: &[&str]| -> Vec<(String, String)> {
            let mut answers = Answers::default();
            let order = list.iter().map(|o| o.to_string()).collect();
            answers
                .values
                .insert("order".into(), Answer::Ranking(order));
            answers.to_form(std::slice::from_ref(&q))
        };
        assert_eq!(
            read_answer(&q, "1. facts\n2. Speed\n3. Tone").unwrap(),
            fields(&["Facts", "Speed", "Tone"])
        );
        // Named again further down: the first place stands; all but one: the last is implied.
        assert_eq!(
            read_answer(&q, "Tone, Facts, Tone").unwrap(),
            fields(&["Tone", "Facts", "Speed"])
        );
        match read_answer(&q, "Tone is best") {
            Err(BadAnswer::Order {
                missing,
                options: 3,
                ..
            }) => {
                assert_eq!(missing, "Speed, Facts");
            }
            other => panic!("{other:?}"),
        }
    }
}
