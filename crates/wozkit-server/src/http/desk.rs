//! The `desk` page: where a wizard answers for a study's `human` systems (`crate::human`).
//!
//! The page lists the conversations handed to this wizard, each with its history and, when a
//! participant's turn waits, a reply box. It works without JavaScript (reload to see new
//! turns; every load counts as being at the desk); with `desk.js` it polls every 2 s, which
//! keeps the wizard at the desk, and reloads when a turn arrives or is taken back, unless a
//! reply is being written.
//!
//! | route | does |
//! |---|---|
//! | `GET /p/desk/poll` | "still here"; what the desk holds for this wizard, as a version |
//! | `POST /p/desk/reply` | the wizard's reply to a waiting turn |
//! | `POST /p/desk/leave` | leaves the desk (the turns held fail) and moves on in the flow |
//!
//! A reply is not stored here: it completes the waiting turn, and `chat::ask` stores it as the
//! system's message. Who typed it is recorded just before, in the conversation's session, as
//! an `Annotation` with key [`HUMAN_REPLY_KEY`] and value `{participant, turn}` (`turn`: the
//! reply's index among the session's messages, as in `TurnAnnotated`), by the wizard as actor.

use axum::Form;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{Page, PageKind};
use wozkit_store::{NewEvent, Participant};
use wozkit_systems::Role as TurnRole;

use super::extract::Asking;
use super::html::{esc, layout, paragraphs};
use super::pages::{advance, to_page};
use crate::app::{AppState, now_ms};
use crate::error::HttpError;
use crate::flow;
use crate::human::DeskConversation;
use crate::security::seat_query;

/// The `Annotation` key naming the wizard who typed a `human` system's reply.
pub const HUMAN_REPLY_KEY: &str = "human_reply";
/// The longest reply a wizard may send.
const MAX_REPLY_CHARS: usize = 4000;

/// Whether the participant is a wizard on a desk page now.
fn at_desk(st: &wozkit_core::model::Study, p: &Participant, role: Role) -> bool {
    role == Role::Wizard && flow::kind_at(st, role, flow::index(&p.flow_step)) == PageKind::Desk
}

