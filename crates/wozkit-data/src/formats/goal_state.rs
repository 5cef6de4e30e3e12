//! A live session's user goal (`goal_generated`) and per-turn goal and belief states
//! (`turn_state`) as the CrossWOZ, MultiWOZ 2.1 and ConvLab-3 exports write them (see *User
//! goals* in `docs/engine-semantics.md` for how the states are derived):
//!
//! - CrossWOZ: `goal` (the generated entries, nothing satisfied) and `final_goal` (the user state
//!   after the last message) as `[subgoal, domain, slot, value, satisfied]` tuples, the goal's
//!   sentences in `task description`, `type` from the sub-goals (`单领域`, `独立多领域`, or
//!   `不独立多领域` when a sub-goal refers to another); per user turn `user_state`; per system turn
//!   `sys_state` and `sys_state_init` (the five CrossWOZ domains with their slots, the study's
//!   other domains and searched columns added, `selectedResults` last).
//! - MultiWOZ 2.1: `goal.<domain>` `{info, reqt}` per sub-goal, per system turn `metadata`
//!   `{<domain>: {book: {booked: []}, semi: {slot: value}}}`.
//! - ConvLab-3: `goal.inform` / `goal.request` by domain, `domains`, per user turn `state`
//!   (`{domain: {slot: value}}`) and `user_state` (ConvLab-3's CrossWOZ form: `{domain: {inform:
//!   {slot: [value, "mentioned"|"not mentioned"]}, request: {slot: [value, ...]}}}`), per system
//!   turn `db_results` (`{domain: [selected names]}`).
//!
//! The dialogue acts of a turn are derived once ([`turn_acts`]): an `Inform` per goal entry the
//! turn satisfied (the user's constraints, the wizard's requested values), a `Request` per
//! requested slot a user message names, and a wizard act labelled `recommend…` or `no_offer`
//! becomes `Recommend` (domain, key column, name of the last selected row) or `NoOffer` (domain
//! of the last searched table) in place of the general act of the label. Each export writes them
//! in its shape: CrossWOZ `["Recommend", domain, column, name]`, `["NoOffer", domain, "none",
//! "none"]`, `["Request", domain, slot, ""]`; MultiWOZ `{"Domain-Recommend": [["Column",
//! name]], "Domain-NoOffer": [["none", "none"]], "Domain-Request": [["Slot", "?"]]}` (domain
//! and slot capitalised); ConvLab-3 non-categorical `{intent: "inform"|"recommend", domain,
//! slot, value}` and binary `{intent: "nooffer", domain, slot: ""}`, `{intent: "request",
//! domain, slot}`.
//!
//! A session without a goal is written as before. A record imported from one of these files
//! keeps its fields as they were read, so a re-export is identical.

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::datasets::ActMapping;
use wozkit_core::event::{EventKind, MessageSource, Role};
use wozkit_core::goals::{Belief, EntryKind, Goal, GoalEntry};

use super::record::{Fields, wizard_label};
use super::vocab;
use crate::mapping::{self, MappedAct};
use crate::session::{ImportedSession, Turn};

/// The session's goal and its sentences, from its `goal_generated` event.
pub(crate) fn logged_goal(session: &ImportedSession) -> Option<(&Goal, &[String])> {
    session.events.iter().find_map(|e| match &e.kind {
        EventKind::GoalGenerated {
            goal, description, ..
        } => Some((goal, description.as_slice())),
        _ => None,
    })
}

/// The goal state logged after one message.
pub(crate) struct State<'a> {
    pub user_state: &'a [GoalEntry],
    pub sys_state: &'a Belief,
    pub sys_state_init: &'a Belief,
}

