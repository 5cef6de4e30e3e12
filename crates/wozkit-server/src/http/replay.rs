//! Replaying a finished session step by step, with the world state at each step.
//!
//! - `GET /researcher/session/{id}/replay` (observer access): the replay page
//!   (`assets/replay.js`): a scrubber over the session's events (`#replay-scrubber`), play and
//!   pause (`#replay-play`) at a speed, step back and forward, the keyboard (←, →, space); at each
//!   step the event itself (`#replay-step`), the transcript so far (`#replay-transcript`) and the
//!   world state (`#replay-world`).
//! - `GET /researcher/session/{id}/replay.json?from=K&count=N` (observer access): steps `K` to
//!   `K+N-1` of the replay. Step `k` is the state after the log's first `k` events (step 0: before
//!   any), and carries event `k` itself.
//!
//! The state at each step is the engine's own fold ([`engine::apply`], the function
//! [`engine::replay`] uses and a live room steps with), never a second reading of the events in
//! the browser: the state is `{"s": …, "d": …}`, `s` the engine's [`Session`] (its fields) and
//! `d` what the pages derive from it (labels, the options the wizard was offered, the timer, the
//! map's robots). The first step of a chunk carries both whole; every later step only `p`, the
//! changes since the step before: `[path, value]` pairs (a path is the keys and array indices
//! from the state's root, e.g. `["s", "world", "fire_out"]`; an array whose length changed is
//! replaced whole; a `[path]` without a value removes that key), applied in order.
//!
//! Long sessions: the page itself holds no events; the browser asks for the steps in chunks of
//! at most [`MAX_CHUNK`] steps (it loads them one after another in the background). A chunk
//! folds the log up to its first step without building anything (the fold is cheap: no text, no
//! JSON) and serialises only its own steps, so no request builds more than one chunk, however
//! long the session. The store reads the log whole for each chunk (it has no upper bound on a
//! read); that is the same read the session page makes.
//!
//! Sessions without a world (an evaluation participant's log, a chat or arena conversation, a
//! session of a study this server does not serve) have no `s` or `d`: their transcript and
//! judgments are the content.

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wozkit_core::engine::{self, Session};
use wozkit_core::event::{Actor, Event, EventKind, Judgment, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::LockKind;

use super::extract::{ResearcherApi, ResearcherPage};
use super::html::{esc, layout, media_url, query_escape};
use crate::app::AppState;
use crate::error::HttpError;

/// Steps per chunk when the request names no count.
pub const DEFAULT_CHUNK: u64 = 250;
/// Most steps one request returns.
pub const MAX_CHUNK: u64 = 1000;

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/researcher/session/{id}/replay", get(page))
        .route("/researcher/session/{id}/replay.json", get(data))
}

/// `GET /researcher/session/{id}/replay`.
async fn page(
    State(app): State<AppState>,
    _: ResearcherPage,
    Path(id): Path<String>,
) -> Result<Response, HttpError> {
    let base = format!("/researcher/session/{}", query_escape(&id));
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let body = format!(
        "<main id=\"replay\" class=\"replay\" data-page=\"replay\" data-session=\"{sid}\" data-src=\"{base}/replay.json\" data-total=\"{total}\">\
         <header class=\"bar\"><h1>Replay <code>{sid}</code></h1>\
         <span class=\"muted\">study {study}{live}</span>\
         <a href=\"{base}\">Log</a><a href=\"/researcher\">Sessions</a></header>\
         <div class=\"replay-controls\" role=\"group\" aria-label=\"Replay controls\">\
           <button type=\"button\" id=\"replay-back\" data-testid=\"replay-back\" aria-label=\"Step back\" title=\"Step back (←)\">◀</button>\
           <button type=\"button\" id=\"replay-play\" data-testid=\"replay-play\" class=\"primary\" title=\"Play or pause (space)\">Play</button>\
           <button type=\"button\" id=\"replay-forward\" data-testid=\"replay-forward\" aria-label=\"Step forward\" title=\"Step forward (→)\">▶</button>\
           <label>Speed <select id=\"replay-speed\" data-testid=\"replay-speed\">\
             <option value=\"1\" selected>1×</option><option value=\"4\">4×</option><option value=\"16\">16×</option></select></label>\
           <input type=\"range\" id=\"replay-scrubber\" data-testid=\"replay-scrubber\" min=\"0\" max=\"{total}\" value=\"0\" step=\"1\" aria-label=\"Step\">\
           <span id=\"replay-position\" data-testid=\"replay-position\" role=\"status\">loading…</span>\
         </div>\
         <p class=\"muted\">Pauses between events follow the session's own timing, divided by the speed; a pause longer than {cap} s is cut to {cap} s.</p>\
         <section id=\"replay-step\" data-testid=\"replay-step\" data-step=\"0\" aria-live=\"polite\"></section>\
         <div class=\"replay-panes\">\
           <section><h2>Transcript</h2><ol id=\"replay-transcript\" data-testid=\"replay-transcript\"></ol></section>\
           <section id=\"replay-world\" data-testid=\"replay-world\"></section>\
         </div></main>",
        sid = esc(&record.id),
        study = esc(&record.study_id),
        total = record.last_seq,
        live = if record.is_live() {
            " — still live: the replay shows the events so far"
        } else {
            ""
        },
        cap = GAP_CAP_S,
    );
    Ok(Html(layout("Replay", &body, &["replay.js"])).into_response())
}

