//! What each role sees: the study facts sent once (`welcome`), the derived state sent after every
//! batch (`view`), and which stored events a role receives.
//!
//! The user must not learn that the assistant is a person choosing from a menu, so the user
//! receives no hints, dialogue states or unlocked options, and chat messages arrive without their
//! dialogue-act source. Neither side sees the other's questionnaire answers or completion code.
//! Robot actions reach the user by their study label only: an action id or its dialogue-act
//! label ("activate.robot") would show the menu behind the assistant.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde::Serialize;
use serde_json::{Value, json};
use wozkit_core::engine::{self, OfferKind, Session, TextPart};
use wozkit_core::event::{Event, EventKind, MessageSource, Role};
use wozkit_core::expr::Vars;
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::{ActType, LockKind, RoleDef};

use crate::http::html::media_url;
use crate::ws::frames::ServerFrame;

/// The event as `role` receives it, or `None` if it is not for that role.
pub fn event_for<'e>(study_def: &LoadedStudy, role: Role, e: &'e Event) -> Option<Cow<'e, Event>> {
    match &e.kind {
        EventKind::SurveyAnswered { role: r, .. } | EventKind::CompletionIssued { role: r, .. }
            if *r != role =>
        {
            None
        }
        // Who plays the wizard is not the user's business: a takeover is seamless for them.
        EventKind::TakenOver { .. } if role == Role::User => None,
        // The wizard's database searches and selections are the wizard's alone.
        EventKind::DbQueried { .. } | EventKind::DbSelected { .. } if role == Role::User => None,
        // The copilot helps the wizard unseen: the user learns nothing of it.
        EventKind::Suggested { .. } | EventKind::SuggestionUsed { .. } if role == Role::User => {
            None
        }
        // The user goal and its state are the user's alone: the wizard never learns the goal.
        EventKind::GoalGenerated { .. } | EventKind::TurnState { .. } if role == Role::Wizard => {
            None
        }
        // The user's goal panel ticks from the user state; the belief states are the wizard's
        // searches and selections, which the user does not see.
        EventKind::TurnState {
            turn,
            role: r,
            user_state,
            ..
        } => Some(with_kind(
            e,
            EventKind::TurnState {
                turn: *turn,
                role: *r,
                user_state: user_state.clone(),
                sys_state: Default::default(),
                sys_state_init: Default::default(),
            },
        )),
        _ if role == Role::Wizard => Some(Cow::Borrowed(e)),
        EventKind::HintGiven { .. }
        | EventKind::StateEntered { .. }
        | EventKind::OptionsUnlocked { .. } => None,
        kind => Some(
            match user_kind(kind).or_else(|| user_action_kind(study_def, kind)) {
                Some(kind) => with_kind(e, kind),
                None => Cow::Borrowed(e),
            },
        ),
    }
}

/// A copy of `e` with its kind replaced by `kind`.
fn with_kind(e: &Event, kind: EventKind) -> Cow<'_, Event> {
    let mut e = e.clone();
    e.kind = kind;
    Cow::Owned(e)
}

/// What the user receives instead of an event of the dialogue that shows the menu behind the
/// assistant (a message's source, the initial state, a lock's state), if anything.
fn user_kind(kind: &EventKind) -> Option<EventKind> {
    Some(match kind {
        EventKind::Message {
            role: r,
            text,
            source,
        } if !matches!(source, MessageSource::Free) => EventKind::Message {
            role: *r,
            text: text.clone(),
            source: MessageSource::Free,
        },
        EventKind::SessionStarted {
            study,
            study_version,
            seed,
            ..
        } => EventKind::SessionStarted {
            study: study.clone(),
            study_version: study_version.clone(),
            seed: *seed,
            initial_state: String::new(),
        },
        EventKind::LockStarted { lock, prompt, .. } => EventKind::LockStarted {
            state: String::new(),
            lock: *lock,
            prompt: prompt.clone(),
        },
        _ => return None,
    })
}

