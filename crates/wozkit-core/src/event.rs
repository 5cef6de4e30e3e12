//! Events: everything that happens in a session, as appended to its log.
//!
//! The engine emits [`EventKind`]s; the store wraps each in an [`Event`] with the session id, a
//! gap-free `seq` and a server timestamp. Events are versioned by [`EVENT_SCHEMA_VERSION`]: a new
//! field is added with a default so old logs stay readable, and a changed meaning gets a new kind.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::model::{ActType, LockKind};

/// Version of the event schema written with every event.
pub const EVENT_SCHEMA_VERSION: u32 = 1;

/// The side a participant plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Wizard,
}

impl Role {
    pub fn other(self) -> Role {
        match self {
            Role::User => Role::Wizard,
            Role::Wizard => Role::User,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Wizard => "wizard",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "wizard" => Some(Role::Wizard),
            _ => None,
        }
    }
}

/// Who caused an event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Actor {
    /// A participant in a role (`participant` is the store's participant id, when known).
    Participant {
        role: Role,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        participant: Option<String>,
    },
    /// A built-in or connected bot playing a role.
    Bot { role: Role, name: String },
    /// The engine or server (timers, world simulation).
    System,
}

impl Actor {
    pub fn role(&self) -> Option<Role> {
        match self {
            Actor::Participant { role, .. } | Actor::Bot { role, .. } => Some(*role),
            Actor::System => None,
        }
    }
}

/// How a wizard message was produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum MessageSource {
    /// A dialogue state chosen from the offered options.
    State {
        state: String,
        label: String,
        act_type: ActType,
        template: usize,
    },
    /// A fixed option.
    Fixed {
        id: String,
        label: String,
        act_type: ActType,
    },
    /// Typed free text.
    Free,
}

impl MessageSource {
    /// Dialogue-act label and type, when labelled.
    pub fn act(&self) -> Option<(&str, ActType)> {
        match self {
            MessageSource::State {
                label, act_type, ..
            }
            | MessageSource::Fixed {
                label, act_type, ..
            } => Some((label, *act_type)),
            MessageSource::Free => None,
        }
    }
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    Terminal,
    TimeLimit,
    Finished,
    Disconnect,
    NoPartner,
    Aborted,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Terminal => "terminal",
            EndReason::TimeLimit => "time_limit",
            EndReason::Finished => "finished",
            EndReason::Disconnect => "disconnect",
            EndReason::NoPartner => "no_partner",
            EndReason::Aborted => "aborted",
        }
    }
}