/// The `turn_state` after each message, in message order (none where a message has none).
fn states(session: &ImportedSession) -> Vec<Option<State<'_>>> {
    let mut out: Vec<Option<State<'_>>> = vec![];
    for e in &session.events {
        match &e.kind {
            EventKind::Message { .. } => out.push(None),
            EventKind::TurnState {
                user_state,
                sys_state,
                sys_state_init,
                ..
            } => {
                if let Some(last) = out.last_mut() {
                    *last = Some(State {
                        user_state,
                        sys_state,
                        sys_state_init,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// The index among the session's messages of an exported turn (it borrows the event).
fn message_index(session: &ImportedSession, turn: &Turn<'_>) -> Option<usize> {
    session
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Message { source, .. } => Some(source),
            _ => None,
        })
        .position(|s: &MessageSource| std::ptr::eq(s, turn.source))
}

/// The state after `turn` and the one before it (the previous message's; none for the first).
fn around<'a>(
    session: &'a ImportedSession,
    turn: Option<&Turn<'_>>,
) -> Option<(State<'a>, Option<&'a [GoalEntry]>)> {
    let i = message_index(session, turn?)?;
    let mut all = states(session);
    let before = i
        .checked_sub(1)
        .and_then(|j| all.get(j))
        .and_then(|s| s.as_ref().map(|s| s.user_state));
    let now = all.get_mut(i)?.take()?;
    Some((now, before))
}

/// The entries `now` satisfies that `before` did not (all satisfied ones when there is no
/// `before`).
fn newly<'a>(now: &'a [GoalEntry], before: Option<&[GoalEntry]>) -> Vec<&'a GoalEntry> {
    now.iter()
        .enumerate()
        .filter(|(i, e)| {
            e.satisfied && !before.and_then(|b| b.get(*i)).is_some_and(|b| b.satisfied)
        })
        .map(|(_, e)| e)
        .collect()
}

/// The entries as CrossWOZ tuples `[subgoal, domain, slot, value, satisfied]`.
fn tuples(entries: &[GoalEntry]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|e| json!([e.subgoal, e.domain, e.slot, e.value, e.satisfied]))
            .collect(),
    )
}

/// The CrossWOZ goal type: one sub-goal, several independent ones, or several referring to each
/// other.
fn goal_type(goal: &Goal) -> &'static str {
    let refers = goal
        .subgoals
        .iter()
        .any(|sg| sg.constraints.iter().any(|c| c.reference.is_some()));
    match (goal.subgoals.len(), refers) {
        (0 | 1, _) => "单领域",
        (_, false) => "独立多领域",
        (_, true) => "不独立多领域",
    }
}

/// The CrossWOZ record fields of a session with a goal: `goal`, `final_goal`, `task
/// description` (the goal's sentences before the lines already there) and `type`.
pub(crate) fn crosswoz_record(session: &ImportedSession, record: &mut Fields) {
    let Some((goal, description)) = logged_goal(session) else {
        return;
    };
    let initial = wozkit_core::goals::entries(goal);
    let last = states(session)
        .into_iter()
        .rev()
        .flatten()
        .next()
        .map_or_else(|| initial.clone(), |s| s.user_state.to_vec());
    record.insert("goal".into(), tuples(&initial));
    record.insert("final_goal".into(), tuples(&last));
    let mut lines: Vec<Value> = description.iter().map(|l| json!(l)).collect();
    if let Some(Value::Array(before)) = record.get("task description") {
        lines.extend(before.iter().cloned());
    }
    record.insert("task description".into(), json!(lines));
    record.insert("type".into(), json!(goal_type(goal)));
}

/// What a derived act does, in no dataset's spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Intent {
    /// A constraint the user stated or a requested value the wizard gave.
    Inform,
    /// The wizard offered the row selected last.
    Recommend,
    /// The wizard found nothing in the table searched last.
    NoOffer,
    /// The user asked for a requested slot still open.
    Request,
}

/// One act derived from a goal session's log, before any format writes it: `slot` and `value`
/// are empty where the act has none (`NoOffer`; a `Request` has no value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Act {
    pub intent: Intent,
    pub domain: String,
    pub slot: String,
    pub value: String,
}

