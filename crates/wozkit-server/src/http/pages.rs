//! The participant's pages: `GET /p` renders wherever the participant is in the flow, and
//! `POST /p/next` accepts a consent or instructions page. The room and the waiting room are
//! skeletons filled by their scripts over the WebSocket.

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use wozkit_core::event::{Actor, EndReason, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_core::platforms::EndingKind;
use wozkit_store::{NewEvent, Participant, ParticipantPatch, Platform};

use super::entry::submit_url_ok;
use super::extract::Asking;
use super::html::{button_form, esc, layout_in, paragraphs};
use super::platform_return::{self, Return};
use super::{judge, room_page, survey};
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::evaluation as eval;
use crate::flow;
use crate::i18n::words;
use crate::security::seat_query;

/// 303 to the participant's page.
pub fn to_page(seat: Option<&str>) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(LOCATION, format!("/p{}", seat_query(seat)))],
    )
        .into_response()
}

/// `GET /p`.
pub async fn current(State(app): State<AppState>, me: Asking) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    let st = &study.study;
    if let Some(reason) = eval::screened_reason(&p.flow_step) {
        let html = judge::screened_page(&app, &p, &study, role, reason).await?;
        return Ok(Html(html).into_response());
    }
    let i = flow::index(&p.flow_step);
    // A researcher who sat in a session (took a wizard's seat over, or joined as the wizard)
    // goes back to its page in the console once it is over: the questionnaire and the code are
    // the participants', and a researcher's answers would mix into their data.
    if p.platform == Platform::Researcher
        && let Some(session) = p.session_id.as_deref()
        && i > flow::room_step(st, role, 0)
    {
        let to = format!("/researcher/session/{}", super::html::query_escape(session));
        return Ok((StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response());
    }
    let (p, i, judge_html) = skip_to_shown(&app, p, &study, role, i, seat.as_deref()).await?;
    if let Some(html) = judge_html {
        return Ok(Html(html).into_response());
    }
    shown_page(&app, &p, &study, role, i, seat.as_deref()).await
}

/// What `GET /p` would answer the participant now, as the page's markup (their record read
/// again): a streamed chat turn ends with it, so the browser shows the page without asking for
/// it. `None` when that answer is not a page (a redirect, an error): the browser then loads `/p`.
pub async fn markup_now(app: &AppState, me: Asking) -> Option<String> {
    let p = app.store.participant(&me.p.id).await.ok()??;
    let res = current(State(app.clone()), Asking { p, ..me }).await.ok()?;
    if res.status() != StatusCode::OK {
        return None;
    }
    let body = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .ok()?;
    String::from_utf8(body.to_vec()).ok()
}

/// Moves the participant past the pages not to show from page `i` on: the participant then,
/// the page reached and, for a judging page, its markup.
///
/// Pages whose `when` is false, and a survey without questions, are skipped; so is a judging
/// page once the worker has judged their share (or no item is left for them). Bounded: each
/// round moves forward or stops.
async fn skip_to_shown(
    app: &AppState,
    mut p: Participant,
    study: &LoadedStudy,
    role: Role,
    mut i: usize,
    seat: Option<&str>,
) -> Result<(Participant, usize, Option<String>), HttpError> {
    let st = &study.study;
    let conditions = &study.compiled.page_when[usize::from(role == Role::Wizard)];
    let mut facts: Option<eval::Facts> = None;
    let mut judge_html = None;
    for _ in 0..=flow::pages(st, role).len() {
        let page = flow::pages(st, role).get(i);
        let skip = match (page, conditions.get(i).and_then(Option::as_ref)) {
            (Some(_), Some(when)) => {
                if facts.is_none() {
                    facts = Some(eval::facts(app, &p).await?);
                }
                let f = facts
                    .as_ref()
                    .map(|f| eval::vars(&p, f))
                    .unwrap_or_default();
                !when.holds(&f)
            }
            _ => false,
        };
        let kind = flow::kind_at(st, role, i);
        if skip || (kind == PageKind::Survey && st.survey.questions(role).is_empty()) {
            i += 1;
            p = advance(app, &p, study, role, i).await?;
            continue;
        }
        if matches!(
            kind,
            PageKind::Rate | PageKind::Compare | PageKind::Chat | PageKind::Arena
        ) {
            match judge::judge_or_move_on(app, &p, study, role, i, seat).await? {
                Some(html) => judge_html = Some(html),
                None => {
                    i = flow::after(st, role, i);
                    p = advance(app, &p, study, role, i).await?;
                    continue;
                }
            }
        }
        break;
    }
    Ok((p, i, judge_html))
}

