//! The dialogue engine: `step(state, command, now, rng) → (state', events)`, pure.
//!
//! A step *decides* what happens from the current state and a command, then *applies* each event
//! it emits with the same [`apply`] that [`replay`] uses, so a live session and a replayed log
//! cannot disagree. A refused command returns a typed [`Refusal`] and leaves the state untouched
//! (the step works on a copy). Time is passed in; timers are data ([`next_wakeup`] says when the
//! engine must be woken with [`Command::Tick`]); randomness comes from the caller's RNG and every
//! random outcome is written into the events.

mod apply;
mod cmd;
mod command;
mod offer;

pub use apply::{apply, replay};
pub use command::{Command, Refusal};
pub use offer::{
    ActionRow, CLOCK_SLOTS, Offer, OfferKind, TextPart, action_check, action_guard_variables,
    action_table, action_table_key, action_table_with, alarm, alarm_with, finish_allowed,
    finish_allowed_with, goal_reached, goal_reached_with, offered, offered_with, render,
    render_clock_parts, render_state, robot_snapshots, valid_actions, vars,
};

use std::sync::Arc;

use indexmap::IndexMap;
use rand::{Rng, RngExt};
use serde::Serialize;

use crate::event::{Actor, EndReason, EventKind, Role};
use crate::expr::Vars;
use crate::load::LoadedStudy;
use crate::model::LockKind;

/// Longest chat message accepted, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;

/// A robot's live state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RobotState {
    pub location: String,
    pub battery: f64,
    /// False when the session's scenario put the robot out of service: it takes no action.
    pub in_service: bool,
    pub activity: Option<Activity>,
}

/// A running robot action: a timer as data.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Activity {
    pub action: usize,
    pub target: Option<String>,
    pub started_ms: u64,
    pub ends_ms: u64,
    pub next_progress_ms: Option<u64>,
    pub percent: u32,
}

/// A lock the wizard is waiting on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActiveLock {
    pub state: usize,
    pub kind: LockKind,
    /// The approval question as rendered when the lock started (slots filled then): the page
    /// shows this text, never the study's raw template.
    pub prompt: Option<String>,
}

/// The whole live state of one session: a fold over its events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Session {
    pub id: String,
    pub seed: u64,
    pub started: bool,
    pub started_at_ms: u64,
    /// Index of the current dialogue state.
    pub current: usize,
    /// Picks the templates of the options offered from the current state.
    pub template_seed: u64,
    /// Shared with the copies [`step`] makes of the session (most steps set no variable) and
    /// copied on the first write ([`Arc::make_mut`]).
    pub world: Arc<IndexMap<String, serde_json::Value>>,
    /// Same order as the study's robots.
    pub robots: Vec<RobotState>,
    /// States offered until said (indices).
    pub unlocked: Vec<usize>,
    pub lock: Option<ActiveLock>,
    pub subtask: Option<String>,
    pub milestones: Vec<String>,
    pub messages: u32,
    pub wizard_spoke: bool,
    pub deadline_ms: Option<u64>,
    /// Robot and target of the latest action, for slots.
    pub last_robot: Option<usize>,
    pub last_target: Option<String>,
    pub joined: Vec<Role>,
    /// Disconnected roles and when their grace ends.
    pub away: Vec<(Role, u64)>,
    pub hint: Option<String>,
    pub media: Vec<String>,
    pub ended: Option<(EndReason, bool)>,
    /// Last time the session saw an event.
    pub now_ms: u64,
    /// The row the wizard selected last in each table of the study's database, by table: what
    /// the `{db.TABLE.COLUMN}` slots read.
    pub db_selected: IndexMap<String, crate::database::Row>,
    /// The user goal and its live state (studies with `goals:`), from `goal_generated` on.
    pub goal: Option<crate::goals::GoalTrack>,
    /// Copilot suggestions made so far (the last one's number).
    pub suggested: u32,
    /// The suggestions the wizard may still send from: those made since the wizard last spoke
    /// (number and text).
    pub suggestions: Vec<(u32, String)>,
}

