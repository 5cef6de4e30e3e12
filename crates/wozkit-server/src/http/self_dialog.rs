//! Self-dialogs and span annotation (Taskmaster-1 style), shown on a `rate` page of a study
//! whose evaluation task is `self_dialog` or `spans`.
//!
//! - `self_dialog`: the worker holds a scenario (an item, leased as every evaluation item) and
//!   writes both sides of its dialogue, USER then ASSISTANT in turn. Each turn is logged as it is
//!   written (`self_dialog.turn` in the worker's log), so a crash or a restart loses at most the
//!   turn being typed; the last turn may be fixed before the next one. The submit is a judgment
//!   of the scenario carrying the utterances, and a counted one (not a test participant's) also
//!   becomes a dialogue session `dlg-<lease>` in the store, laid out as a Taskmaster-1
//!   conversation (so `from_store` of a span study selects it and the Taskmaster-1 export
//!   writes it).
//! - `spans`: the worker marks spans of the dialogue's utterances with the study's slot names
//!   (`spans.segment` in the log, one per mark or removal), then submits; the judgment carries
//!   the spans.
//!
//! Every form works without JavaScript; `selfdialog.js` adds keyboard sending and marking a span
//! by selecting its text.
//!
//! The pages and their problems are in the study's `language:` (catalogue keys `sd-*`, `sp-*`;
//! the core's turn and span problems are worded here, their `Display` is the logs' English).
//! The speakers read as the catalogue's words; forms and data keep Taskmaster-1's USER and
//! ASSISTANT.
//!
//! | route | what |
//! |---|---|
//! | `POST /p/self-dialog/turn` | write the next turn, or fix the last one |
//! | `POST /p/self-dialog/submit` | submit the dialogue |
//! | `POST /p/spans/mark`, `POST /p/spans/remove` | mark a span, remove one |
//! | `POST /p/spans/submit` | submit the spans |
//! | `GET /researcher/study/{study}/taskmaster1.json[?spans=STUDY]` | the Taskmaster-1 export |

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::evaluation::{
    EvalTask, Evaluation, SELF_DIALOG_TURN, SPAN_MARK, SelfDialogs, Span, SpanAnnotation,
    SpanProblem, TurnProblem, check_span, marked_spans, self_speaker, write_turn, written_turns,
};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::questions::seed_of;
use wozkit_store::{Lease, NewEvent, NewSession, Participant, SubmitOutcome};

use super::extract::Asking;
use super::html::{esc, layout_in, markdown};
use super::judge::{
    Fields, field, item_progress, lease_dialogues, lease_form, page_head, submit_form_judgment,
};
use super::pages::to_page;
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::evaluation::{self as eval, Facts};
use crate::flow;
use crate::i18n::{Words, words};
use crate::security::seat_query;

/// The participants' routes of this module.
pub fn participant_routes() -> Router<AppState> {
    Router::new()
        .route("/p/self-dialog/turn", post(turn))
        .route("/p/self-dialog/submit", post(submit_dialogue))
        .route("/p/spans/mark", post(mark))
        .route("/p/spans/remove", post(remove))
        .route("/p/spans/submit", post(submit_spans))
}

/// The researchers' route of this module: the Taskmaster-1 export.
pub fn researcher_routes() -> Router<AppState> {
    Router::new().route("/researcher/study/{study}/taskmaster1.json", get(export))
}

/// The Taskmaster-1 conversation id of the dialogue written under a lease.
pub fn conversation_id(lease: &str) -> String {
    format!("dlg-{lease}")
}