/// What the user receives instead of a robot action's event: no action id, and the action's
/// label without the world snapshot, which is the wizard's model; `None` for other events.
fn user_action_kind(study_def: &LoadedStudy, kind: &EventKind) -> Option<EventKind> {
    Some(match kind {
        EventKind::ActionStarted {
            action,
            robot,
            target,
            ends_at_ms,
            robots,
            ..
        } => {
            // The user reads the action's label; the world snapshot is the wizard's model.
            let label = study_def
                .study
                .actions
                .iter()
                .find(|a| &a.id == action)
                .map_or_else(String::new, |a| a.label.clone());
            EventKind::ActionStarted {
                action: String::new(),
                label,
                robot: robot.clone(),
                target: target.clone(),
                ends_at_ms: *ends_at_ms,
                world: Default::default(),
                robots: robots.clone(),
            }
        }
        EventKind::ActionProgress {
            robot,
            percent,
            eta_s,
            ..
        } => EventKind::ActionProgress {
            action: String::new(),
            robot: robot.clone(),
            percent: *percent,
            eta_s: *eta_s,
        },
        EventKind::ActionCompleted {
            robot,
            target,
            battery,
            ..
        } => EventKind::ActionCompleted {
            action: String::new(),
            robot: robot.clone(),
            target: target.clone(),
            battery: *battery,
        },
        _ => return None,
    })
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
    // The wizard's page names actions in the chat by their labels; the user's events carry
    // the label already (see `event_for`), so the user gets no action ids at all.
    let actions = (role == Role::Wizard).then(|| {
        st.actions
            .iter()
            .map(|a| json!({"id": a.id, "label": a.label}))
            .collect::<Vec<_>>()
    });
    // The wizard's search panel: each table of the study's database with its columns.
    let database = (role == Role::Wizard)
        .then_some(study.database.as_ref())
        .flatten()
        .map(|db| {
            db.tables()
                .values()
                .map(|t| {
                    let spec = st.database.as_ref().and_then(|d| d.tables.get(&t.name));
                    // The wizard reads the study's words for the table and its columns.
                    let label = spec.and_then(|s| s.label.as_deref()).unwrap_or(&t.name);
                    let word = |c: &String| spec.and_then(|s| s.labels.get(c)).unwrap_or(c).clone();
                    json!({"name": t.name, "label": label, "key": t.key, "columns": t.columns.iter()
                    .map(|(c, ty)| json!({"name": c, "label": word(c), "type": ty})).collect::<Vec<_>>(),
                    "show": spec.map(|s| s.show.as_slice()).unwrap_or_default()})
                })
                .collect::<Vec<_>>()
        });
    // The words of the user's goal panel (`goals.text`).
    let goal_text = (role == Role::User)
        .then_some(st.goals.as_ref())
        .flatten()
        .map(|g| {
            let t = g.text.clone().unwrap_or_default();
            json!({"title": t.title, "done": t.done, "reference": t.reference})
        });
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
            // What the robot is equipped for, by the labels of the actions its skills unlock:
            // a skill's id ("open_valves") is the study's machine name, not a participant's word.
            "can": st.actions.iter()
                .filter(|a| a.requires.as_ref().is_some_and(|c| r.capabilities.contains(c)))
                .map(|a| a.label.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "map": map,
        "actions": actions,
        "database": database,
        "goal_text": goal_text,
        "time_limit_s": st.session.time_limit_s,
        "max_text_chars": engine::MAX_TEXT_CHARS,
        "finish_min_messages": st.session.finish.min_messages,
    })
}

/// The derived state for `role` at `now_ms`, borrowing from the study and the session.
///
/// Typed rather than built as a `serde_json::Value`: a view goes out after every batch of
/// events, and the wizard's is ~10 KB (every action × robot × target). Serialising these
/// structs straight to text avoids building and freeing a tree of maps and strings per view.
/// Field order is the wire order documented in docs/protocol.md.
#[derive(Debug, Serialize)]
pub struct View<'a> {
    role: Role,
    now_ms: u64,
    started: bool,
    messages: u32,
    timer: Timer,
    progress: u32,
    milestones: &'a [String],
    subtask: Option<Labelled<'a>>,
    robots: Vec<RobotView<'a>>,
    media: Option<MediaView<'a>>,
    /// The study's alarm on the map (`world.alarm`), `None` when it marks none.
    alarm: Option<AlarmView<'a>>,
    partner_away: bool,
    /// When the partner's grace period ends (ms since the epoch, the server's clock) while the
    /// partner is away: the page counts down to it. `None` while the partner is here.
    partner_back_by_ms: Option<u64>,
    can_finish: bool,
    ended: Option<Ended>,
    #[serde(flatten)]
    side: Side<'a>,
}

#[derive(Debug, Serialize)]
struct Timer {
    limit_s: u32,
    deadline_ms: Option<u64>,
    left_s: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Labelled<'a> {
    id: &'a str,
    label: &'a str,
}

#[derive(Debug, Serialize)]
struct RobotView<'a> {
    id: &'a str,
    name: &'a str,
    location: &'a str,
    location_name: &'a str,
    battery: f64,
    /// False while the study's scenario keeps the robot out of service: the panel says so
    /// instead of "on standby".
    in_service: bool,
    busy: bool,
    action: Option<&'a str>,
    target: Option<&'a str>,
    /// The location id the running action moves the robot to: the map draws the robot between
    /// `location` and this place by `percent`.
    moving_to: Option<&'a str>,
    percent: Option<u32>,
    eta_s: Option<u64>,
}

#[derive(Debug, Serialize)]
struct MediaView<'a> {
    id: &'a str,
    url: String,
    alt: &'a str,
    count: usize,
}

#[derive(Debug, Serialize)]
struct AlarmView<'a> {
    /// The location id it is at.
    location: &'a str,
    /// The words to show there: the study's `label`, or its `cleared_label` once cleared.
    label: &'a str,
    cleared: bool,
}

#[derive(Debug, Serialize)]
struct Ended {
    reason: &'static str,
    goal_reached: bool,
}

#[derive(Debug, Serialize)]
struct LockView<'a> {
    kind: LockKind,
    prompt: Option<&'a str>,
    approve_label: &'a str,
    deny_label: &'a str,
}

/// What only one role sees.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Side<'a> {
    User {
        muted: bool,
        lock: Option<LockView<'a>>,
    },
    Wizard {
        state: &'a str,
        options: Vec<OptionView>,
        fixed: Vec<FixedView<'a>>,
        /// `None` (the key left out) when the connection already has this very panel from an
        /// earlier view ([`View::omit_panel_if_sent`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        actions: Option<Panel>,
        hint: Option<&'a str>,
        can_hint: bool,
        lock: Option<LockView<'a>>,
        muted: bool,
    },
}

#[derive(Debug, Serialize)]
struct OptionView {
    state: String,
    label: String,
    act_type: ActType,
    text: String,
    kind: OfferKind,
    hint: bool,
    /// `text` split at its clock slots (`{time_left}`, `{elapsed}`) so the page keeps the time
    /// current each second; `None` when the text names no clock slot.
    clock_text: Option<Vec<TextPart>>,
}

