//! What each role may do now: offered dialogue options, allowed robot actions, finishing — and the
//! condition variables and slot values these are computed from.

use cel::Value;
use serde::Serialize;

use super::{Refusal, RobotState, Session};
use crate::event::RobotSnapshot;
use cel::common::types::{CelBool, CelDouble};
use cel::common::value::Val;

use crate::expr::{Vars, json_to_val, val_list, val_map, val_str};
use crate::load::LoadedStudy;
use crate::model::{ActType, Action, Robot, Study};

/// Why an option is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferKind {
    Transition,
    Global,
    Unlocked,
}

/// A dialogue option offered to the wizard, with the text it will say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Offer {
    pub state: String,
    pub label: String,
    pub act_type: ActType,
    pub text: String,
    pub template: usize,
    pub prior: f64,
    pub kind: OfferKind,
}

/// The variables every condition of the study sees: the world variables and the built-in ones
/// (`subtask`, `state`, `messages`, `elapsed`, `time_left`, `milestones`, `busy_robots`,
/// `robots`, `db`). Only those the study's compiled conditions can read are built
/// ([`crate::load::Compiled::reads`]); a condition of the study gives the same result as with
/// every variable bound.
pub fn vars(study: &LoadedStudy, s: &Session) -> Vars<'static> {
    match &study.compiled.reads {
        Some(reads) => build_vars(study, s, |name| reads.reads(name), reads.robots_fields()),
        None => build_vars(study, s, |_| true, None),
    }
}

/// The variables of [`vars`] that `wanted` accepts, set in the same order (a built-in variable
/// overrides a world variable of the same name), built straight in CEL's evaluation form; each
/// robot of `robots` with only `robot_fields` when given.
fn build_vars(
    study: &LoadedStudy,
    s: &Session,
    wanted: impl Fn(&str) -> bool,
    robot_fields: Option<&[String]>,
) -> Vars<'static> {
    let mut v = Vars::default();
    for (k, val) in s.world.iter() {
        if wanted(k) {
            v.set_val(k, json_to_val(val));
        }
    }
    if wanted("subtask") {
        v.set_val("subtask", val_str(s.subtask.as_deref().unwrap_or("")));
    }
    if wanted("state") {
        v.set_val("state", val_str(&study.study.states[s.current].id));
    }
    if wanted("messages") {
        v.set("messages", Value::Int(i64::from(s.messages)));
    }
    if wanted("elapsed") {
        let elapsed = s.now_ms.saturating_sub(s.started_at_ms) / 1000;
        v.set("elapsed", Value::Int(elapsed as i64));
    }
    if wanted("time_left") {
        v.set(
            "time_left",
            Value::Int(s.time_left_s(study).unwrap_or(0) as i64),
        );
    }
    if wanted("milestones") {
        v.set_val(
            "milestones",
            val_list(s.milestones.iter().map(|m| val_str(m)).collect()),
        );
    }
    if wanted("busy_robots") {
        v.set("busy_robots", Value::Int(s.busy_robots() as i64));
    }
    if wanted("robots") {
        let robots = study
            .study
            .world
            .robots
            .iter()
            .zip(&s.robots)
            .map(|(def, r)| (def.id.clone(), robot_value(def, r, robot_fields)));
        v.set_val("robots", val_map(robots));
    }
    if (study.database.is_some() || !s.db_selected.is_empty()) && wanted("db") {
        v.set_val("db", db_value(s));
    }
    v
}

/// `db`: the row the wizard selected last in each table, by table (`db.restaurant.price`); a
/// table with no selection yet is absent, so `has(db.restaurant)` tells whether there is one.
/// Read from the session, which folds the logged rows: replay needs no database.
fn db_value(s: &Session) -> Box<dyn Val> {
    val_map(s.db_selected.iter().map(|(table, row)| {
        let row = val_map(row.iter().map(|(k, v)| (k.clone(), json_to_val(v))));
        (table.clone(), row)
    }))
}

/// The fields of a robot as a condition sees it, in order.
const ROBOT_FIELDS: [&str; 7] = [
    "id",
    "kind",
    "location",
    "busy",
    "in_service",
    "battery",
    "capabilities",
];

/// A robot as a condition sees it (`robot`, each entry of `robots`): every field, or only
/// `only` (the fields the study's conditions read, [`crate::expr::Reads`]).
fn robot_value(
    def: &crate::model::Robot,
    r: &super::RobotState,
    only: Option<&[String]>,
) -> Box<dyn Val> {
    let value = |k: &str| -> Box<dyn Val> {
        match k {
            "id" => val_str(&def.id),
            "kind" => val_str(&def.kind),
            "location" => val_str(&r.location),
            "busy" => Box::new(CelBool::from(r.activity.is_some())),
            "in_service" => Box::new(CelBool::from(r.in_service)),
            "battery" => Box::new(CelDouble::from(r.battery)),
            _ => val_list(def.capabilities.iter().map(|c| val_str(c)).collect()),
        }
    };
    val_map(
        ROBOT_FIELDS
            .iter()
            .filter(|k| only.is_none_or(|o| o.iter().any(|x| x == *k)))
            .map(|k| (k.to_string(), value(k))),
    )
}

/// Template of `state` while the current state lasts: FNV-1a of the seed and the id, so the pick
/// is random per visit yet stable across processes and compiler versions.
fn template_index(s: &Session, state: &str, n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.template_seed.to_le_bytes().iter().chain(state.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n.max(1) as u64) as usize
}

