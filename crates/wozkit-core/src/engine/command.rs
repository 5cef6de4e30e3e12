//! Commands (intents from participants, bots and timers), the rules that refuse them, and the
//! decision of which events each one emits.

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use super::offer::{self, OfferKind};
use super::{MAX_TEXT_CHARS, Tx, after_secs, fresh_seed};
use crate::event::{Actor, EndReason, EventKind, LockRelease, MessageSource, Role};
use crate::model::{ClockStart, Effects, LockKind};

/// An intent. The browser sends only these; the engine checks each against state and role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Start the session (system).
    Start { seed: u64 },
    /// A participant or bot entered the room (system).
    Join {
        role: Role,
        #[serde(default)]
        bot: bool,
    },
    /// The wizard says an offered dialogue state.
    Say { state: String },
    /// The wizard says a fixed option.
    Fixed { id: String },
    /// Free text from either side.
    Text { text: String },
    /// The wizard starts a robot action.
    Act {
        action: String,
        robot: String,
        #[serde(default)]
        target: Option<String>,
    },
    /// The user approves the pending request.
    Approve,
    /// The user denies the pending request.
    Deny,
    /// The wizard asks for a hint.
    Hint,
    /// Either side ends the dialogue (when the study allows it).
    Finish,
    /// A participant's connection dropped (system).
    Disconnect { role: Role },
    /// A participant came back (system).
    Reconnect { role: Role },
    /// Fire the timers that are due (system).
    Tick,
    /// End the session without a partner (system).
    Abort { reason: EndReason },
    /// The wizard searches a table of the study's database; the rows found (at most
    /// [`crate::database::MAX_RESULTS`]) go to the wizard only.
    Query {
        table: String,
        #[serde(default)]
        filters: Vec<crate::database::Filter>,
    },
    /// The wizard selects a row (by its key) into the dialogue.
    Select { table: String, key: String },
}

/// Why a command was refused. The state is unchanged.
///
/// The Display text is shown to participants as it is (the action panel, error notices), so it
/// is plain text that names things by the study's labels (robot names, action labels), never by
/// internal ids or with Markdown; the ids a client sent stay in the serialised fields.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    #[error("the session has not started")]
    NotStarted,
    #[error("the session has already started")]
    AlreadyStarted,
    #[error("the session has ended")]
    Ended,
    #[error("only the {} side may do this", expected.as_str())]
    WrongRole { expected: Role },
    #[error("that option is not offered now")]
    NotOffered { state: String },
    #[error("unknown fixed option “{id}”")]
    UnknownFixed { id: String },
    #[error("unknown action “{id}”")]
    UnknownAction { id: String },
    #[error("unknown robot “{id}”")]
    UnknownRobot { id: String },
    #[error("unknown location “{id}”")]
    UnknownLocation { id: String },
    #[error("this action needs a target location")]
    TargetRequired,
    /// A target sent with an action that takes none: refused rather than stored, because a stored
    /// target would name the robot's place in messages and could move it anywhere.
    #[error("“{action}” takes no target location")]
    TargetNotTaken { action: String },
    /// The session's scenario put the robot out of service.
    #[error("{robot} is out of service")]
    OutOfService { robot: String },
    #[error("{robot} is busy")]
    RobotBusy { robot: String },
    /// `robot` is the robot still at work, `selected` the one the wizard chose.
    #[error(
        "{selected} cannot start “{action}” yet: {robot} is still at work, and only one robot may work at a time"
    )]
    OtherRobotActive {
        robot: String,
        selected: String,
        action: String,
    },
    /// `action` is the action's label; `capability` the id the study's `requires` names.
    #[error("{robot} cannot do “{action}”")]
    LacksCapability {
        robot: String,
        action: String,
        capability: String,
    },
    /// `reason` is the study's sentence for the part of the guard that does not hold (with the
    /// names filled in), when the guard has parts.
    #[error("{}", reason.clone().unwrap_or_else(|| format!("“{action}” is not possible now")))]
    GuardFailed {
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    #[error("waiting for the user's answer")]
    Locked,
    #[error("there is nothing to approve or deny")]
    NoLock,
    #[error("wait for the assistant's first message")]
    MutedUntilWizard,
    #[error("the message is empty")]
    EmptyText,
    #[error("the message is longer than {max} characters")]
    TextTooLong { max: usize },
    #[error("finishing is not allowed yet")]
    FinishNotAllowed,
    #[error("there is nothing to hint")]
    NoHint,
    #[error("this study has no database")]
    NoDatabase,
    /// The query or selection named something the database lacks, or a value it cannot take.
    #[error("{problem}")]
    Database {
        problem: crate::database::QueryError,
    },
}

