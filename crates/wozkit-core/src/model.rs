//! The study format: the types a study file (YAML) deserialises into.
//!
//! These types are the single source of truth for the format: the loader deserialises into them,
//! `wozkit schema` derives the JSON Schema from them, and the engine reads them. Every struct
//! rejects unknown keys so a typo is reported instead of silently ignored.
//!
//! Conditions (`when`, `guard`, `goal`, bonus `when`, finish `when`) are CEL expressions. The world
//! variables are CEL variables of the same name; the engine adds `subtask`, `state`, `messages`,
//! `elapsed`, `time_left`, `milestones` and `busy_robots`, and in action guards `robot` and `target`.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Bounds on the numbers of a study, carried by the JSON Schema so the loader reports a value out
// of range at its line and column (docs/engine-semantics.md lists them). They keep every time
// and money computation far from overflow and catch slips such as milliseconds written as seconds.

/// Longest duration, limit or grace period, in seconds: 24 hours.
pub const MAX_SECONDS: u32 = 86_400;
/// Most minutes a payment counts: 24 hours.
pub const MAX_PAY_MINUTES: u32 = 1_440;
/// Largest amount of money in one payment rule (base, per minute, bonus, no partner).
pub const MAX_AMOUNT: u32 = 10_000;
/// Most chat messages `finish.min_messages` may ask for.
pub const MAX_MESSAGES: u32 = 10_000;
/// Largest hint prior weight of a transition.
pub const MAX_PRIOR: u32 = 1_000_000;
/// Fastest robot, in m/s.
pub const MAX_SPEED: u32 = 1_000;

/// A whole study: roles, the dialogue state machine, the world, surveys, pages and payment.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// Short machine name, e.g. `offshore-emergency`.
    pub id: String,
    /// Title shown to participants.
    pub title: String,
    /// One paragraph for the researcher (not shown to participants).
    #[serde(default)]
    pub description: String,
    /// What a crowdworker reads before accepting the task (MTurk's preview), in the
    /// participants' words and the study's language: the cover story, never the researcher's
    /// `description`. Without it the preview shows only the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// The language of the participants' pages (a BCP-47 tag: `en`, the default, or `zh-Hans`):
    /// which catalogue of interface strings they use and the pages' `lang` attribute.
    #[serde(default, skip_serializing_if = "crate::language::Language::is_default")]
    pub language: crate::language::Language,
    /// Version of the study file; logged with every session.
    #[serde(default = "default_version")]
    pub version: String,
    /// The two sides of the conversation (needed by studies with a live room).
    #[serde(default)]
    pub roles: Roles,
    /// Time limit, clock start, finish and disconnect rules.
    #[serde(default)]
    pub session: SessionRules,
    /// How participants are paired.
    #[serde(default)]
    pub pairing: Pairing,
    /// The simulated world: variables, locations, robots.
    #[serde(default)]
    pub world: World,
    /// Variables drawn once per session (where the emergency is, which robots are in service,
    /// how far they travel), and the world values that follow from them.
    #[serde(default, skip_serializing_if = "Scenario::is_empty")]
    pub scenario: Scenario,
    /// Subtasks shown as milestones on the progress bar, in order.
    #[serde(default)]
    pub subtasks: Vec<Subtask>,
    /// Media (GIF/PNG/SVG) by id; files are relative to the study folder.
    #[serde(default)]
    pub media: IndexMap<String, Media>,
    /// The dialogue states of the wizard; exactly one is `initial` (none in a study without a
    /// live room).
    #[serde(default)]
    pub states: Vec<State>,
    /// Options always offered to the wizard; they do not move the state machine.
    #[serde(default)]
    pub fixed_options: Vec<FixedOption>,
    /// Non-verbal actions (robot commands) of the wizard.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// CEL condition: the session's goal was reached (evaluated when it ends).
    #[serde(default)]
    pub goal: Option<String>,
    /// The post-task questionnaire: one for both roles, or one per role (`survey.user`,
    /// `survey.wizard`).
    #[serde(default)]
    pub survey: Survey,
    /// How participants are paid.
    #[serde(default)]
    pub payment: Option<Payment>,
    /// The pages each role goes through.
    #[serde(default)]
    pub flow: Flow,
    /// Dialogues to rate or compare, for studies whose flow has `rate` or `compare` pages, or
    /// the chats and battles with `systems` of `chat` and `arena` pages.
    #[serde(default)]
    pub evaluation: Option<crate::evaluation::Evaluation>,
    /// Dialogue systems under test, by name (`docs/bots.md`).
    #[serde(default)]
    pub systems: IndexMap<String, crate::systems::SystemSpec>,
    /// Tables the wizard searches (CSV or JSON files, or a SQLite file), loaded into SQLite when
    /// the study loads (`docs/engine-semantics.md`, *The wizard's database*).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseSpec>,
    /// How each session's user goal is drawn from the database (`docs/engine-semantics.md`,
    /// *User goals*).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goals: Option<crate::goals::GoalRules>,
    /// Language models that may play the user's seat, given the session's goal
    /// (`docs/simulated-users.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub simulated_users: Vec<crate::simulated_users::SimulatedUser>,
    /// A system that suggests the wizard's next message, which the wizard may send, edit or
    /// ignore (`docs/copilot.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copilot: Option<crate::copilot::Copilot>,
    /// What the crowd platforms need from the study: the completion codes of its Prolific
    /// study, by ending (`docs/platforms.md`).
    #[serde(default, skip_serializing_if = "crate::platforms::Platforms::is_empty")]
    pub platforms: crate::platforms::Platforms,
    /// How the study's domains, slots and wizard states map onto the public datasets'
    /// vocabularies for the exports (`docs/datasets.md`).
    #[serde(default, skip_serializing_if = "crate::datasets::Datasets::is_empty")]
    pub datasets: crate::datasets::Datasets,
}

