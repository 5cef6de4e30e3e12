//! The post-task questionnaire: the form (Likert scales, choices, free text) and `POST
//! /p/survey`, which checks every answer against the study's questions, logs them as one
//! `SurveyAnswered` event in the participant's session and moves on. A form with problems is
//! shown again with the answers kept and each problem next to its question.

use std::collections::HashMap;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind, Question, QuestionKind};
use wozkit_store::NewEvent;

use super::html::{esc, layout, paragraphs};
use super::pages::{SeatQuery, advance, to_page, who};
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::flow;
use crate::security::{origin_ok, seat_query};

/// Longest free-text answer, in characters.
const MAX_ANSWER_CHARS: usize = 2000;

/// The questionnaire page.
pub fn render(
    study: &LoadedStudy,
    page: Option<&Page>,
    action: &str,
    step: &str,
    problems: &[(String, String)],
    values: &HashMap<String, String>,
) -> String {
    let st = &study.study;
    let mut qs = String::new();
    for (n, q) in st.survey.questions.iter().enumerate() {
        let problem = problems
            .iter()
            .find(|(id, _)| id == &q.id)
            .map(|(_, m)| {
                format!(
                    "<p class=\"problem\" role=\"alert\" data-testid=\"problem-{}\">{}</p>",
                    esc(&q.id),
                    esc(m)
                )
            })
            .unwrap_or_default();
        let value = values.get(&q.id).map(String::as_str).unwrap_or("");
        qs.push_str(&format!(
            "<fieldset class=\"question\" data-testid=\"question-{id}\"><legend>{num}. {text}{req}</legend>{input}{problem}</fieldset>",
            id = esc(&q.id),
            num = n + 1,
            text = esc(&q.text),
            req = if q.required { "" } else { " <span class=\"muted\">(optional)</span>" },
            input = input(q, value),
        ));
    }
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

fn input(q: &Question, value: &str) -> String {
    let name = esc(&q.id);
    let req = if q.required { " required" } else { "" };
    match q.kind {
        QuestionKind::Likert => {
            let points: String = (1..=q.points.clamp(2, 11))
                .map(|i| {
                    let checked = if value == i.to_string() { " checked" } else { "" };
                    format!(
                        "<label class=\"point\"><input type=\"radio\" name=\"{name}\" value=\"{i}\" data-testid=\"{name}-{i}\"{req}{checked}><span>{i}</span></label>"
                    )
                })
                .collect();
            format!(
                "<div class=\"likert\"><span class=\"end\">{}</span>{points}<span class=\"end\">{}</span></div>",
                esc(q.low.as_deref().unwrap_or("")),
                esc(q.high.as_deref().unwrap_or(""))
            )
        }
        QuestionKind::Choice => q
            .options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let checked = if value == o { " checked" } else { "" };
                format!(
                    "<label class=\"choice\"><input type=\"radio\" name=\"{name}\" value=\"{}\" data-testid=\"{name}-{i}\"{req}{checked}> {}</label>",
                    esc(o),
                    esc(o)
                )
            })
            .collect(),
        QuestionKind::Text => format!(
            "<textarea name=\"{name}\" data-testid=\"{name}\" rows=\"3\" maxlength=\"{MAX_ANSWER_CHARS}\"{req}>{}</textarea>",
            esc(value)
        ),
    }
}

/// Checks the answers; every problem is reported at once.
pub fn check(
    questions: &[Question],
    fields: &HashMap<String, String>,
) -> Result<IndexMap<String, Value>, Vec<(String, String)>> {
    let mut answers = IndexMap::new();
    let mut problems = vec![];
    for q in questions {
        let raw = fields.get(&q.id).map(|v| v.trim()).unwrap_or("");
        if raw.is_empty() {
            if q.required {
                problems.push((q.id.clone(), "Please answer this question.".to_string()));
            }
            continue;
        }
        let value = match q.kind {
            QuestionKind::Likert => match raw.parse::<u32>() {
                Ok(n) if (1..=q.points).contains(&n) => Ok(json!(n)),
                _ => Err(format!("Choose a point from 1 to {}.", q.points)),
            },
            QuestionKind::Choice if q.options.iter().any(|o| o == raw) => Ok(json!(raw)),
            QuestionKind::Choice => Err("Choose one of the options.".to_string()),
            QuestionKind::Text if raw.chars().count() > MAX_ANSWER_CHARS => Err(format!(
                "Please keep the answer under {MAX_ANSWER_CHARS} characters."
            )),
            QuestionKind::Text => Ok(json!(raw)),
        };
        match value {
            Ok(v) => {
                answers.insert(q.id.clone(), v);
            }
            Err(m) => problems.push((q.id.clone(), m)),
        }
    }
    if problems.is_empty() {
        Ok(answers)
    } else {
        Err(problems)
    }
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
    let fields: HashMap<String, String> = fields.into_iter().collect();
    if flow::kind_at(st, role, i) != PageKind::Survey || fields.get("step") != Some(&p.flow_step) {
        // Already answered (or not there yet): show the current page.
        return Ok(to_page(seat.as_deref()));
    }
    let answers = match check(&st.survey.questions, &fields) {
        Ok(a) => a,
        Err(problems) => {
            let page = flow::pages(st, role).get(i);
            let action = format!("/p/survey{}", seat_query(seat.as_deref()));
            let html = render(&study, page, &action, &p.flow_step, &problems, &fields);
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
                advance(&app, &p, &study, role, i + 1).await?;
            }
            return Ok(to_page(seat.as_deref()));
        }
    }
    advance(&app, &p, &study, role, i + 1).await?;
    Ok(to_page(seat.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wozkit_core::model::QuestionKind;

    fn q(id: &str, kind: QuestionKind, required: bool) -> Question {
        Question {
            id: id.into(),
            text: "?".into(),
            kind,
            points: 5,
            low: None,
            high: None,
            reverse: false,
            options: vec!["a".into(), "b".into()],
            required,
        }
    }

    #[test]
    fn answers_are_checked() {
        let qs = vec![
            q("l", QuestionKind::Likert, true),
            q("c", QuestionKind::Choice, true),
            q("t", QuestionKind::Text, false),
        ];
        let ok: HashMap<String, String> = [("l", "5"), ("c", "b")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let answers = check(&qs, &ok).unwrap_or_default();
        assert_eq!(answers.get("l"), Some(&json!(5)));
        let bad: HashMap<String, String> = [("l", "9"), ("c", "z")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let problems = check(&qs, &bad).err().unwrap_or_default();
        assert_eq!(problems.len(), 2);
    }
}