/// The response for page `i` of the participant's flow, by its kind.
async fn shown_page(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    i: usize,
    seat: Option<&str>,
) -> Result<Response, HttpError> {
    let st = &study.study;
    let page = flow::pages(st, role).get(i);
    let action = |path: &str| format!("{path}{}", seat_query(seat));
    let html = match flow::kind_at(st, role, i) {
        PageKind::Consent => consent_page(study, page, &action("/p/next"), &p.flow_step),
        PageKind::Instructions => {
            instructions_page(study, role, page, &action("/p/next"), &p.flow_step)
        }
        PageKind::Waiting | PageKind::Room if p.session_id.is_none() => {
            waiting_page(study, page, seat)
        }
        PageKind::Waiting | PageKind::Room => room_page::render(study, role, seat),
        PageKind::Survey => survey::render(
            study,
            role,
            page,
            &action("/p/survey"),
            &p.flow_step,
            survey::seed(p),
            &[],
            &[],
            survey::end_note(app, p, role).await?,
        ),
        PageKind::Questions => judge::questions_page(
            study,
            page,
            &action("/p/answers"),
            &p.flow_step,
            wozkit_core::questions::seed_of(&p.id),
            &[],
            &[],
        ),
        PageKind::Onboarding => {
            judge::onboarding_page(study, p, page, &action("/p/onboarding"), &[], &[])
        }
        PageKind::Desk => super::desk::render(app, p, study, page, seat),
        // Reached only when the loop above found nothing to judge and could not move on.
        PageKind::Rate | PageKind::Compare | PageKind::Chat | PageKind::Arena => {
            return Ok(to_page(seat));
        }
        PageKind::Completion => completion_page(app, p, study, role, page).await?,
    };
    Ok(Html(html).into_response())
}

/// The consent page, accepted by a button posting to `next`.
fn consent_page(study: &LoadedStudy, page: Option<&Page>, next: &str, step: &str) -> String {
    let st = &study.study;
    let w = words(st.language);
    let title = page.and_then(|pg| pg.title.clone());
    let body = format!(
        "<main class=\"narrow\" data-page=\"consent\"><h1>{}</h1>{}{}</main>",
        esc(&title.unwrap_or_else(|| w.get("consent-title"))),
        page_text(page),
        button_form(next, step, "accept", &w.get("consent-accept"))
    );
    layout_in(w.lang(), &st.title, "", &body, &[])
}

/// The instructions page of `role`, with the role's badge where the study has a room.
fn instructions_page(
    study: &LoadedStudy,
    role: Role,
    page: Option<&Page>,
    next: &str,
    step: &str,
) -> String {
    let st = &study.study;
    let w = words(st.language);
    let title = page.and_then(|pg| pg.title.clone());
    let me = match role {
        Role::User => &st.roles.user,
        Role::Wizard => &st.roles.wizard,
    };
    // Roles matter only where two people meet in a room; a study without one has a
    // single kind of participant and no role to announce.
    let badge = if st.has_room() {
        format!(
            "<p class=\"role-badge\" data-testid=\"role\" data-role=\"{}\">{} \
             <strong>{}</strong></p>",
            role.as_str(),
            esc(&w.get("instructions-role")),
            esc(&me.label)
        )
    } else {
        String::new()
    };
    let body = format!(
        "<main class=\"narrow\" data-page=\"instructions\"><h1>{}</h1>{}{}{}{}</main>",
        esc(&title.unwrap_or_else(|| w.get("instructions-title"))),
        badge,
        paragraphs(&me.instructions),
        page_text(page),
        button_form(next, step, "continue", &w.get("instructions-continue"))
    );
    layout_in(w.lang(), &st.title, "", &body, &[])
}