/// The page of the worker's item (a scenario to write, or a dialogue to annotate), with the
/// problems of the last request.
#[allow(clippy::too_many_arguments)]
pub async fn item_page(
    app: &AppState,
    study: &LoadedStudy,
    ev: &Evaluation,
    p: &Participant,
    lease: &Lease,
    f: &Facts,
    seat: Option<&str>,
    problems: &[String],
    kept: &[(String, String)],
) -> Result<String, HttpError> {
    let events = app.store.events(&eval::log_id(p), 0).await?;
    let role = p.role.unwrap_or(Role::User);
    let page = flow::pages(&study.study, role).get(flow::index(&p.flow_step));
    let seatq = seat_query(seat);
    let w = words(study.study.language);
    let problems_html: String = problems
        .iter()
        .map(|m| {
            format!(
                "<p class=\"problem\" role=\"alert\" data-testid=\"sd-problem\">{}</p>",
                esc(m)
            )
        })
        .collect();
    let progress = item_progress(w, ev, f);
    // The turns written so far on this item (none on a span page).
    let turns = written_turns(&events, &lease.id);
    let skip = skip_form(w, ev, turns.len(), &lease.id, &seatq);
    let body = match (ev.task, &ev.self_dialog, &ev.spans) {
        (EvalTask::SelfDialog, Some(spec), _) => format!(
            "<main class=\"self-dialog\" data-page=\"self-dialog\" data-testid=\"self-dialog\" data-item=\"{item}\">\
             {head}{progress}{instructions}{problems_html}{writing}{skip}</main>",
            item = esc(&lease.item_id),
            head = page_head(page, &w.get("sd-title")),
            instructions = scenario_html(ev, &lease.item_id),
            writing = writing_html(w, spec, &turns, &lease.id, &seatq, kept),
        ),
        (EvalTask::Spans, _, Some(spec)) => {
            let dialogue = lease.dialogues.first().and_then(|d| ev.dialogue(d));
            let utterances: Vec<(String, &str)> = dialogue
                .map(|d| {
                    d.turns
                        .iter()
                        .map(|t| (tm_speaker(&t.speaker), t.text.as_str()))
                        .collect()
                })
                .unwrap_or_default();
            let spans = marked_spans(&events, &lease.id);
            format!(
                "<main class=\"spans\" data-page=\"spans\" data-testid=\"spans\" data-item=\"{item}\">\
                 {head}{progress}{context}{prompt}{problems_html}{marking}{skip}</main>",
                item = esc(&lease.item_id),
                head = page_head(page, &w.get("sp-title")),
                context = dialogue
                    .and_then(|d| d.context.as_deref())
                    .map(|c| format!("<div class=\"context\">{}</div>", markdown(c)))
                    .unwrap_or_default(),
                prompt = spec
                    .prompt
                    .as_deref()
                    .map(|t| format!("<div class=\"annotate-prompt\">{}</div>", markdown(t)))
                    .unwrap_or_default(),
                marking = spans_html(w, spec, &utterances, &spans, &lease.id, &seatq, kept),
            )
        }
        _ => return Err(HttpError::NotFound),
    };
    let body = format!("{}{body}", w.script_block("sp-js-"));
    Ok(layout_in(
        w.lang(),
        &study.study.title,
        "",
        &body,
        &["selfdialog.js"],
    ))
}

/// The skip button of the item under `lease`.
///
/// It sends the writing or marking form (`form=`), where a turn or a span may be typed and not
/// yet added: the skip keeps it in the log (see `judge::skip`).
fn skip_form(w: &Words, ev: &Evaluation, written: usize, lease: &str, seatq: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/p/skip{seatq}\" class=\"skip\"><input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <button type=\"submit\" data-testid=\"judge-skip\"{pending}>{label}</button></form>",
        seatq = esc(seatq),
        lease = esc(lease),
        label = esc(&w.get("eval-skip")),
        pending = pending_form(
            pending_form_of(ev.task, written, ev.self_dialog.as_ref()),
            &format!("/p/skip{seatq}")
        ),
    )
}

/// The scenario of item `item` to write a dialogue for: its title and instructions (nothing
/// when the item has no scenario).
fn scenario_html(ev: &Evaluation, item: &str) -> String {
    ev.scenario(item)
        .map(|s| {
            format!(
                "<section class=\"sd-scenario\" data-testid=\"scenario\" data-scenario=\"{}\">{}{}</section>",
                esc(&s.id),
                s.title
                    .as_deref()
                    .map(|t| format!("<h2>{}</h2>", esc(t)))
                    .unwrap_or_default(),
                markdown(&s.instructions)
            )
        })
        .unwrap_or_default()
}

/// What the participant reads as a Taskmaster-1 speaker (USER, ASSISTANT): the page's word for
/// it. The data values stay USER and ASSISTANT (hidden fields, `data-speaker`, the log).
fn speaker_label(w: &Words, speaker: &str) -> String {
    if speaker.eq_ignore_ascii_case("user") {
        w.get("sd-user")
    } else {
        w.get("sd-assistant")
    }
}

