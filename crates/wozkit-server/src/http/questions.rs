//! The form fields of the question model (`wozkit_core::questions`), for every page that asks
//! something: one `<fieldset>` per question, plain HTML that works without JavaScript, by
//! keyboard and on a phone. Radio groups and checkboxes sit in fieldsets with a legend; a text or
//! number field is labelled by its legend; a ranking is one number select per option. A problem
//! is shown inside its question's fieldset and tied to it with `aria-describedby`, and the
//! participant's answers are put back, so a refused form loses nothing.
//!
//! Field names are the ones `wozkit_core::questions::check` reads; options and matrix rows are
//! laid out in the order `Question::shown_order` gives for the participant's seed.

use wozkit_core::questions::{
    self, Answers, Fault, MAX_TEXT_CHARS, Problem, Question, QuestionKind, Single,
};

use super::html::esc;
use crate::i18n::{FluentValue, Words};

/// Checks a page's posted answers (`wozkit_core::questions::check`) and words what is wrong
/// with each in the page's language.
pub fn check(
    w: &Words,
    asked: &[Question],
    fields: &[(String, String)],
    seed: u64,
) -> Result<Answers, Vec<Problem>> {
    questions::check(asked, fields, seed).map_err(|faults| {
        faults
            .into_iter()
            .map(|f| Problem {
                question: f.question,
                message: fault_words(w, &f.fault),
            })
            .collect()
    })
}

/// A fault in the catalogue's words (the `answer-*` messages).
pub fn fault_words(w: &Words, fault: &Fault) -> String {
    let num = |n: f64| FluentValue::from(n);
    let count = |n: usize| FluentValue::from(n);
    match fault {
        Fault::Missing => w.get("answer-missing"),
        Fault::MissingRows => w.get("answer-missing-rows"),
        Fault::MissingRanks => w.get("answer-missing-ranks"),
        Fault::Several(field) => w.get(match field {
            Single::Point => "answer-several-point",
            Single::Option => "answer-several-option",
            Single::Answer => "answer-several-answer",
            Single::Number => "answer-several-number",
            Single::RowPoint => "answer-several-row-point",
            Single::Rank => "answer-several-rank",
        }),
        Fault::Point { points } => {
            w.with_values("answer-point", vec![("points", (*points).into())])
        }
        Fault::RowPoint { points } => {
            w.with_values("answer-row-point", vec![("points", (*points).into())])
        }
        Fault::NotAnOption => w.get("answer-not-an-option"),
        Fault::NotShown => w.get("answer-not-shown"),
        Fault::Choices { min, max } => match *max {
            Some(max) if max == *min => {
                w.with_values("answer-choose-exactly", vec![("count", max.into())])
            }
            Some(max) if *min > 0 => w.with_values(
                "answer-choose-between",
                vec![("min", (*min).into()), ("max", max.into())],
            ),
            Some(max) => w.with_values("answer-choose-at-most", vec![("count", max.into())]),
            None => w.with_values("answer-choose-at-least", vec![("count", (*min).into())]),
        },
        Fault::TooLong { max } => w.with_values("answer-too-long", vec![("max", count(*max))]),
        Fault::Words { min, max, wrote } => {
            let wrote = ("wrote", FluentValue::from(*wrote));
            match (min, max) {
                (Some(min), Some(max)) => w.with_values(
                    "answer-words-between",
                    vec![("min", (*min).into()), ("max", (*max).into()), wrote],
                ),
                (Some(min), None) => {
                    w.with_values("answer-words-at-least", vec![("min", (*min).into()), wrote])
                }
                (None, Some(max)) => {
                    w.with_values("answer-words-at-most", vec![("max", (*max).into()), wrote])
                }
                (None, None) => w.get("answer-missing"),
            }
        }
        Fault::Number { integer, min, max } => {
            let whole = (
                "whole",
                FluentValue::from(if *integer { "yes" } else { "no" }),
            );
            match (min, max) {
                (Some(min), Some(max)) => w.with_values(
                    "answer-number-between",
                    vec![whole, ("min", num(*min)), ("max", num(*max))],
                ),
                (Some(min), None) => {
                    w.with_values("answer-number-at-least", vec![whole, ("min", num(*min))])
                }
                (None, Some(max)) => {
                    w.with_values("answer-number-at-most", vec![whole, ("max", num(*max))])
                }
                (None, None) => w.with_values("answer-number-any", vec![whole]),
            }
        }
        Fault::RowsLeft { left } => w.with_values("answer-rows-left", vec![("left", count(*left))]),
        Fault::RankEach { options } => {
            w.with_values("answer-rank-each", vec![("options", count(*options))])
        }
        Fault::RankAll { options } => {
            w.with_values("answer-rank-all", vec![("options", count(*options))])
        }
    }
}