/// The acts derived for one turn of a goal session, written by the CrossWOZ, MultiWOZ and
/// ConvLab-3 exports in their own shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TurnActs {
    /// What the wizard's labelled act became (`Recommend` or `NoOffer`); it replaces the general
    /// act the format writes for the label. None when the label is no such intent or nothing
    /// was selected or searched before the message.
    pub label: Option<Act>,
    /// `Inform` acts for the goal entries the turn satisfied (the user's constraints, the
    /// wizard's requested values), then the user's `Request` acts.
    pub acts: Vec<Act>,
}

/// The acts of a turn that may hold several messages (see `Shape` in `record.rs`): each
/// message's derived acts (its label act and its other acts, in message order), over the state
/// before and after that message; a turn of one message gets [`turn_acts`] with `now` and
/// `before`.
fn merged_turn_acts(
    session: &ImportedSession,
    role: Role,
    turn: &Turn<'_>,
    now: &[GoalEntry],
    before: Option<&[GoalEntry]>,
    map: Option<&ActMapping>,
) -> TurnActs {
    if turn.messages.len() < 2 {
        return turn_acts(session, role, turn, now, before, map);
    }
    let all = session.turns();
    let mut out = TurnActs::default();
    for m in &turn.messages {
        let Some(single) = all.get(*m) else {
            continue;
        };
        let Some((now, before)) = around(session, Some(single)) else {
            continue;
        };
        let derived = turn_acts(session, role, single, now.user_state, before, map);
        out.acts.extend(derived.label);
        out.acts.extend(derived.acts);
    }
    out
}

/// The acts of a turn derived from the session's goal states (`now` after the turn, `before`
/// after the previous message), selections and searches (see [`TurnActs`]): the one
/// derivation the three exports write, each in its shape. Domains and slots are named as `map`
/// maps them; a label the mapping maps gets its mapped acts (see [`crate::mapping`]) instead of
/// a derived one.
fn turn_acts(
    session: &ImportedSession,
    role: Role,
    turn: &Turn<'_>,
    now: &[GoalEntry],
    before: Option<&[GoalEntry]>,
    map: Option<&ActMapping>,
) -> TurnActs {
    let mut out = TurnActs::default();
    for e in newly(now, before) {
        let ours = matches!(
            (role, e.kind),
            (Role::User, EntryKind::Constraint) | (Role::Wizard, EntryKind::Request)
        );
        if ours {
            out.acts.push(Act {
                intent: Intent::Inform,
                domain: e.domain.clone(),
                slot: e.slot.clone(),
                value: e.value.clone(),
            });
        }
    }
    match role {
        Role::Wizard if map.is_some_and(|m| mapping::is_mapped(turn.source, m)) => {}
        Role::Wizard => out.label = labelled_act(session, turn),
        // A user message never informs a request, so the state after it tells what was open.
        Role::User => out.acts.extend(user_requests(&turn.text, now)),
    }
    for a in out.label.iter_mut().chain(out.acts.iter_mut()) {
        a.domain = mapping::domain(map, &a.domain).to_string();
        a.slot = mapping::slot(map, &a.slot).to_string();
    }
    out
}

/// A belief state with its domains and slots named as `map` maps them.
fn mapped_belief(belief: &Belief, map: Option<&ActMapping>) -> Belief {
    belief
        .iter()
        .map(|(d, b)| {
            let mut b = b.clone();
            b.constraints = b
                .constraints
                .iter()
                .map(|(s, v)| (mapping::slot(map, s).to_string(), v.clone()))
                .collect();
            (mapping::domain(map, d).to_string(), b)
        })
        .collect()
}

