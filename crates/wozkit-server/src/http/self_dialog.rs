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
//! | route | what |
//! |---|---|
//! | `POST /p/self-dialog/turn` | write the next turn, or fix the last one |
//! | `POST /p/self-dialog/submit` | submit the dialogue |
//! | `POST /p/spans/mark`, `POST /p/spans/remove` | mark a span, remove one |
//! | `POST /p/spans/submit` | submit the spans |
//! | `GET /researcher/study/{study}/taskmaster1.json[?spans=STUDY]` | the Taskmaster-1 export |

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::evaluation::{
    EvalTask, Evaluation, SELF_DIALOG_TURN, SPAN_MARK, SelfDialogs, Span, SpanAnnotation,
    check_span, marked_spans, self_speaker, write_turn, written_turns,
};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::questions::seed_of;
use wozkit_store::{Lease, NewEvent, NewSession, Participant, SubmitOutcome};

use super::html::{esc, layout, markdown};
use super::judge::{Fields, field, lease_dialogues, lease_form, page_head, submit_form_judgment};
use super::pages::{SeatQuery, to_page};
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::evaluation::{self as eval, Facts};
use crate::flow;
use crate::security::seat_query;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/p/self-dialog/turn", post(turn))
        .route("/p/self-dialog/submit", post(submit_dialogue))
        .route("/p/spans/mark", post(mark))
        .route("/p/spans/remove", post(remove))
        .route("/p/spans/submit", post(submit_spans))
        .route("/researcher/study/{study}/taskmaster1.json", get(export))
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
) -> Result<String, HttpError> {
    let events = app.store.events(&eval::log_id(p), 0).await?;
    let role = p.role.unwrap_or(Role::User);
    let page = flow::pages(&study.study, role).get(flow::index(&p.flow_step));
    let seatq = seat_query(seat);
    let problems_html: String = problems
        .iter()
        .map(|m| {
            format!(
                "<p class=\"problem\" role=\"alert\" data-testid=\"sd-problem\">{}</p>",
                esc(m)
            )
        })
        .collect();
    let progress = format!(
        "<p class=\"muted\" data-testid=\"item-progress\">Item {} of at most {} · please submit within {} minutes</p>",
        f.judged.min(ev.items_per_worker) + 1,
        ev.items_per_worker,
        ev.lease_s.div_ceil(60)
    );
    let skip = format!(
        "<form method=\"post\" action=\"/p/skip{seatq}\" class=\"skip\"><input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <button type=\"submit\" data-testid=\"judge-skip\">Skip this one</button></form>",
        seatq = esc(&seatq),
        lease = esc(&lease.id),
    );
    let body = match (ev.task, &ev.self_dialog, &ev.spans) {
        (EvalTask::SelfDialog, Some(spec), _) => {
            let turns = written_turns(&events, &lease.id);
            let scenario = ev.scenario(&lease.item_id);
            let instructions = scenario
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
                .unwrap_or_default();
            format!(
                "<main class=\"self-dialog\" data-page=\"self-dialog\" data-testid=\"self-dialog\" data-item=\"{item}\">\
                 {head}{progress}{instructions}{problems_html}{writing}{skip}</main>",
                item = esc(&lease.item_id),
                head = page_head(page, "Write both sides of the conversation"),
                writing = writing_html(spec, &turns, &lease.id, &seatq),
            )
        }
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
                head = page_head(page, "Mark the details in the conversation"),
                context = dialogue
                    .and_then(|d| d.context.as_deref())
                    .map(|c| format!("<div class=\"context\">{}</div>", markdown(c)))
                    .unwrap_or_default(),
                prompt = spec
                    .prompt
                    .as_deref()
                    .map(|t| format!("<div class=\"annotate-prompt\">{}</div>", markdown(t)))
                    .unwrap_or_default(),
                marking = spans_html(spec, &utterances, &spans, &lease.id, &seatq),
            )
        }
        _ => return Err(HttpError::NotFound),
    };
    Ok(layout(&study.study.title, &body, &["selfdialog.js"]))
}