/// The written turns, the fix of the last one, the next turn's form and the submit. `kept` is a
/// form sent back: the turn it carries stays in its box.
fn writing_html(
    w: &Words,
    spec: &SelfDialogs,
    turns: &[String],
    lease: &str,
    seatq: &str,
    kept: &[(String, String)],
) -> String {
    let lease = esc(lease);
    let seatq = esc(seatq);
    let list: String = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let who = self_speaker(i);
            format!(
                "<li class=\"sd-turn sd-{cls}\" data-testid=\"sd-turn\" data-index=\"{i}\" data-speaker=\"{who}\">\
                 <span class=\"sd-who\">{label}</span> <span class=\"sd-text\">{}</span></li>",
                esc(t),
                cls = who.to_ascii_lowercase(),
                label = esc(&speaker_label(w, who)),
            )
        })
        .collect();
    let fix = match turns.len().checked_sub(1) {
        Some(last) => {
            let who = self_speaker(last);
            format!(
                "<details class=\"sd-fix\" data-testid=\"sd-fix\"><summary>{summary}</summary>\
                 <form method=\"post\" action=\"/p/self-dialog/turn{seatq}\">\
                 <input type=\"hidden\" name=\"lease\" value=\"{lease}\"><input type=\"hidden\" name=\"index\" value=\"{last}\">\
                 <input type=\"hidden\" name=\"speaker\" value=\"{who}\">\
                 <textarea name=\"text\" rows=\"2\" maxlength=\"{max}\" required aria-label=\"{aria}\">{text}</textarea>\
                 <button type=\"submit\" data-testid=\"sd-fix-save\">{save}</button></form></details>",
                summary = esc(&w.with("sd-fix", &[("speaker", &speaker_label(w, who))])),
                aria = esc(&w.get("sd-fix-label")),
                save = esc(&w.get("sd-fix-save")),
                max = spec.max_chars,
                text = esc(kept_turn(kept, last).unwrap_or(&turns[last])),
            )
        }
        None => String::new(),
    };
    let n = turns.len();
    let next = if n < spec.max_turns as usize {
        next_turn_form(w, spec, n, &lease, &seatq, kept)
    } else {
        format!(
            "<p data-testid=\"sd-full\">{}</p>",
            esc(&w.with("sd-full", &[("max", &spec.max_turns.to_string())]))
        )
    };
    let submit = submit_dialogue_form(w, spec, n, &lease, &seatq);
    format!("<ol class=\"sd-turns\" data-testid=\"sd-turns\">{list}</ol>{fix}{next}{submit}")
}

/// The text sent back in `kept` for the turn at `index`, if the refused form was that turn's.
fn kept_turn(kept: &[(String, String)], index: usize) -> Option<&str> {
    (field(kept, "index").map(|i| i.trim().to_string()) == Some(index.to_string()))
        .then(|| field(kept, "text"))
        .flatten()
}

/// The form of turn `n`, the next one to write (`lease` and `seatq` already escaped).
fn next_turn_form(
    w: &Words,
    spec: &SelfDialogs,
    n: usize,
    lease: &str,
    seatq: &str,
    kept: &[(String, String)],
) -> String {
    let who = self_speaker(n);
    // The speaker's name is marked inside the sentence, wherever the language puts it.
    let hole = "\u{1}speaker\u{1}";
    let label = esc(&w.with(
        "sd-next",
        &[("turn", &(n + 1).to_string()), ("speaker", hole)],
    ))
    .replace(
        hole,
        &format!(
            "<strong data-testid=\"sd-next-speaker\" class=\"sd-{cls}\">{name}</strong>",
            cls = who.to_ascii_lowercase(),
            name = esc(&speaker_label(w, who)),
        ),
    );
    format!(
        "<form method=\"post\" action=\"/p/self-dialog/turn{seatq}\" class=\"sd-next\" id=\"sd-next\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\"><input type=\"hidden\" name=\"index\" value=\"{n}\">\
         <input type=\"hidden\" name=\"speaker\" value=\"{who}\">\
         <label for=\"sd-text\">{label}</label>\
         <textarea id=\"sd-text\" name=\"text\" rows=\"3\" maxlength=\"{max}\" required autofocus>{typed}</textarea>\
         <button type=\"submit\" class=\"primary\" data-testid=\"sd-add\">{add}</button></form>",
        add = esc(&w.get("sd-add")),
        max = spec.max_chars,
        typed = esc(kept_turn(kept, n).unwrap_or_default()),
    )
}

/// The submit form of a dialogue of `n` turns, with the count of turns (`lease` and `seatq`
/// already escaped).
fn submit_dialogue_form(
    w: &Words,
    spec: &SelfDialogs,
    n: usize,
    lease: &str,
    seatq: &str,
) -> String {
    let missing = (spec.min_turns as usize).saturating_sub(n);
    let (turns_s, min_s, max_s, missing_s) = (
        n.to_string(),
        spec.min_turns.to_string(),
        spec.max_turns.to_string(),
        missing.to_string(),
    );
    let count = if missing > 0 {
        w.with(
            "sd-count-more",
            &[
                ("turns", &turns_s),
                ("min", &min_s),
                ("max", &max_s),
                ("missing", &missing_s),
            ],
        )
    } else {
        w.with(
            "sd-count",
            &[("turns", &turns_s), ("min", &min_s), ("max", &max_s)],
        )
    };
    format!(
        "<form method=\"post\" action=\"/p/self-dialog/submit{seatq}\" class=\"sd-submit\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <p class=\"muted\" data-testid=\"sd-count\">{count}</p>\
         <button type=\"submit\" data-testid=\"sd-submit\"{disabled}{pending}>{label}</button></form>",
        count = esc(&count),
        label = esc(&w.get("sd-submit")),
        disabled = if missing > 0 { " disabled" } else { "" },
        pending = pending_form(
            pending_form_of(EvalTask::SelfDialog, n, Some(spec)),
            &format!("/p/self-dialog/submit{seatq}")
        ),
    )
}