/// A snapshot of one robot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RobotSnapshot {
    pub id: String,
    pub location: String,
    pub battery: f64,
    pub busy: bool,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// The session started; `seed` reproduces every random choice.
    SessionStarted {
        study: String,
        study_version: String,
        seed: u64,
        initial_state: String,
    },
    /// The study's scenario variables were drawn for this session (logged right after
    /// `session_started`, before anything reads the world). Replay applies `world` and
    /// `out_of_service` as they are and never draws again: the event, not the seed, is the truth.
    ScenarioDrawn {
        /// The drawn variables, in the study's order.
        values: IndexMap<String, serde_json::Value>,
        /// Every world variable the draw set: the drawn ones, then those the study's
        /// `scenario.set` computed from them.
        #[serde(default)]
        world: IndexMap<String, serde_json::Value>,
        /// Robots out of service in this session (ids).
        #[serde(default)]
        out_of_service: Vec<String>,
    },
    /// A participant (or bot) entered the room.
    Joined {
        role: Role,
        #[serde(default)]
        bot: bool,
    },
    /// The time limit clock started.
    ClockStarted { deadline_ms: u64 },
    /// A chat message.
    Message {
        role: Role,
        text: String,
        #[serde(flatten)]
        source: MessageSource,
    },
    /// The dialogue state moved. `template_seed` picks the templates offered next.
    StateEntered {
        from: String,
        to: String,
        template_seed: u64,
        /// True when a world event (not a wizard choice) moved the state.
        #[serde(default)]
        by_event: bool,
    },
    /// The current subtask changed.
    SubtaskEntered { subtask: String },
    /// World variables changed.
    WorldSet {
        values: IndexMap<String, serde_json::Value>,
    },
    /// A robot action started.
    ActionStarted {
        action: String,
        label: String,
        robot: String,
        #[serde(default)]
        target: Option<String>,
        ends_at_ms: u64,
        world: IndexMap<String, serde_json::Value>,
        robots: Vec<RobotSnapshot>,
    },
    /// A running action progressed.
    ActionProgress {
        action: String,
        robot: String,
        percent: u32,
        eta_s: u32,
    },
    /// A robot action finished.
    ActionCompleted {
        action: String,
        robot: String,
        #[serde(default)]
        target: Option<String>,
        battery: f64,
    },
    /// A subtask was completed.
    Milestone { subtask: String, progress: u32 },
    /// Media shown to both participants.
    MediaShown { media: String, file: String },
    /// States offered from now on.
    OptionsUnlocked { states: Vec<String> },
    /// The wizard waits for the user.
    LockStarted {
        state: String,
        lock: LockKind,
        #[serde(default)]
        prompt: Option<String>,
    },
    /// The lock was released.
    LockReleased { how: LockRelease },
    /// A hint highlighted an option.
    HintGiven { state: String },
    /// A participant's connection dropped.
    Disconnected { role: Role, grace_until_ms: u64 },
    /// A participant came back.
    Reconnected { role: Role },
    /// The session ended.
    SessionEnded {
        reason: EndReason,
        goal_reached: bool,
    },
    /// A participant answered the questionnaire.
    SurveyAnswered {
        role: Role,
        answers: IndexMap<String, serde_json::Value>,
    },
    /// A completion code was issued.
    CompletionIssued {
        role: Role,
        code: String,
        #[serde(default)]
        no_partner: bool,
    },
    /// The first event of a participant's own log (a session of kind `participant`): every
    /// page answer and judgment of an evaluation flow is logged there.
    ParticipantLogStarted {
        participant: String,
        study: String,
        study_version: String,
    },
    /// A page of questions (or any page that asks something besides judging an item) answered.
    PageAnswered {
        page: String,
        answers: IndexMap<String, serde_json::Value>,
    },
    /// The participant was given an item to judge under a lease.
    ItemClaimed {
        page: String,
        item: String,
        lease: String,
        /// The item's dialogues; for a comparison, in the order shown: left first.
        dialogues: Vec<String>,
        /// The system behind each of `dialogues`, in the same order.
        systems: Vec<String>,
        /// The pool the item came from.
        pool: ItemPool,
        claimed_at_ms: u64,
        expires_at_ms: u64,
    },
    /// The participant gave an item back unjudged (skipped it); the item returns to the pool.
    /// `given` is what they had filled in on the item's form before skipping it (each field's
    /// name and value, in the form's order), kept so that nothing they gave is lost; empty when
    /// nothing was.
    ItemReturned {
        item: String,
        lease: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        given: Vec<(String, String)>,
    },
    /// A judgment of one item. `counted` is false for a surplus judgment (submitted after its
    /// lease expired, when the item had all its judgments already) and for gold items.
    Judged(Box<Judgment>),
    /// The first event of a model judge's log (`judge-<study>-<judge>`, a session of kind
    /// `participant`): the judge's answers are logged there, apart from every person's.
    JudgeLogStarted {
        judge: String,
        study: String,
        /// The model asked, and the endpoint's base URL.
        model: String,
        url: String,
    },
    /// A model judge's answer to one question about one item (or its failure to give one).
    /// Never counted towards the item's judgments, never paid.
    ModelJudged(Box<ModelJudgment>),
    /// The onboarding test was taken.
    OnboardingDone {
        passed: bool,
        correct: u32,
        total: u32,
        answers: IndexMap<String, serde_json::Value>,
    },
    /// The participant was screened out and sent to the end of the flow.
    ScreenedOut { reason: ScreenReason },
    /// The first event of a conversation with a system under test (a `chat` page, or one side of
    /// an `arena` battle). The participant's messages are `Message`s of role `user`, the
    /// system's replies `Message`s of role `wizard` by actor `Bot { name: system }`.
    ChatStarted {
        participant: String,
        page: String,
        /// The evaluation item and the lease it was claimed under.
        item: String,
        lease: String,
        system: String,
        /// Arena: `left` or `right`; none for a chat.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<String>,
        /// Arena: the other side's session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opponent: Option<String>,
    },
    /// A system gave no reply to a turn (after its retries, or refused by its limits). The
    /// participant was told and may send the turn again; a battle with a failed turn is void.
    SystemFailed {
        system: String,
        /// What went wrong, without secrets (an API key never appears here).
        error: String,
    },
    /// The participant labelled a system reply during the chat (per-turn annotation and live
    /// feedback). `turn` is the reply's index among the session's messages, from 0.
    TurnAnnotated {
        turn: u32,
        #[serde(default)]
        labels: Vec<String>,
        #[serde(default)]
        score: Option<u32>,
        /// Live feedback: `satisfied` or `frustrated`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// Information from an imported dataset that has no event of its own.
    Annotation {
        key: String,
        value: serde_json::Value,
    },
    /// A researcher's review of one participant of a study (approve, reject, bonus, block,
    /// note), or the outcome of sending one to the crowd platform; appended to the study's
    /// review log (`review-<study>`, a log of kind `participant`).
    Reviewed(Box<ReviewDecision>),
    /// A researcher took the seat of `role` in a live room whose participant had left: from
    /// now on `participant` (the researcher's own participant record) plays the role.
    /// `researcher` is the researcher's account id.
    TakenOver {
        role: Role,
        researcher: String,
        participant: String,
    },
    /// The wizard searched a table of the study's database (`query`). `result_keys` are the keys
    /// of the rows found, in order; `rows` the rows themselves as the wizard saw them. Only the
    /// wizard receives this event.
    DbQueried {
        table: String,
        #[serde(default)]
        filters: Vec<crate::database::Filter>,
        #[serde(default)]
        result_keys: Vec<String>,
        #[serde(default)]
        rows: Vec<crate::database::Row>,
    },
    /// The wizard selected a row of a table into the dialogue (`select`): from now on the
    /// `{db.TABLE.COLUMN}` slots read it. `row` is the row as it was then, so replay needs no
    /// database. Only the wizard receives this event.
    DbSelected {
        table: String,
        key: String,
        row: crate::database::Row,
    },
    /// The session's user goal, drawn from the study's database by its `goals:` rules with
    /// `seed` (logged right after `session_started` and any scenario draw). Replay applies it
    /// and never draws again. Only the user receives this event.
    GoalGenerated {
        seed: u64,
        goal: crate::goals::Goal,
        /// One sentence per sub-goal.
        #[serde(default)]
        description: Vec<String>,
    },
    /// The goal state after chat message `turn` (from 0, by `role`): the user state (every goal
    /// entry with its satisfied flag), and the wizard's belief state by domain after the turn
    /// (`sys_state`) and right after the turn's first search (`sys_state_init`). The wizard never
    /// receives it; the user receives it without the belief states.
    TurnState {
        turn: u32,
        role: Role,
        user_state: Vec<crate::goals::GoalEntry>,
        #[serde(default)]
        sys_state: crate::goals::Belief,
        #[serde(default)]
        sys_state_init: crate::goals::Belief,
    },
    /// The copilot's suggestion of the wizard's next message (`docs/copilot.md`), numbered from
    /// 1 in the session, by `system`. Only the wizard receives it.
    Suggested {
        n: u32,
        system: String,
        text: String,
    },
    /// The wizard's message just before was sent from suggestion `n`, `edits` characters apart
    /// from it ([`crate::copilot::edits`]; 0: sent as it was). Only the wizard receives it.
    SuggestionUsed { n: u32, edits: u32 },
}

