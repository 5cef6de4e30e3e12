//! `GET /try`: the researcher plays both roles side by side. Each frame is a fresh lab
//! participant in its own "seat" (its own cookie), and both carry the same private pair key, so
//! they are paired with each other and never with a real participant. Both are marked as tests
//! (`test=1`), so reports, exports and payments leave their session out unless asked. A server
//! with a simulated user (`serve --simulated-user`) shows the wizard's frame only.

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use wozkit_store::new_id;

use super::extract::ResearcherPage;
use super::html::{esc, layout, query_escape};
use crate::app::AppState;
use crate::error::HttpError;

#[derive(Deserialize)]
pub struct TryQuery {
    study: Option<String>,
}

pub async fn page(
    State(app): State<AppState>,
    _: ResearcherPage,
    Query(q): Query<TryQuery>,
) -> Result<Response, HttpError> {
    let study = app.study(q.study.as_deref()).ok_or(HttpError::NotFound)?;
    let pair = new_id();
    // Seats: lowercase letters and digits, at most 12.
    let seat = |role: char| format!("{role}{}", &pair[..8]);
    let src = |role: &str, s: &str| {
        format!(
            "/join?study={}&role={role}&pair=try-{pair}&seat={s}&test=1",
            query_escape(&study.study.id)
        )
    };
    let (us, ws) = (seat('u'), seat('w'));
    let others: String = app
        .studies
        .keys()
        .filter(|id| **id != study.study.id)
        .map(|id| {
            format!(
                " · <a href=\"/try?study={}\">{}</a>",
                query_escape(id),
                esc(id)
            )
        })
        .collect();
    if !study.study.has_room() {
        // An evaluation study has one kind of participant: one test worker, full width.
        let body = format!(
            "<main class=\"try\"><header class=\"bar\"><h1>Try: {}</h1>\
             <span class=\"muted\">A test worker: left out of exports and reports by default, but its judgments do use up items.</span>\
             <a href=\"/try?study={}\">Start again</a>{others}<a href=\"/researcher\">Sessions</a></header>\
             <div class=\"frames\"><iframe id=\"try-user\" title=\"Worker\" src=\"{}\"></iframe></div></main>",
            esc(&study.study.title),
            query_escape(&study.study.id),
            esc(&src("user", &us)),
        );
        return Ok(Html(layout("Try it", &body, &[])).into_response());
    }
    if let Some(user) = &app.tunables.simulated_user {
        // Piloting alone (`serve --simulated-user`): the simulated user takes the user's seat as
        // soon as the wizard arrives, so only the wizard's frame is shown.
        let body = format!(
            "<main class=\"try\"><header class=\"bar\"><h1>Try: {}</h1>\
             <span class=\"muted\">You are the wizard; the simulated user {} plays the user. A test session, marked simulated.</span>\
             <a href=\"/try?study={}\">Start again</a>{others}<a href=\"/researcher\">Sessions</a></header>\
             <div class=\"frames\"><iframe id=\"try-wizard\" title=\"Wizard\" src=\"{}\"></iframe></div></main>",
            esc(&study.study.title),
            esc(&user.spec.name),
            query_escape(&study.study.id),
            esc(&src("wizard", &ws)),
        );
        return Ok(Html(layout("Try it", &body, &[])).into_response());
    }
    let body = format!(
        "<main class=\"try\"><header class=\"bar\"><h1>Try: {}</h1>\
         <span class=\"muted\">Left: the user. Right: the wizard. Both are test participants paired with each other.</span>\
         <a href=\"/try?study={}\">Start again</a>{others}<a href=\"/researcher\">Sessions</a></header>\
         <div class=\"frames\"><iframe id=\"try-user\" title=\"User\" src=\"{}\"></iframe>\
         <iframe id=\"try-wizard\" title=\"Wizard\" src=\"{}\"></iframe></div></main>",
        esc(&study.study.title),
        query_escape(&study.study.id),
        esc(&src("user", &us)),
        esc(&src("wizard", &ws)),
    );
    Ok(Html(layout("Try it", &body, &[])).into_response())
}
