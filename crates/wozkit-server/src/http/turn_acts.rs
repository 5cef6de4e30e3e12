//! Dialogue-act annotation of turns (`task: turn_acts`), shown on a `rate` page: the worker
//! holds one turn of a dialogue (an item, leased as every evaluation item, so each turn gets
//! exactly `judgments_per_item` counted labels), sees the turns before it as context and the
//! turn itself highlighted, ticks one or more acts of the study's act set and fills slot-value
//! rows (a slot of the study's list; the value typed, or picked from the utterance's words),
//! then submits. The judgment carries the label as its `acts` and `pairs` answers.
//!
//! The form works without JavaScript (checkboxes, selects and text fields); a refused label
//! comes back (422) with what is wrong and where, and the worker's choices kept.
//!
//! | route | what |
//! |---|---|
//! | `POST /p/acts/submit` | submit the label of the held turn |

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Router};
use indexmap::IndexMap;
use wozkit_core::evaluation::{
    ActAnnotation, ActProblem, Dialogue, EvalTask, Evaluation, PairRow, check_act_label,
    parse_turn_item,
};
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_store::{Lease, Participant};

use super::extract::Asking;
use super::html::{esc, layout_in, markdown};
use super::judge::{
    Fields, field, item_progress, lease_dialogues, lease_form, page_head, submit_form_judgment,
};
use super::pages::to_page;
use crate::app::AppState;
use crate::error::HttpError;
use crate::evaluation::{self as eval, Facts};
use crate::flow;
use crate::i18n::{Words, words};
use crate::security::seat_query;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/p/acts/submit", post(submit))
}

/// The page of the worker's turn, with the problems of the last request and the fields sent
/// with it (kept in the form).
#[allow(clippy::too_many_arguments)]
pub async fn item_page(
    study: &LoadedStudy,
    ev: &Evaluation,
    p: &Participant,
    lease: &Lease,
    f: &Facts,
    seat: Option<&str>,
    problems: &[String],
    fields: &[(String, String)],
) -> Result<String, HttpError> {
    let spec = ev.acts.as_ref().ok_or(HttpError::NotFound)?;
    let w = words(study.study.language);
    let role = p.role.unwrap_or(Role::User);
    let page = flow::pages(&study.study, role).get(flow::index(&p.flow_step));
    let seatq = esc(&seat_query(seat));
    let lease_id = esc(&lease.id);
    let Some((d, index)) = parse_turn_item(&lease.item_id) else {
        return Err(HttpError::NotFound);
    };
    let Some(d) = ev.dialogue(d) else {
        return Err(HttpError::NotFound);
    };
    let Some(turn) = d.turns.get(index) else {
        return Err(HttpError::NotFound);
    };
    let problems_html: String = problems
        .iter()
        .map(|m| {
            format!(
                "<p class=\"problem\" role=\"alert\" data-testid=\"acts-problem\">{}</p>",
                esc(m)
            )
        })
        .collect();
    let progress = item_progress(w, ev, f);
    let (before, target) = turns_so_far(d, index);
    let context = d
        .context
        .as_deref()
        .map(|c| format!("<div class=\"context\">{}</div>", markdown(c)))
        .unwrap_or_default();
    let prompt = spec
        .prompt
        .as_deref()
        .map(|t| format!("<div class=\"annotate-prompt\">{}</div>", markdown(t)))
        .unwrap_or_default();
    // Part of the label's form, so a skip keeps in the log what was ticked and typed.
    let skip = format!(
        "<button type=\"submit\" class=\"skip\" formaction=\"/p/skip{seatq}\" formnovalidate data-testid=\"judge-skip\">{}</button>",
        esc(&w.get("eval-skip"))
    );
    let body = format!(
        "<main class=\"turn-acts\" data-page=\"turn-acts\" data-testid=\"turn-acts\" data-item=\"{item}\">\
         {head}{progress}{context}{prompt}{problems_html}\
         <section class=\"dialogue\" aria-label=\"{so_far}\"><h2>{so_far}</h2>\
         <ol class=\"transcript\" start=\"0\">{before}{target}</ol></section>\
         <form method=\"post\" action=\"/p/acts/submit{seatq}\" class=\"ta-label\" data-testid=\"acts-form\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease_id}\">{controls}\
         <button type=\"submit\" class=\"primary\" data-testid=\"acts-submit\">{submit}</button>{skip}</form></main>",
        item = esc(&lease.item_id),
        head = page_head(page, &w.get("acts-title")),
        so_far = esc(&w.get("acts-so-far")),
        submit = esc(&w.get("acts-submit")),
        controls = label_controls(w, spec, &turn.text, fields),
    );
    Ok(layout_in(w.lang(), &study.study.title, "", &body, &[]))
}