impl Study {
    /// Whether the study has a live room (and so needs roles and dialogue states): the user
    /// flow leads to one. Without it the wizard flow is never used (an evaluation study leaves
    /// it at its default).
    pub fn has_room(&self) -> bool {
        self.flow.user.iter().any(|p| p.kind == PageKind::Room)
    }
}

fn default_version() -> String {
    "1".into()
}

/// The user side and the wizard side.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    pub user: RoleDef,
    pub wizard: RoleDef,
}

impl Default for Roles {
    fn default() -> Self {
        let role = |label: &str| RoleDef {
            label: label.into(),
            name: None,
            instructions: String::new(),
        };
        Roles {
            user: role("Participant"),
            wizard: role("Wizard"),
        }
    }
}

/// One side of the conversation.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    /// Role name shown in instructions, e.g. "Operator".
    pub label: String,
    /// Name shown in the chat, e.g. "Fred".
    #[serde(default)]
    pub name: Option<String>,
    /// Instructions shown before the room (plain text, paragraphs separated by blank lines).
    #[serde(default)]
    pub instructions: String,
}

/// When the clock starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockStart {
    /// When both participants are in the room.
    #[default]
    Start,
    /// At the wizard's first message.
    FirstWizardMessage,
}

/// Time limit, clock start, finish and disconnect rules.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRules {
    /// Seconds the dialogue may last; 0 means no limit.
    #[serde(default = "default_time_limit")]
    #[schemars(range(max = MAX_SECONDS))]
    pub time_limit_s: u32,
    #[serde(default)]
    pub clock_starts: ClockStart,
    /// The user cannot type until the wizard has spoken.
    #[serde(default)]
    pub user_waits_for_wizard: bool,
    /// When a participant may press "finish".
    #[serde(default)]
    pub finish: FinishRule,
    /// Seconds a disconnected partner is waited for before the session ends.
    #[serde(default = "default_grace")]
    #[schemars(range(max = MAX_SECONDS))]
    pub disconnect_grace_s: u32,
}

fn default_time_limit() -> u32 {
    360
}
fn default_grace() -> u32 {
    45
}

impl Default for SessionRules {
    fn default() -> Self {
        Self {
            time_limit_s: default_time_limit(),
            clock_starts: ClockStart::default(),
            user_waits_for_wizard: false,
            finish: FinishRule::default(),
            disconnect_grace_s: default_grace(),
        }
    }
}