/// Fills a template's slots from the session.
pub fn render(study: &LoadedStudy, s: &Session, template: &str) -> String {
    let fill = |slot: &str| slot_value(study, s, slot);
    match study.compiled.templates.get(template) {
        Some(parts) => crate::slots::render_parsed(template, parts, fill),
        None => crate::slots::render(template, fill),
    }
}

/// Slots whose value follows the clock: text showing them goes stale as the timer runs.
pub const CLOCK_SLOTS: &[&str] = &["time_left", "elapsed"];

/// A piece of a rendered template: text, or a clock slot the page fills from its own clock.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TextPart {
    /// Literal text, other slots already filled.
    Text(String),
    /// A slot of [`CLOCK_SLOTS`]: `time_left` counts down to the view's `timer`, `elapsed` counts
    /// up from `since_ms` (the session's start, ms since the epoch).
    Clock {
        slot: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        since_ms: Option<u64>,
    },
}

/// A template rendered like [`render`] but split at its clock slots, so a page can keep the time
/// current between views; `None` when the template names no clock slot (its text never changes).
pub fn render_clock_parts(
    study: &LoadedStudy,
    s: &Session,
    template: &str,
) -> Option<Vec<TextPart>> {
    let parsed;
    let parts = match study.compiled.templates.get(template) {
        Some(parts) => parts?,
        None => {
            parsed = crate::slots::parse(template).ok()?;
            &parsed
        }
    };
    if !crate::slots::names(parts).any(|n| CLOCK_SLOTS.contains(&n)) {
        return None;
    }
    let mut out: Vec<TextPart> = vec![];
    for p in parts {
        let piece = match p {
            crate::slots::Part::Slot(name) => match CLOCK_SLOTS.iter().find(|c| **c == name) {
                Some(&slot) if !s.world.contains_key(slot) => {
                    out.push(TextPart::Clock {
                        slot,
                        since_ms: (slot == "elapsed").then_some(s.started_at_ms),
                    });
                    continue;
                }
                _ => slot_value(study, s, name).unwrap_or_else(|| format!("{{{name}}}")),
            },
            crate::slots::Part::Text(t) => t.clone(),
        };
        match out.last_mut() {
            Some(TextPart::Text(prev)) => prev.push_str(&piece),
            _ => out.push(TextPart::Text(piece)),
        }
    }
    Some(out)
}

/// The value of one slot now: a world variable first, then the built-in slots.
fn slot_value(study: &LoadedStudy, s: &Session, slot: &str) -> Option<String> {
    let st = &study.study;
    if let Some(v) = s.world.get(slot) {
        return Some(match v {
            serde_json::Value::String(x) => x.clone(),
            other => other.to_string(),
        });
    }
    if let Some((table, column)) = crate::slots::db_slot(slot) {
        // Empty until the wizard selects a row of the table.
        return Some(
            s.db_selected
                .get(table)
                .and_then(|row| row.get(column))
                .map(crate::database::value_text)
                .unwrap_or_default(),
        );
    }
    let robot = s.last_robot.map(|i| (&st.world.robots[i], &s.robots[i]));
    Some(match slot {
        "time_left" => {
            let t = s.time_left_s(study).unwrap_or(0);
            format!("{}:{:02}", t / 60, t % 60)
        }
        "elapsed" => (s.now_ms.saturating_sub(s.started_at_ms) / 1000).to_string(),
        "subtask" => s
            .subtask
            .as_ref()
            .and_then(|id| st.subtasks.iter().find(|t| &t.id == id))
            .map_or_else(String::new, |t| t.label.clone()),
        "wizard.name" => st
            .roles
            .wizard
            .name
            .clone()
            .unwrap_or_else(|| st.roles.wizard.label.clone()),
        "user.name" => st
            .roles
            .user
            .name
            .clone()
            .unwrap_or_else(|| st.roles.user.label.clone()),
        "target.name" => s
            .last_target
            .as_deref()
            .map_or_else(|| "the target".into(), |id| location_name(st, id)),
        _ => return robot_slot(st, s, robot, slot),
    })
}

/// The name of the location `id` (the id itself when there is none).
fn location_name(st: &Study, id: &str) -> String {
    st.world
        .locations
        .iter()
        .find(|l| l.id == id)
        .map_or_else(|| id.to_string(), |l| l.name.clone())
}

/// The value of a `robot.` slot now: of `robot`, the one that acted last (its definition and
/// state).
fn robot_slot(
    st: &Study,
    s: &Session,
    robot: Option<(&Robot, &RobotState)>,
    slot: &str,
) -> Option<String> {
    Some(match slot {
        "robot.name" => robot.map_or_else(|| "the robot".into(), |(d, _)| d.name.clone()),
        "robot.kind" => robot.map_or_else(String::new, |(d, _)| {
            st.world
                .robot_kinds
                .get(&d.kind)
                .map_or_else(|| d.kind.clone(), |k| k.label.clone())
        }),
        "robot.location" => robot.map_or_else(String::new, |(_, r)| location_name(st, &r.location)),
        "robot.battery" => robot.map_or_else(String::new, |(_, r)| format!("{:.0}", r.battery)),
        "robot.speed" => robot.map_or_else(String::new, |(d, _)| format!("{}", d.speed)),
        "robot.eta" => robot.map_or_else(
            || "0".into(),
            |(_, r)| {
                r.activity
                    .as_ref()
                    .map_or(0, |a| a.ends_ms.saturating_sub(s.now_ms).div_ceil(1000))
                    .to_string()
            },
        ),
        "robot.progress" => robot.map_or_else(
            || "0".into(),
            |(_, r)| r.activity.as_ref().map_or(100, |a| a.percent).to_string(),
        ),
        "robot.status" => robot.map_or_else(String::new, |(_, r)| match &r.activity {
            None if !r.in_service => "out of service".into(),
            None => "on standby".into(),
            Some(a) => format!("busy ({})", st.actions[a.action].label.to_lowercase()),
        }),
        _ => return None,
    })
}