fn need_role(actor: &Actor, role: Role) -> Result<(), Refusal> {
    match actor.role() {
        Some(r) if r == role => Ok(()),
        _ => Err(Refusal::WrongRole { expected: role }),
    }
}

fn actor_role(actor: &Actor) -> Result<Role, Refusal> {
    actor.role().ok_or(Refusal::WrongRole {
        expected: Role::User,
    })
}

/// Starts the session: `session_started`, then the scenario's draw (values in `fixed` taken as
/// they are), then the clock if it starts now.
pub(crate) fn start(
    tx: &mut Tx<'_>,
    seed: u64,
    fixed: &crate::scenario::Values,
    rng: &mut impl Rng,
) {
    let study = tx.study;
    let initial = study.study.states[study.compiled.initial].id.clone();
    tx.system(EventKind::SessionStarted {
        study: study.study.id.clone(),
        study_version: study.study.version.clone(),
        seed,
        initial_state: initial,
    });
    if !study.study.scenario.is_empty() {
        let d = crate::scenario::draw(&study.study, &study.study.world.variables, fixed, rng);
        tx.system(EventKind::ScenarioDrawn {
            values: d.values,
            world: d.world,
            out_of_service: d.out_of_service,
        });
    }
    if let Some(rules) = &study.study.goals
        && let Some(db) = &study.database
    {
        let goal_seed: u64 = rng.random();
        // A study that passed its checks fails here only on an empty table: it then runs
        // without a goal rather than not at all.
        if let Ok(goal) = crate::goals::generate(rules, db, goal_seed) {
            let description = crate::goals::describe(&goal, rules.text.as_ref());
            tx.system(EventKind::GoalGenerated {
                seed: goal_seed,
                goal,
                description,
            });
        }
    }
    if study.study.session.clock_starts == ClockStart::Start {
        start_clock(tx);
    }
}