/// The longest pause between two events when playing (seconds); said on the page, kept by
/// `replay.js`.
const GAP_CAP_S: u64 = 3;

/// The chunk asked for.
#[derive(Deserialize)]
struct ChunkQuery {
    from: Option<u64>,
    count: Option<u64>,
}

/// `GET /researcher/session/{id}/replay.json`.
async fn data(
    State(app): State<AppState>,
    _: ResearcherApi,
    Path(id): Path<String>,
    Query(q): Query<ChunkQuery>,
) -> Result<Response, HttpError> {
    let record = app.store.session(&id).await?.ok_or(HttpError::NotFound)?;
    let events = app.store.events(&id, 0).await?;
    let study = app.study(Some(&record.study_id));
    let from = q.from.unwrap_or(0);
    let count = q.count.unwrap_or(DEFAULT_CHUNK).clamp(1, MAX_CHUNK);
    if from > events.len() as u64 {
        return Err(HttpError::BadRequest(format!(
            "replay of session {id}: step {from} is past the last step ({})",
            events.len()
        )));
    }
    let chunk = chunk(study.as_deref(), &id, &events, from, count);
    let mut out = json!({
        "session": record.id,
        "study": record.study_id,
        "kind": record.kind.as_str(),
        "live": record.is_live(),
    });
    if let (Value::Object(o), Value::Object(c)) =
        (&mut out, serde_json::to_value(&chunk).unwrap_or_default())
    {
        o.extend(c);
    }
    if from == 0 {
        out["facts"] = facts(study.as_deref(), chunk.world);
    }
    Ok(Json(out).into_response())
}

/// One chunk of a replay: steps `from..from+count` (fewer at the end of the log).
#[derive(Debug, Serialize)]
pub struct Chunk {
    /// Whether the steps carry the world state (a room session of a study served here).
    pub world: bool,
    /// Events in the log; the steps are `0..=total`.
    pub total: u64,
    /// Time of the first event (ms since the epoch); steps carry times relative to it.
    pub start_ms: u64,
    pub from: u64,
    /// The first step of the next chunk; `None` after the last step.
    pub next: Option<u64>,
    pub steps: Vec<StepOut>,
}

/// One step of a replay.
#[derive(Debug, Serialize)]
pub struct StepOut {
    pub k: u64,
    /// Milliseconds since the first event.
    pub t_ms: u64,
    /// Event `k` (its `session` field left out: it is the replay's); `None` for step 0.
    pub event: Option<Value>,
    /// The event's line in the transcript, when it has one.
    pub line: Option<Line>,
    /// The engine's session at this step, on a chunk's first step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s: Option<Value>,
    /// What the pages derive from the session, on a chunk's first step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d: Option<Value>,
    /// On later steps: the changes to `{"s": …, "d": …}` since the step before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<Vec<Value>>,
}