impl Session {
    /// The state before `Start`: the study's initial world.
    pub fn new(study: &LoadedStudy, id: &str) -> Session {
        let s = &study.study;
        Session {
            id: id.to_string(),
            seed: 0,
            started: false,
            started_at_ms: 0,
            current: study.compiled.initial,
            template_seed: 0,
            world: Arc::new(s.world.variables.clone()),
            robots: s
                .world
                .robots
                .iter()
                .map(|r| RobotState {
                    location: r.start.clone(),
                    battery: r.battery,
                    in_service: true,
                    activity: None,
                })
                .collect(),
            unlocked: vec![],
            lock: None,
            subtask: None,
            milestones: vec![],
            messages: 0,
            wizard_spoke: false,
            deadline_ms: None,
            last_robot: None,
            last_target: None,
            joined: vec![],
            away: vec![],
            hint: None,
            media: vec![],
            ended: None,
            now_ms: 0,
            db_selected: IndexMap::new(),
            goal: None,
            suggested: 0,
            suggestions: vec![],
        }
    }

    pub fn is_ended(&self) -> bool {
        self.ended.is_some()
    }

    pub fn busy_robots(&self) -> usize {
        self.robots.iter().filter(|r| r.activity.is_some()).count()
    }

    /// Seconds left on the clock (the full limit before it starts; None when there is no limit).
    pub fn time_left_s(&self, study: &LoadedStudy) -> Option<u64> {
        let limit = study.study.session.time_limit_s;
        if limit == 0 {
            return None;
        }
        Some(match self.deadline_ms {
            Some(d) => d.saturating_sub(self.now_ms) / 1000,
            None => u64::from(limit),
        })
    }

    /// Whether the study's goal is reached: as the end recorded it once the session has ended,
    /// else whether it holds now.
    pub fn goal_met(&self, study: &LoadedStudy) -> bool {
        match self.ended {
            Some((_, reached)) => reached,
            None => goal_reached(study, self),
        }
    }

    /// [`Session::goal_met`] with the condition variables already built ([`vars`] of this
    /// session).
    pub fn goal_met_with(&self, study: &LoadedStudy, vars: &Vars<'_>) -> bool {
        match self.ended {
            Some((_, reached)) => reached,
            None => offer::goal_reached_with(study, vars),
        }
    }

    /// Progress bar percentage: 100 once the study's goal is reached (the session ended with
    /// `goal_reached`, or, while it runs, the goal holds now), else the highest milestone reached.
    /// Subtask percentages need not add up to 100, so the goal is what completes the bar.
    pub fn progress(&self, study: &LoadedStudy) -> u32 {
        self.progress_given(study, self.goal_met(study))
    }

    /// [`Session::progress`] given [`Session::goal_met`] of this session.
    pub fn progress_given(&self, study: &LoadedStudy, goal_met: bool) -> u32 {
        if goal_met {
            return 100;
        }
        study
            .study
            .subtasks
            .iter()
            .filter(|t| self.milestones.contains(&t.id))
            .map(|t| t.progress)
            .max()
            .unwrap_or(0)
    }
}

/// An event emitted by a step, before the store gives it a seq.
pub type Emitted = (Actor, EventKind);

/// The outcome of a step.
#[derive(Clone, Debug)]
pub struct Step {
    pub session: Session,
    pub events: Vec<Emitted>,
}

/// A step in progress: events are applied to the copy as they are emitted.
pub(crate) struct Tx<'a> {
    pub study: &'a LoadedStudy,
    pub s: Session,
    pub events: Vec<Emitted>,
    pub now: u64,
}

