//! The questionnaire page: the study's `survey` questions as a form (fields from
//! [`super::questions`], every kind of the question model) and `POST /p/survey`, which checks
//! every answer with `wozkit_core::questions::check`, logs them as one `SurveyAnswered` event in
//! the participant's session (with the order each shuffled question was shown in) and moves on.
//! A form with problems is shown again (422) with the answers kept and each problem next to its
//! question.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use wozkit_core::event::{Actor, EventKind};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_core::questions::{self, Problem, seed_of};
use wozkit_store::{NewEvent, Participant};

use super::html::{esc, layout, paragraphs};
use super::pages::{SeatQuery, advance, to_page, who};
use super::questions::fieldsets;
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::flow;
use crate::security::{origin_ok, seat_query};

/// The seed of a participant's shuffled orders: the same on every load of the page and when the
/// answers are checked, different between participants.
pub fn seed(p: &Participant) -> u64 {
    seed_of(&p.id)
}

/// The questionnaire page; `fields` (the posted form, if any) are put back into the form.
pub fn render(
    study: &LoadedStudy,
    page: Option<&Page>,
    action: &str,
    step: &str,
    seed: u64,
    problems: &[Problem],
    fields: &[(String, String)],
) -> String {
    let st = &study.study;
    let qs = fieldsets(&st.survey.questions, seed, fields, problems);
    let title = page
        .and_then(|p| p.title.clone())
        .or_else(|| st.survey.title.clone())
        .unwrap_or_else(|| "Questionnaire".into());
    let body = format!(
        "<main class=\"narrow\" data-page=\"survey\"><h1>{}</h1>{}\
         <form method=\"post\" action=\"{}\" id=\"survey\"><input type=\"hidden\" name=\"step\" value=\"{}\">{qs}\
         <button type=\"submit\" id=\"survey-submit\" data-testid=\"survey-submit\" class=\"primary\">Submit</button></form></main>",
        esc(&title),
        page.and_then(|p| p.text.as_deref())
            .map(paragraphs)
            .unwrap_or_default(),
        esc(action),
        esc(step),
    );
    layout(&st.title, &body, &[])
}

/// `POST /p/survey`.
pub async fn submit(
    State(app): State<AppState>,
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, HttpError> {
    if !origin_ok(&headers, false) {
        return Err(HttpError::Forbidden(
            "This form must be sent from this site's page.",
        ));
    }
    let seat = q.seat();
    let (p, study, role) = who(&app, &headers, seat.as_deref()).await?;
    let st = &study.study;
    let i = flow::index(&p.flow_step);
    let step = fields
        .iter()
        .find(|(name, _)| name == "step")
        .map(|(_, v)| v);
    if flow::kind_at(st, role, i) != PageKind::Survey || step != Some(&p.flow_step) {
        // Already answered (or not there yet): show the current page.
        return Ok(to_page(seat.as_deref()));
    }
    let seed = seed(&p);
    let answers = match questions::check(&st.survey.questions, &fields, seed) {
        Ok(a) => a.to_event(&st.survey.questions),
        Err(problems) => {
            let page = flow::pages(st, role).get(i);
            let action = format!("/p/survey{}", seat_query(seat.as_deref()));
            let html = render(
                &study,
                page,
                &action,
                &p.flow_step,
                seed,
                &problems,
                &fields,
            );
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response());
        }
    };
    if let Some(session) = &p.session_id {
        let event = NewEvent {
            actor: Actor::Participant {
                role,
                participant: Some(p.id.clone()),
            },
            kind: EventKind::SurveyAnswered { role, answers },
            at_ms: now_ms(),
        };
        // The store keeps one answer set per participant and questionnaire page, whatever
        // the number of submissions racing here (a double click, two tabs).
        let once = format!("survey/{}/{i}", p.id);
        let stored = app.store.append_once(session, &once, vec![event]).await?;
        if stored.is_none() {
            // Answered already: move on as the first submission does (it may not have yet,
            // or the server stopped between storing the answers and moving on), unless the
            // participant is past this page by now.
            let now = app.store.participant(&p.id).await?;
            if now.is_some_and(|now| now.flow_step == p.flow_step) {
                advance(&app, &p, &study, role, flow::after(st, role, i)).await?;
            }
            return Ok(to_page(seat.as_deref()));
        }
    }
    advance(&app, &p, &study, role, flow::after(st, role, i)).await?;
    Ok(to_page(seat.as_deref()))
}