/// The utterances, the spans marked so far, the marking form and the submit.
fn spans_html(
    w: &Words,
    spec: &SpanAnnotation,
    utterances: &[(String, &str)],
    spans: &[Span],
    lease: &str,
    seatq: &str,
    kept: &[(String, String)],
) -> String {
    let lease = esc(lease);
    let seatq = esc(seatq);
    let list: String = utterances
        .iter()
        .enumerate()
        .map(|(i, (who, text))| {
            format!(
                "<li class=\"sd-turn sd-{cls}\" data-testid=\"sp-turn\" data-index=\"{i}\" data-speaker=\"{who}\">\
                 <span class=\"sd-who\">{i}. {label}</span> <span class=\"sp-text\" data-turn=\"{i}\">{}</span> \
                 <small class=\"muted\">{chars}</small></li>",
                esc(text),
                cls = who.to_ascii_lowercase(),
                label = esc(&speaker_label(w, who)),
                chars = esc(&w.with(
                    "sp-characters",
                    &[("count", &text.chars().count().to_string())]
                )),
            )
        })
        .collect();
    format!(
        "<ol class=\"sd-turns sp-turns\" data-testid=\"sp-turns\" start=\"0\">{list}</ol>{table}{forms}",
        table = spans_table(w, spans, &lease, &seatq),
        forms = mark_forms(w, spec, utterances.len(), &lease, &seatq, kept),
    )
}

/// The spans marked so far, each with its remove button (`lease` and `seatq` already escaped).
fn spans_table(w: &Words, spans: &[Span], lease: &str, seatq: &str) -> String {
    if spans.is_empty() {
        return format!(
            "<p class=\"muted\" data-testid=\"sp-none\">{}</p>",
            esc(&w.get("sp-none"))
        );
    }
    let remove = esc(&w.get("sp-remove"));
    let marked: String = spans
        .iter()
        .enumerate()
        .map(|(n, s)| {
            format!(
                "<tr data-testid=\"sp-span\"><td>{}</td><td>{}–{}</td><td>“{}”</td><td>{}</td><td>\
                 <form method=\"post\" action=\"/p/spans/remove{seatq}\"><input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
                 <input type=\"hidden\" name=\"n\" value=\"{n}\"><button type=\"submit\">{remove}</button></form></td></tr>",
                s.turn,
                s.start_index,
                s.end_index,
                esc(&s.text),
                esc(&s.slot)
            )
        })
        .collect();
    format!(
        "<table class=\"sp-spans\"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th></th></tr></thead>\
         <tbody>{marked}</tbody></table>",
        esc(&w.get("sp-utterance")),
        esc(&w.get("sp-characters-head")),
        esc(&w.get("sp-text")),
        esc(&w.get("sp-slot")),
    )
}

/// The marking form (over `utterances` utterances) and the submit (`lease` and `seatq` already
/// escaped). What a refused form sent back in `kept` stays in the marking form.
fn mark_forms(
    w: &Words,
    spec: &SpanAnnotation,
    utterances: usize,
    lease: &str,
    seatq: &str,
    kept: &[(String, String)],
) -> String {
    let typed = |name: &str| esc(field(kept, name).unwrap_or_default());
    let chosen = |name: &str, value: &str| {
        if field(kept, name) == Some(value) {
            " selected"
        } else {
            ""
        }
    };
    let turn_options: String = (0..utterances)
        .map(|i| {
            format!(
                "<option value=\"{i}\"{}>{i}</option>",
                chosen("turn", &i.to_string())
            )
        })
        .collect();
    let slot_options: String = spec
        .slots
        .iter()
        .map(|s| {
            format!(
                "<option value=\"{0}\"{1}>{0}</option>",
                esc(s),
                chosen("slot", s)
            )
        })
        .collect();
    format!(
        "<form method=\"post\" action=\"/p/spans/mark{seatq}\" class=\"sp-mark\" id=\"sp-mark\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <p class=\"muted\">{help}</p>\
         <label>{utterance} <select name=\"turn\" id=\"sp-turn\">{turn_options}</select></label>\
         <label>{words} <input type=\"text\" name=\"text\" id=\"sp-words\" value=\"{words_typed}\"></label>\
         <label>{from} <input type=\"number\" name=\"start\" id=\"sp-start\" min=\"0\" value=\"{start_typed}\"></label>\
         <label>{to} <input type=\"number\" name=\"end\" id=\"sp-end\" min=\"1\" value=\"{end_typed}\"></label>\
         <label>{slot} <select name=\"slot\" id=\"sp-slot\" data-testid=\"sp-slot\">{slot_options}</select></label>\
         <button type=\"submit\" data-testid=\"sp-add\">{mark}</button></form>\
         <form method=\"post\" action=\"/p/spans/submit{seatq}\" class=\"sd-submit\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <button type=\"submit\" class=\"primary\" data-testid=\"sp-submit\"{pending}>{submit}</button></form>",
        pending = pending_form(Some("sp-mark"), &format!("/p/spans/submit{seatq}")),
        words_typed = typed("text"),
        start_typed = typed("start"),
        end_typed = typed("end"),
        help = esc(&w.get("sp-help")),
        utterance = esc(&w.get("sp-utterance")),
        words = esc(&w.get("sp-words")),
        from = esc(&w.get("sp-from")),
        to = esc(&w.get("sp-to")),
        slot = esc(&w.get("sp-slot")),
        mark = esc(&w.get("sp-mark")),
        submit = esc(&w.get("sp-submit")),
    )
}