/// The text the wizard says for `state` now (its template picked by the session's template seed).
pub fn render_state(study: &LoadedStudy, s: &Session, state: usize) -> (usize, String) {
    let def = &study.study.states[state];
    let i = template_index(s, &def.id, def.templates.len());
    let text = def
        .templates
        .get(i)
        .map(|t| render(study, s, t))
        .unwrap_or_default();
    (i, text)
}

/// The dialogue options offered to the wizard now (empty while a lock is on or after the end).
pub fn offered(study: &LoadedStudy, s: &Session) -> Vec<Offer> {
    if s.lock.is_some() || s.ended.is_some() || !s.started {
        return vec![];
    }
    offered_with(study, s, &vars(study, s))
}

/// [`offered`] with the condition variables already built ([`vars`] of the same session), so
/// one context serves every evaluation of a view.
pub fn offered_with(study: &LoadedStudy, s: &Session, vars: &Vars<'_>) -> Vec<Offer> {
    offered_states_with(study, s, vars)
        .into_iter()
        .map(|o| o.render(study, s))
        .collect()
}

/// The offer of `state` now, if it is offered ([`offered`] filtered to it, rendering only its
/// text): what the engine checks a wizard's `say` against.
pub fn offer_of(study: &LoadedStudy, s: &Session, state: &str) -> Option<Offer> {
    if s.lock.is_some() || s.ended.is_some() || !s.started {
        return None;
    }
    let i = study.state_idx(state)?;
    offered_states_with(study, s, &vars(study, s))
        .into_iter()
        .find(|o| o.state == i)
        .map(|o| o.render(study, s))
}

/// A state offered now, before its text is rendered ([`OfferedState::render`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OfferedState {
    /// Index in the study's states.
    pub state: usize,
    pub prior: f64,
    pub kind: OfferKind,
}

impl OfferedState {
    /// The [`Offer`]: the state's label and act type and its template rendered now.
    pub fn render(self, study: &LoadedStudy, s: &Session) -> Offer {
        let def = &study.study.states[self.state];
        let (template, text) = render_state(study, s, self.state);
        Offer {
            state: def.id.clone(),
            label: def.label().to_string(),
            act_type: def.act_type,
            text,
            template,
            prior: self.prior,
            kind: self.kind,
        }
    }
}

/// The states [`offered_with`] offers, in the same order (transitions of the current state,
/// then unlocked states, then global ones; each state once, the first way it is offered),
/// without rendering their texts.
pub fn offered_states_with(study: &LoadedStudy, s: &Session, vars: &Vars<'_>) -> Vec<OfferedState> {
    if s.lock.is_some() || s.ended.is_some() || !s.started {
        return vec![];
    }
    let st = &study.study;
    let c = &study.compiled;
    let state_ok = |i: usize| c.state_when[i].as_ref().is_none_or(|w| w.holds(vars));
    let mut out: Vec<OfferedState> = vec![];
    let mut push = |state: usize, prior: f64, kind: OfferKind| {
        // State ids are unique, so indices tell offered states apart.
        if out.iter().any(|o| o.state == state) || st.states[state].initial {
            return;
        }
        out.push(OfferedState { state, prior, kind });
    };
    let targets = c.transition_to.get(s.current);
    for (j, t) in st.states[s.current].transitions.iter().enumerate() {
        let to = match targets.and_then(|v| v.get(j)) {
            Some(to) => *to,
            None => study.state_idx(t.to()),
        };
        let Some(i) = to else {
            continue;
        };
        let t_ok = c.transition_when[s.current][j]
            .as_ref()
            .is_none_or(|w| w.holds(vars));
        if t_ok && state_ok(i) {
            push(i, t.prior(), OfferKind::Transition);
        }
    }
    for &i in &s.unlocked {
        if state_ok(i) {
            push(i, 1.0, OfferKind::Unlocked);
        }
    }
    for (i, def) in st.states.iter().enumerate() {
        if def.global && state_ok(i) {
            push(i, 1.0, OfferKind::Global);
        }
    }
    out
}

/// Snapshots of every robot, for the log.
pub fn robot_snapshots(study: &LoadedStudy, s: &Session) -> Vec<RobotSnapshot> {
    study
        .study
        .world
        .robots
        .iter()
        .zip(&s.robots)
        .map(|(d, r)| RobotSnapshot {
            id: d.id.clone(),
            location: r.location.clone(),
            battery: r.battery,
            busy: r.activity.is_some(),
        })
        .collect()
}

/// Checks that the wizard may start `action` with `robot` on `target`; returns their indices.
pub fn action_check(
    study: &LoadedStudy,
    s: &Session,
    action: &str,
    robot: &str,
    target: Option<&str>,
) -> Result<(usize, usize), Refusal> {
    action_check_with(study, s, &vars(study, s), None, action, robot, target)
}