pub(crate) fn decide(
    tx: &mut Tx<'_>,
    actor: &Actor,
    cmd: Command,
    rng: &mut impl Rng,
) -> Result<(), Refusal> {
    let study = tx.study;
    match &cmd {
        Command::Start { .. } if tx.s.started => return Err(Refusal::AlreadyStarted),
        Command::Start { .. } => {}
        _ if !tx.s.started => return Err(Refusal::NotStarted),
        _ if tx.s.ended.is_some() => return Err(Refusal::Ended),
        _ => {}
    }
    match cmd {
        Command::Start { seed } => start(tx, seed, &crate::scenario::Values::new(), rng),
        Command::Join { role, bot } => tx.emit(actor.clone(), EventKind::Joined { role, bot }),
        Command::Say { state } => {
            need_role(actor, Role::Wizard)?;
            if tx.s.lock.is_some() {
                return Err(Refusal::Locked);
            }
            let Some(o) = offer::offer_of(study, &tx.s, &state) else {
                return Err(Refusal::NotOffered { state });
            };
            let idx = study
                .state_idx(&o.state)
                .ok_or(Refusal::NotOffered { state })?;
            let def = &study.study.states[idx];
            wizard_spoke(tx);
            tx.emit(
                actor.clone(),
                EventKind::Message {
                    role: Role::Wizard,
                    text: o.text,
                    source: MessageSource::State {
                        state: def.id.clone(),
                        label: def.label().to_string(),
                        act_type: def.act_type,
                        template: o.template,
                    },
                },
            );
            if o.kind != OfferKind::Global {
                let from = study.study.states[tx.s.current].id.clone();
                tx.system(EventKind::StateEntered {
                    from,
                    to: def.id.clone(),
                    template_seed: fresh_seed(rng),
                    by_event: false,
                });
            }
            if let Some(st) = &def.subtask
                && tx.s.subtask.as_ref() != Some(st)
            {
                tx.system(EventKind::SubtaskEntered {
                    subtask: st.clone(),
                });
            }
            apply_effects(tx, &def.effects, rng);
            if let Some(lock) = &def.lock {
                tx.system(EventKind::LockStarted {
                    state: def.id.clone(),
                    lock: lock.kind,
                    prompt: lock.prompt.as_ref().map(|p| offer::render(study, &tx.s, p)),
                });
            }
            if def.terminal {
                tx.end(EndReason::Terminal);
            }
        }
        Command::Fixed { id } => {
            need_role(actor, Role::Wizard)?;
            let f = study
                .study
                .fixed_options
                .iter()
                .find(|f| f.id == id)
                .ok_or(Refusal::UnknownFixed { id })?;
            let text = offer::render(study, &tx.s, &f.text);
            wizard_spoke(tx);
            tx.emit(
                actor.clone(),
                EventKind::Message {
                    role: Role::Wizard,
                    text,
                    source: MessageSource::Fixed {
                        id: f.id.clone(),
                        label: f.id.clone(),
                        act_type: f.act_type,
                    },
                },
            );
        }
        Command::Text { text } => {
            let role = actor_role(actor)?;
            let text = text.trim().to_string();
            if text.is_empty() {
                return Err(Refusal::EmptyText);
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(Refusal::TextTooLong {
                    max: MAX_TEXT_CHARS,
                });
            }
            if role == Role::User && study.study.session.user_waits_for_wizard && !tx.s.wizard_spoke
            {
                return Err(Refusal::MutedUntilWizard);
            }
            if role == Role::Wizard {
                wizard_spoke(tx);
            }
            tx.emit(
                actor.clone(),
                EventKind::Message {
                    role,
                    text,
                    source: MessageSource::Free,
                },
            );
            if role == Role::User
                && tx
                    .s
                    .lock
                    .as_ref()
                    .is_some_and(|l| l.kind == LockKind::Reply)
            {
                tx.system(EventKind::LockReleased {
                    how: LockRelease::Reply,
                });
            }
        }
        Command::Act {
            action,
            robot,
            target,
        } => {
            need_role(actor, Role::Wizard)?;
            let (ai, ri) = offer::action_check(study, &tx.s, &action, &robot, target.as_deref())?;
            let a = &study.study.actions[ai];
            let r = &study.study.world.robots[ri];
            let by_distance = a
                .distance
                .as_ref()
                .and_then(|var| tx.s.world.get(var))
                .and_then(serde_json::Value::as_f64)
                .filter(|_| r.speed > 0.0)
                .map(|metres| (metres / r.speed).min(f64::from(crate::model::MAX_SECONDS)));
            let secs = by_distance.unwrap_or_else(|| {
                a.duration
                    .by_kind
                    .get(&r.kind)
                    .copied()
                    .unwrap_or(a.duration.default)
            });
            let ends = after_secs(tx.now, secs);
            let mut robots = offer::robot_snapshots(study, &tx.s);
            if let Some(snap) = robots.get_mut(ri) {
                snap.busy = true;
            }
            tx.emit(
                actor.clone(),
                EventKind::ActionStarted {
                    action: a.id.clone(),
                    label: a.act.clone().unwrap_or_else(|| a.id.clone()),
                    robot: r.id.clone(),
                    target,
                    ends_at_ms: ends,
                    world: (*tx.s.world).clone(),
                    robots,
                },
            );
        }
        Command::Approve | Command::Deny => {
            need_role(actor, Role::User)?;
            let lock = match &tx.s.lock {
                Some(l) if l.kind == LockKind::Approval => l.clone(),
                _ => return Err(Refusal::NoLock),
            };
            let approved = cmd == Command::Approve;
            tx.emit(
                actor.clone(),
                EventKind::LockReleased {
                    how: if approved {
                        LockRelease::Approved
                    } else {
                        LockRelease::Denied
                    },
                },
            );
            if let Some(l) = &study.study.states[lock.state].lock {
                let effects = if approved { &l.on_approve } else { &l.on_deny };
                apply_effects(tx, effects, rng);
            }
        }
        Command::Hint => {
            need_role(actor, Role::Wizard)?;
            if tx.s.lock.is_some() {
                return Err(Refusal::Locked);
            }
            // Only the picked state is needed, not the offers' texts.
            let offers = offer::offered_states_with(study, &tx.s, &offer::vars(study, &tx.s));
            let total: f64 = offers.iter().map(|o| o.prior.max(0.0)).sum();
            if offers.is_empty() {
                return Err(Refusal::NoHint);
            }
            let pick = if total > 0.0 {
                let mut x = rng.random_range(0.0..total);
                offers
                    .iter()
                    .find(|o| {
                        x -= o.prior.max(0.0);
                        x < 0.0
                    })
                    .unwrap_or(&offers[offers.len() - 1])
            } else {
                &offers[rng.random_range(0..offers.len())]
            };
            tx.emit(
                actor.clone(),
                EventKind::HintGiven {
                    state: study.study.states[pick.state].id.clone(),
                },
            );
        }
        Command::Finish => {
            actor_role(actor)?;
            if !offer::finish_allowed(study, &tx.s) {
                return Err(Refusal::FinishNotAllowed);
            }
            tx.end(EndReason::Finished);
        }
        Command::Disconnect { role } => {
            if !tx.s.away.iter().any(|(r, _)| *r == role) {
                let grace = f64::from(study.study.session.disconnect_grace_s);
                let until = after_secs(tx.now, grace);
                tx.system(EventKind::Disconnected {
                    role,
                    grace_until_ms: until,
                });
            }
        }
        Command::Reconnect { role } => {
            if tx.s.away.iter().any(|(r, _)| *r == role) {
                tx.system(EventKind::Reconnected { role });
            }
        }
        Command::Tick => tick(tx, rng),
        Command::Abort { reason } => tx.end(reason),
        Command::Query { table, filters } => {
            need_role(actor, Role::Wizard)?;
            let db = study.database.as_ref().ok_or(Refusal::NoDatabase)?;
            let found = db
                .query(&table, &filters, crate::database::MAX_RESULTS)
                .map_err(|problem| Refusal::Database { problem })?;
            tx.emit(
                actor.clone(),
                EventKind::DbQueried {
                    table,
                    filters,
                    result_keys: found.keys,
                    rows: found.rows,
                },
            );
        }
        Command::Select { table, key } => {
            need_role(actor, Role::Wizard)?;
            let db = study.database.as_ref().ok_or(Refusal::NoDatabase)?;
            let row = db
                .select(&table, &key)
                .map_err(|problem| Refusal::Database { problem })?;
            tx.emit(actor.clone(), EventKind::DbSelected { table, key, row });
        }
    }
    Ok(())
}

