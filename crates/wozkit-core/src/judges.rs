//! Model judges: language models asked the questions of an evaluation study about its items, to
//! be calibrated against the people's judgments (`evaluation.judges`).
//!
//! A judge names an OpenAI-compatible endpoint (a system of the study, or a URL), a prompt
//! template over the item, the questions it answers and whether each comparison is asked again
//! with the sides swapped (position bias). This module holds the declaration, the prompt
//! rendering and the reading of a reply into one of a question's options. It does no IO: the
//! `wozkit judge` command sends the prompts and stores the answers as
//! [`ModelJudged`](crate::event::EventKind::ModelJudged) events, which never count towards an
//! item's human judgments and are never paid.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluation::{Dialogue, EvalTask, Evaluation};
use crate::questions::QuestionKind;

/// The question id of a comparison's choice (the dialogue preferred), answered `A` or `B`.
pub const CHOICE: &str = "choice";

/// The placeholders a prompt template may hold.
pub const PLACEHOLDERS: [&str; 6] = [
    "context",
    "conversation",
    "conversation_a",
    "conversation_b",
    "question",
    "options",
];

/// One model judge of an evaluation study.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelJudge {
    /// The judge's name: its judgments carry it (letters, digits, `_` and `-`).
    pub name: String,
    /// A system of the study's `systems` of kind `openai` to ask.
    #[serde(default)]
    pub system: Option<String>,
    /// Or the base URL of an OpenAI-compatible endpoint (`…/v1`); `wozkit judge --judge
    /// NAME=URL#MODEL` gives or replaces it.
    #[serde(default)]
    pub url: Option<String>,
    /// The model asked at `url`.
    #[serde(default)]
    pub model: Option<String>,
    /// The prompt, with `{conversation}` (a rating) or `{conversation_a}` and
    /// `{conversation_b}` (a comparison), `{context}`, `{question}` and `{options}`. The reply
    /// must name one option, alone or as `[[OPTION]]`.
    pub prompt: String,
    /// The question ids it answers: questions of `evaluation.questions` of kind `likert` or
    /// `choice`, and `choice` for a comparison's preferred side.
    pub questions: Vec<String>,
    /// Comparisons: also ask with the two dialogues swapped, to measure position bias.
    #[serde(default)]
    pub swap: bool,
}

/// What a judge is asked about one item and question.
#[derive(Clone, Debug, PartialEq)]
pub struct Asked {
    pub question: String,
    /// The options as the reply must name them.
    pub options: Vec<String>,
    /// The answer stored for each option: a scale point is a number, a choice its text, a
    /// comparison side the id of the dialogue shown there.
    pub values: Vec<Value>,
    pub prompt: String,
}

/// The question text and options of `question` in `ev`, if a judge can answer it.
pub fn question_options(ev: &Evaluation, question: &str) -> Option<(String, Vec<String>)> {
    if question == CHOICE {
        return (ev.task == EvalTask::Compare).then(|| {
            let text = ev
                .question
                .clone()
                .unwrap_or_else(|| "Which conversation is better?".into());
            (text, vec!["A".into(), "B".into()])
        });
    }
    let q = ev.questions.iter().find(|q| q.id == question)?;
    let options = match q.kind {
        QuestionKind::Likert => (1..=q.points.unwrap_or(7)).map(|p| p.to_string()).collect(),
        QuestionKind::Choice => q.options.clone(),
        _ => return None,
    };
    Some((q.text.clone(), options))
}