/// The turns of `d` before the one at `index`, and that turn (marked as the one to label).
fn turns_so_far(d: &Dialogue, index: usize) -> (String, String) {
    let before: String = d.turns[..index]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "<li class=\"turn\" data-testid=\"acts-context\" data-index=\"{i}\" data-speaker=\"{s}\">\
                 <span class=\"speaker\">{s}</span> <span class=\"text\">{}</span></li>",
                esc(&t.text),
                s = esc(&t.speaker),
            )
        })
        .collect();
    let turn = &d.turns[index];
    let target = format!(
        "<li class=\"turn ta-target\" data-testid=\"acts-turn\" data-index=\"{index}\" data-speaker=\"{s}\" aria-current=\"true\">\
         <span class=\"speaker\">{s}</span> <strong class=\"text\">{}</strong></li>",
        esc(&turn.text),
        s = esc(&turn.speaker),
    );
    (before, target)
}

/// The act checkboxes and the slot-value rows, filled from `fields`.
fn label_controls(
    w: &Words,
    spec: &ActAnnotation,
    utterance: &str,
    fields: &[(String, String)],
) -> String {
    let ticked = |v: &str| fields.iter().any(|(n, x)| n == "act" && x == v);
    let acts: String = spec
        .acts
        .iter()
        .map(|a| {
            format!(
                "<label class=\"ta-act\"><input type=\"checkbox\" name=\"act\" value=\"{v}\" data-testid=\"act-{v}\"{c}> {v}</label>",
                v = esc(a),
                c = if ticked(a) { " checked" } else { "" }
            )
        })
        .collect();
    let acts = format!(
        "<fieldset class=\"ta-acts\" data-testid=\"acts\"><legend>{}</legend>{acts}</fieldset>",
        esc(&w.get("acts-legend"))
    );
    if spec.slots.is_empty() || spec.max_pairs == 0 {
        return acts;
    }
    let mut tokens: Vec<&str> = utterance
        .split(|c: char| c.is_whitespace() || ",.;:!?\"()".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    tokens.dedup();
    let datalist: String = tokens
        .iter()
        .map(|w| format!("<option value=\"{}\">", esc(w)))
        .collect();
    let rows = pair_rows(w, spec, fields);
    format!(
        "{acts}<fieldset class=\"ta-pairs\"><legend>{legend}</legend>\
         <p class=\"muted\">{how}</p>\
         <datalist id=\"ta-words\">{datalist}</datalist>\
         <table class=\"ta-pairs\"><thead><tr><th>#</th><th>{act}</th><th>{slot}</th><th>{value}</th></tr></thead>\
         <tbody>{rows}</tbody></table></fieldset>",
        legend = esc(&w.get("acts-pairs")),
        how = esc(&w.get("acts-pairs-how")),
        act = esc(&w.get("acts-act")),
        slot = esc(&w.get("acts-slot")),
        value = esc(&w.get("acts-value")),
    )
}

/// The act-slot-value rows, filled from `fields`.
fn pair_rows(w: &Words, spec: &ActAnnotation, fields: &[(String, String)]) -> String {
    (1..=spec.max_pairs)
        .map(|n| {
            let act = field(fields, &format!("pair_act_{n}"));
            let slot = field(fields, &format!("pair_slot_{n}"));
            let value = field(fields, &format!("pair_value_{n}")).unwrap_or_default();
            let of = |key: &str| esc(&w.with(key, &[("n", &n.to_string())]));
            format!(
                "<tr data-testid=\"pair-row\"><td>{n}</td>\
                 <td><select name=\"pair_act_{n}\" aria-label=\"{}\">{}</select></td>\
                 <td><select name=\"pair_slot_{n}\" aria-label=\"{}\">{}</select></td>\
                 <td><input type=\"text\" name=\"pair_value_{n}\" list=\"ta-words\" maxlength=\"500\" aria-label=\"{}\" value=\"{}\"></td></tr>",
                of("acts-pair-act"),
                select_options(&spec.acts, act),
                of("acts-pair-slot"),
                select_options(&spec.slots, slot),
                of("acts-pair-value"),
                esc(value),
            )
        })
        .collect()
}

/// The options of a row's select: none (`—`), then each of `list`, `chosen` selected.
fn select_options(list: &[String], chosen: Option<&str>) -> String {
    std::iter::once(format!(
        "<option value=\"\"{}>—</option>",
        if chosen.is_none_or(str::is_empty) {
            " selected"
        } else {
            ""
        }
    ))
    .chain(list.iter().map(|v| {
        format!(
            "<option value=\"{0}\"{1}>{0}</option>",
            esc(v),
            if chosen == Some(v.as_str()) {
                " selected"
            } else {
                ""
            }
        )
    }))
    .collect()
}

/// `POST /p/acts/submit`: `lease`, `act` (repeated), `pair_act_N`, `pair_slot_N`,
/// `pair_value_N` (N from 1).
async fn submit(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::TurnActs).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let ev = study.study.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let spec = ev.acts.as_ref().ok_or(HttpError::NotFound)?;
    let acts: Vec<String> = fields
        .iter()
        .filter(|(n, _)| n == "act")
        .map(|(_, v)| v.clone())
        .collect();
    let rows: Vec<PairRow> = (1..=spec.max_pairs)
        .map(|n| PairRow {
            act: field(&fields, &format!("pair_act_{n}"))
                .unwrap_or_default()
                .into(),
            slot: field(&fields, &format!("pair_slot_{n}"))
                .unwrap_or_default()
                .into(),
            value: field(&fields, &format!("pair_value_{n}"))
                .unwrap_or_default()
                .into(),
        })
        .collect();
    let label = match check_act_label(spec, &acts, &rows) {
        Ok(label) => label,
        Err(problems) => {
            let w = words(study.study.language);
            let problems: Vec<String> = problems
                .iter()
                .map(|m| w.with("acts-not-saved", &[("problem", &act_problem(w, m))]))
                .collect();
            let f = eval::facts(&app, &p).await?;
            let html = item_page(
                &study,
                ev,
                &p,
                &lease,
                &f,
                seat.as_deref(),
                &problems,
                &fields,
            )
            .await?;
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
        }
    };
    let mut answers = IndexMap::new();
    answers.insert("acts".into(), serde_json::json!(label.acts));
    answers.insert(
        "pairs".into(),
        serde_json::to_value(&label.pairs).map_err(|e| HttpError::BadRequest(e.to_string()))?,
    );
    submit_form_judgment(
        &app,
        &p,
        &study,
        &lease,
        lease_dialogues(ev, &lease),
        answers,
    )
    .await?;
    Ok(to_page(seat.as_deref()))
}

