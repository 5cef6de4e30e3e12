//! Observing a live room (both sides as they happen, read-only) and taking over as its wizard.
//!
//! - `GET /researcher/session/{id}/observe` (observer access): the user's and the wizard's
//!   views side by side (`iframe#observe-user`, `iframe#observe-wizard`), fed by one observer
//!   WebSocket (`/ws?observe=ID`, `assets/observe.js`) whose frames go to each frame's
//!   `room.js`, in its read-only mode; `#take-over` while the wizard's seat may be taken.
//! - `GET /researcher/session/{id}/observe/{role}`: the room page of a role, read-only.
//! - `POST /researcher/session/{id}/take-over` (researcher access): seats the researcher as the
//!   wizard of a room whose wizard is away, and sends their browser to the wizard's room page.
//! - `POST /researcher/study/{study}/join-as-wizard` (researcher access): sends the researcher
//!   through the study's waiting room as a wizard, like any participant.
//!
//! The researcher plays as a participant of platform `researcher` whose worker id is the account
//! id (one per study, reused), under the participant cookie of seat [`SEAT`].

use axum::Router;
use axum::extract::{Path, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::PageKind;
use wozkit_store::{NewParticipant, Participant, ParticipantPatch, Platform, new_id, new_token};

use super::extract::{ResearcherForm, ResearcherPage, Running};
use super::html::{esc, layout, query_escape};
use super::researcher::{NoFields, csrf_field};
use crate::app::{AppState, now_ms};
use crate::auth::{Access, Researcher};
use crate::error::HttpError;
use crate::flow;
use crate::room::{self, RoomMsg};
use crate::security::{participant_cookie, set_cookie};

/// The participant seat (cookie) a researcher plays under, apart from any other participant
/// the same browser holds.
pub const SEAT: &str = "console";
/// How long the researcher's participant cookie lasts.
const COOKIE_AGE_S: u64 = 12 * 3600;
/// The meta key prefix under which a participant's extra cookie tokens are kept (the same as
/// the entry links' aliases, `http/entry.rs`).
const ALIAS_PREFIX: &str = "participant_token_alias/";

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/researcher/session/{id}/observe", get(page))
        .route("/researcher/session/{id}/observe/{role}", get(side))
        .route("/researcher/session/{id}/take-over", post(take_over))
        .route(
            "/researcher/study/{study}/join-as-wizard",
            post(join_as_wizard),
        )
}

/// The form (a button) that sends the researcher through `study`'s waiting room as a wizard;
/// for the console's study pages.
pub fn join_as_wizard_form(study: &LoadedStudy, r: &Researcher) -> String {
    if !study.study.has_room() || !r.may(Access::Researcher) {
        return String::new();
    }
    format!(
        "<form method=\"post\" action=\"/researcher/study/{}/join-as-wizard\" class=\"inline\">{}\
         <button type=\"submit\" id=\"join-as-wizard\" data-testid=\"join-as-wizard\">Join the waiting room as wizard</button></form>",
        query_escape(&study.study.id),
        csrf_field(r),
    )
}