/// `base` with `robot` bound to robot `ri`: the scope an action's guard is evaluated in (with
/// `target` added on top).
fn robot_scope<'b>(study: &LoadedStudy, s: &Session, base: &'b Vars<'_>, ri: usize) -> Vars<'b> {
    let mut v = base.scope();
    let fields = study.compiled.reads.as_ref().and_then(|r| r.robot_fields());
    v.set_val(
        "robot",
        robot_value(&study.study.world.robots[ri], &s.robots[ri], fields),
    );
    v
}

/// [`action_check`] with the condition variables built: `base`, and each robot's guard scope
/// ([`robot_scope`] by robot index) when a whole table is checked, since converting a robot to
/// a condition value costs more than the check itself.
fn action_check_with(
    study: &LoadedStudy,
    s: &Session,
    base: &Vars<'_>,
    robot_scopes: Option<&[Vars<'_>]>,
    action: &str,
    robot: &str,
    target: Option<&str>,
) -> Result<(usize, usize), Refusal> {
    let st = &study.study;
    let ai = st
        .actions
        .iter()
        .position(|a| a.id == action)
        .ok_or_else(|| Refusal::UnknownAction { id: action.into() })?;
    let ri = st
        .world
        .robots
        .iter()
        .position(|r| r.id == robot)
        .ok_or_else(|| Refusal::UnknownRobot { id: robot.into() })?;
    let a = &st.actions[ai];
    let target = action_target(st, a, target)?;
    robot_free(st, s, a, ri)?;
    if let Some(g) = &study.compiled.action_guard[ai] {
        let own;
        let rv = match robot_scopes {
            Some(scopes) => &scopes[ri],
            None => {
                own = robot_scope(study, s, base, ri);
                &own
            }
        };
        let mut v = rv.scope();
        v.set_val("target", val_str(target));
        if !g.holds(&v) {
            return Err(guard_failed(study, ai, ri, target, &v));
        }
    }
    Ok((ai, ri))
}

/// The place an action goes to: the target given when the action takes one (a known location),
/// else none (`""`).
fn action_target<'t>(st: &Study, a: &Action, target: Option<&'t str>) -> Result<&'t str, Refusal> {
    match (a.target, target) {
        (true, None) => Err(Refusal::TargetRequired),
        (true, Some(t)) if !st.world.locations.iter().any(|l| l.id == t) => {
            Err(Refusal::UnknownLocation { id: t.into() })
        }
        (true, Some(t)) => Ok(t),
        (false, Some(_)) => Err(Refusal::TargetNotTaken {
            action: a.label.clone(),
        }),
        (false, None) => Ok(""),
    }
}

/// Whether robot `ri` may start action `a`: in service, capable, idle, and no other robot
/// acting when the action is exclusive.
fn robot_free(st: &Study, s: &Session, a: &Action, ri: usize) -> Result<(), Refusal> {
    let def = &st.world.robots[ri];
    if !s.robots[ri].in_service {
        return Err(Refusal::OutOfService {
            robot: def.name.clone(),
        });
    }
    if let Some(cap) = &a.requires
        && !def.capabilities.contains(cap)
    {
        return Err(Refusal::LacksCapability {
            robot: def.name.clone(),
            action: a.label.clone(),
            capability: cap.clone(),
        });
    }
    if s.robots[ri].activity.is_some() {
        return Err(Refusal::RobotBusy {
            robot: def.name.clone(),
        });
    }
    if a.exclusive
        && let Some(j) = s.robots.iter().position(|r| r.activity.is_some())
    {
        return Err(Refusal::OtherRobotActive {
            robot: st.world.robots[j].name.clone(),
            selected: def.name.clone(),
            action: a.label.clone(),
        });
    }
    Ok(())
}

/// The refusal of action `ai` by robot `ri` whose guard does not hold in `v`: the first part
/// that does not hold says why, in the study's words.
fn guard_failed(study: &LoadedStudy, ai: usize, ri: usize, target: &str, v: &Vars<'_>) -> Refusal {
    let st = &study.study;
    let a = &st.actions[ai];
    let def = &st.world.robots[ri];
    let reason = study.compiled.action_guard_parts[ai]
        .iter()
        .find(|(part, _)| !part.holds(v))
        .map(|(_, why)| {
            let place = st
                .world
                .locations
                .iter()
                .find(|l| l.id == target)
                .map_or(target, |l| l.name.as_str());
            why.replace("{robot}", &def.name)
                .replace("{target}", place)
                .replace("{action}", &a.label)
        });
    Refusal::GuardFailed {
        action: a.label.clone(),
        reason,
    }
}

/// One row of the action table: action index, robot id, target, and whether it may start.
pub type ActionRow = (usize, String, Option<String>, Result<(), Refusal>);

/// Every (action, robot, target) combination with whether the wizard may start it now: the
/// action panel's table. The condition context is built once for the whole table.
pub fn action_table(study: &LoadedStudy, s: &Session) -> Vec<ActionRow> {
    action_table_with(study, s, &vars(study, s))
}

/// [`action_table`] with the condition variables already built ([`vars`] of the same session).
/// Each robot's guard scope is built once for the table, not once per combination.
pub fn action_table_with(study: &LoadedStudy, s: &Session, base: &Vars<'_>) -> Vec<ActionRow> {
    let st = &study.study;
    let running = s.started && s.ended.is_none();
    let scopes: Vec<Vars<'_>> = (0..st.world.robots.len())
        .map(|ri| robot_scope(study, s, base, ri))
        .collect();
    let mut out = vec![];
    for (ai, a) in st.actions.iter().enumerate() {
        let targets: Vec<Option<&str>> = if a.target {
            st.world
                .locations
                .iter()
                .map(|l| Some(l.id.as_str()))
                .collect()
        } else {
            vec![None]
        };
        for r in &st.world.robots {
            for t in &targets {
                let check = if !running {
                    Err(if s.started {
                        Refusal::Ended
                    } else {
                        Refusal::NotStarted
                    })
                } else {
                    action_check_with(study, s, base, Some(&scopes), &a.id, &r.id, *t).map(|_| ())
                };
                out.push((ai, r.id.clone(), t.map(str::to_string), check));
            }
        }
    }
    out
}