/// What is wrong with a label, in the page's language (the core's `Display` is the English of
/// logs and the CLI).
fn act_problem(w: &Words, problem: &ActProblem) -> String {
    let list = |names: &[String]| names.join(&w.get("acts-list-sep"));
    let row = |row: &usize| row.to_string();
    match problem {
        ActProblem::UnknownAct { act, known } => w.with(
            "acts-problem-unknown-act",
            &[("act", act), ("known", &list(known))],
        ),
        ActProblem::NoAct => w.get("acts-problem-no-act"),
        ActProblem::ActNotTicked { row: r, ticked, .. } if ticked.is_empty() => {
            w.with("acts-problem-pair-no-act", &[("row", &row(r))])
        }
        ActProblem::ActNotTicked {
            row: r,
            act,
            ticked,
        } => w.with(
            "acts-problem-act-not-ticked",
            &[("row", &row(r)), ("act", act), ("ticked", &list(ticked))],
        ),
        ActProblem::UnknownSlot {
            row: r,
            slot,
            known,
        } => w.with(
            "acts-problem-unknown-slot",
            &[("row", &row(r)), ("slot", slot), ("known", &list(known))],
        ),
        ActProblem::NoValue { row: r, slot } => {
            w.with("acts-problem-no-value", &[("row", &row(r)), ("slot", slot)])
        }
        ActProblem::ValueTooLong { row: r, max } => w.with(
            "acts-problem-too-long",
            &[("row", &row(r)), ("max", &max.to_string())],
        ),
        ActProblem::SamePair { row: r } => w.with("acts-problem-same-pair", &[("row", &row(r))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wozkit_core::language::Language;

    #[test]
    fn every_act_problem_reads_in_both_languages_with_its_names_and_row() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let all = [
            ActProblem::UnknownAct {
                act: "thank".into(),
                known: names(&["inform", "request"]),
            },
            ActProblem::NoAct,
            ActProblem::ActNotTicked {
                row: 2,
                act: "request".into(),
                ticked: names(&["inform", "greet"]),
            },
            ActProblem::ActNotTicked {
                row: 2,
                act: "request".into(),
                ticked: vec![],
            },
            ActProblem::UnknownSlot {
                row: 3,
                slot: "price".into(),
                known: names(&["food", "area"]),
            },
            ActProblem::NoValue {
                row: 4,
                slot: "area".into(),
            },
            ActProblem::ValueTooLong { row: 5, max: 500 },
            ActProblem::SamePair { row: 6 },
        ];
        let (en, zh) = (words(Language::En), words(Language::ZhHans));
        let han = |s: &str| s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
        for p in &all {
            let (e, c) = (act_problem(en, p), act_problem(zh, p));
            assert!(!e.starts_with("acts-") && !han(&e), "{p:?}: {e}");
            assert!(han(&c), "{p:?}: {c}");
            // Every name and number of the problem is in both wordings (with nothing ticked,
            // a pair is asked for its act first).
            let core = match p {
                ActProblem::ActNotTicked { row, ticked, .. } if ticked.is_empty() => {
                    row.to_string()
                }
                _ => p.to_string(),
            };
            for token in core
                .split(|ch: char| !ch.is_alphanumeric())
                .filter(|t| !t.is_empty())
                .filter(|t| {
                    [
                        "thank", "request", "inform", "greet", "price", "food", "area",
                    ]
                    .contains(t)
                        || t.parse::<u32>().is_ok()
                })
            {
                assert!(e.contains(token), "{p:?}: {token} not in {e}");
                assert!(c.contains(token), "{p:?}: {token} not in {c}");
            }
        }
        assert_eq!(
            act_problem(zh, &all[2]),
            "第 2 对：它的对话行为“request”不在勾选的行为之中（inform、greet）"
        );
    }
}