/// Adds a turn's goal fields to its CrossWOZ fields: the derived acts (see [`TurnActs`]) as
/// `[intent, domain, slot, value]`, and the user state (user turns) or the belief states over
/// `empty` (system turns).
pub(crate) fn crosswoz_turn(
    session: &ImportedSession,
    role: Role,
    turn: Option<&Turn<'_>>,
    fields: &mut Fields,
    empty: &Value,
    map: Option<&ActMapping>,
) {
    let Some((now, before)) = around(session, turn) else {
        return;
    };
    if let Some(turn) = turn
        && let Some(Value::Array(acts)) = fields.get_mut("dialog_act")
    {
        let derived = merged_turn_acts(session, role, turn, now.user_state, before, map);
        acts.extend(
            derived
                .label
                .iter()
                .chain(&derived.acts)
                .filter(|a| vocab::is_crosswoz_act(crosswoz_intent(a), &a.domain))
                .map(crosswoz_act),
        );
    }
    match role {
        Role::User => {
            fields.insert("user_state".into(), tuples(now.user_state));
        }
        Role::Wizard => {
            let (sys, init) = (
                mapped_belief(now.sys_state, map),
                mapped_belief(now.sys_state_init, map),
            );
            fields.insert("sys_state".into(), crosswoz_belief(&sys, empty));
            fields.insert("sys_state_init".into(), crosswoz_belief(&init, empty));
        }
    }
}

/// The intent an act has in CrossWOZ.
fn crosswoz_intent(a: &Act) -> &'static str {
    match a.intent {
        Intent::Inform => "Inform",
        Intent::Recommend => "Recommend",
        Intent::NoOffer => "NoOffer",
        Intent::Request => "Request",
    }
}

/// An act as CrossWOZ writes it: `["Inform", domain, slot, value]`, `["Recommend", domain, key
/// column, name]`, `["NoOffer", domain, "none", "none"]`, `["Request", domain, slot, ""]`.
fn crosswoz_act(a: &Act) -> Value {
    match a.intent {
        Intent::Inform => json!(["Inform", a.domain, a.slot, a.value]),
        Intent::Recommend => json!(["Recommend", a.domain, a.slot, a.value]),
        Intent::NoOffer => json!(["NoOffer", a.domain, "none", "none"]),
        Intent::Request => json!(["Request", a.domain, a.slot, ""]),
    }
}

/// The user's `Request` acts: one for each requested slot of the goal that the message names
/// (its column name, case aside) and that was not yet informed before it; a slot requested by
/// several sub-goals goes to the first of them still open.
fn user_requests(text: &str, entries: &[GoalEntry]) -> Vec<Act> {
    let lower = text.to_lowercase();
    let mut seen: Vec<&str> = vec![];
    let mut out = vec![];
    for e in entries {
        if e.kind != EntryKind::Request || e.satisfied || seen.contains(&e.slot.as_str()) {
            continue;
        }
        if !e.slot.trim().is_empty() && lower.contains(&e.slot.to_lowercase()) {
            seen.push(&e.slot);
            out.push(Act {
                intent: Intent::Request,
                domain: e.domain.clone(),
                slot: e.slot.clone(),
                value: String::new(),
            });
        }
    }
    out
}

/// The wizard's act label as a dataset intent, by its first word (`recommend_restaurant`,
/// `no_offer`, `NoOffer`): `Recommend` or `NoOffer`; None for any other label.
fn intent(label: &str) -> Option<Intent> {
    let plain: String = label
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    if plain.starts_with("recommend") {
        Some(Intent::Recommend)
    } else if plain.starts_with("nooffer") {
        Some(Intent::NoOffer)
    } else {
        None
    }
}