#[derive(Debug, Serialize)]
struct FixedView<'a> {
    id: &'a str,
    text: String,
    act_type: ActType,
    /// As [`OptionView::clock_text`].
    clock_text: Option<Vec<TextPart>>,
}

#[derive(Debug, Serialize)]
struct ActionView {
    id: String,
    label: String,
    target: bool,
    combos: Vec<Combo>,
    /// The combination the panel opens on for this action: the first of `combos` the engine
    /// accepts now (a free robot with the skill, a target it may go to); `None` when none is.
    pick: Option<Pick>,
    /// Why no combination of this action is possible now (the engine's distinct refusals, the
    /// first few); `None` while one is.
    why_not: Option<String>,
}

#[derive(Debug, Serialize)]
struct Pick {
    robot: String,
    target: Option<String>,
}

#[derive(Debug, Serialize)]
struct Combo {
    robot: String,
    target: Option<String>,
    ok: bool,
    reason: Option<String>,
}

impl View<'_> {
    /// The `view` frame's text.
    pub fn frame(&self) -> String {
        ServerFrame::View { view: self }.text()
    }

    /// Leaves the wizard's action panel out when it is `sent` (the panel every recipient of
    /// this view already holds from an earlier view), and returns the panel they hold after
    /// this view. The panel is most of a wizard's view (~8 of ~10 KB) and stays the same
    /// while the robots and what the actions' guards read do not change, so most views skip
    /// it; the page keeps the panel of the last view that had one (docs/protocol.md).
    pub fn omit_panel_if_sent(&mut self, sent: Option<&PanelSent>) -> Option<PanelSent> {
        let Side::Wizard { actions, .. } = &mut self.side else {
            return sent.cloned();
        };
        let now = actions.as_ref()?;
        if sent.is_some_and(|p| Arc::ptr_eq(&p.0.0, &now.0)) {
            *actions = None;
            return sent.cloned();
        }
        Some(PanelSent(now.clone()))
    }
}

/// The action panel a role's connections hold (for [`View::omit_panel_if_sent`]); compared by
/// identity: panels are shared from one cache, so an unchanged situation yields the same one.
#[derive(Debug, Clone)]
pub struct PanelSent(Panel);

/// What every view of one session state shares: the condition variables, built once (building
/// them costs more than evaluating the conditions), and what both roles' views derive from them.
/// Build one per batch and pass it to [`view`] for each role.
pub struct Basis {
    vars: Vars<'static>,
    /// Whether either participant may finish now.
    can_finish: bool,
    /// Whether the study's goal is reached ([`Session::goal_met`]).
    goal_met: bool,
}

impl Basis {
    /// The basis of views of `s` as it is now.
    pub fn new(study: &LoadedStudy, s: &Session) -> Basis {
        let vars = engine::vars(study, s);
        Basis {
            can_finish: s.ended.is_none() && engine::finish_allowed_with(study, s, &vars),
            goal_met: s.goal_met_with(study, &vars),
            vars,
        }
    }
}

/// The derived state for `role` now; `basis` is [`Basis::new`] of the same session.
pub fn view<'a>(
    study: &'a LoadedStudy,
    s: &'a Session,
    role: Role,
    now_ms: u64,
    basis: &Basis,
) -> View<'a> {
    let st = &study.study;
    let robots = robot_views(study, s, now_ms);
    let lock = s.lock.as_ref().map(|l| {
        let def = st.states[l.state].lock.as_ref();
        LockView {
            kind: l.kind,
            // Rendered when the lock started (the event carries it): slots filled, like any template.
            prompt: l.prompt.as_deref(),
            approve_label: def.map_or("Approve", |d| d.approve_label.as_str()),
            deny_label: def.map_or("Deny", |d| d.deny_label.as_str()),
        }
    });
    let media = s
        .media
        .last()
        .and_then(|id| st.media.get(id).map(|m| (id, m)))
        .map(|(id, m)| MediaView {
            id,
            url: media_url(&st.id, &m.file),
            alt: &m.alt,
            count: s.media.len(),
        });
    let subtask = s.subtask.as_deref().map(|id| Labelled {
        id,
        label: st
            .subtasks
            .iter()
            .find(|t| t.id == id)
            .map_or(id, |t| t.label.as_str()),
    });
    let side = match role {
        Role::User => Side::User {
            muted: st.session.user_waits_for_wizard && !s.wizard_spoke && s.ended.is_none(),
            lock: lock.filter(|l| l.kind == LockKind::Approval),
        },
        Role::Wizard => wizard_side(study, s, basis, lock),
    };
    View {
        role,
        now_ms,
        started: s.started,
        messages: s.messages,
        timer: Timer {
            limit_s: st.session.time_limit_s,
            deadline_ms: s.deadline_ms,
            left_s: s.time_left_s(study),
        },
        progress: s.progress_given(study, basis.goal_met),
        milestones: &s.milestones,
        subtask,
        robots,
        media,
        alarm: st.world.alarm.as_ref().and_then(|a| {
            engine::alarm_with(study, s, &basis.vars).map(|(location, cleared)| AlarmView {
                location,
                label: if cleared { &a.cleared_label } else { &a.label },
                cleared,
            })
        }),
        partner_away: s.away.iter().any(|(r, _)| *r == role.other()),
        partner_back_by_ms: s
            .away
            .iter()
            .find(|(r, _)| *r == role.other())
            .map(|(_, until)| *until),
        can_finish: basis.can_finish,
        ended: s.ended.map(|(reason, goal_reached)| Ended {
            reason: reason.as_str(),
            goal_reached,
        }),
        side,
    }
}