/// `GET /researcher/session/{id}/observe`.
async fn page(
    State(app): State<AppState>,
    ResearcherPage(me, ..): ResearcherPage,
    Path(id): Path<String>,
) -> Result<Response, HttpError> {
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let study = app
        .study(Some(&record.study_id))
        .filter(|s| s.study.has_room())
        .ok_or(HttpError::NotFound)?;
    let base = format!("/researcher/session/{}", query_escape(&id));
    let take_over = if me.may(Access::Researcher) {
        format!(
            "<form id=\"take-over-form\" method=\"post\" action=\"{base}/take-over\" hidden>{}\
             <button type=\"submit\" id=\"take-over\" data-testid=\"take-over\" class=\"primary\">Take over as wizard</button></form>",
            csrf_field(&me)
        )
    } else {
        String::new()
    };
    let body = format!(
        "<main id=\"observe\" class=\"observe\" data-page=\"observe\" data-session=\"{sid}\" data-live=\"{live}\">\
         <header class=\"bar\"><h1>Observing <code>{sid}</code></h1>\
         <span class=\"muted\">{title}: read-only; the participants are not told.</span>\
         <span id=\"observe-status\" data-testid=\"observe-status\" role=\"status\">connecting…</span>\
         <span id=\"observe-seats\" data-testid=\"observe-seats\"></span>\
         {take_over}{join}<a href=\"{base}\">Log</a><a href=\"/researcher\">Sessions</a></header>\
         <p id=\"observe-ended\" data-testid=\"observe-ended\" class=\"banner\" hidden>The session has ended.</p>\
         <div class=\"frames observe-frames\">\
           <iframe id=\"observe-user\" data-testid=\"observe-user\" title=\"The user's view\" src=\"{base}/observe/user\"></iframe>\
           <iframe id=\"observe-wizard\" data-testid=\"observe-wizard\" title=\"The wizard's view\" src=\"{base}/observe/wizard\"></iframe>\
         </div></main>",
        sid = esc(&record.id),
        live = record.is_live(),
        title = esc(&study.study.title),
        join = join_as_wizard_form(&study, &me),
    );
    Ok(Html(layout("Observe", &body, &["observe.js"])).into_response())
}

/// `GET /researcher/session/{id}/observe/{role}`: the room page of `role`, read-only (its
/// `room.js` takes frames from the observe page instead of a socket of its own).
async fn side(
    State(app): State<AppState>,
    _: ResearcherPage,
    Path((id, role)): Path<(String, String)>,
) -> Result<Response, HttpError> {
    let role = Role::parse(&role).ok_or(HttpError::NotFound)?;
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let study = app
        .study(Some(&record.study_id))
        .filter(|s| s.study.has_room())
        .ok_or(HttpError::NotFound)?;
    let html = super::room_page::render(&study, role, None)
        .replacen(
            "<main id=\"room\" ",
            "<main id=\"room\" data-observe=\"true\" ",
            1,
        )
        .replacen(
            "<span class=\"who\">You are ",
            "<span class=\"who\">Seen by ",
            1,
        );
    Ok(Html(html).into_response())
}

/// A refusal shown to the researcher, with a way back.
fn refused(status: StatusCode, message: &str, back: &str) -> Response {
    let body = format!(
        "<main class=\"narrow\" data-page=\"refused\"><h1>Not possible</h1>\
         <p id=\"refusal\" data-testid=\"refusal\">{}</p><p><a href=\"{}\">Back</a></p></main>",
        esc(message),
        esc(back)
    );
    (status, Html(layout("Not possible", &body, &[]))).into_response()
}

/// The researcher's participant in `study` (created the first time), with a fresh cookie token
/// for it; `Err` with the response to send when it is seated in another live session.
async fn researcher_participant(
    app: &AppState,
    r: &Researcher,
    study: &LoadedStudy,
    except_session: Option<&str>,
    back: &str,
) -> Result<Result<(Participant, String), Response>, HttpError> {
    let study_id = &study.study.id;
    let (token, hash) = new_token();
    let existing = app
        .store
        .participant_by_worker(study_id, Platform::Researcher, &r.id)
        .await?;
    if let Some(p) = existing {
        if let Some(s) = p
            .session_id
            .as_deref()
            .filter(|s| Some(*s) != except_session)
            && let Some(rec) = app.store.session(s).await?
            && rec.is_live()
            && p.role.is_some_and(|role| {
                flow::kind_at(&study.study, role, flow::index(&p.flow_step)) == PageKind::Room
            })
        {
            let message = format!(
                "You are already seated in the live session {s}: finish it (or leave it) first."
            );
            return Ok(Err(refused(StatusCode::CONFLICT, &message, back)));
        }
        app.store
            .set_meta(&format!("{ALIAS_PREFIX}{hash}"), &p.id)
            .await?;
        return Ok(Ok((p, token)));
    }
    let new = NewParticipant {
        id: new_id(),
        token_hash: hash,
        study_id: study_id.clone(),
        platform: Platform::Researcher,
        worker_id: Some(r.id.clone()),
        external_ids: Default::default(),
        flow_step: flow::encode(&study.study, Role::Wizard, 0),
        created_at_ms: now_ms(),
    };
    let p = app.store.create_participant(new).await?;
    Ok(Ok((p, token)))
}