/// The waiting room's skeleton, filled by `waiting.js`.
fn waiting_page(study: &LoadedStudy, page: Option<&Page>, seat: Option<&str>) -> String {
    let st = &study.study;
    let w = words(st.language);
    let title = page.and_then(|pg| pg.title.clone());
    let seat_attr = esc(seat.unwrap_or(""));
    // The status line keeps the study's own words (waiting.js adds the time to them);
    // without any, waiting.js says it waits for a partner.
    let body = format!(
        "<main class=\"narrow\" data-page=\"waiting\" data-seat=\"{seat_attr}\" \
         data-waiting=\"{}\"><h1>{}</h1>{}\
         <p id=\"waiting-status\" data-testid=\"waiting-status\" role=\"status\">{}</p>\
         <p class=\"muted\">{}</p></main>{}",
        esc(&waiting_words(page)),
        esc(&title.unwrap_or_else(|| w.get("waiting-title"))),
        page_text(page),
        esc(&w.get("waiting-connecting")),
        esc(&w.get("waiting-keep-open")),
        w.script_block("waiting-js-"),
    );
    layout_in(w.lang(), &st.title, "", &body, &["waiting.js"])
}

/// The completion page: the participant's code (made once), and the way back to the platform.
async fn completion_page(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    page: Option<&Page>,
) -> Result<String, HttpError> {
    let w = words(study.study.language);
    let code = ensure_code(app, p, role).await?;
    let no_partner = match &p.session_id {
        Some(id) => app
            .store
            .session(id)
            .await?
            .and_then(|r| r.ended)
            .is_some_and(|e| e.reason == EndReason::NoPartner),
        None => false,
    };
    let ending = if no_partner {
        EndingKind::NoPartner
    } else {
        EndingKind::Completed
    };
    let back = platform_return::of(&study.study, p, ending, Some(&code));
    let mturk = mturk_submit(p, &code, w);
    Ok(completion(study, page, no_partner, &back, &mturk))
}