/// When "finish" is allowed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishRule {
    /// Chat messages needed before finishing.
    #[serde(default)]
    #[schemars(range(max = MAX_MESSAGES))]
    pub min_messages: u32,
    /// CEL condition that must also hold.
    #[serde(default)]
    pub when: Option<String>,
}

/// What happens to a participant left without a partner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnNoPartner {
    /// A completion code marked "no partner", paid the waiting-time rate.
    #[default]
    Complete,
    /// A built-in bot takes the missing role.
    Bot,
}

/// How participants are paired.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pairing {
    /// Seconds in the waiting room before `on_timeout` applies.
    #[serde(default = "default_wait")]
    #[schemars(range(max = MAX_SECONDS))]
    pub wait_limit_s: u32,
    #[serde(default)]
    pub on_timeout: OnNoPartner,
    /// Seconds a participant who entered (or was switched to the other role) counts as on
    /// their way to the waiting room: newcomers' roles balance over the participants present,
    /// and a waiter of a role in surplus switches roles only once no partner can still be on
    /// their way. Keep it below `wait_limit_s`, so a surplus is resolved before waits run out.
    #[serde(default = "default_arrival")]
    #[schemars(range(max = MAX_SECONDS))]
    pub arrival_s: u32,
}

fn default_wait() -> u32 {
    180
}

fn default_arrival() -> u32 {
    120
}

impl Default for Pairing {
    fn default() -> Self {
        Self {
            wait_limit_s: default_wait(),
            on_timeout: OnNoPartner::default(),
            arrival_s: default_arrival(),
        }
    }
}

/// The simulated world.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// World variables and their initial values (bool, number or string).
    #[serde(default)]
    pub variables: IndexMap<String, serde_json::Value>,
    /// Places robots can be sent to.
    #[serde(default)]
    pub locations: Vec<Location>,
    /// Media id of the map shown to the user.
    #[serde(default)]
    pub map: Option<String>,
    /// Kinds of robots, e.g. `ground`, `aerial`.
    #[serde(default)]
    pub robot_kinds: IndexMap<String, RobotKind>,
    #[serde(default)]
    pub robots: Vec<Robot>,
    /// A hazard marked over the map at a location until it is dealt with.
    #[serde(default)]
    pub alarm: Option<Alarm>,
}

/// A hazard marked on the map: drawn at its location while active, shown cleared once
/// `cleared_when` holds or the session's goal is reached.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Alarm {
    /// Where it is: a location id, or the name of a world variable holding one.
    pub at: String,
    /// CEL condition: the hazard is dealt with (besides reaching the goal, which always clears it).
    #[serde(default)]
    pub cleared_when: Option<String>,
    /// The words on the map while active.
    #[serde(default = "default_alarm_label")]
    pub label: String,
    /// The words on the map once cleared.
    #[serde(default = "default_alarm_cleared_label")]
    pub cleared_label: String,
}

fn default_alarm_label() -> String {
    "Alarm".into()
}

fn default_alarm_cleared_label() -> String {
    "All clear".into()
}

/// Scenario variation: variables drawn once per session from its seeded RNG, logged as a
/// `scenario_drawn` event before anything depends on them (`docs/engine-semantics.md`).
///
/// Each drawn variable must also be declared under `world.variables` (whose value is the
/// default that `validate` and `graph` read); the draw overrides it. `set` then computes other
/// world variables from the drawn ones (CEL), and `out_of_service` takes robots out of the
/// session (CEL per robot id).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The variables drawn, in order, by name.
    #[serde(default)]
    pub variables: IndexMap<String, ScenarioVar>,
    /// World variables computed once after the draw: CEL expressions over the world variables
    /// (drawn values included), e.g. `"{'pu_et': 'east tower', 'pu_nt': 'north tower'}[fire_location]"`.
    #[serde(default)]
    pub set: IndexMap<String, String>,
    /// Robots out of service in a session: robot id -> CEL condition over the world variables,
    /// evaluated once after the draw. An out-of-service robot stays at its start and takes no action.
    #[serde(default)]
    pub out_of_service: IndexMap<String, String>,
}

impl Scenario {
    /// Whether the study draws nothing.
    pub fn is_empty(&self) -> bool {
        self.variables.is_empty() && self.set.is_empty() && self.out_of_service.is_empty()
    }
}