/// Which pool an evaluation item comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemPool {
    /// An item judged `judgments_per_item` times.
    Item,
    /// An attention check with a known answer; not counted towards any item's judgments.
    Gold,
}

impl ItemPool {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemPool::Item => "item",
            ItemPool::Gold => "gold",
        }
    }
}

/// What a review event records (see [`EventKind::Reviewed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewAction {
    /// The participant's work is accepted (the platform pays the reward).
    Approve,
    /// The participant's work is refused, with a reason the worker is shown.
    Reject,
    /// A bonus of `cents`; a later bonus replaces an earlier one (0 takes it back).
    Bonus,
    /// The worker is refused at entry to every study from then on.
    Block,
    /// A note for the researchers; changes nothing.
    Note,
    /// The decision at `of_seq` was sent to the platform (for a bonus: `cents` of it).
    Sent,
    /// Sending the decision at `of_seq` failed; `reason` is the platform's message.
    SendFailed,
    /// The platform's API has no request for the decision at `of_seq` (e.g. a block on
    /// Prolific): it is not sent, now or later; `reason` says where the researcher does it.
    NotSendable,
}

impl ReviewAction {
    /// The action's name as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewAction::Approve => "approve",
            ReviewAction::Reject => "reject",
            ReviewAction::Bonus => "bonus",
            ReviewAction::Block => "block",
            ReviewAction::Note => "note",
            ReviewAction::Sent => "sent",
            ReviewAction::SendFailed => "send_failed",
            ReviewAction::NotSendable => "not_sendable",
        }
    }
}

