//! Commands (intents from participants, bots and timers), the rules that refuse them, and the
//! dispatch to the file of `cmd/` that decides which events each one emits; the helpers the
//! commands share (roles, the clock, effects).

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::cmd;
use super::{Tx, after_secs, fresh_seed};
use crate::event::{Actor, EndReason, EventKind, Role};
use crate::model::{ClockStart, Effects};

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
    /// The copilot's suggestion came back (system): it goes to the wizard.
    Suggest { system: String, text: String },
    /// The wizard sends free text made from suggestion `n`, as it was or edited.
    SendSuggestion { n: u32, text: String },
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
    #[error("this study has no copilot")]
    NoCopilot,
    /// The wizard sent from a suggestion that is not open: never made, or the wizard has spoken
    /// since.
    #[error("that suggestion is no longer open; send your message without it")]
    SuggestionClosed { n: u32 },
    /// The query or selection named something the database lacks, or a value it cannot take.
    #[error("{problem}")]
    Database {
        problem: crate::database::QueryError,
    },
}

pub(super) fn need_role(actor: &Actor, role: Role) -> Result<(), Refusal> {
    match actor.role() {
        Some(r) if r == role => Ok(()),
        _ => Err(Refusal::WrongRole { expected: role }),
    }
}

/// The wizard, with no lock pending (what saying a state and asking for a hint need).
pub(super) fn free_wizard(tx: &Tx<'_>, actor: &Actor) -> Result<(), Refusal> {
    need_role(actor, Role::Wizard)?;
    if tx.s.lock.is_some() {
        return Err(Refusal::Locked);
    }
    Ok(())
}

pub(super) fn actor_role(actor: &Actor) -> Result<Role, Refusal> {
    actor.role().ok_or(Refusal::WrongRole {
        expected: Role::User,
    })
}

/// Checks `cmd` from `actor` against the state and emits its events into `tx`, or refuses it
/// (the state unchanged). Each command is a file of `cmd/`.
pub(crate) fn decide(
    tx: &mut Tx<'_>,
    actor: &Actor,
    cmd: Command,
    rng: &mut impl Rng,
) -> Result<(), Refusal> {
    match &cmd {
        Command::Start { .. } if tx.s.started => return Err(Refusal::AlreadyStarted),
        Command::Start { .. } => {}
        _ if !tx.s.started => return Err(Refusal::NotStarted),
        _ if tx.s.ended.is_some() => return Err(Refusal::Ended),
        _ => {}
    }
    match cmd {
        Command::Start { seed } => {
            cmd::start::start(tx, seed, &crate::scenario::Values::new(), rng)
        }
        Command::Join { role, bot } => tx.emit(actor.clone(), EventKind::Joined { role, bot }),
        Command::Say { state } => cmd::say::say(tx, actor, state, rng)?,
        Command::Fixed { id } => cmd::fixed::fixed(tx, actor, id)?,
        Command::Text { text } => cmd::text::text(tx, actor, text)?,
        Command::Act {
            action,
            robot,
            target,
        } => cmd::act::act(tx, actor, action, robot, target)?,
        Command::Approve => cmd::lock::answer(tx, actor, true, rng)?,
        Command::Deny => cmd::lock::answer(tx, actor, false, rng)?,
        Command::Hint => cmd::hint::hint(tx, actor, rng)?,
        Command::Finish => cmd::finish::finish(tx, actor)?,
        Command::Disconnect { role } => cmd::presence::disconnect(tx, role),
        Command::Reconnect { role } => cmd::presence::reconnect(tx, role),
        Command::Tick => cmd::tick::tick(tx, rng),
        Command::Abort { reason } => tx.end(reason),
        Command::Query { table, filters } => cmd::database::query(tx, actor, table, filters)?,
        Command::Select { table, key } => cmd::database::select(tx, actor, table, key)?,
        Command::Suggest { system, text } => cmd::copilot::suggest(tx, system, text)?,
        Command::SendSuggestion { n, text } => cmd::copilot::send(tx, actor, n, text)?,
    }
    Ok(())
}

pub(super) fn start_clock(tx: &mut Tx<'_>) {
    let limit = tx.study.study.session.time_limit_s;
    if limit > 0 && tx.s.deadline_ms.is_none() {
        let deadline_ms = after_secs(tx.now, f64::from(limit));
        tx.system(EventKind::ClockStarted { deadline_ms });
    }
}

pub(super) fn wizard_spoke(tx: &mut Tx<'_>) {
    if !tx.s.wizard_spoke && tx.study.study.session.clock_starts == ClockStart::FirstWizardMessage {
        start_clock(tx);
    }
}

/// Emits the events of a set of effects.
pub(super) fn apply_effects(tx: &mut Tx<'_>, e: &Effects, rng: &mut impl Rng) {
    apply_effects_with_media(tx, e, e.media.as_deref(), rng);
}

pub(super) fn apply_effects_with_media(
    tx: &mut Tx<'_>,
    e: &Effects,
    media: Option<&str>,
    rng: &mut impl Rng,
) {
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