/// The robots as the views show them: where each is (by name), its battery and what it is doing.
fn robot_views<'a>(study: &'a LoadedStudy, s: &'a Session, now_ms: u64) -> Vec<RobotView<'a>> {
    let st = &study.study;
    let loc_name = |id: &'a str| -> &'a str {
        st.world
            .locations
            .iter()
            .find(|l| l.id == id)
            .map_or(id, |l| l.name.as_str())
    };
    st.world
        .robots
        .iter()
        .zip(&s.robots)
        .map(|(def, r)| {
            let act = r.activity.as_ref();
            RobotView {
                id: &def.id,
                name: &def.name,
                location: &r.location,
                location_name: loc_name(&r.location),
                battery: r.battery,
                in_service: r.in_service,
                busy: act.is_some(),
                action: act.map(|a| st.actions[a.action].label.as_str()),
                target: act.and_then(|a| a.target.as_deref()).map(loc_name),
                // The same rule as the engine's completion: only a moving action with a target.
                moving_to: act
                    .filter(|a| st.actions[a.action].moves)
                    .and_then(|a| a.target.as_deref()),
                percent: act.map(|a| a.percent),
                eta_s: act.map(|a| a.ends_ms.saturating_sub(now_ms).div_ceil(1000)),
            }
        })
        .collect()
}

/// The wizard's side of the view: the state, the options offered, the fixed options, the
/// action panel, the hint and the lock.
fn wizard_side<'a>(
    study: &'a LoadedStudy,
    s: &'a Session,
    basis: &Basis,
    lock: Option<LockView<'a>>,
) -> Side<'a> {
    let st = &study.study;
    let offers = engine::offered_with(study, s, &basis.vars);
    let can_hint = s.started && s.ended.is_none() && s.lock.is_none() && !offers.is_empty();
    let options = offers
        .into_iter()
        .map(|o| OptionView {
            hint: s.hint.as_deref() == Some(o.state.as_str()),
            clock_text: study
                .state_idx(&o.state)
                .and_then(|i| st.states[i].templates.get(o.template))
                .and_then(|t| engine::render_clock_parts(study, s, t)),
            state: o.state,
            label: o.label,
            act_type: o.act_type,
            text: o.text,
            kind: o.kind,
        })
        .collect();
    let fixed = st
        .fixed_options
        .iter()
        .map(|f| FixedView {
            id: &f.id,
            text: engine::render(study, s, &f.text),
            act_type: f.act_type,
            clock_text: engine::render_clock_parts(study, s, &f.text),
        })
        .collect();
    Side::Wizard {
        state: &st.states[s.current].id,
        options,
        fixed,
        actions: Some(panel(study, s, &basis.vars)),
        hint: s.hint.as_deref(),
        can_hint,
        lock,
        muted: false,
    }
}

/// The wizard's action panel ([`actions`]), shared: views of sessions in the same situation
/// (equal [`engine::action_table_key`]) serialise the same panel, built once.
#[derive(Debug, Clone)]
struct Panel(Arc<Vec<ActionView>>);

impl Serialize for Panel {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(ser)
    }
}

/// Panels kept by [`panel`]; the cache is emptied when it would grow past this. The demo
/// study has a few dozen situations (robot places, batteries, world flags) in play at once.
const PANELS_KEPT: usize = 512;

/// Panels built lately, by study and [`engine::action_table_key`], for every room.
#[derive(Default)]
struct Panels {
    /// Per study: the variables its guards read ([`engine::action_guard_variables`]).
    guard_vars: HashMap<StudyKey, Arc<Vec<String>>>,
    panels: HashMap<(StudyKey, Vec<u8>), Panel>,
}

/// A loaded study: its address (the same study stays at one address while loaded), id and
/// version (so a study loaded later at a freed address is told apart).
type StudyKey = (usize, String, String);

static PANELS: LazyLock<Mutex<Panels>> = LazyLock::new(Mutex::default);

/// The wizard's action panel for `s`: built with [`actions`] unless a panel of the same study
/// and the same [`engine::action_table_key`] is cached. The panel is a pure function of what
/// the key holds, so a cached one is the panel [`actions`] would build now.
fn panel(study: &LoadedStudy, s: &Session, vars: &Vars<'_>) -> Panel {
    let st = &study.study;
    let id: StudyKey = (
        std::ptr::from_ref(study) as usize,
        st.id.clone(),
        st.version.clone(),
    );
    let guard_vars = {
        let mut cache = PANELS.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .guard_vars
            .entry(id.clone())
            .or_insert_with(|| Arc::new(engine::action_guard_variables(study)))
            .clone()
    };
    let Some(key) = engine::action_table_key(study, s, &guard_vars) else {
        return Panel(Arc::new(actions(study, s, vars)));
    };
    let key = (id, key);
    if let Some(p) = PANELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .panels
        .get(&key)
    {
        return p.clone();
    }
    let built = Panel(Arc::new(actions(study, s, vars)));
    let mut cache = PANELS.lock().unwrap_or_else(|e| e.into_inner());
    if cache.panels.len() >= PANELS_KEPT {
        cache.panels.clear();
        cache.guard_vars.retain(|k, _| k == &key.0);
    }
    cache.panels.insert(key, built.clone());
    built
}

/// Distinct refusals named in an action's `why_not`; more are counted, not listed.
const WHY_NOT_REASONS: usize = 3;