/// The form where a turn is typed before it is added (`sd-next`, absent once the dialogue has
/// all its turns) or a span before it is marked (`sp-mark`).
fn pending_form_of(
    task: EvalTask,
    turns: usize,
    spec: Option<&SelfDialogs>,
) -> Option<&'static str> {
    match task {
        EvalTask::SelfDialog => spec
            .is_some_and(|s| turns < s.max_turns as usize)
            .then_some("sd-next"),
        EvalTask::Spans => Some("sp-mark"),
        _ => None,
    }
}

/// The attributes that make a button outside the form `form` send it to `action`: a submit or
/// skip then carries what is typed there and not yet added, so that it is refused with a message
/// (submit) or kept in the log (skip), never silently dropped. Without that form on the page,
/// nothing: the button's own form is sent.
fn pending_form(form: Option<&str>, action: &str) -> String {
    form.map(|form| {
        format!(
            " form=\"{}\" formaction=\"{}\" formnovalidate",
            esc(form),
            esc(action)
        )
    })
    .unwrap_or_default()
}

/// Whether a posted form carries a turn or a span typed and not yet added.
fn pending_in(fields: &Fields, names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| field(fields, n).is_some_and(|v| !v.trim().is_empty()))
}

/// What is wrong with a written turn, in the page's language (the core's `Display` is the
/// English of logs and the CLI).
fn turn_problem(w: &Words, problem: &TurnProblem) -> String {
    match problem {
        TurnProblem::Empty => w.get("sd-problem-empty"),
        TurnProblem::TooLong { max } => w.with("sd-problem-too-long", &[("max", &max.to_string())]),
        TurnProblem::Full { max } => w.with("sd-problem-full", &[("max", &max.to_string())]),
        // The page numbers turns from 1, where the core's indexes count from 0; the turn itself
        // is named by the message's prefix (`sd-problem-turn`).
        TurnProblem::OutOfOrder { expected, .. } => w.with(
            "sd-problem-out-of-order",
            &[("next", &(expected + 1).to_string())],
        ),
        TurnProblem::WrongSpeaker { expected, .. } => w.with(
            "sd-problem-wrong-speaker",
            &[("speaker", &speaker_label(w, expected))],
        ),
    }
}

/// What is wrong with a span, in the page's language (the core's `Display` is the English of
/// logs and the CLI).
fn span_problem(w: &Words, problem: &SpanProblem) -> String {
    match problem {
        SpanProblem::NoTurn { turn, turns } => w.with(
            "sp-problem-no-turn",
            &[
                ("turn", &turn.to_string()),
                ("turns", &turns.to_string()),
                ("last", &turns.saturating_sub(1).to_string()),
            ],
        ),
        SpanProblem::Empty { start, end } => w.with(
            "sp-problem-empty",
            &[("start", &start.to_string()), ("end", &end.to_string())],
        ),
        SpanProblem::PastEnd { end, len } => w.with(
            "sp-problem-past-end",
            &[("end", &end.to_string()), ("len", &len.to_string())],
        ),
        SpanProblem::UnknownSlot { slot } => {
            w.with("sp-problem-unknown-slot", &[("slot", slot.as_str())])
        }
        SpanProblem::TextMismatch { found, given } => w.with(
            "sp-problem-text-mismatch",
            &[("found", found.as_str()), ("given", given.as_str())],
        ),
    }
}

/// The Taskmaster-1 speaker of a dialogue turn's speaker (`user` → USER; anything else is the
/// assistant).
fn tm_speaker(speaker: &str) -> String {
    if speaker.eq_ignore_ascii_case("user") {
        "USER".into()
    } else {
        "ASSISTANT".into()
    }
}