/// The fieldsets of `questions`, numbered from 1, with `fields` (the posted form, if any) put
/// back and each problem next to its question.
pub fn fieldsets(
    w: &Words,
    questions: &[Question],
    seed: u64,
    fields: &[(String, String)],
    problems: &[Problem],
) -> String {
    questions
        .iter()
        .enumerate()
        .map(|(n, q)| {
            let problem = problems
                .iter()
                .find(|p| p.question == q.id)
                .map(|p| p.message.as_str());
            fieldset(w, n + 1, q, seed, fields, problem)
        })
        .collect()
}

/// What the form shows for one question.
struct Ctx<'a> {
    q: &'a Question,
    id: String,
    fields: &'a [(String, String)],
    /// `aria-describedby` for the controls: the hint and the problem, when there are.
    described: String,
    /// ` required` on controls when an answer is needed.
    req: &'static str,
}

impl Ctx<'_> {
    /// The value posted under `name` (the first non-empty one).
    fn value(&self, name: &str) -> &str {
        self.fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .find(|v| !v.is_empty())
            .unwrap_or("")
    }

    fn ticked(&self, name: &str, option: &str) -> bool {
        self.fields
            .iter()
            .any(|(n, v)| n == name && v.trim() == option.trim())
    }
}

fn fieldset(
    w: &Words,
    n: usize,
    q: &Question,
    seed: u64,
    fields: &[(String, String)],
    problem: Option<&str>,
) -> String {
    let id = esc(&q.id);
    let hint = hint(w, q);
    let mut described = vec![];
    if hint.is_some() {
        described.push(format!("{id}-hint"));
    }
    if problem.is_some() {
        described.push(format!("{id}-problem"));
    }
    let described = if described.is_empty() {
        String::new()
    } else {
        format!(" aria-describedby=\"{}\"", described.join(" "))
    };
    let required = q.is_required();
    let ctx = Ctx {
        q,
        id: id.clone(),
        fields,
        described,
        req: if required { " required" } else { "" },
    };
    let order = q.shown_order(seed);
    let input = match q.kind {
        QuestionKind::Likert => scale(&ctx, &q.id, &id),
        QuestionKind::Choice | QuestionKind::Multiple => choices(&ctx, &order),
        QuestionKind::Text | QuestionKind::Comment => text(&ctx),
        QuestionKind::Number => number(&ctx),
        QuestionKind::Matrix => matrix(&ctx, &order),
        QuestionKind::Ranking => ranking(&ctx, &order),
    };
    let optional = optional_mark(w, required, &q.text);
    let hint = hint
        .map(|h| format!("<p class=\"hint\" id=\"{id}-hint\">{}</p>", esc(&h)))
        .unwrap_or_default();
    let problem = problem
        .map(|m| {
            format!(
                "<p class=\"problem\" id=\"{id}-problem\" role=\"alert\" data-testid=\"problem-{id}\">{}</p>",
                esc(m)
            )
        })
        .unwrap_or_default();
    let invalid = if problem.is_empty() {
        ""
    } else {
        " aria-invalid=\"true\""
    };
    format!(
        "<fieldset class=\"question q-{kind}\" id=\"q-{id}\" data-testid=\"question-{id}\"{described}{invalid}>\
         <legend id=\"{id}-legend\">{n}. {text}{optional}</legend>{hint}{input}{problem}</fieldset>",
        kind = q.kind.as_str(),
        described = ctx.described,
        text = esc(&q.text),
    )
}

/// A short line under the question saying what is accepted, when it is not obvious.
/// The mark after the label of a question that may be left empty; none when it is required or
/// its text already says "(optional)" (in the page's language) at its end (any case, spaces
/// trimmed).
pub(super) fn optional_mark(w: &Words, required: bool, label: &str) -> String {
    let mark = w.get("question-optional");
    let label = label.trim();
    let says_so = label
        .len()
        .checked_sub(mark.len())
        .and_then(|at| label.get(at..))
        .is_some_and(|end| end.to_lowercase() == mark.to_lowercase());
    if required || says_so {
        String::new()
    } else {
        format!(" <span class=\"muted\">{}</span>", esc(&mark))
    }
}