/// One scenario variable: a weighted choice among values, or a uniform range.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioVar {
    /// The values to choose from, each with its weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Vec<ScenarioChoice>>,
    /// A number drawn uniformly between `min` and `max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ScenarioRange>,
}

/// One value of a choice and its weight (relative; default 1).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioChoice {
    /// The value (string, number or bool), as a world variable holds it.
    pub value: serde_json::Value,
    /// Relative weight; must be positive.
    #[serde(default = "one")]
    pub weight: f64,
}

/// A uniform range. With `integer: true` the draw is a whole number in `min..=max`; with `step`
/// it is `min + k * step` for a whole `k` (up to `max`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRange {
    pub min: f64,
    pub max: f64,
    /// Distance between the values that may be drawn; none: any value in between.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
    /// Whole numbers only (the default `step` is then 1).
    #[serde(default)]
    pub integer: bool,
}

/// A place in the world.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Location {
    pub id: String,
    pub name: String,
    /// Position on the map in percent of its width and height.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub x: f64,
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub y: f64,
}

/// A kind of robot.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RobotKind {
    pub label: String,
}

/// One robot.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Robot {
    pub id: String,
    pub name: String,
    /// A key of `world.robot_kinds`.
    pub kind: String,
    /// Skills, matched against an action's `requires`.
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub equipment: Vec<String>,
    /// Speed in m/s (shown in templates).
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_SPEED))]
    pub speed: f64,
    /// Battery in percent at the start.
    #[serde(default = "full_battery")]
    #[schemars(range(min = 0, max = 100))]
    pub battery: f64,
    /// Location id where it starts.
    pub start: String,
}

fn full_battery() -> f64 {
    100.0
}

/// A subtask shown as a milestone.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Subtask {
    pub id: String,
    pub label: String,
    /// Progress bar percentage once this subtask is done.
    #[schemars(range(max = 100))]
    pub progress: u32,
}

/// A media file.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Media {
    /// Path relative to the study folder.
    pub file: String,
    /// Text alternative for screen readers.
    #[serde(default)]
    pub alt: String,
}

/// The dialogue-act type of a wizard turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActType {
    Request,
    Interaction,
    Action,
    Update,
}

impl ActType {
    pub const ALL: [ActType; 4] = [
        ActType::Request,
        ActType::Interaction,
        ActType::Action,
        ActType::Update,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ActType::Request => "request",
            ActType::Interaction => "interaction",
            ActType::Action => "action",
            ActType::Update => "update",
        }
    }
}

/// A dialogue state: one wizard utterance with its dialogue act.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub id: String,
    /// Dialogue-act label; defaults to the id.
    #[serde(default)]
    pub label: Option<String>,
    #[serde(rename = "type")]
    pub act_type: ActType,
    /// Utterances; one is picked at random. `{slot}` placeholders are filled from the world.
    #[serde(default)]
    pub templates: Vec<String>,
    /// States offered next.
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// CEL condition for this state to be offered at all.
    #[serde(default)]
    pub when: Option<String>,
    /// Offered from every state (e.g. status updates).
    #[serde(default)]
    pub global: bool,
    /// The start state (never said).
    #[serde(default)]
    pub initial: bool,
    /// Entering this state ends the dialogue.
    #[serde(default)]
    pub terminal: bool,
    /// Entering this state sets the current subtask.
    #[serde(default)]
    pub subtask: Option<String>,
    /// Effects when the wizard says this.
    #[serde(default)]
    pub effects: Effects,
    /// The wizard waits after saying this.
    #[serde(default)]
    pub lock: Option<Lock>,
}

impl State {
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.id)
    }
}

/// A transition, written either as the target id or with a prior and guard.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Transition {
    To(String),
    Full(TransitionFull),
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransitionFull {
    pub to: String,
    /// Hint prior weight (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = MAX_PRIOR))]
    pub prior: f64,
    /// CEL condition for this transition.
    #[serde(default)]
    pub when: Option<String>,
}

fn one() -> f64 {
    1.0
}