/// The page again with a problem (422).
async fn refused(
    app: &AppState,
    study: &LoadedStudy,
    p: &Participant,
    lease: &Lease,
    seat: Option<&str>,
    problem: String,
    kept: &[(String, String)],
) -> Result<Response, HttpError> {
    let ev = study.study.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let f = eval::facts(app, p).await?;
    let html = item_page(app, study, ev, p, lease, &f, seat, &[problem], kept).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response())
}

/// Records one annotation of the participant's current item in their log and sends them back
/// to their page: what every form of these pages does once it has checked its fields.
async fn annotate(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    key: &str,
    value: Value,
    seat: Option<&str>,
) -> Result<Response, HttpError> {
    eval::record(
        app,
        p,
        study,
        vec![EventKind::Annotation {
            key: key.into(),
            value,
        }],
    )
    .await?;
    Ok(to_page(seat))
}

/// `POST /p/self-dialog/turn`: `lease`, `index`, `speaker` (optional), `text`.
async fn turn(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::SelfDialog).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let spec = study
        .study
        .evaluation
        .as_ref()
        .and_then(|e| e.self_dialog.as_ref())
        .ok_or(HttpError::NotFound)?;
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let mut turns = written_turns(&events, &lease.id);
    let index = match field(&fields, "index").map(str::parse::<usize>) {
        Some(Ok(i)) => i,
        _ => turns.len(),
    };
    let text = fields
        .iter()
        .find(|(n, _)| n == "text")
        .map_or("", |(_, v)| v.as_str());
    let written = match write_turn(spec, &mut turns, index, field(&fields, "speaker"), text) {
        Ok(t) => t,
        Err(problem) => {
            let w = words(study.study.language);
            let msg = w.with(
                "sd-problem-turn",
                &[
                    ("n", &(index + 1).to_string()),
                    ("problem", &turn_problem(w, &problem)),
                ],
            );
            return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
        }
    };
    let value = json!({
        "lease": lease.id,
        "item": lease.item_id,
        "index": index,
        "speaker": self_speaker(index),
        "text": written,
    });
    annotate(&app, &p, &study, SELF_DIALOG_TURN, value, seat.as_deref()).await
}

/// `POST /p/self-dialog/submit`: `lease`. Needs `min_turns` turns.
async fn submit_dialogue(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::SelfDialog).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let st = &study.study;
    let spec = st
        .evaluation
        .as_ref()
        .and_then(|e| e.self_dialog.as_ref())
        .ok_or(HttpError::NotFound)?;
    if pending_in(&fields, &["text"]) {
        let msg = words(st.language).get("sd-problem-unsent");
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
    }
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let turns = written_turns(&events, &lease.id);
    if turns.len() < spec.min_turns as usize {
        let msg = words(st.language).with(
            "sd-problem-too-few",
            &[
                ("turns", &turns.len().to_string()),
                ("min", &spec.min_turns.to_string()),
            ],
        );
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
    }
    let utterances: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"index": i, "speaker": self_speaker(i), "text": t}))
        .collect();
    let mut answers = IndexMap::new();
    answers.insert("conversation_id".into(), json!(conversation_id(&lease.id)));
    answers.insert("utterances".into(), Value::Array(utterances));
    let outcome = submit_form_judgment(
        &app,
        &p,
        &study,
        &lease,
        (vec![String::new()], vec![lease.item_id.clone()]),
        answers,
    )
    .await?;
    // Test participants' dialogues stay in their logs only, out of the exports and `from_store`.
    if outcome == SubmitOutcome::Counted && !p.is_test() {
        store_dialogue(&app, &study, &p, &lease, &turns).await?;
    }
    Ok(to_page(seat.as_deref()))
}

/// Writes a counted self-dialog as an ended dialogue session `dlg-<lease>` laid out as a
/// Taskmaster-1 conversation: the `taskmaster1.dialogue` annotation (`conversation_id`,
/// `instruction_id`, the place of `utterances`), then each utterance as a message (USER as the
/// user, ASSISTANT as the wizard) followed by its `taskmaster1.turn` annotation (`index`).
/// Idempotent: an existing session is left as it is.
async fn store_dialogue(
    app: &AppState,
    study: &LoadedStudy,
    p: &Participant,
    lease: &Lease,
    turns: &[String],
) -> Result<(), HttpError> {
    let id = conversation_id(&lease.id);
    if app.store.session(&id).await?.is_some() {
        return Ok(());
    }
    let now = now_ms();
    app.store
        .create_session(NewSession {
            id: id.clone(),
            study_id: study.study.id.clone(),
            study_version: study.study.version.clone(),
            seed: seed_of(&id),
            created_at_ms: now,
        })
        .await?;
    let actor = eval::actor(p);
    let event = |kind: EventKind| NewEvent {
        actor: actor.clone(),
        kind,
        at_ms: now,
    };
    let mut events = vec![event(EventKind::Annotation {
        key: "taskmaster1.dialogue".into(),
        value: json!({
            "conversation_id": id,
            "instruction_id": lease.item_id,
            "utterances": null,
        }),
    })];
    for (i, text) in turns.iter().enumerate() {
        let role = if i % 2 == 0 { Role::User } else { Role::Wizard };
        events.push(NewEvent {
            actor: Actor::Participant {
                role,
                participant: Some(p.id.clone()),
            },
            kind: EventKind::Message {
                role,
                text: text.clone(),
                source: MessageSource::Free,
            },
            at_ms: now,
        });
        events.push(event(EventKind::Annotation {
            key: "taskmaster1.turn".into(),
            value: json!({ "index": i }),
        }));
    }
    app.store.append(&id, events).await?;
    app.store.end_session(&id, EndReason::Finished, now).await?;
    Ok(())
}