/// The top-level variables the study's action guards read, sorted, without repeats: what
/// [`action_table_key`] needs to know. Compute it once per study.
pub fn action_guard_variables(study: &LoadedStudy) -> Vec<String> {
    let mut names: Vec<String> = study
        .compiled
        .action_guard
        .iter()
        .flatten()
        .flat_map(|g| g.variables())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Everything [`action_table_with`] reads from `s`, as bytes: two sessions of the same study
/// with equal keys have equal action tables, so a caller may keep a table and build it again
/// only when the key changes. `guard_vars` is [`action_guard_variables`] of the study.
///
/// The key holds whether the session runs, each robot's state (what the checks and a robot's
/// condition value read; `robots` and `busy_robots` derive from it), and the value of every
/// other variable a guard reads. `None` when a guard reads a variable the key does not cover
/// (anything but the built-in variables above and the session's world variables, e.g. the
/// wizard's database rows): such a table must be built every time.
pub fn action_table_key(
    study: &LoadedStudy,
    s: &Session,
    guard_vars: &[String],
) -> Option<Vec<u8>> {
    fn put(key: &mut Vec<u8>, bytes: &[u8]) {
        key.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        key.extend_from_slice(bytes);
    }
    let mut key = Vec::with_capacity(128);
    key.push(u8::from(s.started));
    key.push(u8::from(s.ended.is_some()));
    for r in &s.robots {
        put(&mut key, r.location.as_bytes());
        key.extend_from_slice(&r.battery.to_bits().to_le_bytes());
        key.push(u8::from(r.in_service));
        key.push(u8::from(r.activity.is_some()));
    }
    for name in guard_vars {
        put(&mut key, name.as_bytes());
        // The same precedence as `vars`: the built-in variables are set after the world's.
        match name.as_str() {
            // Per robot and per combination: covered by the robots' states above.
            "robot" | "target" | "robots" | "busy_robots" => {}
            "subtask" => put(&mut key, s.subtask.as_deref().unwrap_or("").as_bytes()),
            "state" => put(&mut key, study.study.states[s.current].id.as_bytes()),
            "messages" => key.extend_from_slice(&s.messages.to_le_bytes()),
            "elapsed" => key.extend_from_slice(
                &(s.now_ms.saturating_sub(s.started_at_ms) / 1000).to_le_bytes(),
            ),
            "time_left" => {
                key.extend_from_slice(&s.time_left_s(study).unwrap_or(0).to_le_bytes());
            }
            "milestones" => {
                key.extend_from_slice(&(s.milestones.len() as u64).to_le_bytes());
                for m in &s.milestones {
                    put(&mut key, m.as_bytes());
                }
            }
            // A world variable; any other name (the wizard's database rows, a variable the
            // session does not hold) is not covered.
            world => put(&mut key, s.world.get(world)?.to_string().as_bytes()),
        }
    }
    Some(key)
}

/// Every (action, robot, target) the wizard may start now.
pub fn valid_actions(study: &LoadedStudy, s: &Session) -> Vec<(String, String, Option<String>)> {
    action_table(study, s)
        .into_iter()
        .filter(|(_, _, _, check)| check.is_ok())
        .map(|(ai, r, t, _)| (study.study.actions[ai].id.clone(), r, t))
        .collect()
}

/// Whether "finish" is allowed now.
pub fn finish_allowed(study: &LoadedStudy, s: &Session) -> bool {
    let rule = &study.study.session.finish;
    s.messages >= rule.min_messages
        && study
            .compiled
            .finish_when
            .as_ref()
            .is_none_or(|w| w.holds(&vars(study, s)))
}

/// [`finish_allowed`] with the condition variables already built ([`vars`] of the same session).
pub fn finish_allowed_with(study: &LoadedStudy, s: &Session, vars: &Vars<'_>) -> bool {
    let rule = &study.study.session.finish;
    s.messages >= rule.min_messages
        && study
            .compiled
            .finish_when
            .as_ref()
            .is_none_or(|w| w.holds(vars))
}

/// Whether the study's goal holds (false when the study sets none).
pub fn goal_reached(study: &LoadedStudy, s: &Session) -> bool {
    study
        .compiled
        .goal
        .as_ref()
        .is_some_and(|g| g.holds(&vars(study, s)))
}

/// [`goal_reached`] with the condition variables already built ([`vars`] of the same session).
pub fn goal_reached_with(study: &LoadedStudy, vars: &Vars<'_>) -> bool {
    study.compiled.goal.as_ref().is_some_and(|g| g.holds(vars))
}

/// The study's alarm now: the location id it is at and whether it is cleared (its
/// `cleared_when` holds, or the goal is reached: the session ended with it, or it holds now).
/// `None` when the study marks no alarm or its location variable no longer names a string.
pub fn alarm<'a>(study: &'a LoadedStudy, s: &'a Session) -> Option<(&'a str, bool)> {
    study.study.world.alarm.as_ref()?;
    alarm_with(study, s, &vars(study, s))
}

