//! A simulated user's answers to the questions after a conversation (a chat or arena page's
//! `questions`): one prompt per question, showing the goal, the conversation, the question and
//! what its answer may be; the reply read into the form a participant would post, and checked
//! by the same rules as a person's answers ([`crate::questions::check`]). A matrix or a ranking
//! is not asked: the crowd's policy answers it.

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
    /// Read, but refused by the question's own rules (word limits, bounds, how many options).
    #[error("question `{question}`: the answer `{reply}` breaks the question's rules ({fault})")]
    Rules {
        question: String,
        reply: String,
        fault: String,
    },
}

/// What an answer to `q` may be, in words for the prompt; `None` for the kinds a simulated user
/// is not asked (a matrix, a ranking).
pub fn choices(q: &Question) -> Option<String> {
    let list = |options: &[String]| {
        options
            .iter()
            .map(|o| format!("- {o}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(match q.kind {
        QuestionKind::Likert => {
            let points = q.points();
            let named: Vec<String> = (1..=points)
                .filter_map(|p| q.point_label(p).map(|l| format!("{p} = {l}")))
                .collect();
            let scale = if named.is_empty() {
                String::new()
            } else {
                format!(" ({})", named.join(", "))
            };
            format!("Answer with one number from 1 to {points}{scale}, and nothing else.")
        }
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
        QuestionKind::Matrix | QuestionKind::Ranking => return None,
    })
}

impl SimulatedUser {
    /// The prompt asking for the answer to `q` after the conversation `dialogue`, given the
    /// goal's text; `None` for a question it is not asked (see [`choices`]).
    pub fn answer_prompt(
        &self,
        goal: &str,
        dialogue: &[(Role, String)],
        q: &Question,
    ) -> Option<String> {
        let choices = choices(q)?;
        Some(render(
            &self.answer_prompt,
            &[
                ("goal", goal),
                ("conversation", &transcript(dialogue)),
                ("question", &q.text),
                ("choices", &choices),
            ],
        ))
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
        QuestionKind::Matrix | QuestionKind::Ranking => return Ok(vec![]),
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
        let asked = choices(&q).expect("asked");
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
        let r = question("{id: order, text: Rank them, kind: ranking, options: [a, b]}");
        assert_eq!(choices(&r), None);
    }
}