/// A dialogue as the prompt shows it: one line per turn, `speaker: text`.
pub fn transcript(d: &Dialogue) -> String {
    d.turns
        .iter()
        .map(|t| format!("{}: {}", t.speaker, t.text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The placeholders of `template` that are not known, in order.
pub fn unknown_placeholders(template: &str) -> Vec<String> {
    placeholders(template)
        .filter(|p| !PLACEHOLDERS.contains(p))
        .map(str::to_string)
        .collect()
}

/// The `{name}` placeholders of `template`, in order (JSON braces are not placeholders).
pub fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template.split('{').skip(1).filter_map(|rest| {
        let name = rest.split('}').next()?;
        (rest.contains('}') && !name.is_empty() && name.chars().all(is_name_char)).then_some(name)
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// What to ask about an item showing `shown` (one dialogue, or two in the order shown).
pub fn ask(
    ev: &Evaluation,
    judge: &ModelJudge,
    question: &str,
    shown: &[&Dialogue],
) -> Option<Asked> {
    let (text, options) = question_options(ev, question)?;
    let values: Vec<Value> = if question == CHOICE {
        shown.iter().map(|d| Value::String(d.id.clone())).collect()
    } else {
        match ev.questions.iter().find(|q| q.id == question)?.kind {
            QuestionKind::Likert => (1..=options.len() as u64).map(Value::from).collect(),
            _ => options.iter().cloned().map(Value::String).collect(),
        }
    };
    if values.len() != options.len() {
        return None;
    }
    let context = shown
        .iter()
        .filter_map(|d| d.context.as_deref())
        .collect::<Vec<_>>()
        .join("\n");
    let first = shown.first().map(|d| transcript(d)).unwrap_or_default();
    let second = shown.get(1).map(|d| transcript(d)).unwrap_or_default();
    let prompt = judge
        .prompt
        .replace("{context}", &context)
        .replace("{conversation_a}", &first)
        .replace("{conversation_b}", &second)
        .replace("{conversation}", &first)
        .replace("{question}", &text)
        .replace("{options}", &options.join(", "));
    Some(Asked {
        question: question.to_string(),
        options,
        values,
        prompt,
    })
}

/// The option a reply names: `[[OPTION]]` anywhere (the last one), or the whole reply (its last
/// non-empty line, without surrounding punctuation), compared without case. `None` when it names
/// none or several: a reply is never guessed.
pub fn parse_reply(reply: &str, options: &[String]) -> Option<usize> {
    let find = |s: &str| {
        let s = s
            .trim()
            .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace());
        options.iter().position(|o| o.eq_ignore_ascii_case(s))
    };
    if let Some(start) = reply.rfind("[[") {
        let rest = &reply[start + 2..];
        return rest.find("]]").and_then(|end| find(&rest[..end]));
    }
    let last = reply.lines().rev().find(|l| !l.trim().is_empty())?;
    find(last).or_else(|| {
        let last = last.trim();
        let (head, tail) = last.split_once(':')?;
        (head.len() < 20).then_some(())?;
        find(tail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(o: &[&str]) -> Vec<String> {
        o.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn replies_are_read_only_when_they_name_one_option() {
        let ab = opts(&["A", "B"]);
        assert_eq!(parse_reply("[[B]]", &ab), Some(1));
        assert_eq!(parse_reply("A is longer, but overall: [[a]]", &ab), Some(0));
        assert_eq!(parse_reply("Thinking...\nB.", &ab), Some(1));
        assert_eq!(parse_reply("Answer: A", &ab), Some(0));
        assert_eq!(parse_reply("Both are fine", &ab), None);
        assert_eq!(parse_reply("[[C]]", &ab), None);
        assert_eq!(parse_reply("", &ab), None);
        let scale = opts(&["1", "2", "3", "4", "5"]);
        assert_eq!(parse_reply("Rating: [[4]]", &scale), Some(3));
        assert_eq!(parse_reply("7", &scale), None);
    }

    #[test]
    fn unknown_placeholders_are_listed() {
        assert!(unknown_placeholders("{conversation}\n{question} ({options})").is_empty());
        assert_eq!(
            unknown_placeholders("{conversaton} {question}"),
            vec!["conversaton".to_string()]
        );
        // JSON braces in a prompt are not placeholders.
        assert!(unknown_placeholders(r#"reply as {"answer": "A"}"#).is_empty());
    }
}