/// The written turns, the fix of the last one, the next turn's form and the submit.
fn writing_html(spec: &SelfDialogs, turns: &[String], lease: &str, seatq: &str) -> String {
    let lease = esc(lease);
    let seatq = esc(seatq);
    let list: String = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let who = self_speaker(i);
            format!(
                "<li class=\"sd-turn sd-{cls}\" data-testid=\"sd-turn\" data-index=\"{i}\" data-speaker=\"{who}\">\
                 <span class=\"sd-who\">{who}</span> <span class=\"sd-text\">{}</span></li>",
                esc(t),
                cls = who.to_ascii_lowercase(),
            )
        })
        .collect();
    let fix = match turns.len().checked_sub(1) {
        Some(last) => format!(
            "<details class=\"sd-fix\" data-testid=\"sd-fix\"><summary>Fix the last turn ({who})</summary>\
             <form method=\"post\" action=\"/p/self-dialog/turn{seatq}\">\
             <input type=\"hidden\" name=\"lease\" value=\"{lease}\"><input type=\"hidden\" name=\"index\" value=\"{last}\">\
             <input type=\"hidden\" name=\"speaker\" value=\"{who}\">\
             <textarea name=\"text\" rows=\"2\" maxlength=\"{max}\" required aria-label=\"The last turn\">{text}</textarea>\
             <button type=\"submit\" data-testid=\"sd-fix-save\">Save the fix</button></form></details>",
            who = self_speaker(last),
            max = spec.max_chars,
            text = esc(&turns[last]),
        ),
        None => String::new(),
    };
    let n = turns.len();
    let next = if n < spec.max_turns as usize {
        let who = self_speaker(n);
        format!(
            "<form method=\"post\" action=\"/p/self-dialog/turn{seatq}\" class=\"sd-next\" id=\"sd-next\">\
             <input type=\"hidden\" name=\"lease\" value=\"{lease}\"><input type=\"hidden\" name=\"index\" value=\"{n}\">\
             <input type=\"hidden\" name=\"speaker\" value=\"{who}\">\
             <label for=\"sd-text\">Turn {turn}: <strong data-testid=\"sd-next-speaker\" class=\"sd-{cls}\">{who}</strong> says</label>\
             <textarea id=\"sd-text\" name=\"text\" rows=\"3\" maxlength=\"{max}\" required autofocus></textarea>\
             <button type=\"submit\" class=\"primary\" data-testid=\"sd-add\">Add this turn</button></form>",
            turn = n + 1,
            cls = who.to_ascii_lowercase(),
            max = spec.max_chars,
        )
    } else {
        format!(
            "<p data-testid=\"sd-full\">The conversation has its {} turns: submit it.</p>",
            spec.max_turns
        )
    };
    let missing = (spec.min_turns as usize).saturating_sub(n);
    let submit = format!(
        "<form method=\"post\" action=\"/p/self-dialog/submit{seatq}\" class=\"sd-submit\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <p class=\"muted\" data-testid=\"sd-count\">{n} turns written; between {min} and {max} are needed{more}.</p>\
         <button type=\"submit\" data-testid=\"sd-submit\"{disabled}>Submit the conversation</button></form>",
        min = spec.min_turns,
        max = spec.max_turns,
        more = if missing > 0 {
            format!(" ({missing} more before you can submit)")
        } else {
            String::new()
        },
        disabled = if missing > 0 { " disabled" } else { "" },
    );
    format!("<ol class=\"sd-turns\" data-testid=\"sd-turns\">{list}</ol>{fix}{next}{submit}")
}