fn hint(w: &Words, q: &Question) -> Option<String> {
    // `what` names the message family: `question-KIND-between`, `-at-least`, `-at-most`.
    let between = |lo: Option<String>, hi: Option<String>, what: &str| match (lo, hi) {
        (Some(lo), Some(hi)) => Some(w.with(
            &format!("question-{what}-between"),
            &[("lo", &lo), ("hi", &hi)],
        )),
        (Some(lo), None) => Some(w.with(&format!("question-{what}-at-least"), &[("lo", &lo)])),
        (None, Some(hi)) => Some(w.with(&format!("question-{what}-at-most"), &[("hi", &hi)])),
        (None, None) => None,
    };
    let s = |v: Option<u32>| v.map(|v| v.to_string());
    let f = |v: Option<f64>| v.map(|v| v.to_string());
    match q.kind {
        QuestionKind::Multiple => between(s(q.min_choices), s(q.max_choices), "choose")
            .or_else(|| Some(w.get("question-choose-all"))),
        QuestionKind::Text | QuestionKind::Comment => {
            between(s(q.min_words), s(q.max_words), "words")
        }
        QuestionKind::Number if q.integer => {
            between(f(q.min), f(q.max), "whole").or_else(|| Some(w.get("question-whole")))
        }
        QuestionKind::Number => between(f(q.min), f(q.max), "number"),
        QuestionKind::Ranking => {
            Some(w.with("question-rank", &[("count", &q.options.len().to_string())]))
        }
        _ => None,
    }
}

/// A row of radio buttons, one per point, each labelled with its number and its label (if any),
/// posted as `name`; `testid` prefixes each point's test id.
fn scale(ctx: &Ctx<'_>, name: &str, testid: &str) -> String {
    let q = ctx.q;
    let value = ctx.value(name);
    let name = esc(name);
    let points: String = (1..=q.points())
        .map(|p| {
            let checked = if value == p.to_string() { " checked" } else { "" };
            let label = q
                .point_label(p)
                .map(|l| format!("<span class=\"plabel\">{}</span>", esc(l)))
                .unwrap_or_default();
            format!(
                "<label class=\"point\"><input type=\"radio\" name=\"{name}\" value=\"{p}\" \
                 data-testid=\"{testid}-{p}\"{req}{checked}><span class=\"num\">{p}</span>{label}</label>",
                req = ctx.req,
            )
        })
        .collect();
    format!("<div class=\"likert\">{points}</div>")
}

/// Radio buttons (`choice`) or checkboxes (`multiple`), in the order shown. Checkboxes are not
/// marked `required`: a browser would then demand every box.
fn choices(ctx: &Ctx<'_>, order: &[usize]) -> String {
    let q = ctx.q;
    let (kind, req) = match q.kind {
        QuestionKind::Multiple => ("checkbox", ""),
        _ => ("radio", ctx.req),
    };
    let id = &ctx.id;
    order
        .iter()
        .filter_map(|&i| q.options.get(i).map(|o| (i, o)))
        .map(|(i, o)| {
            let checked = if ctx.ticked(&q.id, o) { " checked" } else { "" };
            format!(
                "<label class=\"choice\"><input type=\"{kind}\" name=\"{id}\" value=\"{o}\" \
                 data-testid=\"{id}-{i}\"{req}{checked}> {o}</label>",
                o = esc(o),
            )
        })
        .collect()
}

fn text(ctx: &Ctx<'_>) -> String {
    let id = &ctx.id;
    let rows = if ctx.q.kind == QuestionKind::Comment {
        4
    } else {
        3
    };
    format!(
        "<textarea name=\"{id}\" id=\"{id}-input\" data-testid=\"{id}\" rows=\"{rows}\" \
         maxlength=\"{MAX_TEXT_CHARS}\" aria-labelledby=\"{id}-legend\"{described}{req}>{value}</textarea>",
        described = ctx.described,
        req = ctx.req,
        value = esc(ctx.value(&ctx.q.id)),
    )
}

