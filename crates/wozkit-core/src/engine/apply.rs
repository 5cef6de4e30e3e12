//! The fold: how each event changes a session. Used by live steps and by replay alike.

use std::sync::Arc;

use super::{ActiveLock, Activity, Session, after_secs};
use indexmap::IndexMap;

use crate::database::{Filter, Row};
use crate::event::{Actor, EndReason, Event, EventKind, MessageSource, Role};
use crate::load::LoadedStudy;
use crate::model::LockKind;

/// Applies one event. Unknown references (impossible for events this engine emitted) are ignored,
/// so a log written by an older study version still replays.
///
/// One match over every kind of event, on purpose: a new kind does not compile until this fold
/// says what it changes (most change one field; the others have functions below). It stays
/// one piece for that reason: each arm is one line or one call, and splitting the match would
/// lose the check that every kind is handled.
pub fn apply(study: &LoadedStudy, s: &mut Session, _actor: &Actor, kind: &EventKind, at_ms: u64) {
    s.now_ms = s.now_ms.max(at_ms);
    match kind {
        EventKind::SessionStarted { seed, .. } => session_started(s, *seed, at_ms),
        EventKind::ScenarioDrawn {
            world,
            out_of_service,
            ..
        } => scenario_drawn(study, s, world, out_of_service),
        EventKind::Joined { role, .. } => push_once(&mut s.joined, role),
        EventKind::ClockStarted { deadline_ms } => s.deadline_ms = Some(*deadline_ms),
        EventKind::Message { role, source, text } => message(study, s, *role, source, text),
        EventKind::StateEntered {
            to, template_seed, ..
        } => state_entered(study, s, to, *template_seed),
        EventKind::SubtaskEntered { subtask } => s.subtask = Some(subtask.clone()),
        EventKind::WorldSet { values } => set_world(s, values),
        EventKind::ActionStarted {
            action,
            robot,
            target,
            ends_at_ms,
            ..
        } => action_started(study, s, action, robot, target.as_ref(), *ends_at_ms, at_ms),
        EventKind::ActionProgress { robot, percent, .. } => {
            action_progress(study, s, robot, *percent, at_ms);
        }
        EventKind::ActionCompleted {
            robot,
            target,
            battery,
            action,
        } => action_completed(study, s, action, robot, target.as_ref(), *battery),
        EventKind::Milestone { subtask, .. } => push_once(&mut s.milestones, subtask),
        EventKind::MediaShown { media, .. } => s.media.push(media.clone()),
        EventKind::OptionsUnlocked { states } => options_unlocked(study, s, states),
        EventKind::LockStarted {
            state,
            lock,
            prompt,
        } => lock_started(study, s, state, *lock, prompt.as_ref()),
        EventKind::LockReleased { .. } => s.lock = None,
        EventKind::HintGiven { state } => s.hint = Some(state.clone()),
        EventKind::Disconnected {
            role,
            grace_until_ms,
        } => disconnected(s, *role, *grace_until_ms),
        EventKind::Reconnected { role } => s.away.retain(|(r, _)| r != role),
        EventKind::SessionEnded {
            reason,
            goal_reached,
        } => session_ended(s, *reason, *goal_reached),
        EventKind::SurveyAnswered { .. }
        | EventKind::CompletionIssued { .. }
        | EventKind::Annotation { .. }
        | EventKind::ChatStarted { .. }
        | EventKind::SystemFailed { .. }
        | EventKind::TurnAnnotated { .. }
        | EventKind::ParticipantLogStarted { .. }
        | EventKind::PageAnswered { .. }
        | EventKind::ItemClaimed { .. }
        | EventKind::ItemReturned { .. }
        | EventKind::Judged(_)
        | EventKind::JudgeLogStarted { .. }
        | EventKind::ModelJudged(_)
        | EventKind::OnboardingDone { .. }
        | EventKind::ScreenedOut { .. }
        // A researcher's review of a participant: kept in the study's review log only.
        | EventKind::Reviewed(_)
        // Who plays a role is the room's business (the participant ids), not the engine's.
        | EventKind::TakenOver { .. } => {}
        // A search changes nothing: its results are in the event, for the wizard's page.
        // (It moves the goal's belief state, when the session has a goal.)
        EventKind::DbQueried { table, filters, .. } => db_queried(s, table, filters),
        EventKind::DbSelected { table, key, row } => db_selected(s, table, key, row),
        EventKind::GoalGenerated { goal, .. } => goal_generated(study, s, goal),
        EventKind::Suggested { n, text, .. } => suggested(s, *n, text),
        // The message it was sent as closed the suggestions already.
        EventKind::SuggestionUsed { .. } => {}
        // The state it logs was folded already; a wizard turn closes the turn's first search.
        EventKind::TurnState { role, .. } => turn_state(s, *role),
    }
}