/// The utterances, the spans marked so far, the marking form and the submit.
fn spans_html(
    spec: &SpanAnnotation,
    utterances: &[(String, &str)],
    spans: &[Span],
    lease: &str,
    seatq: &str,
) -> String {
    let lease = esc(lease);
    let seatq = esc(seatq);
    let list: String = utterances
        .iter()
        .enumerate()
        .map(|(i, (who, text))| {
            format!(
                "<li class=\"sd-turn sd-{cls}\" data-testid=\"sp-turn\" data-index=\"{i}\">\
                 <span class=\"sd-who\">{i}. {who}</span> <span class=\"sp-text\" data-turn=\"{i}\">{}</span> \
                 <small class=\"muted\">({} characters)</small></li>",
                esc(text),
                text.chars().count(),
                cls = who.to_ascii_lowercase(),
            )
        })
        .collect();
    let marked: String = spans
        .iter()
        .enumerate()
        .map(|(n, s)| {
            format!(
                "<tr data-testid=\"sp-span\"><td>{}</td><td>{}–{}</td><td>“{}”</td><td>{}</td><td>\
                 <form method=\"post\" action=\"/p/spans/remove{seatq}\"><input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
                 <input type=\"hidden\" name=\"n\" value=\"{n}\"><button type=\"submit\">Remove</button></form></td></tr>",
                s.turn,
                s.start_index,
                s.end_index,
                esc(&s.text),
                esc(&s.slot)
            )
        })
        .collect();
    let table = if spans.is_empty() {
        "<p class=\"muted\" data-testid=\"sp-none\">No span marked yet.</p>".to_string()
    } else {
        format!(
            "<table class=\"sp-spans\"><thead><tr><th>Utterance</th><th>Characters</th><th>Text</th><th>Slot</th><th></th></tr></thead>\
             <tbody>{marked}</tbody></table>"
        )
    };
    let turn_options: String = (0..utterances.len())
        .map(|i| format!("<option value=\"{i}\">{i}</option>"))
        .collect();
    let slot_options: String = spec
        .slots
        .iter()
        .map(|s| format!("<option value=\"{0}\">{0}</option>", esc(s)))
        .collect();
    format!(
        "<ol class=\"sd-turns sp-turns\" data-testid=\"sp-turns\" start=\"0\">{list}</ol>{table}\
         <form method=\"post\" action=\"/p/spans/mark{seatq}\" class=\"sp-mark\" id=\"sp-mark\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <p class=\"muted\">Select the words in an utterance, or give the utterance and the exact words \
         (the first place they occur is marked), or the character offsets (from 0; the end is not included).</p>\
         <label>Utterance <select name=\"turn\" id=\"sp-turn\">{turn_options}</select></label>\
         <label>Words <input type=\"text\" name=\"text\" id=\"sp-words\"></label>\
         <label>From <input type=\"number\" name=\"start\" id=\"sp-start\" min=\"0\"></label>\
         <label>To <input type=\"number\" name=\"end\" id=\"sp-end\" min=\"1\"></label>\
         <label>Slot <select name=\"slot\" id=\"sp-slot\" data-testid=\"sp-slot\">{slot_options}</select></label>\
         <button type=\"submit\" data-testid=\"sp-add\">Mark</button></form>\
         <form method=\"post\" action=\"/p/spans/submit{seatq}\" class=\"sd-submit\">\
         <input type=\"hidden\" name=\"lease\" value=\"{lease}\">\
         <button type=\"submit\" class=\"primary\" data-testid=\"sp-submit\">Submit the spans</button></form>"
    )
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
) -> Result<Response, HttpError> {
    let ev = study.study.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let f = eval::facts(app, p).await?;
    let html = item_page(app, study, ev, p, lease, &f, seat, &[problem]).await?;
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
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = q.seat();
    let (p, study, lease) = match lease_form(
        &app,
        &headers,
        seat.as_deref(),
        &fields,
        EvalTask::SelfDialog,
    )
    .await?
    {
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
            let msg = format!("Turn {}: {problem}.", index + 1);
            return refused(&app, &study, &p, &lease, seat.as_deref(), msg).await;
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
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = q.seat();
    let (p, study, lease) = match lease_form(
        &app,
        &headers,
        seat.as_deref(),
        &fields,
        EvalTask::SelfDialog,
    )
    .await?
    {
        Ok(c) => c,
        Err(res) => return Ok(res),
    };
    let st = &study.study;
    let spec = st
        .evaluation
        .as_ref()
        .and_then(|e| e.self_dialog.as_ref())
        .ok_or(HttpError::NotFound)?;
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let turns = written_turns(&events, &lease.id);
    if turns.len() < spec.min_turns as usize {
        let msg = format!(
            "The conversation has {} turns; write at least {} before submitting.",
            turns.len(),
            spec.min_turns
        );
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg).await;
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
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = q.seat();
    let (p, study, lease) =
        match lease_form(&app, &headers, seat.as_deref(), &fields, EvalTask::Spans).await? {
            Ok(c) => c,
            Err(res) => return Ok(res),
        };
    let ev = study.study.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let spec = ev.spans.as_ref().ok_or(HttpError::NotFound)?;
    let utterances = utterances_of(ev, &lease);
    let number = |name: &str| -> Result<Option<u32>, String> {
        match field(&fields, name) {
            None => Ok(None),
            Some(v) => v
                .parse::<u32>()
                .map(Some)
                .map_err(|_| format!("`{name}` must be a whole number from 0, not {v:?}")),
        }
    };
    let text = field(&fields, "text");
    let found = (|| -> Result<Span, String> {
        let turn = number("turn")?.ok_or("choose the utterance (`turn`)")?;
        let slot = field(&fields, "slot").ok_or("choose a slot name (`slot`)")?;
        let (start, end) = match (number("start")?, number("end")?, text) {
            (Some(s), Some(e), _) => (s, e),
            (None, None, Some(words)) => {
                let utterance = utterances
                    .get(turn as usize)
                    .ok_or_else(|| format!("utterance {turn} does not exist"))?;
                let at = utterance
                    .find(words)
                    .ok_or_else(|| format!("utterance {turn} does not contain {words:?}"))?;
                let start = utterance[..at].chars().count() as u32;
                (start, start + words.chars().count() as u32)
            }
            _ => return Err("give both offsets (`start` and `end`), or the words".into()),
        };
        check_span(&utterances, &spec.slots, turn, start, end, slot, text)
            .map_err(|e| e.to_string())
    })();
    let span = match found {
        Ok(span) => span,
        Err(msg) => {
            let msg = format!("The span was not marked: {msg}.");
            return refused(&app, &study, &p, &lease, seat.as_deref(), msg).await;
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
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = q.seat();
    let (p, study, lease) =
        match lease_form(&app, &headers, seat.as_deref(), &fields, EvalTask::Spans).await? {
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
            let msg = format!("No such span to remove: {count} are marked.");
            refused(&app, &study, &p, &lease, seat.as_deref(), msg).await
        }
    }
}

/// `POST /p/spans/submit`: `lease`. Needs `min_spans` spans.
async fn submit_spans(
    State(app): State<AppState>,
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, HttpError> {
    let seat = q.seat();
    let (p, study, lease) =
        match lease_form(&app, &headers, seat.as_deref(), &fields, EvalTask::Spans).await? {
            Ok(c) => c,
            Err(res) => return Ok(res),
        };
    let st = &study.study;
    let ev = st.evaluation.as_ref().ok_or(HttpError::NotFound)?;
    let spec = ev.spans.as_ref().ok_or(HttpError::NotFound)?;
    let events = app.store.events(&eval::log_id(&p), 0).await?;
    let spans = marked_spans(&events, &lease.id);
    if spans.len() < spec.min_spans as usize {
        let msg = format!(
            "{} spans are marked; mark at least {} before submitting.",
            spans.len(),
            spec.min_spans
        );
        return refused(&app, &study, &p, &lease, seat.as_deref(), msg).await;
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
    headers: HeaderMap,
    axum::extract::Path(study): axum::extract::Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, HttpError> {
    use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
    use wozkit_store::{SessionFilter, SessionKind, SessionStatus};
    let next = format!("/researcher/study/{study}/taskmaster1.json");
    if let Err(res) =
        super::researcher::require_page(&app, &headers, &next, crate::auth::Access::Observer).await
    {
        return Ok(res);
    }
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
