//! Entry: the landing page, the entry link (`/join`) that creates or resumes a participant and
//! sets its cookie, and the lookup of the participant behind a cookie.
//!
//! Platforms are recognised by their parameters: Prolific (`PROLIFIC_PID`, `STUDY_ID`,
//! `SESSION_ID`), MTurk (`workerId`, `assignmentId`, `hitId`, `turkSubmitTo`) and lab links
//! (`participant`, optional; `role`, `pair` and `test=1` are honoured for lab links only, so a
//! crowd worker cannot choose a role or mark itself as a test). In a study without a room,
//! `role=wizard` is honoured only when the wizard flow has a `desk` page (`human` systems).
//!
//! A seat belongs to whoever started it. A worker who comes back resumes where they were with
//! their cookie (or the token in their page's URL); without either, only with what the platform
//! tells that worker alone: MTurk's `assignmentId`, Prolific's `SESSION_ID`, or a lab link's
//! signature (`sig`, [`CodeKey::lab_signature`](wozkit_data::completion::CodeKey::lab_signature)).
//! A worker id alone (semi-public on MTurk, guessable in a lab) gets neither the seat nor its
//! code. A resumed participant gets a new token, stored as an alias in the meta table.
//!
//! Pages in another site's frame (MTurk's ExternalQuestion, or a request saying
//! `Sec-Fetch-Dest: iframe` from another site) do not get this site's cookies, so an MTurk worker's pages carry
//! the participant's token in their URLs instead (a key seat, see
//! [`parse_seat`](crate::security::parse_seat)).
//!
//! Each client address may open only so many entry links a minute (`Tunables::join_per_minute`),
//! so a script cannot create participants without bound; the rest get a 429 page saying when to
//! try again.

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::PageKind;
use wozkit_store::{
    NewParticipant, Participant, ParticipantPatch, Platform, SIMULATED_KEY, StoreError, TEST_KEY,
    hash_token, new_id, new_token,
};

use super::html::{esc, layout, paragraphs, query_escape};
use crate::app::{AppState, now_ms};
use crate::error::{BLOCKLISTED, HttpError, OPEN_AGAIN, SEAT_TAKEN};
use crate::flow;
use crate::pairing::role_or;
use crate::security::{
    Client, cookie, key_seat, parse_named_seat, participant_cookie, seat_query, seat_token,
    set_cookie,
};
use crate::ws::waiting::PAIR_KEY;

/// Meta key prefix of extra tokens issued to returning workers.
const ALIAS_PREFIX: &str = "participant_token_alias/";
/// Participant cookies last 30 days.
const COOKIE_AGE_S: u64 = 30 * 24 * 3600;
/// Longest id accepted from a platform.
const MAX_ID_LEN: usize = 128;

/// The participant holding the request's cookie (of `seat`, if given).
pub async fn current_participant(
    app: &AppState,
    headers: &HeaderMap,
    seat: Option<&str>,
) -> Result<Option<Participant>, StoreError> {
    let token = match seat_token(seat) {
        Some(token) => Some(token.to_owned()),
        None => cookie(headers, &participant_cookie(seat)),
    };
    let Some(token) = token else {
        return Ok(None);
    };
    if token.len() > 256 {
        return Ok(None);
    }
    let hash = hash_token(&token);
    if let Some(p) = app.store.participant_by_token_hash(&hash).await? {
        return Ok(Some(p));
    }
    match app.store.meta(&format!("{ALIAS_PREFIX}{hash}")).await? {
        Some(id) => app.store.participant(&id).await,
        None => Ok(None),
    }
}

/// `GET /`: what this server is and how to take part.
pub async fn landing(State(app): State<AppState>) -> Html<String> {
    let studies: String = app
        .studies
        .values()
        .map(|s| {
            format!(
                "<li><strong>{}</strong> — entry link: <a href=\"/join?study={}\"><code>/join?study={}</code></a></li>",
                esc(&s.study.title),
                query_escape(&s.study.id),
                esc(&s.study.id)
            )
        })
        .collect();
    let body = format!(
        "<main class=\"narrow\"><h1>wozkit</h1>\
         <p>This server runs dialogue studies. Participants start from an entry link:</p><ul>{studies}</ul>\
         <p>Crowd platforms add their ids to the link: Prolific <code>?PROLIFIC_PID=…&amp;STUDY_ID=…&amp;SESSION_ID=…</code>, \
         MTurk <code>?workerId=…&amp;assignmentId=…&amp;hitId=…</code>, a lab <code>?participant=NAME</code>.</p>\
         <p>Researchers: <a href=\"/researcher\">sessions</a> · <a href=\"/try\">try both roles yourself</a></p></main>"
    );
    Html(layout("wozkit", &body, &[]))
}