/// Every action with each robot (and target) and whether it may start now, with the reason
/// when not: the action panel disables the send button and shows the reason. Each action also
/// carries the combination the panel opens on (`pick`), or why none is possible (`why_not`),
/// both from the engine's own checks.
fn actions(study: &LoadedStudy, s: &Session, vars: &Vars<'_>) -> Vec<ActionView> {
    let mut out: Vec<ActionView> = study
        .study
        .actions
        .iter()
        .map(|a| ActionView {
            id: a.id.clone(),
            label: a.label.clone(),
            target: a.target,
            combos: vec![],
            pick: None,
            why_not: None,
        })
        .collect();
    for (ai, robot, target, check) in engine::action_table_with(study, s, vars) {
        if let Some(a) = out.get_mut(ai) {
            a.combos.push(Combo {
                robot,
                target,
                ok: check.is_ok(),
                reason: check.err().map(|e| e.to_string()),
            });
        }
    }
    for a in &mut out {
        a.pick = a.combos.iter().find(|c| c.ok).map(|c| Pick {
            robot: c.robot.clone(),
            target: c.target.clone(),
        });
        if a.pick.is_none() {
            a.why_not = Some(why_not(&a.combos));
        }
    }
    out
}

/// One sentence on why none of `combos` is possible: the distinct refusals in table order (the
/// first [`WHY_NOT_REASONS`], then how many more), or that there is no robot to do it.
fn why_not(combos: &[Combo]) -> String {
    let mut reasons: Vec<&str> = vec![];
    for r in combos.iter().filter_map(|c| c.reason.as_deref()) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    if reasons.is_empty() {
        return "No robot can do this.".into();
    }
    let more = reasons.len().saturating_sub(WHY_NOT_REASONS);
    let text = reasons[..reasons.len().min(WHY_NOT_REASONS)].join("; ");
    let mut chars = text.chars();
    let text: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    match more {
        0 => format!("{text}."),
        n => format!("{text}; and {n} more."),
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use serde_json::Value;
    use wozkit_core::engine::{Command, step};
    use wozkit_core::event::Actor;

    use super::*;

    fn keys(frame: &str) -> Vec<String> {
        let v: Value = serde_json::from_str(frame).unwrap_or_default();
        v["view"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn wizard() -> Actor {
        Actor::Participant {
            role: Role::Wizard,
            participant: None,
        }
    }

    /// Plays `cmds` on the built-in offshore study; returns the study, the session and its log.
    fn play(cmds: Vec<(Actor, Command)>) -> (LoadedStudy, Session, Vec<Event>) {
        let study = match wozkit_core::load::load_builtin("offshore-emergency") {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let mut s = Session::new(&study, "t");
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut log = vec![];
        for (actor, cmd) in cmds {
            match step(&study, &s, &actor, cmd.clone(), 1_000, &mut rng) {
                Ok(out) => {
                    for (a, kind) in out.events {
                        log.push(Event {
                            v: 1,
                            session: "t".into(),
                            seq: log.len() as u64 + 1,
                            at_ms: 1_000,
                            actor: a,
                            kind,
                        });
                    }
                    s = out.session;
                }
                Err(r) => panic!("{cmd:?}: {r}"),
            }
        }
        (study, s, log)
    }

    fn say(state: &str) -> (Actor, Command) {
        (
            wizard(),
            Command::Say {
                state: state.into(),
            },
        )
    }

    #[test]
    fn the_approval_prompt_reaches_the_user_with_its_slots_filled() {
        let (study, s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
            say("request_pa_announcement"),
        ]);
        let v: Value = serde_json::from_str(
            &view(&study, &s, Role::User, 2_000, &Basis::new(&study, &s)).frame(),
        )
        .unwrap_or_default();
        assert_eq!(
            v["view"]["lock"]["prompt"],
            "Make a PA announcement telling the crew to leave the processing module east tower?"
        );
    }

    #[test]
    fn the_user_gets_robot_actions_by_label_without_ids_or_the_world() {
        let (study, _, log) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
            (
                wizard(),
                Command::Act {
                    action: "send".into(),
                    robot: "qdc1".into(),
                    target: Some("pu_et".into()),
                },
            ),
            (Actor::System, Command::Tick),
        ]);
        let started = log
            .iter()
            .find(|e| matches!(e.kind, EventKind::ActionStarted { .. }))
            .map(|e| event_for(&study, Role::User, e));
        let Some(Some(e)) = started else {
            panic!("no action_started for the user in {log:?}")
        };
        let EventKind::ActionStarted {
            action,
            label,
            world,
            robot,
            target,
            ..
        } = &e.kind
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (action.as_str(), label.as_str(), world.len()),
            ("", "Send to location", 0)
        );
        assert_eq!((robot.as_str(), target.as_deref()), ("qdc1", Some("pu_et")));
        // The wizard's copy is the stored event.
        let stored = log
            .iter()
            .find(|e| matches!(e.kind, EventKind::ActionStarted { .. }));
        assert!(
            stored.is_some_and(|e| matches!(
                event_for(&study, Role::Wizard, e),
                Some(Cow::Borrowed(_))
            ))
        );
        // Progress and completion carry no action id for the user either.
        for kind in [
            EventKind::ActionProgress {
                action: "send".into(),
                robot: "qdc1".into(),
                percent: 50,
                eta_s: 9,
            },
            EventKind::ActionCompleted {
                action: "send".into(),
                robot: "qdc1".into(),
                target: Some("pu_et".into()),
                battery: 94.0,
            },
        ] {
            let e = Event {
                v: 1,
                session: "t".into(),
                seq: 99,
                at_ms: 2_000,
                actor: Actor::System,
                kind,
            };
            let text =
                serde_json::to_string(&event_for(&study, Role::User, &e)).unwrap_or_default();
            assert!(!text.contains("\"send\""), "{text}");
        }
    }

    #[test]
    fn the_map_gets_each_robots_skills_by_label_and_where_a_moving_robot_goes() {
        let (study, s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
            (
                wizard(),
                Command::Act {
                    action: "send".into(),
                    robot: "qdc1".into(),
                    target: Some("pu_et".into()),
                },
            ),
        ]);
        let welcome = welcome_study(&study, Role::User);
        assert_eq!(
            welcome["robots"][0]["can"],
            json!(["Extinguish the fire", "Close the gas valves"])
        );
        assert_eq!(welcome["robots"][2]["can"], json!(["Inspect the area"]));
        for role in [Role::User, Role::Wizard] {
            let v: Value = serde_json::from_str(
                &view(&study, &s, role, 2_000, &Basis::new(&study, &s)).frame(),
            )
            .unwrap_or_default();
            let robots = v["view"]["robots"].as_array().cloned().unwrap_or_default();
            let moving: Vec<_> = robots
                .iter()
                .map(|r| {
                    (
                        r["id"].clone(),
                        r["location"].clone(),
                        r["moving_to"].clone(),
                    )
                })
                .collect();
            assert_eq!(
                moving,
                vec![
                    (json!("hsk1"), json!("base"), Value::Null),
                    (json!("hsk2"), json!("base"), Value::Null),
                    (json!("qdc1"), json!("base"), json!("pu_et")),
                    (json!("qdc2"), json!("base"), Value::Null),
                ],
                "{role:?}"
            );
        }
    }

    fn view_json(study: &LoadedStudy, s: &Session, role: Role) -> Value {
        serde_json::from_str(&view(study, s, role, s.now_ms, &Basis::new(study, s)).frame())
            .unwrap_or_default()
    }

    #[test]
    fn the_progress_bar_is_full_once_the_goal_is_reached() {
        // The offshore study's last subtask is worth 90 %; its goal is that subtask's milestone.
        let (study, mut s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
        ]);
        s.milestones = vec!["inspect".into(), "extinguish".into()];
        for role in [Role::User, Role::Wizard] {
            assert_eq!(view_json(&study, &s, role)["view"]["progress"], 60);
        }
        s.milestones.push("assess_damage".into());
        for role in [Role::User, Role::Wizard] {
            assert_eq!(view_json(&study, &s, role)["view"]["progress"], 100);
        }
        // The end decides: reached, the bar stays full; not reached, it shows the milestones.
        s.ended = Some((wozkit_core::event::EndReason::Terminal, true));
        assert_eq!(view_json(&study, &s, Role::User)["view"]["progress"], 100);
        s.milestones = vec!["inspect".into()];
        s.ended = Some((wozkit_core::event::EndReason::TimeLimit, false));
        assert_eq!(view_json(&study, &s, Role::User)["view"]["progress"], 30);
    }

    #[test]
    fn a_robot_out_of_service_says_so_in_both_views() {
        let (study, mut s, _) = play(vec![(Actor::System, Command::Start { seed: 1 })]);
        s.robots[1].in_service = false;
        for role in [Role::User, Role::Wizard] {
            let v = view_json(&study, &s, role);
            let service: Vec<&Value> = (v["view"]["robots"].as_array().into_iter().flatten())
                .map(|r| &r["in_service"])
                .collect();
            assert_eq!(service.len(), s.robots.len(), "{role:?}");
            for (i, in_service) in service.iter().enumerate() {
                assert_eq!(**in_service, Value::Bool(i != 1), "{role:?}, robot {i}");
            }
        }
    }

    #[test]
    fn the_map_alarm_is_at_the_studys_location_until_cleared_or_the_goal_is_reached() {
        let (study, mut s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
        ]);
        let Some(def) = study.study.world.alarm.clone() else {
            panic!("the offshore study marks an alarm")
        };
        // Where the study's variable says, read from the study rather than written here.
        let at = study.study.world.variables[&def.at].clone();
        let alarm = |s: &Session| view_json(&study, s, Role::User)["view"]["alarm"].clone();
        assert_eq!(
            alarm(&s),
            json!({"location": at, "label": def.label, "cleared": false})
        );
        // The goal reached clears it, while the session runs and at its end.
        s.milestones = vec![
            "inspect".into(),
            "extinguish".into(),
            "assess_damage".into(),
        ];
        let cleared = json!({"location": at, "label": def.cleared_label, "cleared": true});
        assert_eq!(alarm(&s), cleared);
        s.ended = Some((wozkit_core::event::EndReason::Terminal, true));
        assert_eq!(alarm(&s), cleared);
        assert_eq!(
            view_json(&study, &s, Role::Wizard)["view"]["alarm"],
            cleared
        );
        // An end without the goal leaves it on unless the study's own condition holds.
        s.milestones = vec!["inspect".into()];
        s.ended = Some((wozkit_core::event::EndReason::TimeLimit, false));
        assert_eq!(alarm(&s)["cleared"], false);
        std::sync::Arc::make_mut(&mut s.world).insert("fire_out".into(), json!(true));
        assert_eq!(alarm(&s)["cleared"], true);
    }

    #[test]
    fn an_option_naming_the_time_left_carries_its_clock_slot() {
        let (study, s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
        ]);
        let v = view_json(&study, &s, Role::Wizard);
        let options = v["view"]["options"].as_array().cloned().unwrap_or_default();
        let time = options
            .iter()
            .find(|o| o["state"] == "inform_time_left")
            .cloned()
            .unwrap_or_default();
        let parts = time["clock_text"].as_array().cloned().unwrap_or_default();
        assert!(parts.contains(&json!({"slot": "time_left"})), "{time}");
        // With the clock slot filled as the server fills it, the parts give the offered text.
        let filled: String = parts
            .iter()
            .map(|p| {
                p.as_str()
                    .map_or_else(|| "6:00".to_string(), str::to_string)
            })
            .collect();
        assert_eq!(time["text"], filled.as_str());
        assert!(filled.contains("6:00"), "{filled}");
        // Text without a clock slot has none.
        let wind = options
            .iter()
            .find(|o| o["state"] == "inform_wind")
            .cloned()
            .unwrap_or_default();
        assert!(
            wind["text"].is_string() && wind["clock_text"].is_null(),
            "{wind}"
        );
        assert!(v["view"]["fixed"][0]["clock_text"].is_null());
    }

    #[test]
    fn views_have_the_documented_fields_in_order() {
        let study = match wozkit_core::load::load_builtin("offshore-emergency") {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let mut s = Session::new(&study, "t");
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (actor, cmd) in [
            (Actor::System, Command::Start { seed: 1 }),
            (
                Actor::System,
                Command::Join {
                    role: Role::User,
                    bot: false,
                },
            ),
            (
                Actor::System,
                Command::Join {
                    role: Role::Wizard,
                    bot: false,
                },
            ),
        ] {
            match step(&study, &s, &actor, cmd, 1_000, &mut rng) {
                Ok(out) => s = out.session,
                Err(r) => panic!("{r}"),
            }
        }
        let common = "role now_ms started messages timer progress milestones subtask robots media \
                      alarm partner_away partner_back_by_ms can_finish ended";
        let user = format!("{common} muted lock");
        let wizard = format!("{common} state options fixed actions hint can_hint lock muted");
        let split = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            keys(&view(&study, &s, Role::User, 2_000, &Basis::new(&study, &s)).frame()),
            split(&user)
        );
        let w = view(&study, &s, Role::Wizard, 2_000, &Basis::new(&study, &s)).frame();
        assert_eq!(keys(&w), split(&wizard));
        let v: Value = serde_json::from_str(&w).unwrap_or_default();
        assert_eq!(v["type"], "view");
        assert!(v["view"]["options"][0]["state"].is_string());
        let combos = v["view"]["actions"][0]["combos"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            combos,
            study.study.world.robots.len() * study.study.world.locations.len()
        );
        assert!(v["view"]["actions"][0]["combos"][0]["reason"].is_string());
    }

    /// The wizard view's actions, as JSON.
    fn wizard_actions(study: &LoadedStudy, s: &Session) -> Vec<Value> {
        let v: Value = serde_json::from_str(
            &view(study, s, Role::Wizard, 2_000, &Basis::new(study, s)).frame(),
        )
        .unwrap_or_default();
        v["view"]["actions"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn each_action_opens_on_a_combination_the_engine_accepts_or_says_why_not() {
        let (study, s, _) = play(vec![
            (Actor::System, Command::Start { seed: 1 }),
            say("intro_hello"),
            say("inform_alert_emergency"),
        ]);
        let actions = wizard_actions(&study, &s);
        let send = actions
            .iter()
            .find(|a| a["id"] == "send")
            .cloned()
            .unwrap_or_default();
        // The first robot to the first place is refused (the guard wants the fire's place), so
        // the pick is not simply the first of each list.
        assert_eq!(send["combos"][0]["ok"], json!(false), "{send}");
        let pick = &send["pick"];
        assert_eq!(pick["target"], "pu_et", "{send}");
        assert_eq!(send["why_not"], Value::Null);
        // The engine accepts the pick: it starts.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let act = Command::Act {
            action: "send".into(),
            robot: pick["robot"].as_str().unwrap_or_default().into(),
            target: pick["target"].as_str().map(str::to_string),
        };
        let after = match step(&study, &s, &wizard(), act, 1_500, &mut rng) {
            Ok(out) => out.session,
            Err(r) => panic!("the picked combination is refused: {r}"),
        };
        // Every pick is a combination the view itself marks possible; an action with none
        // says why, in the engine's words.
        for a in wizard_actions(&study, &after) {
            let combos = a["combos"].as_array().cloned().unwrap_or_default();
            match a["pick"].as_object() {
                Some(p) => {
                    assert!(
                        combos.iter().any(|c| c["ok"] == json!(true)
                            && c["robot"] == p["robot"]
                            && c["target"] == p["target"]),
                        "{a}"
                    );
                    assert_eq!(a["why_not"], Value::Null, "{a}");
                }
                None => {
                    assert!(combos.iter().all(|c| c["ok"] == json!(false)), "{a}");
                    let why = a["why_not"].as_str().unwrap_or_default();
                    let first = combos[0]["reason"].as_str().unwrap_or_default();
                    assert!(
                        why.to_lowercase().contains(&first.to_lowercase()),
                        "{why} / {first}"
                    );
                }
            }
        }
        // `send` is exclusive: while one robot runs it, no other may start, and the panel says
        // which one is active.
        let send = wizard_actions(&study, &after)
            .into_iter()
            .find(|a| a["id"] == "send")
            .unwrap_or_default();
        assert_eq!(send["pick"], Value::Null, "{send}");
        assert!(
            send["why_not"]
                .as_str()
                .is_some_and(|w| w.contains("is busy") || w.contains("is active")),
            "{send}"
        );
    }

    #[test]
    fn why_not_lists_distinct_refusals_and_counts_the_rest() {
        let combo = |reason: &str| Combo {
            robot: "r".into(),
            target: None,
            ok: false,
            reason: Some(reason.into()),
        };
        let combos: Vec<Combo> = ["a is busy", "a is busy", "b cannot do “x”", "c", "d", "e"]
            .into_iter()
            .map(combo)
            .collect();
        assert_eq!(
            why_not(&combos),
            "A is busy; b cannot do “x”; c; and 2 more."
        );
        assert_eq!(why_not(&combos[..2]), "A is busy.");
        assert_eq!(why_not(&[]), "No robot can do this.");
    }
}