/// What a wizard turn's act label becomes when it is a dataset intent (see [`intent`]):
/// `Recommend` of the domain, key column and name of the row the wizard selected last before the
/// message, `NoOffer` of the table searched last. The domain is the goal's label of the table
/// (the table's name when no sub-goal is on it). None without such a selection or search.
fn labelled_act(session: &ImportedSession, turn: &Turn<'_>) -> Option<Act> {
    let label = wizard_label(Some(turn))?;
    let intent = intent(label)?;
    let mut selected: Option<(&str, &str, &wozkit_core::database::Row)> = None;
    let mut searched: Option<&str> = None;
    for e in &session.events {
        match &e.kind {
            EventKind::Message { source, .. } if std::ptr::eq(source, turn.source) => break,
            EventKind::DbSelected { table, key, row } => selected = Some((table, key, row)),
            EventKind::DbQueried { table, .. } => searched = Some(table),
            _ => {}
        }
    }
    let domain = |table: &str| -> String {
        logged_goal(session)
            .and_then(|(g, _)| g.subgoals.iter().find(|sg| sg.table == table))
            .map_or_else(|| table.to_string(), |sg| sg.domain.clone())
    };
    match intent {
        Intent::Recommend => selected.map(|(table, key, row)| {
            let column = row
                .iter()
                .find(|(_, v)| wozkit_core::database::value_text(v) == key)
                .map_or("none", |(c, _)| c.as_str());
            Act {
                intent,
                domain: domain(table),
                slot: column.to_string(),
                value: key.to_string(),
            }
        }),
        Intent::NoOffer => searched.map(|table| Act {
            intent,
            domain: domain(table),
            slot: String::new(),
            value: String::new(),
        }),
        Intent::Inform | Intent::Request => None,
    }
}

/// A belief state over CrossWOZ's empty state: each domain's slots set from the search's
/// constraints (a column the domain lacks is added before `selectedResults`), a domain the five
/// lack added with its searched columns.
fn crosswoz_belief(belief: &Belief, empty: &Value) -> Value {
    let mut state = empty.as_object().cloned().unwrap_or_default();
    for (domain, b) in belief {
        let (Some(Value::Object(o)), Some(known)) =
            (state.get(domain), vocab::crosswoz_slots(domain))
        else {
            continue;
        };
        let mut slots = o.clone();
        slots.shift_remove("selectedResults");
        for (slot, value) in &b.constraints {
            if known.contains(&slot.as_str()) {
                slots.insert(slot.clone(), json!(value));
            }
        }
        slots.insert("selectedResults".into(), json!(b.selected_results));
        state.insert(domain.clone(), Value::Object(slots));
    }
    Value::Object(state)
}

/// The MultiWOZ goal domains of a session with a goal: `{info, reqt}` per sub-goal's domain
/// (an `info` value is the constraint's value).
pub(crate) fn multiwoz_goal(
    session: &ImportedSession,
    goal_fields: &mut Fields,
    map: Option<&ActMapping>,
) {
    let Some((goal, _)) = logged_goal(session) else {
        return;
    };
    for sg in &goal.subgoals {
        let domain = mapping::domain(map, &sg.domain);
        if !vocab::MULTIWOZ_DOMAINS.iter().any(|(d, _, _)| *d == domain) {
            continue;
        }
        let info: Fields = sg
            .constraints
            .iter()
            .map(|c| (mapping::slot(map, &c.slot).to_string(), json!(c.value)))
            .collect();
        let reqt: Vec<&str> = sg
            .requests
            .iter()
            .map(|r| mapping::slot(map, &r.slot))
            .collect();
        goal_fields.insert(domain.to_string(), json!({"info": info, "reqt": reqt}));
    }
}

/// Adds a turn's goal fields to its MultiWOZ fields: the derived acts (see [`TurnActs`]) in
/// `dialog_act`, and on system turns the belief state as `metadata`.
pub(crate) fn multiwoz_turn(
    session: &ImportedSession,
    role: Role,
    turn: Option<&Turn<'_>>,
    fields: &mut Fields,
    map: Option<&ActMapping>,
) {
    let Some((now, before)) = around(session, turn) else {
        return;
    };
    if let Some(turn) = turn
        && let Some(Value::Object(acts)) = fields.get_mut("dialog_act")
    {
        let derived = merged_turn_acts(session, role, turn, now.user_state, before, map);
        for act in derived.label.iter().chain(&derived.acts) {
            let (name, pair) = multiwoz_act(act);
            let slot = pair.get(0).and_then(Value::as_str).unwrap_or_default();
            if !vocab::is_multiwoz_act(&name, slot) {
                continue;
            }
            if let Value::Array(pairs) = acts.entry(name).or_insert_with(|| json!([])) {
                pairs.push(pair);
            }
        }
    }
    if role == Role::Wizard {
        let belief = mapped_belief(now.sys_state, map);
        fields.insert("metadata".into(), multiwoz_belief_metadata(&belief));
    }
}