impl Transition {
    pub fn to(&self) -> &str {
        match self {
            Transition::To(s) => s,
            Transition::Full(f) => &f.to,
        }
    }
    pub fn prior(&self) -> f64 {
        match self {
            Transition::To(_) => 1.0,
            Transition::Full(f) => f.prior,
        }
    }
    pub fn when(&self) -> Option<&str> {
        match self {
            Transition::To(_) => None,
            Transition::Full(f) => f.when.as_deref(),
        }
    }
}

/// Changes to the world and the dialogue.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Effects {
    /// World variables to set.
    #[serde(default)]
    pub set: IndexMap<String, serde_json::Value>,
    /// Subtask completed: the milestone is shown on the progress bar.
    #[serde(default)]
    pub milestone: Option<String>,
    /// Subtask that becomes current.
    #[serde(default)]
    pub subtask: Option<String>,
    /// Media shown to both participants.
    #[serde(default)]
    pub media: Option<String>,
    /// Dialogue state entered (without a wizard message): its transitions are offered next.
    #[serde(default)]
    pub enter: Option<String>,
    /// States offered from now on until said.
    #[serde(default)]
    pub unlock: Vec<String>,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
            && self.milestone.is_none()
            && self.subtask.is_none()
            && self.media.is_none()
            && self.enter.is_none()
            && self.unlock.is_empty()
    }
}

/// The kind of lock a state puts on the wizard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LockKind {
    /// Wait for any reply from the user.
    Reply,
    /// The user must approve or deny.
    Approval,
}

/// A lock after a state is said.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub kind: LockKind,
    /// Question shown to the user for an approval.
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default = "approve")]
    pub approve_label: String,
    #[serde(default = "deny")]
    pub deny_label: String,
    #[serde(default)]
    pub on_approve: Effects,
    #[serde(default)]
    pub on_deny: Effects,
}

fn approve() -> String {
    "Approve".into()
}
fn deny() -> String {
    "Deny".into()
}

/// An option always offered to the wizard.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixedOption {
    pub id: String,
    pub text: String,
    #[serde(rename = "type", default = "interaction")]
    pub act_type: ActType,
}

fn interaction() -> ActType {
    ActType::Interaction
}

/// An action's guard: one CEL condition, or a list of parts that must all hold, each with the
/// sentence the wizard sees when it does not (so a refusal says why, in the study's words):
///
/// ```yaml
/// guard:
///   - if: "target == fire_location"
///     else: "Robots go to the alarm area: {target} is not it."
///   - if: "robot.location != target"
///     else: "{robot} is already at {target}."
/// ```
///
/// `{robot}`, `{target}` and `{action}` in a reason become the robot's name, the target
/// location's name and the action's label.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Guard {
    /// One condition; a refusal then says only that the action is not possible now.
    Expr(String),
    /// Parts, checked in order; the first that does not hold gives the reason.
    Parts(Vec<GuardPart>),
}

/// One part of a [`Guard`].
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuardPart {
    /// CEL condition that must hold.
    #[serde(rename = "if")]
    pub when: String,
    /// Shown to the wizard when it does not hold.
    #[serde(rename = "else")]
    pub reason: String,
}

impl Guard {
    /// Each part's condition (one for [`Guard::Expr`]), with its JSON pointer suffix under the
    /// guard (`""` or `/N/if`).
    pub fn conditions(&self) -> Vec<(String, &str)> {
        match self {
            Guard::Expr(e) => vec![(String::new(), e.as_str())],
            Guard::Parts(parts) => parts
                .iter()
                .enumerate()
                .map(|(k, p)| (format!("/{k}/if"), p.when.as_str()))
                .collect(),
        }
    }

    /// The whole guard as one CEL condition: the parts joined with `&&`.
    pub fn expression(&self) -> String {
        match self {
            Guard::Expr(e) => e.clone(),
            Guard::Parts(parts) => parts
                .iter()
                .map(|p| format!("({})", p.when))
                .collect::<Vec<_>>()
                .join(" && "),
        }
    }
}