#[cfg(test)]
mod panel_tests {
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use wozkit_core::engine::{Command, step};
    use wozkit_core::event::Actor;

    use super::*;

    fn text(panel: &[ActionView]) -> String {
        serde_json::to_string(panel).unwrap_or_default()
    }

    /// Plays random sessions (seed `seed`) of `study` (offered states, accepted robot actions,
    /// the user's answers, time passing), calling `each` with the session after every step
    /// (200 at most, fewer if it ends).
    fn play(study: &LoadedStudy, seed: u64, mut each: impl FnMut(usize, &Session)) {
        let wizard = Actor::Participant {
            role: Role::Wizard,
            participant: None,
        };
        let user = Actor::Participant {
            role: Role::User,
            participant: None,
        };
        {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut s = Session::new(study, "t");
            let mut now = 1_000;
            let mut cmds = vec![
                (Actor::System, Command::Start { seed }),
                (
                    Actor::System,
                    Command::Join {
                        role: Role::User,
                        bot: false,
                    },
                ),
                (
                    Actor::System,
                    Command::Join {
                        role: Role::Wizard,
                        bot: false,
                    },
                ),
            ];
            for i in 0..200 {
                if i >= 3 {
                    now += rng.random_range(200..4_000);
                    let offers = engine::offered(study, &s);
                    let valid = engine::valid_actions(study, &s);
                    let cmd = match rng.random_range(0..6) {
                        _ if s.lock.is_some() => {
                            let answer = if rng.random_bool(0.7) {
                                Command::Approve
                            } else {
                                Command::Deny
                            };
                            (user.clone(), answer)
                        }
                        0 | 1 if !offers.is_empty() => {
                            let o = &offers[rng.random_range(0..offers.len())];
                            (
                                wizard.clone(),
                                Command::Say {
                                    state: o.state.clone(),
                                },
                            )
                        }
                        2 if !valid.is_empty() => {
                            let (action, robot, target) =
                                valid[rng.random_range(0..valid.len())].clone();
                            (
                                wizard.clone(),
                                Command::Act {
                                    action,
                                    robot,
                                    target,
                                },
                            )
                        }
                        3 => (user.clone(), Command::Text { text: "ok".into() }),
                        _ => (Actor::System, Command::Tick),
                    };
                    cmds = vec![cmd];
                }
                for (actor, cmd) in cmds.drain(..) {
                    if let Ok(out) = step(study, &s, &actor, cmd, now, &mut rng) {
                        s = out.session;
                    }
                }
                each(i, &s);
                if s.ended.is_some() {
                    break;
                }
            }
        }
    }

