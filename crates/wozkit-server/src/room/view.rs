//! What each role sees: the study facts sent once (`welcome`), the derived state sent after every
//! batch (`view`), and which stored events a role receives.
//!
//! The user must not learn that the assistant is a person choosing from a menu, so the user
//! receives no hints, dialogue states or unlocked options, and chat messages arrive without their
//! dialogue-act source. Neither side sees the other's questionnaire answers or completion code.

use std::borrow::Cow;

use serde_json::{Value, json};
use wozkit_core::engine::{self, Session};
use wozkit_core::event::{Event, EventKind, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{LockKind, RoleDef};

use crate::http::html::media_url;

/// The event as `role` receives it, or `None` if it is not for that role.
pub fn event_for(role: Role, e: &Event) -> Option<Cow<'_, Event>> {
    match &e.kind {
        EventKind::SurveyAnswered { role: r, .. } | EventKind::CompletionIssued { role: r, .. }
            if *r != role =>
        {
            None
        }
        _ if role == Role::Wizard => Some(Cow::Borrowed(e)),
        EventKind::HintGiven { .. }
        | EventKind::StateEntered { .. }
        | EventKind::OptionsUnlocked { .. } => None,
        EventKind::Message {
            role: r,
            text,
            source,
        } if !matches!(source, MessageSource::Free) => {
            let mut e = e.clone();
            e.kind = EventKind::Message {
                role: *r,
                text: text.clone(),
                source: MessageSource::Free,
            };
            Some(Cow::Owned(e))
        }
        EventKind::LockStarted { lock, prompt, .. } => {
            let mut e = e.clone();
            e.kind = EventKind::LockStarted {
                state: String::new(),
                lock: *lock,
                prompt: prompt.clone(),
            };
            Some(Cow::Owned(e))
        }
        _ => Some(Cow::Borrowed(e)),
    }
}

fn role_json(r: &RoleDef) -> Value {
    json!({ "label": r.label, "name": r.name.clone().unwrap_or_else(|| r.label.clone()) })
}

/// The study as shown to `role`: names, subtasks, places, robots, the map, limits.
pub fn welcome_study(study: &LoadedStudy, role: Role) -> Value {
    let st = &study.study;
    let (me, partner) = match role {
        Role::User => (&st.roles.user, &st.roles.wizard),
        Role::Wizard => (&st.roles.wizard, &st.roles.user),
    };
    let map = st
        .world
        .map
        .as_ref()
        .and_then(|id| st.media.get(id))
        .map(|m| json!({ "url": media_url(&st.id, &m.file), "alt": m.alt }));
    json!({
        "id": st.id,
        "title": st.title,
        "me": role_json(me),
        "partner": role_json(partner),
        "subtasks": st.subtasks.iter().map(|t| json!({"id": t.id, "label": t.label, "progress": t.progress})).collect::<Vec<_>>(),
        "locations": st.world.locations.iter().map(|l| json!({"id": l.id, "name": l.name, "x": l.x, "y": l.y})).collect::<Vec<_>>(),
        "robots": st.world.robots.iter().map(|r| json!({
            "id": r.id, "name": r.name, "kind": r.kind,
            "kind_label": st.world.robot_kinds.get(&r.kind).map_or(r.kind.as_str(), |k| k.label.as_str()),
        })).collect::<Vec<_>>(),
        "map": map,
        "time_limit_s": st.session.time_limit_s,
        "max_text_chars": engine::MAX_TEXT_CHARS,
        "finish_min_messages": st.session.finish.min_messages,
    })
}