/// The waiting page's own words for its status line: its title, or else the first paragraph
/// of its text (on one line); empty when the study sets neither.
fn waiting_words(page: Option<&Page>) -> String {
    let title = page
        .and_then(|p| p.title.as_deref())
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let text = || {
        page.and_then(|p| p.text.as_deref())
            .and_then(|t| t.split("\n\n").map(str::trim).find(|p| !p.is_empty()))
    };
    title
        .or_else(text)
        .map(|w| w.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn page_text(page: Option<&Page>) -> String {
    page.and_then(|p| p.text.as_deref())
        .map(paragraphs)
        .unwrap_or_default()
}

#[derive(Deserialize)]
pub struct NextForm {
    step: String,
}

/// `POST /p/next`: accept a consent or instructions page. Idempotent: a repeated post (double
/// click, back button) for a page already accepted only redirects.
pub async fn next(
    State(app): State<AppState>,
    me: Asking,
    Form(form): Form<NextForm>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    let i = flow::index(&p.flow_step);
    let acceptable = matches!(
        flow::kind_at(&study.study, role, i),
        PageKind::Consent | PageKind::Instructions
    );
    if acceptable && form.step == p.flow_step {
        advance(&app, &p, &study, role, flow::after(&study.study, role, i)).await?;
    }
    Ok(to_page(seat.as_deref()))
}

/// Moves the participant to step `i`.
pub async fn advance(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    role: Role,
    i: usize,
) -> Result<Participant, HttpError> {
    let patch = ParticipantPatch {
        flow_step: Some(flow::encode(&study.study, role, i)),
        ..ParticipantPatch::default()
    };
    Ok(app.store.update_participant(&p.id, patch).await?)
}

/// The participant's completion code, issued (and logged in the session, or for a participant
/// without one in their own log) the first time.
pub(crate) async fn ensure_code(
    app: &AppState,
    p: &Participant,
    role: Role,
) -> Result<String, HttpError> {
    if let Some(code) = &p.completion_code {
        return Ok(code.clone());
    }
    let code = app.code_key.code(&p.id);
    if let Some(session) = &p.session_id {
        let event = NewEvent {
            actor: Actor::Participant {
                role,
                participant: Some(p.id.clone()),
            },
            kind: EventKind::CompletionIssued {
                role,
                code: code.clone(),
                no_partner: false,
            },
            at_ms: now_ms(),
        };
        // Several tabs (or reloads) may open the completion page at once: one event.
        let once = format!("completion/{}", p.id);
        app.rooms
            .append_once(app.store.as_ref(), session, &once, vec![event])
            .await?;
    } else if let Some(study) = app.study(Some(&p.study_id)) {
        let log = eval::ensure_log(app, p, &study).await?;
        let event = NewEvent {
            actor: eval::actor(p),
            kind: EventKind::CompletionIssued {
                role,
                code: code.clone(),
                no_partner: false,
            },
            at_ms: now_ms(),
        };
        let once = format!("completion/{}", p.id);
        app.store.append_once(&log, &once, vec![event]).await?;
    }
    let patch = ParticipantPatch {
        completion_code: Some(Some(code.clone())),
        ..ParticipantPatch::default()
    };
    app.store.update_participant(&p.id, patch).await?;
    Ok(code)
}

/// MTurk's externalSubmit: a form posting the assignment id and the code back to the
/// `turkSubmitTo` the worker came with (checked to be a web address at entry, and again here),
/// so the assignment is submitted without the worker pasting anything.
fn mturk_submit(p: &Participant, code: &str, w: &crate::i18n::Words) -> String {
    let ids = &p.external_ids;
    let (Some(to), Some(assignment)) = (ids.get("turkSubmitTo"), ids.get("assignmentId")) else {
        return String::new();
    };
    if p.platform != Platform::Mturk || !submit_url_ok(to) {
        return String::new();
    }
    let action = format!("{}/mturk/externalSubmit", to.trim_end_matches('/'));
    format!(
        "<form id=\"mturk-submit\" data-testid=\"mturk-submit\" method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"assignmentId\" value=\"{}\">\
         <input type=\"hidden\" name=\"completionCode\" value=\"{}\">\
         <button class=\"primary\" type=\"submit\">{}</button></form>",
        esc(&action),
        esc(assignment),
        esc(code),
        esc(&w.get("completion-mturk-submit"))
    )
}

fn completion(
    study: &LoadedStudy,
    page: Option<&Page>,
    no_partner: bool,
    back: &Return,
    mturk: &str,
) -> String {
    let st = &study.study;
    let w = words(st.language);
    // An MTurk worker submits with the form; a redirect would leave the page first.
    let (head, link) = if mturk.is_empty() {
        (back.head(), back.link())
    } else {
        (String::new(), String::new())
    };
    let sorry = if no_partner {
        format!(
            "<p id=\"no-partner\" data-testid=\"no-partner\">{}</p>",
            esc(&w.get("completion-no-partner"))
        )
    } else {
        String::new()
    };
    let body = format!(
        "<main class=\"narrow\" data-page=\"completion\"><h1>{}</h1>{sorry}{}{}{mturk}{link}</main>",
        esc(&page
            .and_then(|p| p.title.clone())
            .unwrap_or_else(|| w.get("completion-title"))),
        page_text(page),
        back.body(),
    );
    layout_in(w.lang(), &st.title, &head, &body, &[])
}