/// The utterances of a span item's dialogue.
fn utterances_of<'a>(ev: &'a Evaluation, lease: &Lease) -> Vec<&'a str> {
    lease
        .dialogues
        .first()
        .and_then(|d| ev.dialogue(d))
        .map(|d| d.turns.iter().map(|t| t.text.as_str()).collect())
        .unwrap_or_default()
}

/// `POST /p/spans/mark`: `lease`, `turn`, `slot`, and either `start` and `end` (character
/// offsets, end excluded; `text`, if given, must be what they select) or `text` alone (its
/// first occurrence in the utterance).
async fn mark(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::Spans).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let ev = study.study.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let spec = ev.spans.as_ref().ok_or(HttpError::NotFound)?;
    let utterances = utterances_of(ev, &lease);
    let w = words(study.study.language);
    let number = |name: &str| -> Result<Option<u32>, String> {
        match field(&fields, name) {
            None => Ok(None),
            Some(v) => v
                .parse::<u32>()
                .map(Some)
                .map_err(|_| w.with(&format!("sp-problem-number-{name}"), &[("value", v)])),
        }
    };
    let text = field(&fields, "text");
    let found = (|| -> Result<Span, String> {
        let turn = number("turn")?.ok_or_else(|| w.get("sp-problem-turn"))?;
        let slot = field(&fields, "slot").ok_or_else(|| w.get("sp-problem-slot"))?;
        let (start, end) = match (number("start")?, number("end")?, text) {
            (Some(s), Some(e), _) => (s, e),
            (None, None, Some(said)) => {
                let n = turn.to_string();
                let utterance = utterances
                    .get(turn as usize)
                    .ok_or_else(|| w.with("sp-problem-missing", &[("turn", &n)]))?;
                let at = utterance.find(said).ok_or_else(|| {
                    w.with("sp-problem-not-found", &[("turn", &n), ("words", said)])
                })?;
                let start = utterance[..at].chars().count() as u32;
                (start, start + said.chars().count() as u32)
            }
            _ => return Err(w.get("sp-problem-offsets")),
        };
        check_span(&utterances, &spec.slots, turn, start, end, slot, text)
            .map_err(|e| span_problem(w, &e))
    })();
    let span = match found {
        Ok(span) => span,
        Err(msg) => {
            let msg = w.with("sp-problem-not-marked", &[("problem", &msg)]);
            return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
        }
    };
    let mut value =
        serde_json::to_value(&span).map_err(|e| HttpError::BadRequest(e.to_string()))?;
    value["lease"] = json!(lease.id);
    value["item"] = json!(lease.item_id);
    annotate(&app, &p, &study, SPAN_MARK, value, seat.as_deref()).await
}

/// `POST /p/spans/remove`: `lease`, `n` (the position of the span in the list, from 0).
async fn remove(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::Spans).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let count = marked_spans(&events, &lease.id).len();
    match field(&fields, "n").map(str::parse::<usize>) {
        Some(Ok(n)) if n < count => {
            let value = json!({"lease": lease.id, "item": lease.item_id, "remove": n});
            annotate(&app, &p, &study, SPAN_MARK, value, seat.as_deref()).await
        }
        _ => {
            let msg = words(study.study.language)
                .with("sp-problem-remove", &[("count", &count.to_string())]);
            refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await
        }
    }
}