    fn demo() -> LoadedStudy {
        match wozkit_core::load::load_builtin("offshore-emergency") {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// After every step of random sessions of the demo study, the wizard's panel as served
    /// (cached by situation, shared between sessions) is the one built afresh.
    #[test]
    fn a_cached_action_panel_is_the_panel_built_afresh() {
        let study = demo();
        let mut compared = 0;
        let mut reused = 0;
        for seed in 0..4u64 {
            play(&study, seed, |i, s| {
                let vars = engine::vars(&study, s);
                let fresh = actions(&study, s, &vars);
                let first = panel(&study, s, &vars);
                let again = panel(&study, s, &vars);
                assert_eq!(text(&first.0), text(&fresh), "seed {seed}, step {i}");
                reused += usize::from(Arc::ptr_eq(&first.0, &again.0));
                compared += 1;
            });
        }
        assert!(compared > 100, "{compared}");
        // Asked twice in the same situation, the panel is built once (unless other tests
        // filled the shared cache in between).
        assert!(reused * 2 > compared, "{reused} of {compared}");
    }

    /// A page that keeps the `actions` of the last view that had them (as room.js and the
    /// load generator do) holds, after every view of random sessions, exactly the panel a
    /// whole view would carry; and most views leave the panel out.
    #[test]
    fn views_leave_out_only_the_panel_the_page_already_holds() {
        let study = demo();
        let (mut views, mut omitted) = (0, 0);
        for seed in 10..14u64 {
            let mut sent: Option<PanelSent> = None;
            let mut held: Option<serde_json::Value> = None;
            play(&study, seed, |i, s| {
                let basis = Basis::new(&study, s);
                let mut v = view(&study, s, Role::Wizard, s.now_ms, &basis);
                sent = v.omit_panel_if_sent(sent.as_ref());
                let frame: serde_json::Value = match serde_json::from_str(&v.frame()) {
                    Ok(f) => f,
                    Err(e) => panic!("seed {seed}, step {i}: {e}"),
                };
                match frame["view"].get("actions") {
                    Some(a) => held = Some(a.clone()),
                    None => omitted += 1,
                }
                views += 1;
                let whole: serde_json::Value =
                    serde_json::from_str(&view(&study, s, Role::Wizard, s.now_ms, &basis).frame())
                        .unwrap_or_default();
                assert_eq!(
                    held.as_ref(),
                    Some(&whole["view"]["actions"]),
                    "seed {seed}, step {i}"
                );
            });
        }
        assert!(views > 100, "{views}");
        assert!(
            omitted * 2 > views,
            "only {omitted} of {views} views left the panel out"
        );
    }
}