/// [`alarm`] with the condition variables already built ([`vars`] of the same session).
pub fn alarm_with<'a>(
    study: &'a LoadedStudy,
    s: &'a Session,
    vars: &Vars<'_>,
) -> Option<(&'a str, bool)> {
    let a = study.study.world.alarm.as_ref()?;
    let at = match s.world.get(&a.at) {
        Some(v) => v.as_str()?,
        None => a.at.as_str(),
    };
    let cleared = s.goal_met_with(study, vars)
        || study
            .compiled
            .alarm_cleared
            .as_ref()
            .is_some_and(|c| c.holds(vars));
    Some((at, cleared))
}

#[cfg(test)]
mod key_tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_action_table_key_follows_what_the_guards_read_and_nothing_else() {
        let study = match crate::load::load_builtin("offshore-emergency") {
            Ok(s) => s,
            Err(e) => panic!("{e:?}"),
        };
        let names = action_guard_variables(&study);
        assert!(names.iter().any(|n| n == "fire_inspected"), "{names:?}");
        let mut s = Session::new(&study, "t");
        Arc::make_mut(&mut s.world).insert("fire_inspected".into(), serde_json::Value::Bool(false));
        let key = |s: &Session| action_table_key(&study, s, &names);
        let start = key(&s);
        assert!(start.is_some());

        // What no guard reads leaves the key (and so a kept table) as it is.
        let mut chatted = s.clone();
        chatted.messages += 3;
        Arc::make_mut(&mut chatted.world)
            .insert("unread_by_guards".into(), serde_json::Value::Bool(true));
        assert_eq!(key(&chatted), start);

        // A variable a guard reads, a robot's place or battery, and the start change it.
        let mut inspected = s.clone();
        Arc::make_mut(&mut inspected.world)
            .insert("fire_inspected".into(), serde_json::Value::Bool(true));
        assert_ne!(key(&inspected), start);
        let mut moved = s.clone();
        moved.robots[0].location = "base_elsewhere".into();
        assert_ne!(key(&moved), start);
        let mut drained = s.clone();
        drained.robots[0].battery -= 0.5;
        assert_ne!(key(&drained), start);
        let mut started = s.clone();
        started.started = !s.started;
        assert_ne!(key(&started), start);

        // A name the key cannot cover (the wizard's database rows, a variable the session does
        // not hold) means no key at all.
        assert_eq!(action_table_key(&study, &s, &["db".to_string()]), None);
        assert_eq!(
            action_table_key(&study, &s, &["no_such_var".to_string()]),
            None
        );
    }
}