/// The session starts, with its seed.
fn session_started(s: &mut Session, seed: u64, at_ms: u64) {
    s.started = true;
    s.seed = seed;
    s.started_at_ms = at_ms;
}

/// Adds `item` to `list` unless it is there already.
fn push_once<T: Clone + PartialEq>(list: &mut Vec<T>, item: &T) {
    if !list.contains(item) {
        list.push(item.clone());
    }
}

/// A role's connection drops: it is away until its grace time (once, the latest).
fn disconnected(s: &mut Session, role: Role, grace_until_ms: u64) {
    s.away.retain(|(r, _)| *r != role);
    s.away.push((role, grace_until_ms));
}

/// A search is made: it moves the goal's belief state, when the session has a goal.
fn db_queried(s: &mut Session, table: &str, filters: &[Filter]) {
    if let Some(track) = s.goal.as_mut() {
        track.on_query(table, filters, &s.db_selected);
    }
}

/// The wizard selects a row: it is the table's selected row, and the goal's tracking hears it.
fn db_selected(s: &mut Session, table: &str, key: &str, row: &Row) {
    s.db_selected.insert(table.to_string(), row.clone());
    if let Some(track) = s.goal.as_mut() {
        track.on_select(table, key, row, &s.db_selected);
    }
}

/// A suggestion is made: it is the latest, and one of those open.
fn suggested(s: &mut Session, n: u32, text: &str) {
    s.suggested = n;
    s.suggestions.push((n, text.to_string()));
}

/// The scenario is drawn: the world takes its variables, and the robots out of service are so.
fn scenario_drawn(
    study: &LoadedStudy,
    s: &mut Session,
    world: &IndexMap<String, serde_json::Value>,
    out_of_service: &[String],
) {
    set_world(s, world);
    for (def, r) in study.study.world.robots.iter().zip(s.robots.iter_mut()) {
        r.in_service = !out_of_service.contains(&def.id);
    }
}

/// Sets world variables to the values given.
fn set_world(s: &mut Session, values: &IndexMap<String, serde_json::Value>) {
    let vars = Arc::make_mut(&mut s.world);
    for (k, v) in values {
        vars.insert(k.clone(), v.clone());
    }
}

/// A message is sent: the goal's tracking hears it, a wizard's message closes the suggestions,
/// the hint goes, and a state's option said is no longer unlocked.
fn message(study: &LoadedStudy, s: &mut Session, role: Role, source: &MessageSource, text: &str) {
    s.messages += 1;
    if let Some(track) = s.goal.as_mut() {
        track.on_message(role, text, &s.db_selected);
    }
    if role == Role::Wizard {
        s.wizard_spoke = true;
        // Once the wizard has spoken, the suggestions made before answer nothing.
        s.suggestions.clear();
    }
    s.hint = None;
    if let MessageSource::State { state, .. } = source
        && let Some(i) = study.state_idx(state)
    {
        s.unlocked.retain(|u| *u != i);
    }
}

/// The flow enters a state: it is the current one, with its template seed, and no longer
/// unlocked.
fn state_entered(study: &LoadedStudy, s: &mut Session, to: &str, template_seed: u64) {
    if let Some(i) = study.state_idx(to) {
        s.current = i;
        s.template_seed = template_seed;
        s.unlocked.retain(|u| *u != i);
    }
}

/// States are unlocked (each once).
fn options_unlocked(study: &LoadedStudy, s: &mut Session, states: &[String]) {
    for st in states {
        if let Some(i) = study.state_idx(st)
            && !s.unlocked.contains(&i)
        {
            s.unlocked.push(i);
        }
    }
}