/// What the desk holds for a wizard, as a short string that changes when a turn arrives or
/// is answered.
fn version(convos: &[DeskConversation]) -> String {
    convos
        .iter()
        .map(|c| match &c.waiting {
            Some((_, turn)) => format!("{}:{turn}", c.dialogue_id),
            None => format!("{}:-{}", c.dialogue_id, c.history.len()),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The desk page of wizard `p` (who is marked present by it).
pub fn render(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    page: Option<&Page>,
    seat: Option<&str>,
) -> String {
    let st = &study.study;
    app.systems.desk.touch(&st.id, &p.id);
    let convos = app.systems.desk.conversations(&p.id);
    let action = |path: &str| format!("{path}{}", seat_query(seat));
    let items: String = convos.iter().map(|c| conversation_html(c, seat)).collect();
    let empty = if convos.is_empty() {
        "<p id=\"desk-empty\" data-testid=\"desk-empty\" role=\"status\">No conversation yet. \
         Keep this page open: participants' messages appear here.</p>"
    } else {
        ""
    };
    let leave = format!(
        "<form method=\"post\" action=\"{}\" class=\"desk-leave\"><input type=\"hidden\" \
             name=\"step\" value=\"{}\"><button type=\"submit\" id=\"desk-leave\" \
             data-testid=\"desk-leave\">Leave the desk</button></form>",
        esc(&action("/p/desk/leave")),
        esc(&p.flow_step),
    );
    let body = format!(
        "<main class=\"narrow\" data-page=\"desk\" data-seat=\"{}\" data-version=\"{}\"><h1>{}</h1>{}\
         <p class=\"muted\">You answer participants as an assistant. They do not know a person \
         is answering. Stay on this page; leaving it for more than 15 seconds ends your turn \
         at the desk.</p>{empty}{items}{}</main>",
        esc(seat.unwrap_or("")),
        esc(&version(&convos)),
        esc(page
            .and_then(|pg| pg.title.as_deref())
            .unwrap_or("The desk")),
        page.and_then(|pg| pg.text.as_deref())
            .map(paragraphs)
            .unwrap_or_default(),
        leave,
    );
    layout(&st.title, &body, &["desk.js"])
}

/// One conversation at the desk: what was said, and the reply form when the participant waits
/// for one.
fn conversation_html(c: &DeskConversation, seat: Option<&str>) -> String {
    let lines: String = c
        .history
        .iter()
        .map(|t| {
            let (class, who) = match t.role {
                TurnRole::User => ("user", "Participant"),
                TurnRole::Assistant => ("system", "Reply"),
            };
            format!(
                "<li class=\"said {class}\"><span class=\"speaker\">{who}</span> \
                 <span class=\"text\">{}</span></li>",
                esc(&t.text)
            )
        })
        .collect();
    let reply = match &c.waiting {
        Some((system, turn)) => format!(
            "<form method=\"post\" action=\"{}\" data-testid=\"desk-reply\">\
             <input type=\"hidden\" name=\"dialogue\" value=\"{}\">\
             <input type=\"hidden\" name=\"turn\" value=\"{turn}\">\
             <label>Your reply as <strong>{}</strong>\
             <textarea name=\"text\" required maxlength=\"{MAX_REPLY_CHARS}\" rows=\"3\"></textarea></label>\
             <button class=\"primary\" type=\"submit\">Send</button></form>",
            esc(&format!("/p/desk/reply{}", seat_query(seat))),
            esc(&c.dialogue_id),
            esc(system),
        ),
        None => "<p class=\"muted\">Waiting for the participant.</p>".to_string(),
    };
    format!(
        "<section class=\"desk-conversation\" data-testid=\"desk-conversation\" \
         data-dialogue=\"{}\" data-waiting=\"{}\"><ol class=\"chat-log\">{lines}</ol>{reply}</section>",
        esc(&c.dialogue_id),
        c.waiting
            .as_ref()
            .map_or(String::new(), |(_, t)| t.to_string()),
    )
}

/// `GET /p/desk/poll`: keeps the wizard at the desk; says what it holds for them.
pub async fn poll(State(app): State<AppState>, me: Asking) -> Result<Response, HttpError> {
    let Asking { p, study, role, .. } = me;
    if !at_desk(&study.study, &p, role) {
        return Ok(Json(json!({"at_desk": false})).into_response());
    }
    app.systems.desk.touch(&study.study.id, &p.id);
    let convos = app.systems.desk.conversations(&p.id);
    Ok(Json(json!({"at_desk": true, "version": version(&convos)})).into_response())
}

#[derive(Deserialize)]
pub struct ReplyForm {
    dialogue: String,
    turn: usize,
    text: String,
}

/// `POST /p/desk/reply`: the wizard's reply to a waiting turn; back to the desk.
pub async fn reply(
    State(app): State<AppState>,
    me: Asking,
    Form(form): Form<ReplyForm>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    if !at_desk(&study.study, &p, role) {
        return Ok(to_page(seat.as_deref()));
    }
    let text = form.text.trim();
    if text.is_empty() {
        return Err(HttpError::BadRequest(
            "desk reply: write a reply first".into(),
        ));
    }
    if text.chars().count() > MAX_REPLY_CHARS {
        return Err(HttpError::BadRequest(format!(
            "desk reply: at most {MAX_REPLY_CHARS} characters"
        )));
    }
    let desk = &app.systems.desk;
    desk.touch(&study.study.id, &p.id);
    if !desk.is_waiting(&p.id, &form.dialogue, form.turn) {
        // The turn was withdrawn while the reply was written (its time ran out, or the
        // participant left): say so, and give the text back rather than dropping it.
        let body = format!(
            "<main class=\"narrow\" data-page=\"desk-late\"><h1>Too late for this turn</h1>\
             <p data-testid=\"desk-late\">The participant's turn was withdrawn before your reply \
             arrived (its time ran out, or the participant left), so it was not sent. Your text:</p>\
             <blockquote>{}</blockquote><p><a class=\"button primary\" href=\"/p{}\">Back to the \
             desk</a></p></main>",
            esc(text),
            esc(&seat_query(seat.as_deref())),
        );
        return Ok((
            StatusCode::CONFLICT,
            Html(layout(&study.study.title, &body, &[])),
        )
            .into_response());
    }
    {
        // Who typed it, just before the reply itself is stored as the system's message.
        let event = NewEvent {
            actor: Actor::Participant {
                role: Role::Wizard,
                participant: Some(p.id.clone()),
            },
            kind: EventKind::Annotation {
                key: HUMAN_REPLY_KEY.into(),
                value: json!({"participant": p.id, "turn": form.turn}),
            },
            at_ms: now_ms(),
        };
        app.store.append(&form.dialogue, vec![event]).await?;
        if let Err(why) = desk.answer(&p.id, &form.dialogue, form.turn, text) {
            tracing::info!(
                participant = p.id,
                dialogue = form.dialogue,
                "desk reply not delivered: {why}"
            );
        }
    }
    Ok(to_page(seat.as_deref()))
}

#[derive(Deserialize)]
pub struct LeaveForm {
    step: String,
}

/// `POST /p/desk/leave`: the wizard leaves the desk (turns they held fail) and moves on.
pub async fn leave(
    State(app): State<AppState>,
    me: Asking,
    Form(form): Form<LeaveForm>,
) -> Result<Response, HttpError> {
    let seat = me.seat.clone();
    let Asking { p, study, role, .. } = me;
    if at_desk(&study.study, &p, role) && form.step == p.flow_step {
        app.systems.desk.leave(&p.id);
        let i = flow::index(&p.flow_step);
        advance(&app, &p, &study, role, flow::after(&study.study, role, i)).await?;
    }
    Ok(to_page(seat.as_deref()))
}