/// Who is joining, as the platform says.
struct Identity {
    platform: Platform,
    worker: Option<String>,
    external: BTreeMap<String, String>,
}

fn valid_id(v: &str) -> bool {
    !v.is_empty() && v.len() <= MAX_ID_LEN && !v.chars().any(char::is_control)
}

/// Whether `url` may receive the MTurk submit form: an http(s) address with a host and nothing
/// that would break out of an attribute or a URL (quotes, spaces, angle brackets).
pub fn submit_url_ok(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| {
        !r.is_empty()
            && !r.starts_with('/')
            && !r
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "\"'<>`\\".contains(c))
    })
}

fn identify(q: &HashMap<String, String>, simulated_joins: bool) -> Result<Identity, HttpError> {
    let take = |keys: &[&str]| -> Result<BTreeMap<String, String>, HttpError> {
        let mut out = BTreeMap::new();
        for k in keys {
            if let Some(v) = q.get(*k) {
                if !valid_id(v) {
                    return Err(HttpError::BadRequest(format!(
                        "`{k}` must be 1–{MAX_ID_LEN} printable characters"
                    )));
                }
                out.insert((*k).to_string(), v.clone());
            }
        }
        Ok(out)
    };
    if let Some(pid) = q.get("PROLIFIC_PID") {
        return Ok(Identity {
            platform: Platform::Prolific,
            worker: Some(pid.clone()),
            external: take(&["PROLIFIC_PID", "STUDY_ID", "SESSION_ID"])?,
        });
    }
    if let Some(w) = q.get("workerId") {
        // The completion page posts a form to this address: a web address only, so a link
        // cannot turn it into a `javascript:` or `data:` target.
        if let Some(to) = q.get("turkSubmitTo")
            && !submit_url_ok(to)
        {
            return Err(HttpError::BadRequest(
                "`turkSubmitTo` must be an http:// or https:// address".into(),
            ));
        }
        return Ok(Identity {
            platform: Platform::Mturk,
            worker: Some(w.clone()),
            external: take(&["workerId", "assignmentId", "hitId", "turkSubmitTo"])?,
        });
    }
    // A lab link may mark its participant as a test (`test=1`; `/try` does): left out of
    // reports, exports and payments unless asked. Crowd links cannot.
    if q.get(TEST_KEY).is_some_and(|v| v != "1") {
        return Err(HttpError::BadRequest(
            "`test` must be 1 (or left out for a real participant)".into(),
        ));
    }
    // A simulated user's seat (`wozkit simulate-users`): a test participant, only where the
    // server was started to take them.
    if let Some(name) = q.get(SIMULATED_KEY) {
        if !simulated_joins {
            return Err(HttpError::BadRequest(
                "`simulated` is taken only by `wozkit simulate-users`".into(),
            ));
        }
        if q.get(TEST_KEY).map(String::as_str) != Some("1") {
            return Err(HttpError::BadRequest(format!(
                "`simulated={name}` needs `test=1`: a simulated user is a test participant"
            )));
        }
    }
    Ok(Identity {
        platform: Platform::Lab,
        worker: q.get("participant").cloned(),
        external: take(&["participant", PAIR_KEY, TEST_KEY, SIMULATED_KEY])?,
    })
}

/// 303 to the participant's page, setting the cookie of a new token. In a frame the page's URL
/// carries the token (a key seat) as well, since the frame's requests will not carry the cookie.
fn redirect_with_cookie(
    headers: &HeaderMap,
    seat: Option<&str>,
    token: Option<&str>,
    framed: bool,
) -> Response {
    let key;
    let url_seat = match token {
        Some(t) if framed => {
            key = key_seat(t);
            Some(key.as_str())
        }
        _ => seat,
    };
    let mut res = (
        StatusCode::SEE_OTHER,
        [(LOCATION, format!("/p{}", seat_query(url_seat)))],
    )
        .into_response();
    if let Some(token) = token
        && let Ok(v) = set_cookie(headers, &participant_cookie(seat), token, COOKIE_AGE_S).parse()
    {
        res.headers_mut().insert(SET_COOKIE, v);
    }
    res
}