fn number(ctx: &Ctx<'_>) -> String {
    let q = ctx.q;
    let id = &ctx.id;
    let bound =
        |name: &str, v: Option<f64>| v.map(|v| format!(" {name}=\"{v}\"")).unwrap_or_default();
    let (step, mode) = if q.integer {
        ("1", "numeric")
    } else {
        ("any", "decimal")
    };
    format!(
        "<input type=\"number\" name=\"{id}\" id=\"{id}-input\" data-testid=\"{id}\" step=\"{step}\" \
         inputmode=\"{mode}\"{min}{max} value=\"{value}\" aria-labelledby=\"{id}-legend\"{described}{req}>",
        min = bound("min", q.min),
        max = bound("max", q.max),
        value = esc(ctx.value(&q.id)),
        described = ctx.described,
        req = ctx.req,
    )
}

/// One fieldset per row (legend: the row's text), each a scale: rows stack on a phone.
fn matrix(ctx: &Ctx<'_>, order: &[usize]) -> String {
    let q = ctx.q;
    let rows: String = order
        .iter()
        .filter_map(|&i| q.rows.get(i))
        .map(|row| {
            let name = q.row_field(row);
            let testid = esc(&name);
            format!(
                "<fieldset class=\"row\" data-testid=\"row-{testid}\"><legend>{}</legend>{}</fieldset>",
                esc(&row.text),
                scale(ctx, &name, &testid)
            )
        })
        .collect();
    format!("<div class=\"matrix\">{rows}</div>")
}