/// The derived state for `role` now.
pub fn view(study: &LoadedStudy, s: &Session, role: Role, now_ms: u64) -> Value {
    let st = &study.study;
    let loc_name = |id: &str| -> String {
        st.world
            .locations
            .iter()
            .find(|l| l.id == id)
            .map_or_else(|| id.to_string(), |l| l.name.clone())
    };
    let robots: Vec<Value> = st
        .world
        .robots
        .iter()
        .zip(&s.robots)
        .map(|(def, r)| {
            let act = r.activity.as_ref();
            json!({
                "id": def.id,
                "name": def.name,
                "location": r.location,
                "location_name": loc_name(&r.location),
                "battery": r.battery,
                "busy": act.is_some(),
                "action": act.map(|a| st.actions[a.action].label.clone()),
                "target": act.and_then(|a| a.target.as_deref()).map(loc_name),
                "percent": act.map(|a| a.percent),
                "eta_s": act.map(|a| a.ends_ms.saturating_sub(now_ms).div_ceil(1000)),
            })
        })
        .collect();
    let lock = s.lock.as_ref().map(|l| {
        let def = st.states[l.state].lock.as_ref();
        json!({
            "kind": l.kind,
            "prompt": def.and_then(|d| d.prompt.clone()),
            "approve_label": def.map_or("Approve", |d| d.approve_label.as_str()),
            "deny_label": def.map_or("Deny", |d| d.deny_label.as_str()),
        })
    });
    let media = s.media.last().and_then(|id| st.media.get(id).map(|m| (id, m))).map(|(id, m)| {
        json!({ "id": id, "url": media_url(&st.id, &m.file), "alt": m.alt, "count": s.media.len() })
    });
    let subtask = s.subtask.as_ref().map(|id| {
        let label = st
            .subtasks
            .iter()
            .find(|t| &t.id == id)
            .map_or(id.as_str(), |t| t.label.as_str());
        json!({ "id": id, "label": label })
    });
    let mut v = json!({
        "role": role,
        "now_ms": now_ms,
        "started": s.started,
        "messages": s.messages,
        "timer": {
            "limit_s": st.session.time_limit_s,
            "deadline_ms": s.deadline_ms,
            "left_s": s.time_left_s(study),
        },
        "progress": s.progress(study),
        "milestones": s.milestones,
        "subtask": subtask,
        "robots": robots,
        "media": media,
        "partner_away": s.away.iter().any(|(r, _)| *r == role.other()),
        "can_finish": s.ended.is_none() && engine::finish_allowed(study, s),
        "ended": s.ended.map(|(reason, goal)| json!({"reason": reason.as_str(), "goal_reached": goal})),
    });
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    match role {
        Role::User => {
            let muted = st.session.user_waits_for_wizard && !s.wizard_spoke;
            obj.insert("muted".into(), json!(muted && s.ended.is_none()));
            let approval = lock.filter(|l| l["kind"] == json!(LockKind::Approval));
            obj.insert("lock".into(), approval.unwrap_or(Value::Null));
        }
        Role::Wizard => {
            let offers = engine::offered(study, s);
            let options: Vec<Value> = offers
                .iter()
                .map(|o| {
                    json!({
                        "state": o.state, "label": o.label, "act_type": o.act_type,
                        "text": o.text, "kind": o.kind,
                        "hint": s.hint.as_deref() == Some(o.state.as_str()),
                    })
                })
                .collect();
            let fixed: Vec<Value> = st
                .fixed_options
                .iter()
                .map(|f| json!({"id": f.id, "text": engine::render(study, s, &f.text), "act_type": f.act_type}))
                .collect();
            obj.insert("state".into(), json!(st.states[s.current].id));
            obj.insert("options".into(), json!(options));
            obj.insert("fixed".into(), json!(fixed));
            obj.insert("actions".into(), json!(actions(study, s)));
            obj.insert("hint".into(), json!(s.hint));
            obj.insert(
                "can_hint".into(),
                json!(s.started && s.ended.is_none() && s.lock.is_none() && !offers.is_empty()),
            );
            obj.insert("lock".into(), lock.unwrap_or(Value::Null));
            obj.insert("muted".into(), json!(false));
        }
    }
    v
}

/// Every action with each robot (and target) and whether it may start now, with the reason
/// when not: the action panel disables the send button and shows the reason.
fn actions(study: &LoadedStudy, s: &Session) -> Vec<Value> {
    let mut combos: Vec<Vec<Value>> = vec![vec![]; study.study.actions.len()];
    for (ai, robot, target, check) in engine::action_table(study, s) {
        combos[ai].push(json!({
            "robot": robot, "target": target, "ok": check.is_ok(),
            "reason": check.err().map(|e| e.to_string()),
        }));
    }
    study
        .study
        .actions
        .iter()
        .zip(combos)
        .map(|(a, combos)| json!({ "id": a.id, "label": a.label, "target": a.target, "combos": combos }))
        .collect()
}