/// `GET /join`: creates or resumes the participant and sends it to its current page.
pub async fn join(
    State(app): State<AppState>,
    client: Client,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, HttpError> {
    // Before anything else: every entry link may create a participant row. (The refusal is in
    // the language of the study the link names.)
    app.joins.check(client.addr).map_err(|retry_after_s| {
        let lang = app
            .study(q.get("study").map(String::as_str))
            .map(|s| s.study.language)
            .unwrap_or_default();
        HttpError::TooManyRequests { retry_after_s }.in_language(lang)
    })?;
    let study = app
        .study(q.get("study").map(String::as_str))
        .ok_or_else(|| {
            HttpError::BadRequest("unknown study: check the `study` parameter of the link".into())
        })?;
    if q.get("assignmentId")
        .is_some_and(|a| a == "ASSIGNMENT_ID_NOT_AVAILABLE")
    {
        return Ok(preview(&study));
    }
    let seat = match q.get("seat") {
        Some(s) => Some(parse_named_seat(s).ok_or_else(|| {
            HttpError::BadRequest("`seat` must be 1–12 lowercase letters or digits".into())
        })?),
        None => None,
    };
    let id = identify(&q, app.tunables.simulated_joins)?;
    let framed = is_framed(&headers, &id);
    let study_id = study.study.id.clone();
    if crate::evaluation::blocked(&app, &study, id.worker.as_deref()) {
        tracing::info!(
            study = study_id,
            "a blocklisted worker was refused at entry"
        );
        return Err(HttpError::Forbidden(BLOCKLISTED).in_language(study.study.language));
    }
    if let Some(p) = current_participant(&app, &headers, seat.as_deref()).await?
        && p.study_id == study_id
        && (id.worker.is_none() || (p.worker_id == id.worker && p.platform == id.platform))
    {
        if framed {
            // The cookie came (a first-party visit) but the frame's later requests will not
            // carry it: a fresh token for the URLs.
            return Ok(resume(&app, &headers, seat.as_deref(), &p, framed).await?);
        }
        return Ok(redirect_with_cookie(&headers, seat.as_deref(), None, false));
    }
    if let Some(worker) = &id.worker
        && let Some(p) = app
            .store
            .participant_by_worker(&study_id, id.platform, worker)
            .await?
    {
        if !may_resume(&app, &p, &id, &q) {
            tracing::info!(
                participant = p.id,
                study = study_id,
                "an entry link named a started participant without its platform pair or signature"
            );
            return Err(HttpError::Conflict(SEAT_TAKEN).in_language(study.study.language));
        }
        return Ok(resume(&app, &headers, seat.as_deref(), &p, framed).await?);
    }
    let role = entry_role(&app, &q, &study, &id).await?;
    let entry = Entry {
        app: &app,
        headers: &headers,
        q: &q,
        id: &id,
        seat: seat.as_deref(),
        framed,
    };
    create(&entry, &study, role).await
}

/// MTurk's preview, shown before the worker accepts: what the task is, and no participant.
/// Only the study's participant-facing `preview` (the cover story of a Wizard-of-Oz study):
/// never the researcher's `description`, nor that two workers are paired.
fn preview(study: &LoadedStudy) -> Response {
    let st = &study.study;
    let w = crate::i18n::words(st.language);
    let body = format!(
        "<main class=\"narrow\" data-page=\"preview\"><h1>{}</h1>\
         <section id=\"task-description\" data-testid=\"task-description\">{}</section>\
         <p id=\"preview\"><strong>{}</strong></p></main>",
        esc(&st.title),
        paragraphs(st.preview.as_deref().unwrap_or("")),
        esc(&w.get("preview-accept")),
    );
    let html = super::html::layout_in(w.lang(), &st.title, "", &body, &[]);
    Html(html).into_response()
}

/// Whether the entry is in another site's frame, where this site's cookies are not sent: the
/// pages carry the token instead. (`/try` frames its two seats on this site, where cookies
/// work.)
fn is_framed(headers: &HeaderMap, id: &Identity) -> bool {
    let header = |name: &str, value: &[u8]| {
        headers
            .get(name)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(value))
    };
    id.platform == Platform::Mturk
        || (header("sec-fetch-dest", b"iframe") && !header("sec-fetch-site", b"same-origin"))
}

