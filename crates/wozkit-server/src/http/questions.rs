//! The form fields of the question model (`wozkit_core::questions`), for every page that asks
//! something: one `<fieldset>` per question, plain HTML that works without JavaScript, by
//! keyboard and on a phone. Radio groups and checkboxes sit in fieldsets with a legend; a text or
//! number field is labelled by its legend; a ranking is one number select per option. A problem
//! is shown inside its question's fieldset and tied to it with `aria-describedby`, and the
//! participant's answers are put back, so a refused form loses nothing.
//!
//! Field names are the ones `wozkit_core::questions::check` reads; options and matrix rows are
//! laid out in the order `Question::shown_order` gives for the participant's seed.

use wozkit_core::questions::{MAX_TEXT_CHARS, Problem, Question, QuestionKind};

use super::html::esc;
use crate::i18n::Words;

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