/// A non-verbal action of the wizard, done by a robot.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub id: String,
    /// Button label.
    pub label: String,
    /// Dialogue-act label logged for the action (defaults to the id).
    #[serde(default)]
    pub act: Option<String>,
    /// The action takes a target location.
    #[serde(default)]
    pub target: bool,
    /// The robot moves to the target (its location changes on completion).
    #[serde(default)]
    pub moves: bool,
    /// Capability the robot must have.
    #[serde(default)]
    pub requires: Option<String>,
    /// When the action may start: one CEL condition, or parts that must all hold, each with
    /// the reason the wizard is given when it does not; `robot` (id, kind, location,
    /// capabilities, battery) and `target` are bound.
    #[serde(default)]
    pub guard: Option<Guard>,
    /// No other robot may be busy.
    #[serde(default)]
    pub exclusive: bool,
    /// Duration in seconds.
    pub duration: Duration,
    /// A world variable holding a distance in metres: the action then takes that distance
    /// divided by the robot's `speed` seconds (at most 24 h), instead of `duration` (which still
    /// applies to a robot without speed). Lets a scenario draw how far the robots travel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<String>,
    /// Seconds between progress updates; 0 means none.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_SECONDS))]
    pub progress_every_s: f64,
    /// Battery percent used.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub battery_cost: f64,
    /// Effects on completion.
    #[serde(default)]
    pub on_complete: Effects,
    /// Media shown on completion by robot kind (overrides `on_complete.media`).
    #[serde(default)]
    pub media_by_kind: IndexMap<String, String>,
}

/// How long an action takes.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Duration {
    /// Seconds when no kind matches.
    #[schemars(range(min = 0, max = MAX_SECONDS))]
    pub default: f64,
    /// Seconds by robot kind.
    #[serde(default)]
    #[schemars(extend("additionalProperties" = {"type": "number", "minimum": 0, "maximum": MAX_SECONDS}))]
    pub by_kind: IndexMap<String, f64>,
}

/// The post-task questionnaire and its questions: the one question model that every page asking
/// something uses (`crate::questions`).
pub use crate::questions::{MatrixRow, Question, QuestionKind, Questionnaire, Survey};

/// The payment scheme.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Payment {
    #[serde(default = "usd")]
    pub currency: String,
    #[schemars(range(min = 0, max = MAX_AMOUNT))]
    pub base: f64,
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_AMOUNT))]
    pub per_minute: f64,
    /// Minutes paid at most.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_PAY_MINUTES))]
    pub max_minutes: f64,
    #[serde(default)]
    pub bonus: Option<Bonus>,
    /// Paid to someone who got no partner.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_AMOUNT))]
    pub no_partner: f64,
    /// Evaluation studies: paid for each judged item (counted judgments, plus surplus ones
    /// when `evaluation.pay_surplus`), on top of base and minutes.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_AMOUNT))]
    pub per_item: f64,
    /// What the study may spend in all, in `currency`: the researcher console shows the payment
    /// table's total (test participants left out) against it and warns past 90 %. Nothing is
    /// refused when it is reached.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub budget: Option<f64>,
}

fn usd() -> String {
    "USD".into()
}

/// A bonus on a condition.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bonus {
    #[schemars(range(min = 0, max = MAX_AMOUNT))]
    pub amount: f64,
    /// CEL condition over the final world.
    pub when: String,
}

/// The pages per role.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    #[serde(default = "default_pages")]
    pub user: Vec<Page>,
    #[serde(default = "default_pages")]
    pub wizard: Vec<Page>,
    /// Prolific completion redirect, e.g. `https://app.prolific.com/submissions/complete?cc={code}`:
    /// the completion page links to it and goes there after a few seconds, for participants
    /// who came from Prolific only. `{code}` is the Prolific study's code for the ending reached
    /// (`platforms.prolific.completion_codes`); with codes declared and no URL, Prolific's own
    /// address is used.
    #[serde(default)]
    pub completion_url: Option<String>,
}

/// Prolific's completion redirect, for a study that declares Prolific codes and no
/// `flow.completion_url`.
pub const PROLIFIC_COMPLETION_URL: &str = "https://app.prolific.com/submissions/complete?cc={code}";