/// The ConvLab-3 dialogue fields of a session with a goal: `domains`, and `goal.inform` /
/// `goal.request` by domain (the description is the goal's sentences before the one already
/// there).
pub(crate) fn convlab3_record(session: &ImportedSession, record: &mut Fields) {
    let Some((goal, description)) = logged_goal(session) else {
        return;
    };
    let mut inform: IndexMap<String, Fields> = IndexMap::new();
    let mut request: IndexMap<String, Fields> = IndexMap::new();
    for sg in &goal.subgoals {
        let i = inform.entry(sg.domain.clone()).or_default();
        for c in &sg.constraints {
            i.insert(c.slot.clone(), json!(c.value));
        }
        let r = request.entry(sg.domain.clone()).or_default();
        for q in &sg.requests {
            r.insert(q.slot.clone(), json!(""));
        }
    }
    let domains: Vec<&str> = goal.subgoals.iter().map(|sg| sg.domain.as_str()).collect();
    let scenario = record
        .get("goal")
        .and_then(|g| g.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut text = description.join(" ");
    if !scenario.is_empty() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&scenario);
    }
    record.insert("domains".into(), json!(domains));
    record.insert(
        "goal".into(),
        json!({"description": text, "inform": inform, "request": request}),
    );
}

/// Adds a turn's goal fields to its ConvLab-3 fields: the derived acts (see [`TurnActs`]) in
/// `dialogue_acts`; on user turns the belief `state` and the `user_state`; on system turns
/// `db_results`.
pub(crate) fn convlab3_turn(
    session: &ImportedSession,
    role: Role,
    turn: Option<&Turn<'_>>,
    fields: &mut Fields,
    map: Option<&ActMapping>,
) {
    let Some((now, before)) = around(session, turn) else {
        return;
    };
    if let Some(turn) = turn
        && let Some(Value::Object(acts)) = fields.get_mut("dialogue_acts")
    {
        let derived = merged_turn_acts(session, role, turn, now.user_state, before, map);
        if let (Some(_), Some(label)) = (&derived.label, wizard_label(Some(turn)))
            && let Some(Value::Array(binary)) = acts.get_mut("binary")
        {
            // The derived act replaces the general act of the label.
            let general = json!({"intent": label, "domain": "general", "slot": ""});
            binary.retain(|a| *a != general);
        }
        for act in derived.label.iter().chain(&derived.acts) {
            let (kind, value) = convlab3_act(act);
            if let Some(Value::Array(list)) = acts.get_mut(kind) {
                list.push(value);
            }
        }
    }
    match role {
        Role::User => {
            let state: Fields = mapped_belief(now.sys_state, map)
                .iter()
                .map(|(d, b)| (d.clone(), json!(b.constraints)))
                .collect();
            fields.insert("state".into(), Value::Object(state));
            let mut user: IndexMap<String, IndexMap<&str, Fields>> = IndexMap::new();
            for e in now.user_state {
                let part = match e.kind {
                    EntryKind::Constraint => "inform",
                    EntryKind::Request => "request",
                };
                let said = if e.satisfied {
                    "mentioned"
                } else {
                    "not mentioned"
                };
                let d = user.entry(e.domain.clone()).or_default();
                d.entry("inform").or_default();
                d.entry("request").or_default();
                if let Some(slots) = d.get_mut(part) {
                    slots.insert(e.slot.clone(), json!([e.value, said]));
                }
            }
            fields.insert("user_state".into(), json!(user));
        }
        Role::Wizard => {
            let db: Fields = mapped_belief(now.sys_state, map)
                .iter()
                .map(|(d, b)| (d.clone(), json!(b.selected_results)))
                .collect();
            fields.insert("db_results".into(), Value::Object(db));
        }
    }
}