/// A line of the transcript.
#[derive(Debug, Serialize)]
pub struct Line {
    /// `message`, `action`, `judgment`, `answers` or `note`.
    pub kind: &'static str,
    pub role: Option<Role>,
    /// Who: the role's label, a bot's name, or "system".
    pub who: String,
    pub text: String,
    /// For messages: `option` (an offered dialogue state), `fixed` (a fixed option) or `free`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'static str>,
    /// The dialogue-act label of an option.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// Whether a log replays with a world: a room study served here, and a log that starts a room
/// session (not a chat with a system or a participant's evaluation log).
fn has_world(study: Option<&LoadedStudy>, events: &[Event]) -> bool {
    study.is_some_and(|s| s.study.has_room())
        && events
            .first()
            .is_none_or(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
}

/// Steps `from..from+count` of the replay of `events` (a session's whole log, in order).
pub fn chunk(
    study: Option<&LoadedStudy>,
    session_id: &str,
    events: &[Event],
    from: u64,
    count: u64,
) -> Chunk {
    let total = events.len() as u64;
    let from = from.min(total);
    let end = from.saturating_add(count).min(total + 1);
    let start_ms = events.first().map_or(0, |e| e.at_ms);
    let world = study.filter(|_| has_world(study, events));
    // The fold up to the chunk's first step: the engine's replay of the first `from` events.
    let mut session = world.map(|st| engine::replay(st, session_id, &events[..from as usize]));
    let mut prev: Option<Value> = None;
    let mut steps = Vec::with_capacity((end - from) as usize);
    for k in from..end {
        let event = (k > 0).then(|| &events[k as usize - 1]);
        if let (Some(st), Some(s), Some(e)) = (world, session.as_mut(), event)
            && k > from
        {
            engine::apply(st, s, &e.actor, &e.kind, e.at_ms);
        }
        let (mut s_out, mut d_out, mut p_out) = (None, None, None);
        if let (Some(st), Some(s)) = (world, &session) {
            let now = json!({
                "s": serde_json::to_value(s).unwrap_or_default(),
                "d": derived(st, s),
            });
            match &prev {
                None => {
                    s_out = Some(now["s"].clone());
                    d_out = Some(now["d"].clone());
                }
                Some(before) => {
                    let mut out = vec![];
                    patch(before, &now, &mut vec![], &mut out);
                    p_out = Some(out);
                }
            }
            prev = Some(now);
        }
        steps.push(StepOut {
            k,
            t_ms: event.map_or(0, |e| e.at_ms.saturating_sub(start_ms)),
            event: event.map(event_json),
            line: event.and_then(|e| line(study, e)),
            s: s_out,
            d: d_out,
            p: p_out,
        });
    }
    Chunk {
        world: world.is_some(),
        total,
        start_ms,
        from,
        next: (end <= total).then_some(end),
        steps,
    }
}

/// The changes from `before` to `now` as `[path, value]` pairs (`[path]` for a removed key):
/// objects and arrays of the same length are compared member by member, anything else is
/// replaced whole when it differs.
pub fn patch(before: &Value, now: &Value, path: &mut Vec<Value>, out: &mut Vec<Value>) {
    match (before, now) {
        (Value::Object(b), Value::Object(n)) => {
            for (k, v) in n {
                path.push(Value::String(k.clone()));
                match b.get(k) {
                    Some(old) => patch(old, v, path, out),
                    None => out.push(json!([path.clone(), v])),
                }
                path.pop();
            }
            for k in b.keys().filter(|k| !n.contains_key(*k)) {
                path.push(Value::String(k.clone()));
                out.push(json!([path.clone()]));
                path.pop();
            }
        }
        (Value::Array(b), Value::Array(n)) if b.len() == n.len() => {
            for (i, (old, v)) in b.iter().zip(n).enumerate() {
                path.push(json!(i));
                patch(old, v, path, out);
                path.pop();
            }
        }
        _ if before != now => out.push(json!([path.clone(), now])),
        _ => {}
    }
}

fn event_json(e: &Event) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let Value::Object(m) = &mut v {
        m.remove("session");
    }
    v
}

fn who(study: Option<&LoadedStudy>, a: &Actor) -> String {
    let role_label = |r: Role| -> String {
        study.map_or_else(
            || r.as_str().to_string(),
            |s| match r {
                Role::User => s.study.roles.user.label.clone(),
                Role::Wizard => s.study.roles.wizard.label.clone(),
            },
        )
    };
    match a {
        Actor::Participant { role, .. } => role_label(*role),
        Actor::Bot { role, name } => format!("{name} (bot, {})", role_label(*role)),
        Actor::System => "system".into(),
    }
}

fn compact(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The transcript line of an event, if it has one.
fn line(study: Option<&LoadedStudy>, e: &Event) -> Option<Line> {
    let mk = |kind, text: String| Line {
        kind,
        role: e.actor.role(),
        who: who(study, &e.actor),
        text,
        via: None,
        label: None,
    };
    Some(match &e.kind {
        EventKind::Message { role, text, source } => {
            let mut l = mk("message", text.clone());
            l.role = Some(*role);
            l.via = Some(match source {
                MessageSource::State { .. } => "option",
                MessageSource::Fixed { .. } => "fixed",
                MessageSource::Free => "free",
            });
            l.label = source
                .act()
                .map(|(label, t)| format!("{label} / {}", t.as_str()));
            l
        }
        EventKind::SurveyAnswered { role, answers } => {
            let mut l = mk("answers", format!("questionnaire: {}", compact(answers)));
            l.role = Some(*role);
            l
        }
        kind => {
            let (kind, text) = room_text(study, kind).or_else(|| evaluation_text(kind))?;
            mk(kind, text)
        }
    })
}

/// The transcript line's kind and text of an event of a room, if it has one.
fn room_text(study: Option<&LoadedStudy>, kind: &EventKind) -> Option<(&'static str, String)> {
    Some(match kind {
        EventKind::ActionStarted {
            action,
            label,
            robot,
            target,
            ..
        } => (
            "action",
            action_text(study, action, label, robot, target.as_deref()),
        ),
        // The copilot's help, which the wizard saw and the user did not (`docs/copilot.md`).
        EventKind::Suggested { n, system, text } => (
            "note",
            format!("copilot {system} suggested ({n}): “{text}”"),
        ),
        EventKind::SuggestionUsed { n, edits } => (
            "note",
            match edits {
                0 => format!("sent from suggestion {n} as it was"),
                e => format!("sent from suggestion {n}, edited ({e} characters changed)"),
            },
        ),
        EventKind::TakenOver { role, .. } => (
            "note",
            format!("a researcher took over the {} seat", role.as_str()),
        ),
        EventKind::SessionEnded {
            reason,
            goal_reached,
        } => (
            "note",
            format!(
                "session ended: {}{}",
                reason.as_str(),
                if *goal_reached { ", goal reached" } else { "" }
            ),
        ),
        _ => return None,
    })
}

/// A started action's text: the robot, the action and its target, by their names in the study
/// (their ids without one).
fn action_text(
    study: Option<&LoadedStudy>,
    action: &str,
    label: &str,
    robot: &str,
    target: Option<&str>,
) -> String {
    let st = study.map(|s| &s.study);
    let robot = st
        .and_then(|s| s.world.robots.iter().find(|r| r.id == robot))
        .map_or(robot, |r| r.name.as_str());
    let label = st
        .and_then(|s| s.actions.iter().find(|a| a.id == action))
        .map_or(label, |a| a.label.as_str());
    let target = target.map(|t| {
        st.and_then(|s| s.world.locations.iter().find(|l| l.id == t))
            .map_or(t, |l| l.name.as_str())
    });
    let mut text = format!("{robot}: {label}");
    if let Some(t) = target {
        text.push_str(&format!(" → {t}"));
    }
    text
}

/// The transcript line's kind and text of an evaluation's event, if it has one.
fn evaluation_text(kind: &EventKind) -> Option<(&'static str, String)> {
    Some(match kind {
        EventKind::Judged(j) => ("judgment", judged_text(j)),
        EventKind::PageAnswered { page, answers } => {
            ("answers", format!("page {page}: {}", compact(answers)))
        }
        EventKind::OnboardingDone {
            passed,
            correct,
            total,
            ..
        } => (
            "answers",
            format!(
                "onboarding test {}: {correct} of {total} right",
                if *passed { "passed" } else { "failed" }
            ),
        ),
        EventKind::ItemClaimed {
            page,
            item,
            dialogues,
            systems,
            ..
        } => (
            "note",
            format!(
                "page {page}: item {item} shown ({})",
                dialogues
                    .iter()
                    .zip(systems)
                    .map(|(d, s)| format!("{d} by {s}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        EventKind::ItemReturned { item, .. } => ("note", format!("item {item} skipped")),
        EventKind::ScreenedOut { reason } => ("note", format!("screened out: {}", compact(reason))),
        EventKind::ChatStarted {
            system, side, page, ..
        } => (
            "note",
            format!(
                "page {page}: chat with {system}{}",
                side.as_deref()
                    .map(|s| format!(" ({s} side)"))
                    .unwrap_or_default()
            ),
        ),
        EventKind::TurnAnnotated {
            turn,
            labels,
            score,
            feedback,
        } => (
            "judgment",
            annotated_text(*turn, labels, *score, feedback.as_deref()),
        ),
        EventKind::SystemFailed { system, error } => {
            ("note", format!("{system} gave no reply: {error}"))
        }
        _ => return None,
    })
}

/// A judgment's text: the item, the choice and its reason, the answers, the turns labelled,
/// the gold check and whether it counts.
fn judged_text(j: &Judgment) -> String {
    let mut parts = vec![format!("item {}", j.item)];
    if let Some(c) = &j.choice {
        parts.push(format!("chose {c}"));
    }
    if let Some(r) = &j.justification {
        parts.push(format!("because “{r}”"));
    }
    if !j.answers.is_empty() {
        parts.push(compact(&j.answers));
    }
    if !j.turns.is_empty() {
        parts.push(format!("{} turn label(s)", j.turns.len()));
    }
    if let Some(g) = j.gold_correct {
        parts.push(if g { "gold: right" } else { "gold: wrong" }.into());
    }
    if !j.counted {
        parts.push("not counted".into());
    }
    parts.join(" · ")
}

/// A turn's labels' text: the turn, its labels, its score and the live feedback.
fn annotated_text(
    turn: u32,
    labels: &[String],
    score: Option<u32>,
    feedback: Option<&str>,
) -> String {
    let mut parts = vec![format!("turn {turn}")];
    if !labels.is_empty() {
        parts.push(labels.join(", "));
    }
    if let Some(s) = score {
        parts.push(format!("score {s}"));
    }
    if let Some(f) = feedback {
        parts.push(f.to_string());
    }
    parts.join(" · ")
}

/// What the pages show of a session besides its raw fields: names for ids, the options the
/// wizard was offered, each side's lock and presence, the timer, the map's robots and alarm.
fn derived(study: &LoadedStudy, s: &Session) -> Value {
    let st = &study.study;
    let place = |id: &str| place_name(study, id);
    let robots = robots_json(study, s);
    let lock = s.lock.as_ref().map(|l| {
        json!({"kind": l.kind, "prompt": l.prompt, "state": st.states.get(l.state).map(|x| x.id.clone())})
    });
    // By state id (and their order apart): when the offer changes, the step sends the options
    // that came and went, not the whole list again.
    let offered = engine::offered(study, s);
    let option_order: Vec<&str> = offered.iter().map(|o| o.state.as_str()).collect();
    let options: serde_json::Map<String, Value> = offered
        .iter()
        .map(|o| {
            (
                o.state.clone(),
                json!({"label": o.label, "act_type": o.act_type, "text": o.text, "kind": o.kind}),
            )
        })
        .collect();
    let state = st.states.get(s.current);
    let label_of = |id: &str| -> String {
        st.subtasks
            .iter()
            .find(|t| t.id == id)
            .map_or_else(|| id.to_string(), |t| t.label.clone())
    };
    let media = s
        .media
        .last()
        .and_then(|id| st.media.get(id))
        .map(|m| json!({"url": media_url(&st.id, &m.file), "alt": m.alt}));
    let present = |r: Role| -> &'static str {
        if s.away.iter().any(|(a, _)| *a == r) {
            "away"
        } else if s.joined.contains(&r) {
            "here"
        } else {
            "not joined"
        }
    };
    json!({
        "timer": {
            "limit_s": st.session.time_limit_s,
            "left_s": s.time_left_s(study),
            "elapsed_s": s.started.then(|| s.now_ms.saturating_sub(s.started_at_ms) / 1000),
        },
        "progress": s.progress(study),
        "subtask": s.subtask.as_deref().map(label_of),
        "milestones": s.milestones.iter().map(|m| json!({"id": m, "label": label_of(m)})).collect::<Vec<_>>(),
        "robots": robots,
        "alarm": engine::alarm(study, s).map(|(at, cleared)| json!({"location": at, "location_name": place(at), "cleared": cleared})),
        "media": media,
        "wizard": {
            "presence": present(Role::Wizard),
            "state": state.map(|x| x.id.clone()),
            "state_label": state.map(|x| x.label.clone().unwrap_or_else(|| x.id.clone())),
            "options": options,
            "option_order": option_order,
            "unlocked": s.unlocked.iter().filter_map(|i| st.states.get(*i)).map(|x| x.id.clone()).collect::<Vec<_>>(),
            "hint": s.hint,
            "lock": lock,
        },
        "user": {
            "presence": present(Role::User),
            "muted": st.session.user_waits_for_wizard && !s.wizard_spoke && s.ended.is_none(),
            "lock": s.lock.as_ref().filter(|l| l.kind == LockKind::Approval).map(|l| json!({"prompt": l.prompt})),
        },
        "ended": s.ended.map(|(reason, goal)| json!({"reason": reason.as_str(), "goal_reached": goal})),
    })
}

/// The name of place `id` (the id itself when the study has no such place).
fn place_name(study: &LoadedStudy, id: &str) -> String {
    study
        .study
        .world
        .locations
        .iter()
        .find(|l| l.id == id)
        .map_or_else(|| id.to_string(), |l| l.name.clone())
}

/// The robots as the pages show them: where each is, its battery and what it is doing.
fn robots_json(study: &LoadedStudy, s: &Session) -> Vec<Value> {
    let st = &study.study;
    let place = |id: &str| place_name(study, id);
    st.world
        .robots
        .iter()
        .zip(&s.robots)
        .map(|(def, r)| {
            let act = r.activity.as_ref();
            json!({
                "id": def.id,
                "name": def.name,
                "location": r.location,
                "location_name": place(&r.location),
                "battery": r.battery,
                "action": act.map(|a| st.actions[a.action].label.clone()),
                "target": act.and_then(|a| a.target.as_deref()).map(place),
                "moving_to": act.filter(|a| st.actions[a.action].moves).and_then(|a| a.target.clone()),
                "percent": act.map(|a| a.percent),
            })
        })
        .collect()
}

/// The study facts the page draws with: role labels, places (with their map position), robots,
/// the map; only what a replay with a world needs.
fn facts(study: Option<&LoadedStudy>, world: bool) -> Value {
    let Some(study) = study else {
        return json!({"note": "This session's study is not served here: the log is shown without its world."});
    };
    let st = &study.study;
    let mut f = json!({
        "title": st.title,
        "roles": {"user": st.roles.user.label, "wizard": st.roles.wizard.label},
    });
    if world {
        f["locations"] = json!(
            st.world
                .locations
                .iter()
                .map(|l| json!({"id": l.id, "name": l.name, "x": l.x, "y": l.y}))
                .collect::<Vec<_>>()
        );
        f["robots"] = json!(
            st.world
                .robots
                .iter()
                .map(|r| json!({"id": r.id, "name": r.name, "kind": r.kind}))
                .collect::<Vec<_>>()
        );
        f["map"] = json!(
            st.world
                .map
                .as_ref()
                .and_then(|id| st.media.get(id))
                .map(|m| json!({"url": media_url(&st.id, &m.file), "alt": m.alt}))
        );
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies changes as the page does (`replay.js`, `applyChange`).
    fn apply(root: &mut Value, changes: &[Value]) {
        for c in changes {
            let path = c[0].as_array().expect("path");
            let (last, parents) = path.split_last().expect("a member");
            let mut at = &mut *root;
            for p in parents {
                at = match p {
                    Value::String(k) => &mut at[k.as_str()],
                    other => &mut at[other.as_u64().expect("index") as usize],
                };
            }
            match (last, c.get(1)) {
                (Value::String(k), Some(v)) => at[k.as_str()] = v.clone(),
                (Value::String(k), None) => {
                    at.as_object_mut().expect("object").remove(k);
                }
                (i, Some(v)) => at[i.as_u64().expect("index") as usize] = v.clone(),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn changes_rebuild_the_next_state_and_name_only_what_changed() {
        let before = json!({
            "s": {"world": {"fire_out": false, "gone": 1}, "robots": [{"at": "base"}, {"at": "base"}], "n": 1},
            "d": {"options": {"a": {"text": "x"}}, "list": [1, 2]},
        });
        let now = json!({
            "s": {"world": {"fire_out": true, "new": "y"}, "robots": [{"at": "base"}, {"at": "tower"}], "n": 1},
            "d": {"options": {"b": {"text": "z"}}, "list": [1, 2, 3]},
        });
        let mut out = vec![];
        patch(&before, &now, &mut vec![], &mut out);
        let mut rebuilt = before.clone();
        apply(&mut rebuilt, &out);
        assert_eq!(rebuilt, now);
        let paths: Vec<String> = out.iter().map(|c| c[0].to_string()).collect();
        assert!(
            paths.contains(&r#"["s","robots",1,"at"]"#.to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&r#"["d","list"]"#.to_string()),
            "a longer array whole"
        );
        assert!(
            !paths.iter().any(|p| p.contains("\"n\"")),
            "unchanged left out"
        );
        let mut same = vec![];
        patch(&now, &now, &mut vec![], &mut same);
        assert!(same.is_empty());
    }
}
