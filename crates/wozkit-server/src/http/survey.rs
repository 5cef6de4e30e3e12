//! The questionnaire page: the study's `survey` questions for the participant's role as a form (fields from
//! [`super::questions`], every kind of the question model) and `POST /p/survey`, which checks
//! every answer with `wozkit_core::questions::check`, logs them as one `SurveyAnswered` event in
//! the participant's session (with the order each shuffled question was shown in) and moves on.
//! A form with problems is shown again (422) with the answers kept and each problem next to its
//! question. After a session that ended because a participant left (or no partner came), one
//! sentence above the questions says what happened ([`end_note`]).

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use wozkit_core::event::{Actor, EndReason, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_core::questions::{Problem, seed_of};
use wozkit_store::{NewEvent, Participant};

use super::extract::Asking;
use super::html::{esc, layout_in, paragraphs};
use super::pages::{advance, to_page};
use super::questions::fieldsets;
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::flow;
use crate::i18n::words;
use crate::security::seat_query;

/// The seed of a participant's shuffled orders: the same on every load of the page and when the
/// answers are checked, different between participants.
pub fn seed(p: &Participant) -> u64 {
    seed_of(&p.id)
}

/// Who was still away when a session ended, from its log: a `Disconnected` not followed by a
/// `Reconnected` of the same role.
fn away_at_end<'a>(events: impl IntoIterator<Item = &'a EventKind>) -> Vec<Role> {
    let mut away = vec![];
    for kind in events {
        match kind {
            EventKind::Disconnected { role, .. } if !away.contains(role) => away.push(*role),
            EventKind::Reconnected { role } => away.retain(|r| r != role),
            _ => {}
        }
    }
    away
}

/// The catalogue key of the sentence shown above the questions for `role` when the
/// conversation did not end in the ordinary way: `reason` is how the session ended, `away` who
/// was still away then.
pub fn end_sentence(reason: EndReason, role: Role, away: &[Role]) -> Option<&'static str> {
    match reason {
        EndReason::NoPartner => Some("survey-end-no-partner"),
        EndReason::Disconnect => {
            let me = away.contains(&role);
            let partner = away.contains(&role.other());
            Some(match (me, partner) {
                (false, true) => "survey-end-partner-left",
                (true, false) => "survey-end-me-left",
                _ => "survey-end-lost",
            })
        }
        EndReason::Terminal | EndReason::TimeLimit | EndReason::Finished | EndReason::Aborted => {
            None
        }
    }
}

/// The catalogue key of the sentence above the questions for participant `p` in `role`, read
/// from its session in the store: `None` without a session, while it is live, or when it ended in the ordinary way.
pub async fn end_note(
    app: &AppState,
    p: &Participant,
    role: Role,
) -> Result<Option<&'static str>, HttpError> {
    let Some(session) = &p.session_id else {
        return Ok(None);
    };
    let Some(reason) = app
        .store
        .session(session)
        .await?
        .and_then(|r| r.ended)
        .map(|e| e.reason)
    else {
        return Ok(None);
    };
    let away = if reason == EndReason::Disconnect {
        let events = app.store.events(session, 0).await?;
        away_at_end(events.iter().map(|e| &e.kind))
    } else {
        vec![]
    };
    Ok(end_sentence(reason, role, &away))
}

/// The questionnaire page of `role` (its own questionnaire, or the shared one): `fields` (the
/// posted form, if any) are put back into the form, and `note` (a catalogue key from
/// [`end_note`]), if any, is one paragraph (`#end-note`) between the title and the questions.
#[allow(clippy::too_many_arguments)]
pub fn render(
    study: &LoadedStudy,
    role: Role,
    page: Option<&Page>,
    action: &str,
    step: &str,
    seed: u64,
    problems: &[Problem],
    fields: &[(String, String)],
    note: Option<&str>,
) -> String {
    let st = &study.study;
    let w = words(st.language);
    let qs = fieldsets(w, st.survey.questions(role), seed, fields, problems);
    let title = page
        .and_then(|p| p.title.clone())
        .or_else(|| st.survey.title(role).map(str::to_string))
        .unwrap_or_else(|| w.get("survey-title"));
    let body = format!(
        "<main class=\"narrow\" data-page=\"survey\"><h1>{}</h1>{}{}\
         <form method=\"post\" action=\"{}\" id=\"survey\"><input type=\"hidden\" name=\"step\" value=\"{}\">{qs}\
         <button type=\"submit\" id=\"survey-submit\" data-testid=\"survey-submit\" class=\"primary\">{}</button></form></main>",
        esc(&title),
        note.map(|n| format!(
            "<p id=\"end-note\" data-testid=\"end-note\" class=\"banner\" role=\"note\">{}</p>",
            esc(&w.get(n))
        ))
        .unwrap_or_default(),
        page.and_then(|p| p.text.as_deref())
            .map(paragraphs)
            .unwrap_or_default(),
        esc(action),
        esc(step),
        esc(&w.get("survey-submit")),
    );
    layout_in(w.lang(), &st.title, "", &body, &[])
}

/// `POST /p/survey`.
pub async fn submit(
    State(app): State<AppState>,
    me: Asking,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
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
    let asked = st.survey.questions(role);
    let answers = match super::questions::check(words(st.language), asked, &fields, seed) {
        Ok(a) => a.to_event(asked),
        Err(problems) => {
            let page = flow::pages(st, role).get(i);
            let action = format!("/p/survey{}", seat_query(seat.as_deref()));
            let note = end_note(&app, &p, role).await?;
            let html = render(
                &study,
                role,
                page,
                &action,
                &p.flow_step,
                seed,
                &problems,
                &fields,
                note,
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
        let stored = app
            .rooms
            .append_once(app.store.as_ref(), session, &once, vec![event])
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(role: Role) -> EventKind {
        EventKind::Disconnected {
            role,
            grace_until_ms: 1,
        }
    }

    #[test]
    fn who_was_away_at_the_end_follows_disconnects_and_returns() {
        let log = [
            gone(Role::User),
            gone(Role::Wizard),
            EventKind::Reconnected { role: Role::Wizard },
            gone(Role::User),
        ];
        assert_eq!(away_at_end(&log), vec![Role::User]);
        assert_eq!(away_at_end(&log[..3]), vec![Role::User]);
        assert_eq!(away_at_end(&log[..0]), Vec::<Role>::new());
    }

    #[test]
    fn only_a_disconnect_or_no_partner_ending_is_explained() {
        let partner_left = end_sentence(EndReason::Disconnect, Role::Wizard, &[Role::User]);
        let i_left = end_sentence(EndReason::Disconnect, Role::User, &[Role::User]);
        let both = end_sentence(
            EndReason::Disconnect,
            Role::User,
            &[Role::User, Role::Wizard],
        );
        let en = |key: Option<&str>| key.map(|k| words(Default::default()).get(k));
        assert!(en(partner_left).is_some_and(|s| s.starts_with("Your partner")));
        assert!(en(i_left).is_some_and(|s| s.starts_with("Your connection")));
        assert!(en(both).is_some_and(|s| s.starts_with("The connection")));
        assert!(
            en(end_sentence(EndReason::NoPartner, Role::User, &[]))
                .is_some_and(|s| s.contains("No partner"))
        );
        for reason in [
            EndReason::Terminal,
            EndReason::TimeLimit,
            EndReason::Finished,
            EndReason::Aborted,
        ] {
            assert_eq!(end_sentence(reason, Role::User, &[Role::Wizard]), None);
        }
    }
}