impl Tx<'_> {
    pub fn emit(&mut self, actor: Actor, kind: EventKind) {
        let message = match &kind {
            EventKind::Message { role, .. } => Some(*role),
            _ => None,
        };
        apply(self.study, &mut self.s, &actor, &kind, self.now);
        self.events.push((actor, kind));
        // Every chat message of a session with a goal is followed by the goal state it left.
        if let Some(role) = message
            && let Some(track) = &self.s.goal
        {
            let state = EventKind::TurnState {
                turn: self.s.messages.saturating_sub(1),
                role,
                user_state: track.entries.clone(),
                sys_state: track.belief.clone(),
                sys_state_init: track.turn_init(),
            };
            apply(self.study, &mut self.s, &Actor::System, &state, self.now);
            self.events.push((Actor::System, state));
        }
    }
    pub fn system(&mut self, kind: EventKind) {
        self.emit(Actor::System, kind);
    }
    pub fn end(&mut self, reason: EndReason) {
        if self.s.ended.is_none() {
            let goal = goal_reached(self.study, &self.s);
            self.system(EventKind::SessionEnded {
                reason,
                goal_reached: goal,
            });
        }
    }
}

/// Runs one command. On refusal, nothing changes.
pub fn step(
    study: &LoadedStudy,
    session: &Session,
    actor: &Actor,
    command: Command,
    now_ms: u64,
    rng: &mut impl Rng,
) -> Result<Step, Refusal> {
    let mut tx = Tx {
        study,
        s: session.clone(),
        events: vec![],
        now: now_ms.max(session.now_ms),
    };
    tx.s.now_ms = tx.now;
    command::decide(&mut tx, actor, command, rng)?;
    if tx.events.is_empty() {
        // Nothing happened: the state must equal what a replay of the log gives.
        tx.s.now_ms = session.now_ms;
    }
    Ok(Step {
        session: tx.s,
        events: tx.events,
    })
}

/// Starts the session like [`Command::Start`], with some scenario variables fixed instead of
/// drawn (`fixed`, by name; the others are drawn from `rng`). `simulate` plays every variant this
/// way; the events are the same kinds a live start emits.
pub fn start_with_scenario(
    study: &LoadedStudy,
    session: &Session,
    seed: u64,
    fixed: &crate::scenario::Values,
    now_ms: u64,
    rng: &mut impl Rng,
) -> Result<Step, Refusal> {
    if session.started {
        return Err(Refusal::AlreadyStarted);
    }
    let mut tx = Tx {
        study,
        s: session.clone(),
        events: vec![],
        now: now_ms.max(session.now_ms),
    };
    tx.s.now_ms = tx.now;
    cmd::start::start(&mut tx, seed, fixed, rng);
    Ok(Step {
        session: tx.s,
        events: tx.events,
    })
}

/// When the engine must next be woken with `Tick` (None: nothing pending).
pub fn next_wakeup(study: &LoadedStudy, s: &Session) -> Option<u64> {
    if s.ended.is_some() || !s.started {
        return None;
    }
    let _ = study;
    let mut t: Option<u64> = s.deadline_ms;
    let mut consider = |x: u64| t = Some(t.map_or(x, |y| y.min(x)));
    for r in &s.robots {
        if let Some(a) = &r.activity {
            consider(a.ends_ms);
            if let Some(p) = a.next_progress_ms {
                consider(p);
            }
        }
    }
    for (_, until) in &s.away {
        consider(*until);
    }
    t
}

/// `secs` seconds after `at_ms`. Study numbers are bounded by validation, but the engine must not
/// panic on a study that skipped it (or on a clock near its end): a negative or non-finite
/// duration counts as 0, a huge one saturates at the end of time (`f64 as u64` saturates too).
pub(crate) fn after_secs(at_ms: u64, secs: f64) -> u64 {
    let ms = if secs.is_finite() && secs > 0.0 {
        (secs * 1000.0).round() as u64
    } else {
        0
    };
    at_ms.saturating_add(ms)
}

/// A fresh random template seed.
pub(crate) fn fresh_seed(rng: &mut impl Rng) -> u64 {
    rng.random()
}