/// Sends the researcher's browser to its participant's current page, under seat [`SEAT`].
fn to_seat(headers: &HeaderMap, token: &str) -> Response {
    let mut res = (
        StatusCode::SEE_OTHER,
        [(LOCATION, format!("/p?seat={SEAT}"))],
    )
        .into_response();
    let cookie = set_cookie(
        headers,
        &participant_cookie(Some(SEAT)),
        token,
        COOKIE_AGE_S,
    );
    if let Ok(v) = cookie.parse() {
        res.headers_mut().insert(SET_COOKIE, v);
    }
    res
}

/// `POST /researcher/session/{id}/take-over`.
async fn take_over(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    ResearcherForm(me, ..): ResearcherForm<Running, NoFields>,
) -> Result<Response, HttpError> {
    let back = format!("/researcher/session/{}/observe", query_escape(&id));
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let study = app
        .study(Some(&record.study_id))
        .filter(|s| s.study.has_room())
        .ok_or(HttpError::NotFound)?;
    if !record.is_live() {
        return Ok(refused(
            StatusCode::CONFLICT,
            "The session has ended: there is no seat to take.",
            &back,
        ));
    }
    let (p, token) = match researcher_participant(&app, &me, &study, Some(&id), &back).await? {
        Ok(found) => found,
        Err(res) => return Ok(res),
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let msg = RoomMsg::TakeOver {
        role: Role::Wizard,
        researcher: me.id.clone(),
        participant: p.id.clone(),
        reply,
    };
    if !room::send(&app, &id, msg).await? {
        return Err(HttpError::NotFound);
    }
    match answer.await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Ok(refused(StatusCode::CONFLICT, why.message(), &back)),
        Err(_) => {
            return Ok(refused(
                StatusCode::CONFLICT,
                "The room closed before it answered: the session has probably ended.",
                &back,
            ));
        }
    }
    let patch = ParticipantPatch {
        role: Some(Some(Role::Wizard)),
        session_id: Some(Some(id.clone())),
        flow_step: Some(flow::encode(
            &study.study,
            Role::Wizard,
            flow::room_step(&study.study, Role::Wizard, 0),
        )),
        completion_code: None,
    };
    app.store.update_participant(&p.id, patch).await?;
    tracing::info!(
        session = id,
        researcher = me.id,
        participant = p.id,
        "a researcher took over as wizard"
    );
    Ok(to_seat(&headers, &token))
}

/// `POST /researcher/study/{study}/join-as-wizard`.
async fn join_as_wizard(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(study_id): Path<String>,
    ResearcherForm(me, ..): ResearcherForm<Running, NoFields>,
) -> Result<Response, HttpError> {
    let study = app
        .studies
        .get(&study_id)
        .filter(|s| s.study.has_room())
        .cloned()
        .ok_or(HttpError::NotFound)?;
    let (p, token) = match researcher_participant(&app, &me, &study, None, "/researcher").await? {
        Ok(found) => found,
        Err(res) => return Ok(res),
    };
    let st = &study.study;
    let lobby = flow::find_from(st, Role::Wizard, PageKind::Waiting, 0)
        .unwrap_or_else(|| flow::room_step(st, Role::Wizard, 0));
    let patch = ParticipantPatch {
        role: Some(Some(Role::Wizard)),
        session_id: Some(None),
        flow_step: Some(flow::encode(st, Role::Wizard, lobby)),
        completion_code: Some(None),
    };
    app.store.update_participant(&p.id, patch).await?;
    tracing::info!(
        study = study_id,
        researcher = me.id,
        participant = p.id,
        "a researcher joined the waiting room as wizard"
    );
    Ok(to_seat(&headers, &token))
}