/// `POST /p/spans/submit`: `lease`. Needs `min_spans` spans.
async fn submit_spans(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let (p, study, lease) = match lease_form(&app, me, &fields, EvalTask::Spans).await? {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let st = &study.study;
    let ev = st.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let spec = ev.spans.as_ref().ok_or(HttpError::NotFound)?;
    if pending_in(&fields, &["text", "start", "end"]) {
        let msg = words(st.language).get("sp-problem-unsent");
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
    }
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let spans = marked_spans(&events, &lease.id);
    if spans.len() < spec.min_spans as usize {
        let msg = words(st.language).with(
            "sp-problem-too-few",
            &[
                ("count", &spans.len().to_string()),
                ("min", &spec.min_spans.to_string()),
            ],
        );
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg, &fields).await;
    }
    let mut answers = IndexMap::new();
    answers.insert(
        "spans".into(),
        serde_json::to_value(&spans).map_err(|e| HttpError::BadRequest(e.to_string()))?,
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

/// The query of the Taskmaster-1 export.
#[derive(serde::Deserialize)]
pub struct ExportQuery {
    /// Another span study whose judgments to include (besides the served ones that select
    /// this study with `from_store`).
    spans: Option<String>,
}

/// `GET /researcher/study/{study}/taskmaster1.json`: the dialogues of a self-dialog study as a
/// Taskmaster-1 file (a JSON array of conversations; a counted dialogue whose session is missing
/// is written from its judgment first), each utterance with the `segments` of
/// every counted judgment of the span studies over them (the served `spans` studies whose
/// `from_store` selects this study, and `?spans=STUDY`): spans several annotators marked alike
/// are one segment listing each annotator's name, as the published data keeps both annotators'.
async fn export(
    State(app): State<AppState>,
    _: super::extract::ResearcherPage,
    axum::extract::Path(study): axum::extract::Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, HttpError> {
    use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
    use wozkit_store::{SessionFilter, SessionKind, SessionStatus};
    let served = app.study(Some(&study)).ok_or(HttpError::NotFound)?;
    if served.study.evaluation.as_ref().map(|e| e.task) != Some(EvalTask::SelfDialog) {
        return Err(HttpError::BadRequest(format!(
            "study `{study}` is not a self-dialog study (`evaluation.task: self_dialog`)"
        )));
    }
    repair_dialogues(&app, &served).await?;
    let filter = SessionFilter {
        study_id: Some(study.clone()),
        kind: SessionKind::Dialogue,
        status: Some(SessionStatus::Ended),
        ..SessionFilter::default()
    };
    let mut dialogues = vec![];
    for s in app.store.list_sessions(&filter).await? {
        let events = app.store.events(&s.id, 0).await?;
        dialogues.push(wozkit_data::ImportedSession { id: s.id, events });
    }
    let mut span_studies: Vec<String> = app
        .studies
        .values()
        .filter_map(|s| s.study.evaluation.as_ref().map(|e| (s.study.id.clone(), e)))
        .filter(|(_, e)| {
            e.task == EvalTask::Spans && e.store_selections().iter().any(|sel| sel.study == study)
        })
        .map(|(id, _)| id)
        .collect();
    span_studies.extend(q.spans.filter(|s| !span_studies.contains(s)));
    let judgments = wozkit_data::stored::span_judgments(&*app.store, &span_studies).await?;
    wozkit_data::add_segments(&mut dialogues, &judgments);
    let mut out = Vec::new();
    wozkit_data::export_taskmaster1(&dialogues, &mut out).map_err(|e| {
        HttpError::BadRequest(format!("the Taskmaster-1 export of `{study}` failed: {e}"))
    })?;
    Ok((
        StatusCode::OK,
        [
            (CONTENT_TYPE, "application/json".to_string()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{study}.taskmaster1.json\""),
            ),
        ],
        out,
    )
        .into_response())
}

/// Writes the dialogue session of every counted self-dialog judgment that has none (the
/// server stopped between the judgment and the session): the judgment holds the utterances.
async fn repair_dialogues(app: &AppState, study: &LoadedStudy) -> Result<(), HttpError> {
    use wozkit_store::{SessionFilter, SessionKind};
    let logs = SessionFilter {
        study_id: Some(study.study.id.clone()),
        kind: SessionKind::Participant,
        ..SessionFilter::default()
    };
    for log in app.store.list_sessions(&logs).await? {
        for e in app.store.events(&log.id, 0).await? {
            let EventKind::Judged(j) = e.kind else {
                continue;
            };
            if !j.counted
                || app
                    .store
                    .session(&conversation_id(&j.lease))
                    .await?
                    .is_some()
            {
                continue;
            }
            let Some(lease) = app.store.lease(&j.lease).await? else {
                continue;
            };
            let Some(p) = app.store.participant(&lease.worker).await? else {
                continue;
            };
            if p.is_test() {
                continue;
            }
            let turns: Vec<String> = j
                .answers
                .get("utterances")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|u| u.get("text").and_then(Value::as_str).map(str::to_string))
                .collect();
            if !turns.is_empty() {
                store_dialogue(app, study, &p, &lease, &turns).await?;
            }
        }
    }
    Ok(())
}