/// A researcher's review decision about one participant, or a platform send's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewDecision {
    /// The store's participant id.
    pub participant: String,
    /// The platform's worker id, when the participant has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The participant's platform (`prolific`, `mturk`, `lab`, ...).
    #[serde(default)]
    pub platform: String,
    pub action: ReviewAction,
    /// Why (required for a rejection and a block; the text of a note; the platform's message
    /// of a failed send).
    #[serde(default)]
    pub reason: String,
    /// A bonus, or the bonus part sent, in cents of the study's payment currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cents: Option<u64>,
    /// The researcher account's id and name.
    pub researcher: String,
    #[serde(default)]
    pub researcher_name: String,
    /// `Sent`, `SendFailed` and `NotSendable`: the sequence number, in the review log, of the
    /// decision sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_seq: Option<u64>,
    /// `Sent` and `SendFailed`: the payment or decision record the outcome is of
    /// (`<key>#<number>`, see `wozkit_platforms::once`). A record's outcome may be logged twice
    /// (two instances settling it at once); it counts once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment: Option<String>,
}

/// Why a participant was screened out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScreenReason {
    /// Failed the onboarding test.
    Onboarding,
    /// Failed too many attention checks.
    Gold,
    /// The worker id is on the study's or the global blocklist.
    Blocklist,
}

/// A model judge's answer to one question about one item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelJudgment {
    pub judge: String,
    pub item: String,
    pub question: String,
    /// The item's dialogues in the order the prompt showed them (swapped when `swapped`).
    pub dialogues: Vec<String>,
    /// The system behind each of `dialogues`, in the same order.
    pub systems: Vec<String>,
    /// Asked with the two dialogues of a comparison swapped (`swap: true`).
    #[serde(default)]
    pub swapped: bool,
    /// The answer as a person's would be stored (a scale point, an option, the id of the
    /// dialogue chosen); `None` when the reply named no option or the judge failed.
    #[serde(default)]
    pub answer: Option<serde_json::Value>,
    /// The judge's reply as received (empty when the call failed).
    #[serde(default)]
    pub reply: String,
    /// Why there is no answer: the reply named no option, or the call failed.
    #[serde(default)]
    pub failure: Option<String>,
    /// Tokens the call used (prompt and reply), as the endpoint reported them.
    #[serde(default)]
    pub tokens: u64,
}

/// One judgment of an evaluation item (rating one dialogue, or comparing two).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    /// The flow page the judgment was made on.
    pub page: String,
    pub item: String,
    pub lease: String,
    pub pool: ItemPool,
    /// The item's dialogues as shown; for a comparison the left one first.
    pub dialogues: Vec<String>,
    /// The system behind each of `dialogues`, in the same order.
    pub systems: Vec<String>,
    /// Comparison: the id of the dialogue chosen.
    #[serde(default)]
    pub choice: Option<String>,
    /// Comparison: the participant's reason for the choice.
    #[serde(default)]
    pub justification: Option<String>,
    /// Answers to the page's questions (rating scales and the like), by question id.
    #[serde(default)]
    pub answers: IndexMap<String, serde_json::Value>,
    /// Per-turn annotation: one entry per annotated turn.
    #[serde(default)]
    pub turns: Vec<TurnLabel>,
    /// Counted towards the item's `judgments_per_item`.
    pub counted: bool,
    /// Submitted after the lease had expired and the item no longer needed it.
    #[serde(default)]
    pub surplus: bool,
    /// Gold items: whether the known answer was given.
    #[serde(default)]
    pub gold_correct: Option<bool>,
    pub claimed_at_ms: u64,
    /// Arena: a system failed a turn of this battle, so the vote is kept but not counted (and
    /// the pair is battled again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub void: bool,
}

/// The arena vote choices besides a side's dialogue: neither side was better.
pub const VOTE_TIE: &str = "tie";
/// The arena vote choice: both sides were bad (scored as a tie).
pub const VOTE_BOTH_BAD: &str = "both_bad";

/// The labels given to one turn of a shown dialogue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnLabel {
    /// The dialogue the turn belongs to.
    pub dialogue: String,
    /// The turn's index in the dialogue, from 0.
    pub turn: u32,
    /// Checkbox annotation: the labels ticked (possibly none).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Scale annotation: the point chosen.
    #[serde(default)]
    pub score: Option<u32>,
}

/// How a lock was released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockRelease {
    Reply,
    Approved,
    Denied,
}

/// An event as stored: the kind plus who, when and where in the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Event schema version.
    pub v: u32,
    pub session: String,
    /// Gap-free position in the session's log, from 1.
    pub seq: u64,
    /// Server time, milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub actor: Actor,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The chat messages of a session's events, in log order: the sender's role and the text. What
/// dataset exports and evaluation items read as a stored session's utterances.
pub fn messages(events: &[Event]) -> impl Iterator<Item = (Role, &str)> {
    events.iter().filter_map(|e| match &e.kind {
        EventKind::Message { role, text, .. } => Some((*role, text.as_str())),
        _ => None,
    })
}