impl Study {
    /// Where a Prolific participant who reached `ending` is sent, with the Prolific study's code
    /// for it; `None` when the study has no code for that ending (and the URL needs one), or no
    /// web address to send to.
    pub fn prolific_redirect(&self, ending: crate::platforms::EndingKind) -> Option<String> {
        let code = self.prolific_code(ending);
        let url = match (&self.flow.completion_url, code) {
            (Some(url), _) => url.as_str(),
            (None, Some(_)) => PROLIFIC_COMPLETION_URL,
            (None, None) => return None,
        };
        let url = if url.contains("{code}") {
            url.replace("{code}", code?)
        } else {
            url.to_string()
        };
        // Only web addresses: a study file cannot turn the page into a `javascript:` link.
        (url.starts_with("https://") || url.starts_with("http://")).then_some(url)
    }

    /// The Prolific study's code for an ending, if the study declares one.
    pub fn prolific_code(&self, ending: crate::platforms::EndingKind) -> Option<&str> {
        self.platforms
            .prolific
            .as_ref()
            .and_then(|p| p.completion_codes.code(ending))
    }
}

impl Default for Flow {
    fn default() -> Self {
        Self {
            user: default_pages(),
            wizard: default_pages(),
            completion_url: None,
        }
    }
}

/// Kinds of pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PageKind {
    Consent,
    Instructions,
    Waiting,
    Room,
    Survey,
    Completion,
    Questions,
    Onboarding,
    Rate,
    Compare,
    /// Chat with one system, then rate it (`evaluation.task: chat`).
    Chat,
    /// Chat with two hidden systems at once and vote (`evaluation.task: arena`).
    Arena,
    /// Wizard flow only: the desk where a wizard answers the turns of a `human` system.
    Desk,
}

/// One page in the flow. Pages are shown in order; a page with `when` is skipped when its
/// condition is false, and `next` jumps to another page (by id) once this one is done.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Page {
    pub kind: PageKind,
    /// Names the page for `next` jumps and in the log (default: its kind and position).
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Markdown (headings, lists, emphasis, links; no HTML).
    #[serde(default)]
    pub text: Option<String>,
    /// CEL condition over `answers` (earlier pages' answers by question id), `platform`,
    /// `params` (the entry link's parameters), `onboarding` (`"passed"`, `"failed"` or
    /// `"none"`), `judged` (items judged so far) and `test`; the page is skipped when false.
    #[serde(default)]
    pub when: Option<String>,
    /// The page to go to after this one (by id), instead of the next in the list.
    #[serde(default)]
    pub next: Option<String>,
    /// The questions of a `questions` page.
    #[serde(default)]
    pub questions: Vec<crate::questions::Question>,
}

impl Page {
    /// A page of `kind` with nothing else set.
    pub fn of(kind: PageKind) -> Page {
        Page {
            kind,
            id: None,
            title: None,
            text: None,
            when: None,
            next: None,
            questions: vec![],
        }
    }
}

fn default_pages() -> Vec<Page> {
    use PageKind::*;
    [Consent, Instructions, Waiting, Room, Survey, Completion]
        .into_iter()
        .map(Page::of)
        .collect()
}

/// The wizard's database: tables by name, each from a file of the study folder or from a SQLite
/// file (`sqlite`). Table and column names are letters, digits and `_` (they become SQL names).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    /// The searchable tables, by name.
    #[serde(default)]
    pub tables: IndexMap<String, TableSpec>,
    /// A SQLite file (relative to the study folder) holding the tables that name no `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqlite: Option<String>,
}

/// One table of the wizard's database.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// A `.csv` file (a header row, then one row per record) or a `.json` file, relative to the
    /// study folder. A JSON table is an array of rows, each an object or (as CrossWOZ's database
    /// files) a pair `[name, object]`; a value is a text, a number, true/false, null or a list
    /// of those (stored as one text, the items joined by `, `). None: the table of the same name
    /// in the database's `sqlite` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The column whose value names a row (unique, never empty): what `select` takes and what
    /// the events log.
    pub key: String,
    /// The columns the wizard's results table shows, in this order (every column of the table
    /// when empty). Searches may still filter on every column.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub show: Vec<String>,
    /// The table's name as the wizard reads it in the database panel ("Restaurants"); the
    /// table's own name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The wizard's words for columns (`price_per_person: Price per person`): the headers of the
    /// results table and the search fields. A column without one shows its own name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub labels: IndexMap<String, String>,
}