fn start_clock(tx: &mut Tx<'_>) {
    let limit = tx.study.study.session.time_limit_s;
    if limit > 0 && tx.s.deadline_ms.is_none() {
        let deadline_ms = after_secs(tx.now, f64::from(limit));
        tx.system(EventKind::ClockStarted { deadline_ms });
    }
}

fn wizard_spoke(tx: &mut Tx<'_>) {
    if !tx.s.wizard_spoke && tx.study.study.session.clock_starts == ClockStart::FirstWizardMessage {
        start_clock(tx);
    }
}

/// Emits the events of a set of effects.
pub(crate) fn apply_effects(tx: &mut Tx<'_>, e: &Effects, rng: &mut impl Rng) {
    apply_effects_with_media(tx, e, e.media.as_deref(), rng);
}

fn apply_effects_with_media(tx: &mut Tx<'_>, e: &Effects, media: Option<&str>, rng: &mut impl Rng) {
    let study = tx.study;
    if !e.set.is_empty() {
        tx.system(EventKind::WorldSet {
            values: e.set.clone(),
        });
    }
    if let Some(st) = &e.subtask
        && tx.s.subtask.as_ref() != Some(st)
    {
        tx.system(EventKind::SubtaskEntered {
            subtask: st.clone(),
        });
    }
    if let Some(m) = &e.milestone
        && !tx.s.milestones.contains(m)
        && let Some(t) = study.study.subtasks.iter().find(|t| &t.id == m)
    {
        tx.system(EventKind::Milestone {
            subtask: m.clone(),
            progress: t.progress,
        });
    }
    if let Some(id) = media
        && let Some(m) = study.study.media.get(id)
    {
        tx.system(EventKind::MediaShown {
            media: id.to_string(),
            file: m.file.clone(),
        });
    }
    if let Some(to) = &e.enter {
        let from = study.study.states[tx.s.current].id.clone();
        tx.system(EventKind::StateEntered {
            from,
            to: to.clone(),
            template_seed: fresh_seed(rng),
            by_event: true,
        });
    }
    if !e.unlock.is_empty() {
        tx.system(EventKind::OptionsUnlocked {
            states: e.unlock.clone(),
        });
    }
}