/// A lock starts on a state.
fn lock_started(
    study: &LoadedStudy,
    s: &mut Session,
    state: &str,
    lock: LockKind,
    prompt: Option<&String>,
) {
    if let Some(i) = study.state_idx(state) {
        s.lock = Some(ActiveLock {
            state: i,
            kind: lock,
            prompt: prompt.cloned(),
        });
    }
}

/// The session ends: no lock holds and no robot acts any more.
fn session_ended(s: &mut Session, reason: EndReason, goal_reached: bool) {
    s.ended = Some((reason, goal_reached));
    s.lock = None;
    for r in &mut s.robots {
        r.activity = None;
    }
}

/// A goal is drawn: the session tracks it from now on.
fn goal_generated(study: &LoadedStudy, s: &mut Session, goal: &crate::goals::Goal) {
    s.goal = Some(crate::goals::GoalTrack::new(
        goal.clone(),
        study.study.goals.as_ref(),
        study.database.as_deref(),
    ));
}

/// A turn's state is logged: a wizard turn closes the turn's first search.
fn turn_state(s: &mut Session, role: Role) {
    if role == Role::Wizard
        && let Some(track) = s.goal.as_mut()
    {
        track.belief_init = None;
    }
}

/// A robot starts an action: its activity, and the robot and place the slots name next.
fn action_started(
    study: &LoadedStudy,
    s: &mut Session,
    action: &str,
    robot: &str,
    target: Option<&String>,
    ends_at_ms: u64,
    at_ms: u64,
) {
    let ai = study.study.actions.iter().position(|a| a.id == action);
    let ri = study.study.world.robots.iter().position(|r| r.id == robot);
    let (Some(ai), Some(ri)) = (ai, ri) else {
        return;
    };
    let def = &study.study.actions[ai];
    let every = def.progress_every_s;
    let next = (every > 0.0)
        .then(|| after_secs(at_ms, every))
        .filter(|t| *t < ends_at_ms);
    // The engine refuses a target for a targetless action; a log written before it did may
    // hold one, and it must not name or move anything on replay either.
    let target = target.cloned().filter(|_| def.target);
    s.robots[ri].activity = Some(Activity {
        action: ai,
        target: target.clone(),
        started_ms: at_ms,
        ends_ms: ends_at_ms,
        next_progress_ms: next,
        percent: 0,
    });
    s.last_robot = Some(ri);
    // An action without a target acts where the robot is: slots name that place.
    s.last_target = target.or_else(|| Some(s.robots[ri].location.clone()));
}

/// A running action reports progress: its percentage and when it reports next.
fn action_progress(study: &LoadedStudy, s: &mut Session, robot: &str, percent: u32, at_ms: u64) {
    if let Some(ri) = study.study.world.robots.iter().position(|r| r.id == robot)
        && let Some(a) = s.robots[ri].activity.as_mut()
    {
        a.percent = percent;
        let every = study.study.actions[a.action].progress_every_s;
        a.next_progress_ms = (every > 0.0)
            .then(|| after_secs(at_ms, every))
            .filter(|t| *t < a.ends_ms);
    }
}

/// An action ends: the robot is free, its battery what the event says, and it stands at the
/// target when the action moves it.
fn action_completed(
    study: &LoadedStudy,
    s: &mut Session,
    action: &str,
    robot: &str,
    target: Option<&String>,
    battery: f64,
) {
    let Some(ri) = study.study.world.robots.iter().position(|r| r.id == robot) else {
        return;
    };
    // Only an action that takes a target moves the robot (see `action_started`).
    let moves = study
        .study
        .actions
        .iter()
        .find(|a| a.id == action)
        .is_some_and(|a| a.moves && a.target);
    let r = &mut s.robots[ri];
    r.activity = None;
    r.battery = battery;
    if moves && let Some(t) = target {
        r.location = t.clone();
    }
    s.last_robot = Some(ri);
}

/// Rebuilds a session from its log.
pub fn replay<'a>(
    study: &LoadedStudy,
    session_id: &str,
    events: impl IntoIterator<Item = &'a Event>,
) -> Session {
    let mut s = Session::new(study, session_id);
    for e in events {
        apply(study, &mut s, &e.actor, &e.kind, e.at_ms);
    }
    s
}