#[cfg(test)]
mod pruned_vars_tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::expr::json_to_cel;
    use crate::sim::{WizardPolicy, play};

    /// `study` as loaded before its conditions' reads, templates and transitions were analysed:
    /// every variable built, every template parsed when rendered, every target looked up.
    fn unanalysed(study: &LoadedStudy) -> LoadedStudy {
        let mut old = study.clone();
        old.compiled.reads = None;
        old.compiled.templates = crate::slots::Templates::default();
        old.compiled.transition_to = vec![];
        old
    }

    fn cel_str(s: &str) -> Value {
        Value::String(Arc::new(s.to_string()))
    }

    fn robot_cel(def: &crate::model::Robot, r: &crate::engine::RobotState) -> Value {
        let m: HashMap<String, Value> = [
            ("id", cel_str(&def.id)),
            ("kind", cel_str(&def.kind)),
            ("location", cel_str(&r.location)),
            ("busy", Value::Bool(r.activity.is_some())),
            ("in_service", Value::Bool(r.in_service)),
            ("battery", Value::Float(r.battery)),
            (
                "capabilities",
                Value::List(Arc::new(
                    def.capabilities.iter().map(|c| cel_str(c)).collect(),
                )),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Value::Map(m.into())
    }

    /// Every variable, each converted through a [`Value`] as bound before the variables were
    /// built straight in CEL's evaluation form and pruned: the reference.
    fn reference_vars(study: &LoadedStudy, s: &Session) -> Vars<'static> {
        let mut v = Vars::default();
        for (k, val) in s.world.iter() {
            v.set(k, json_to_cel(val));
        }
        v.set("subtask", cel_str(s.subtask.as_deref().unwrap_or("")));
        v.set("state", cel_str(&study.study.states[s.current].id));
        v.set("messages", Value::Int(i64::from(s.messages)));
        let elapsed = s.now_ms.saturating_sub(s.started_at_ms) / 1000;
        v.set("elapsed", Value::Int(elapsed as i64));
        v.set(
            "time_left",
            Value::Int(s.time_left_s(study).unwrap_or(0) as i64),
        );
        v.set(
            "milestones",
            Value::List(Arc::new(s.milestones.iter().map(|m| cel_str(m)).collect())),
        );
        v.set("busy_robots", Value::Int(s.busy_robots() as i64));
        let robots: HashMap<String, Value> = study
            .study
            .world
            .robots
            .iter()
            .zip(&s.robots)
            .map(|(def, r)| (def.id.clone(), robot_cel(def, r)))
            .collect();
        v.set("robots", Value::Map(robots.into()));
        if study.database.is_some() || !s.db_selected.is_empty() {
            let tables: HashMap<String, Value> = s
                .db_selected
                .iter()
                .map(|(table, row)| {
                    let m: HashMap<String, Value> = row
                        .iter()
                        .map(|(k, v)| (k.clone(), json_to_cel(v)))
                        .collect();
                    (table.clone(), Value::Map(m.into()))
                })
                .collect();
            v.set("db", Value::Map(tables.into()));
        }
        v
    }

    /// Every action guard evaluated as [`action_table`] does, with the reference variables.
    fn reference_guards(study: &LoadedStudy, s: &Session) -> Vec<bool> {
        let base = reference_vars(study, s);
        let st = &study.study;
        let mut out = vec![];
        for g in study.compiled.action_guard.iter().flatten() {
            for (def, r) in st.world.robots.iter().zip(&s.robots) {
                let mut rv = base.scope();
                rv.set("robot", robot_cel(def, r));
                for t in st.world.locations.iter().map(|l| l.id.as_str()).chain([""]) {
                    let mut v = rv.scope();
                    v.set("target", cel_str(t));
                    out.push(g.holds(&v));
                }
            }
        }
        out
    }

    /// [`reference_guards`] with the engine's variables.
    fn guards(study: &LoadedStudy, s: &Session) -> Vec<bool> {
        let base = vars(study, s);
        let mut out = vec![];
        for g in study.compiled.action_guard.iter().flatten() {
            for ri in 0..study.study.world.robots.len() {
                let rv = robot_scope(study, s, &base, ri);
                let targets = study.study.world.locations.iter().map(|l| l.id.as_str());
                for t in targets.chain([""]) {
                    let mut v = rv.scope();
                    v.set_val("target", val_str(t));
                    out.push(g.holds(&v));
                }
            }
        }
        out
    }

    /// Expressions that read every variable, field by field, as plain values.
    fn probes(study: &LoadedStudy, s: &Session) -> Vec<String> {
        let mut p: Vec<String> = [
            "subtask",
            "state",
            "messages",
            "elapsed",
            "time_left",
            "milestones",
            "busy_robots",
            "size(robots)",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        p.extend(s.world.keys().map(|k| format!("[{k}]")));
        for r in &study.study.world.robots {
            for f in [
                "id",
                "kind",
                "location",
                "busy",
                "in_service",
                "battery",
                "capabilities",
            ] {
                p.push(format!("robots['{}'].{f}", r.id));
            }
        }
        for (table, row) in &s.db_selected {
            p.push(format!("size(db['{table}'])"));
            p.extend(row.keys().map(|c| format!("[db['{table}']['{c}']]")));
        }
        p
    }

    /// Everything the engine derives from the condition variables and the templates, for `s`.
    fn compare(study: &LoadedStudy, old: &LoadedStudy, s: &Session, at: &str) -> usize {
        let (new_vars, old_vars) = (vars(study, s), reference_vars(old, s));
        let mut checked = 0;
        let (all, reference) = (build_vars(study, s, |_| true, None), reference_vars(old, s));
        for src in probes(study, s) {
            let c = crate::expr::Condition::compile(&src).expect("a probe compiles");
            assert_eq!(c.evaluate(&all), c.evaluate(&reference), "{at}: `{src}`");
        }
        for c in study.compiled.conditions() {
            assert_eq!(
                c.evaluate(&new_vars),
                c.evaluate(&old_vars),
                "{at}: `{}`",
                c.source
            );
            checked += 1;
        }
        assert_eq!(guards(study, s), reference_guards(old, s), "{at}");
        assert_eq!(offered(study, s), offered(old, s), "{at}");
        assert_eq!(
            offered_with(study, s, &new_vars),
            offered_with(old, s, &old_vars),
            "{at}"
        );
        assert_eq!(action_table(study, s), action_table(old, s), "{at}");
        assert_eq!(finish_allowed(study, s), finish_allowed(old, s), "{at}");
        assert_eq!(goal_reached(study, s), goal_reached(old, s), "{at}");
        assert_eq!(alarm(study, s), alarm(old, s), "{at}");
        assert_eq!(
            finish_allowed_with(study, s, &new_vars),
            finish_allowed_with(old, s, &old_vars),
            "{at}"
        );
        assert_eq!(
            goal_reached_with(study, &new_vars),
            goal_reached_with(old, &old_vars),
            "{at}"
        );
        assert_eq!(
            alarm_with(study, s, &new_vars),
            alarm_with(old, s, &old_vars),
            "{at}"
        );
        assert_eq!(
            action_table_with(study, s, &new_vars),
            action_table_with(old, s, &old_vars),
            "{at}"
        );
        let st = &study.study;
        let texts = st
            .states
            .iter()
            .flat_map(|d| {
                d.templates
                    .iter()
                    .chain(d.lock.as_ref().and_then(|l| l.prompt.as_ref()))
            })
            .chain(st.fixed_options.iter().map(|f| &f.text))
            .map(String::as_str)
            .chain([
                "{time_left} left, {elapsed} s, {robot.name} {{x}}",
                "bad {slot",
            ]);
        for t in texts {
            assert_eq!(render(study, s, t), render(old, s, t), "{at}: {t}");
            assert_eq!(
                render_clock_parts(study, s, t),
                render_clock_parts(old, s, t),
                "{at}: {t}"
            );
            checked += 1;
        }
        for i in 0..st.states.len() {
            assert_eq!(render_state(study, s, i), render_state(old, s, i), "{at}");
        }
        checked
    }

    /// Every built-in study with a dialogue (evaluation studies have none to play).
    fn dialogue_studies() -> Vec<(String, LoadedStudy)> {
        crate::load::builtin_names()
            .into_iter()
            .map(|name| match crate::load::load_builtin(&name) {
                Ok(s) => (name, s),
                Err(e) => panic!("{name}: {e:?}"),
            })
            .filter(|(_, s)| !s.study.states.is_empty())
            .collect()
    }

    /// Plays a random session of `study` and calls `each` with the session before its first
    /// event (`None`) and after every event (its index).
    fn each_state(
        study: &LoadedStudy,
        seed: u64,
        policy: WizardPolicy,
        mut each: impl FnMut(Option<usize>, &Session),
    ) {
        let played = play(study, seed, policy);
        let mut s = Session::new(study, &played.session.id);
        each(None, &s);
        for (i, (actor, kind, now)) in played.events.iter().enumerate() {
            super::super::apply(study, &mut s, actor, kind, *now);
            each(Some(i), &s);
        }
    }

    #[test]
    fn pruned_variables_and_parsed_templates_give_what_the_full_ones_give() {
        let mut checked = 0;
        let mut pruned = 0;
        for (name, study) in dialogue_studies() {
            let old = unanalysed(&study);
            let reads = study.compiled.reads.as_ref().expect("the loader analyses");
            pruned += study
                .study
                .world
                .variables
                .keys()
                .filter(|k| !reads.reads(k))
                .count();
            for (seed, policy) in (0..6).map(|i| {
                let p = [WizardPolicy::Priors, WizardPolicy::Uniform][i as usize % 2];
                (i, p)
            }) {
                each_state(&study, seed, policy, |i, s| {
                    let at = match i {
                        None => format!("{name} seed {seed} start"),
                        Some(i) => format!("{name} seed {seed} event {i}"),
                    };
                    checked += compare(&study, &old, s, &at);
                });
            }
        }
        assert!(checked > 1000, "{checked}");
        // The built-in studies have world variables no condition reads: the pruning is real.
        assert!(pruned > 0);
    }

    /// `offer_of` (what a `say` is checked against) is `offered` filtered to one state, for
    /// every state of every built-in study after every event of random sessions.
    #[test]
    fn the_offer_of_a_state_is_that_state_among_the_offers() {
        let mut offered_seen = 0;
        for (name, study) in dialogue_studies() {
            for seed in 0..3 {
                each_state(&study, seed, WizardPolicy::Uniform, |i, s| {
                    let Some(i) = i else { return };
                    let all = offered(&study, s);
                    offered_seen += all.len();
                    for def in &study.study.states {
                        let expected = all.iter().find(|o| o.state == def.id);
                        assert_eq!(
                            offer_of(&study, s, &def.id).as_ref(),
                            expected,
                            "{name} seed {seed} event {i} state {}",
                            def.id
                        );
                    }
                    assert_eq!(offer_of(&study, s, "no-such-state"), None);
                });
            }
        }
        assert!(offered_seen > 100, "{offered_seen}");
    }

    #[test]
    fn a_variable_counts_as_read_by_the_root_of_what_an_expression_names() {
        let conds: Vec<crate::expr::Condition> = [
            "a.b.c == 1",
            "has(db.restaurant)",
            "robots.exists(r, r.busy) && .absolute",
        ]
        .iter()
        .map(|s| crate::expr::Condition::compile(s).expect("compiles"))
        .collect();
        let reads = crate::expr::Reads::of(&conds);
        for name in ["a", "a.b", "a.b.c", "db", "robots", "absolute", ".absolute"] {
            assert!(reads.reads(name), "{name}");
        }
        for name in ["b", "c", "restaurant", "busy", "messages", "ab"] {
            assert!(!reads.reads(name), "{name}");
        }
    }

    fn reads_of(sources: &[&str]) -> crate::expr::Reads {
        let conds: Vec<crate::expr::Condition> = sources
            .iter()
            .map(|s| crate::expr::Condition::compile(s).expect("compiles"))
            .collect();
        crate::expr::Reads::of(&conds)
    }

    #[test]
    fn robot_fields_are_pruned_only_when_every_use_selects_a_field() {
        let r = reads_of(&[
            "robots.hsk1.busy && robots.hsk2.location == 'x'",
            "has(robots.qdc1.in_service) && robot.capabilities.exists(c, c == 'cam')",
            "robot.battery > 3.0",
        ]);
        let owned = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            r.robots_fields(),
            Some(&owned(&["busy", "in_service", "location"])[..])
        );
        assert_eq!(
            r.robot_fields(),
            Some(&owned(&["battery", "capabilities"])[..])
        );
        assert_eq!(reads_of(&["messages > 1"]).robots_fields(), Some(&[][..]));
        for whole in [
            "size(robots) > 0",
            "has(robots.hsk1)",
            "robots.exists(r, robots[r].busy)",
            "robots.hsk1 == robots.hsk2",
            "robots['hsk1'].busy",
            ".robots.hsk1 != null",
        ] {
            assert_eq!(reads_of(&[whole]).robots_fields(), None, "{whole}");
        }
        for whole in ["robot == null", "robot['battery'] > 1.0", "size(robot) > 0"] {
            assert_eq!(reads_of(&[whole]).robot_fields(), None, "{whole}");
        }
        // The demo study reads two fields of its robots: the others are not built.
        let study = crate::load::load_builtin("offshore-emergency").expect("loads");
        let fields = study
            .compiled
            .reads
            .as_ref()
            .and_then(|r| r.robots_fields());
        assert!(
            fields.is_some_and(|f| f.len() < ROBOT_FIELDS.len()),
            "{fields:?}"
        );
    }
}