/// A select of ranks 1..=n for each option, in the order shown: works without JavaScript.
fn ranking(ctx: &Ctx<'_>, order: &[usize]) -> String {
    let q = ctx.q;
    let n = q.options.len();
    let rows: String = order
        .iter()
        .filter_map(|&i| q.options.get(i).map(|o| (i, o)))
        .map(|(i, o)| {
            let name = esc(&q.rank_field(i));
            let value = ctx.value(&q.rank_field(i));
            let ranks: String = (1..=n)
                .map(|r| {
                    let selected = if value == r.to_string() { " selected" } else { "" };
                    format!("<option value=\"{r}\"{selected}>{r}</option>")
                })
                .collect();
            format!(
                "<div class=\"rank\"><select name=\"{name}\" id=\"{name}-rank\" data-testid=\"{name}\"{req}>\
                 <option value=\"\">–</option>{ranks}</select><label for=\"{name}-rank\">{}</label></div>",
                esc(o),
                req = ctx.req,
            )
        })
        .collect();
    format!("<div class=\"ranking\">{rows}</div>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::i18n::words;
    use wozkit_core::language::Language;

    fn question(v: serde_json::Value) -> Question {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("fixture question: {e}"))
    }

    /// Every fault in English as the questionnaire has always said it, and in Chinese.
    #[test]
    fn each_fault_reads_in_the_pages_language() {
        let en = words(Language::En);
        let zh = words(Language::ZhHans);
        let words_2_10 = Fault::Words {
            min: Some(2),
            max: Some(10),
            wrote: 1,
        };
        let cases = [
            (Fault::Missing, "Please answer this question."),
            (Fault::MissingRows, "Please answer every row."),
            (Fault::MissingRanks, "Please rank the options."),
            (Fault::Several(Single::Point), "Choose one point."),
            (Fault::Several(Single::Option), "Choose one option."),
            (Fault::Several(Single::Answer), "Send one answer."),
            (Fault::Several(Single::Number), "Send one number."),
            (
                Fault::Several(Single::RowPoint),
                "Choose one point in each row.",
            ),
            (Fault::Several(Single::Rank), "Give each option one rank."),
            (Fault::Point { points: 5 }, "Choose a point from 1 to 5."),
            (
                Fault::RowPoint { points: 7 },
                "Choose a point from 1 to 7 in each row.",
            ),
            (Fault::NotAnOption, "Choose one of the options."),
            (Fault::NotShown, "Choose only from the options shown."),
            (
                Fault::Choices {
                    min: 1,
                    max: Some(3),
                },
                "Choose between 1 and 3 options.",
            ),
            (
                Fault::Choices {
                    min: 1,
                    max: Some(1),
                },
                "Choose exactly 1 option.",
            ),
            (
                Fault::Choices {
                    min: 2,
                    max: Some(2),
                },
                "Choose exactly 2 options.",
            ),
            (
                Fault::Choices {
                    min: 0,
                    max: Some(1),
                },
                "Choose at most 1 option.",
            ),
            (
                Fault::Choices {
                    min: 0,
                    max: Some(4),
                },
                "Choose at most 4 options.",
            ),
            (
                Fault::Choices { min: 1, max: None },
                "Choose at least 1 option.",
            ),
            (
                Fault::Choices { min: 3, max: None },
                "Choose at least 3 options.",
            ),
            (
                Fault::TooLong { max: 2000 },
                "Please keep the answer under 2000 characters.",
            ),
            (
                words_2_10.clone(),
                "Write between 2 and 10 words (you wrote 1 word).",
            ),
            (
                Fault::Words {
                    min: Some(1),
                    max: None,
                    wrote: 0,
                },
                "Write at least 1 word (you wrote 0 words).",
            ),
            (
                Fault::Words {
                    min: None,
                    max: Some(3),
                    wrote: 5,
                },
                "Write at most 3 words (you wrote 5 words).",
            ),
            (
                Fault::Number {
                    integer: true,
                    min: Some(18.0),
                    max: Some(120.0),
                },
                "Enter a whole number from 18 to 120.",
            ),
            (
                Fault::Number {
                    integer: false,
                    min: Some(-1.5),
                    max: Some(2.5),
                },
                "Enter a number from -1.5 to 2.5.",
            ),
            (
                Fault::Number {
                    integer: false,
                    min: Some(0.0),
                    max: None,
                },
                "Enter a number of at least 0.",
            ),
            (
                Fault::Number {
                    integer: true,
                    min: None,
                    max: Some(9.0),
                },
                "Enter a whole number of at most 9.",
            ),
            (
                Fault::Number {
                    integer: false,
                    min: None,
                    max: None,
                },
                "Enter a number.",
            ),
            (
                Fault::RowsLeft { left: 1 },
                "Please answer every row (1 row left).",
            ),
            (
                Fault::RowsLeft { left: 2 },
                "Please answer every row (2 rows left).",
            ),
            (
                Fault::RankEach { options: 4 },
                "Give each option a different rank from 1 to 4.",
            ),
            (
                Fault::RankAll { options: 4 },
                "Give every option a rank from 1 to 4.",
            ),
        ];
        for (fault, english) in &cases {
            assert_eq!(fault_words(en, fault), *english, "{fault:?}");
            let chinese = fault_words(zh, fault);
            assert!(
                !chinese.is_empty() && !chinese.contains(|c: char| c.is_ascii_alphabetic()),
                "{fault:?} in Chinese: {chinese}"
            );
        }
        assert_eq!(
            fault_words(zh, &words_2_10),
            "请写 2 到 10 个词（你写了 1 个）。"
        );
    }

    #[test]
    fn a_problem_is_tied_to_its_question_and_the_answer_kept() {
        let q = question(serde_json::json!({
            "id": "why", "text": "Why <not>?", "kind": "text", "min_words": 2
        }));
        let fields = vec![("why".to_string(), "because\"".to_string())];
        let problems = vec![Problem {
            question: "why".into(),
            message: "Write at least 2 words (you wrote 1 word).".into(),
        }];
        let html = fieldsets(words(Language::En), &[q], 1, &fields, &problems);
        assert!(html.contains("Why &lt;not&gt;?"), "{html}");
        assert!(
            html.contains("aria-describedby=\"why-hint why-problem\""),
            "{html}"
        );
        assert!(html.contains("id=\"why-problem\""), "{html}");
        assert!(html.contains(">because&quot;</textarea>"), "{html}");
    }

    #[test]
    fn shuffled_options_follow_the_seed_and_keep_their_values() {
        let q = question(serde_json::json!({
            "id": "c", "text": "?", "kind": "choice", "shuffle": true,
            "options": ["a", "b", "c", "d", "e", "f"]
        }));
        let shown = q.shown_order(9);
        let html = fieldsets(words(Language::En), std::slice::from_ref(&q), 9, &[], &[]);
        let positions: Vec<usize> = shown
            .iter()
            .map(|i| {
                html.find(&format!("data-testid=\"c-{i}\""))
                    .unwrap_or(usize::MAX)
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{html}");
    }
}