/// The role of a new participant.
///
/// A study without a live room has one kind of participant, who takes the user flow; the one
/// exception is a wizard sent by a lab link (`role=wizard`) to the desk where people answer
/// for the study's `human` systems. Crowd links never choose a role.
async fn entry_role(
    app: &AppState,
    q: &HashMap<String, String>,
    study: &LoadedStudy,
    id: &Identity,
) -> Result<Role, HttpError> {
    let role = match (id.platform, q.get("role")) {
        (Platform::Lab, Some(r)) => Some(
            Role::parse(r)
                .ok_or_else(|| HttpError::BadRequest("`role` must be `user` or `wizard`".into()))?,
        ),
        _ => None,
    };
    let desk = study
        .study
        .flow
        .wizard
        .iter()
        .any(|p| p.kind == PageKind::Desk);
    Ok(if study.study.has_room() {
        role_or(role, app, &study.study.id).await?
    } else if desk && role == Some(Role::Wizard) {
        Role::Wizard
    } else {
        Role::User
    })
}

/// What an entry link that makes a new participant comes with.
struct Entry<'a> {
    app: &'a AppState,
    headers: &'a HeaderMap,
    q: &'a HashMap<String, String>,
    id: &'a Identity,
    seat: Option<&'a str>,
    framed: bool,
}

/// Creates the participant of an entry in `role` and sends it to its first page (or, when the
/// same worker joined twice at once, resumes the one that won).
async fn create(e: &Entry<'_>, study: &LoadedStudy, role: Role) -> Result<Response, HttpError> {
    let (app, id) = (e.app, e.id);
    let study_id = study.study.id.clone();
    let (token, token_hash) = new_token();
    let new = NewParticipant {
        id: new_id(),
        token_hash,
        study_id: study_id.clone(),
        platform: id.platform,
        worker_id: id.worker.clone(),
        external_ids: id.external.clone(),
        flow_step: flow::encode(&study.study, role, 0),
        created_at_ms: now_ms(),
    };
    let p = match app.store.create_participant(new).await {
        Ok(p) => p,
        // The same worker joined twice at once: resume the one that won.
        Err(StoreError::Conflict { .. }) if id.worker.is_some() => {
            let worker = id.worker.as_deref().unwrap_or_default();
            match app
                .store
                .participant_by_worker(&study_id, id.platform, worker)
                .await?
            {
                Some(p) if may_resume(app, &p, id, e.q) => {
                    return Ok(resume(app, e.headers, e.seat, &p, e.framed).await?);
                }
                Some(_) => {
                    return Err(HttpError::Conflict(SEAT_TAKEN).in_language(study.study.language));
                }
                None => {
                    return Err(
                        HttpError::BadRequest(OPEN_AGAIN.into()).in_language(study.study.language)
                    );
                }
            }
        }
        Err(err) => return Err(err.into()),
    };
    let patch = ParticipantPatch {
        role: Some(Some(role)),
        ..ParticipantPatch::default()
    };
    app.store.update_participant(&p.id, patch).await?;
    tracing::info!(
        participant = p.id,
        study = study_id,
        role = role.as_str(),
        platform = p.platform.as_str(),
        "joined"
    );
    Ok(redirect_with_cookie(
        e.headers,
        e.seat,
        Some(&token),
        e.framed,
    ))
}

/// Whether an entry link without the participant's cookie or token may resume participant `p`:
/// only with what the platform tells that worker alone (MTurk's assignment id, Prolific's
/// session id, both recorded at entry), or a lab link signed by this server.
fn may_resume(app: &AppState, p: &Participant, id: &Identity, q: &HashMap<String, String>) -> bool {
    let same = |key: &str| match (p.external_ids.get(key), id.external.get(key)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    match id.platform {
        Platform::Mturk => same("assignmentId"),
        Platform::Prolific => same("SESSION_ID"),
        // Researchers do not come through entry links; a lab link otherwise.
        Platform::Lab | Platform::Researcher => {
            let name = p.worker_id.as_deref().unwrap_or_default();
            q.get("sig").is_some_and(|sig| {
                wozkit_data::completion::normalize(sig)
                    == app.code_key.lab_signature(&p.study_id, name)
            })
        }
    }
}

/// A returning worker without the cookie: a fresh token for the same participant.
async fn resume(
    app: &AppState,
    headers: &HeaderMap,
    seat: Option<&str>,
    p: &Participant,
    framed: bool,
) -> Result<Response, StoreError> {
    let (token, hash) = new_token();
    app.store
        .set_meta(&format!("{ALIAS_PREFIX}{hash}"), &p.id)
        .await?;
    Ok(redirect_with_cookie(headers, seat, Some(&token), framed))
}