/// Fires every timer due at `tx.now`, earliest first.
fn tick(tx: &mut Tx<'_>, rng: &mut impl Rng) {
    let study = tx.study;
    // Robot actions, in order of their end time.
    let mut due: Vec<(u64, usize)> =
        tx.s.robots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.activity.as_ref().map(|a| (a.ends_ms, i)))
            .filter(|(t, _)| *t <= tx.now)
            .collect();
    due.sort();
    for (_, ri) in due {
        if tx.s.ended.is_some() {
            return;
        }
        let Some(a) = tx.s.robots[ri].activity.clone() else {
            continue;
        };
        let def = &study.study.actions[a.action];
        let robot = &study.study.world.robots[ri];
        let battery = (tx.s.robots[ri].battery - def.battery_cost).max(0.0);
        tx.system(EventKind::ActionCompleted {
            action: def.id.clone(),
            robot: robot.id.clone(),
            target: a.target.clone(),
            battery,
        });
        let media = def
            .media_by_kind
            .get(&robot.kind)
            .map(String::as_str)
            .or(def.on_complete.media.as_deref());
        apply_effects_with_media(tx, &def.on_complete, media, rng);
    }
    // Progress of actions still running.
    let progress: Vec<usize> =
        tx.s.robots
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.activity
                    .as_ref()
                    .and_then(|a| a.next_progress_ms)
                    .is_some_and(|p| p <= tx.now)
            })
            .map(|(i, _)| i)
            .collect();
    for ri in progress {
        if let Some(a) = tx.s.robots[ri].activity.clone() {
            // In u128: `done * 100` overflows u64 for spans beyond ~5 million years.
            let span = u128::from(a.ends_ms.saturating_sub(a.started_ms).max(1));
            let done = u128::from(tx.now.saturating_sub(a.started_ms)).min(span);
            let eta_s = a.ends_ms.saturating_sub(tx.now).div_ceil(1000);
            tx.system(EventKind::ActionProgress {
                action: study.study.actions[a.action].id.clone(),
                robot: study.study.world.robots[ri].id.clone(),
                percent: u32::try_from(done * 100 / span).unwrap_or(100),
                eta_s: u32::try_from(eta_s).unwrap_or(u32::MAX),
            });
        }
    }
    if tx.s.away.iter().any(|(_, until)| *until <= tx.now) {
        tx.end(EndReason::Disconnect);
    }
    if tx.s.deadline_ms.is_some_and(|d| d <= tx.now) {
        tx.end(EndReason::TimeLimit);
    }
}