/// A name as MultiWOZ capitalises its domains and slots (`restaurant` is `Restaurant`).
fn capitalised(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// An act as MultiWOZ writes it: the `Domain-Intent` key (capitalised) and one `[Slot, value]`
/// pair under it: `[Slot, value]` for `Inform`, `[key column, name]` for `Recommend`,
/// `["none", "none"]` for `NoOffer`, `[Slot, "?"]` for `Request`.
fn multiwoz_act(a: &Act) -> (String, Value) {
    let domain = capitalised(&a.domain);
    let slot = capitalised(&a.slot);
    match a.intent {
        Intent::Inform => (format!("{domain}-Inform"), json!([slot, a.value])),
        Intent::Recommend => (format!("{domain}-Recommend"), json!([slot, a.value])),
        Intent::NoOffer => (format!("{domain}-NoOffer"), json!(["none", "none"])),
        Intent::Request => (format!("{domain}-Request"), json!([slot, "?"])),
    }
}

/// An act as ConvLab-3 writes it, with the list it goes in: `inform` and `recommend` with their
/// value are non-categorical `{intent, domain, slot, value}`; `nooffer` (`slot` empty) and
/// `request` are binary `{intent, domain, slot}`.
fn convlab3_act(a: &Act) -> (&'static str, Value) {
    let valued = |intent: &str| json!({"intent": intent, "domain": a.domain, "slot": a.slot, "value": a.value});
    match a.intent {
        Intent::Inform => ("non-categorical", valued("inform")),
        Intent::Recommend => ("non-categorical", valued("recommend")),
        Intent::NoOffer => (
            "binary",
            json!({"intent": "nooffer", "domain": a.domain, "slot": ""}),
        ),
        Intent::Request => (
            "binary",
            json!({"intent": "request", "domain": a.domain, "slot": a.slot}),
        ),
    }
}

/// The acts the study's mapping `map` gives a turn's messages (see [`mapping::mapped_acts`]);
/// none for an empty turn or a study without a mapping.
fn turn_mapped_acts(
    session: &ImportedSession,
    turn: Option<&Turn<'_>>,
    map: Option<&ActMapping>,
) -> Vec<MappedAct> {
    match (turn, map) {
        (Some(turn), Some(map)) => mapping::mapped_acts(session, &turn.messages, map),
        _ => Vec::new(),
    }
}

/// Adds the acts the study's mapping gives a turn's messages (see [`crate::mapping`]) to its
/// MultiWOZ `dialog_act`: `{"Domain-Intent": [[Slot, value]]}`, `["none", "none"]` for an act
/// without a slot, `?` for a request's value. Only MultiWOZ acts are written (the loader checks
/// the mapping; an act outside the vocabulary is never written).
pub(crate) fn multiwoz_mapped(
    session: &ImportedSession,
    turn: Option<&Turn<'_>>,
    map: Option<&ActMapping>,
    fields: &mut Fields,
) {
    let Some(Value::Object(acts)) = fields.get_mut("dialog_act") else {
        return;
    };
    for a in turn_mapped_acts(session, turn, map) {
        let name = format!("{}-{}", a.domain, a.intent);
        let slot = a.slot.as_deref().unwrap_or("none");
        let value = match (&a.value, a.slot.is_some(), a.intent.as_str()) {
            (Some(v), _, _) => v.as_str(),
            (None, true, "Request") => "?",
            _ => "none",
        };
        if !vocab::is_multiwoz_act(&name, slot) {
            continue;
        }
        let pair = json!([slot, value]);
        if let Value::Array(pairs) = acts.entry(name).or_insert_with(|| json!([]))
            && !pairs.contains(&pair)
        {
            pairs.push(pair);
        }
    }
}

/// Adds the mapped acts of a turn to its CrossWOZ `dialog_act`: `[intent, domain, slot,
/// value]`, a general act `["General", act, "none", "none"]`, `"none"` for a missing slot or
/// value (`""` for a request's), CrossWOZ's acts only.
pub(crate) fn crosswoz_mapped(
    session: &ImportedSession,
    turn: Option<&Turn<'_>>,
    map: Option<&ActMapping>,
    fields: &mut Fields,
) {
    let Some(Value::Array(acts)) = fields.get_mut("dialog_act") else {
        return;
    };
    for a in turn_mapped_acts(session, turn, map) {
        let (intent, domain) = if a.domain == "general" {
            ("General", a.intent.as_str())
        } else {
            (a.intent.as_str(), a.domain.as_str())
        };
        if !vocab::is_crosswoz_act(intent, domain) {
            continue;
        }
        let slot = a.slot.as_deref().unwrap_or("none");
        let value = match (&a.value, intent) {
            (Some(v), _) => v.as_str(),
            (None, "Request") => "",
            _ => "none",
        };
        let act = json!([intent, domain, slot, value]);
        if !acts.contains(&act) {
            acts.push(act);
        }
    }
}

/// Adds the mapped acts of a turn to its ConvLab-3 `dialogue_acts`: non-categorical `{intent,
/// domain, slot, value}` for an act with a slot and a value, binary `{intent, domain, slot}`
/// (`slot` `""` without one) otherwise.
pub(crate) fn convlab3_mapped(
    session: &ImportedSession,
    turn: Option<&Turn<'_>>,
    map: Option<&ActMapping>,
    fields: &mut Fields,
) {
    let Some(Value::Object(acts)) = fields.get_mut("dialogue_acts") else {
        return;
    };
    for a in turn_mapped_acts(session, turn, map) {
        if !wozkit_core::datasets::is_convlab3_act(&a.domain, &a.intent) {
            continue;
        }
        let (kind, act) = match (&a.slot, &a.value) {
            (Some(slot), Some(value)) => (
                "non-categorical",
                json!({"intent": a.intent, "domain": a.domain, "slot": slot, "value": value}),
            ),
            (slot, _) => (
                "binary",
                json!({"intent": a.intent, "domain": a.domain, "slot": slot.as_deref().unwrap_or("")}),
            ),
        };
        if let Some(Value::Array(list)) = acts.get_mut(kind)
            && !list.contains(&act)
        {
            list.push(act);
        }
    }
}

/// The wizard's searches up to a turn's last message (all of them for the empty turn closing a
/// dialogue) as a belief state: per table searched, the `equals` filters of its last search
/// (column → the value's text), named as `map` maps the table and columns. For the MultiWOZ
/// `metadata` of a mapped study's session without a user goal (a goal session's `turn_state`
/// replaces it).
pub(crate) fn searched_belief(
    session: &ImportedSession,
    turn: Option<&Turn<'_>>,
    map: &ActMapping,
) -> Belief {
    let mut belief = Belief::new();
    let last = turn.and_then(|t| t.messages.last().copied());
    let mut n = 0usize;
    for e in &session.events {
        match &e.kind {
            EventKind::Message { .. } if Some(n) == last => break,
            EventKind::Message { .. } => n += 1,
            EventKind::DbQueried { table, filters, .. } => {
                let b = belief
                    .entry(mapping::domain(Some(map), table).to_string())
                    .or_default();
                b.constraints = filters
                    .iter()
                    .filter_map(|f| match &f.op {
                        wozkit_core::database::FilterOp::Equals { value } => Some((
                            mapping::slot(Some(map), &f.column).to_string(),
                            wozkit_core::database::value_text(value),
                        )),
                        _ => None,
                    })
                    .collect();
            }
            _ => {}
        }
    }
    belief
}

/// The MultiWOZ `metadata` of a belief state named in MultiWOZ's domains and slots: its `semi`
/// slots set, every other slot `""`.
pub(crate) fn multiwoz_belief_metadata(belief: &Belief) -> Value {
    vocab::multiwoz_metadata(|domain, part, slot| {
        let b = belief.get(domain)?;
        (part == "semi")
            .then(|| b.constraints.get(slot).cloned())
            .flatten()
    })
}
