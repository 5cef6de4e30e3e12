//! The evaluation part of a study: the dialogues people judge, how they become items (one
//! dialogue to rate, or two to compare), how many judgments each item needs, and the known-answer
//! items of onboarding and attention checks.
//!
//! Dialogues are written in the study, in `dialogues_file`, or selected in the store
//! (`from_store`: the server reads those at start and appends them to [`Evaluation::dialogues`]).
//! The flow pages `rate`, `compare` and `onboarding` read this section; the server turns
//! [`Evaluation::items`] into the store's items and leases (exactly `judgments_per_item`
//! judgments per item). Pure data and pure functions, like the rest of the core.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{Event, EventKind, ItemPool};
use crate::model::MAX_SECONDS;
use crate::questions::Question;

/// Most judgments one item may ask for.
pub const MAX_JUDGMENTS: u32 = 1_000;
/// Most items one worker may be given in one participation.
pub const MAX_ITEMS_PER_WORKER: u32 = 10_000;
/// Shortest lease, in seconds: a worker needs time to read a dialogue.
pub const MIN_LEASE_S: u32 = 10;

/// What the participants of an evaluation study do with the dialogues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalTask {
    /// Rate one dialogue at a time on the study's questions.
    Rate,
    /// Compare two dialogues side by side and pick one (ACUTE-Eval).
    Compare,
    /// Chat with one of the study's systems, then rate it (a `chat` page). Each system is an
    /// item: it gets `judgments_per_item` finished conversations.
    Chat,
    /// Chat with two hidden systems at once and vote for the better one (an `arena` page).
    /// Each pair of systems is an item: it gets `judgments_per_item` counted battles.
    Arena,
    /// Write both sides of a scenario's dialogue, USER and ASSISTANT in turn, on one page
    /// (Taskmaster-1 self-dialogs). Each scenario of `self_dialog.scenarios` is an item: it gets
    /// `judgments_per_item` written dialogues, each by a different worker.
    SelfDialog,
    /// Mark API-argument spans in the utterances of a dialogue with the slot names of
    /// `spans.slots` (Taskmaster-1 `segments`). Each dialogue is an item, annotated by
    /// `judgments_per_item` different workers.
    Spans,
    /// Label single turns of dialogues (stored sessions or written ones) with dialogue acts of
    /// `acts.acts` and slot-value pairs of `acts.slots`. Each selected turn (`acts.which`) is an
    /// item `DIALOGUE#TURN` (its one "dialogue" is the turn itself, so a worker may label several
    /// turns of a dialogue), labelled by `judgments_per_item` different workers.
    TurnActs,
}

impl EvalTask {
    /// Whether participants talk to live systems (chat and arena) rather than judge written
    /// dialogues.
    pub fn is_live(self) -> bool {
        matches!(self, EvalTask::Chat | EvalTask::Arena)
    }
}

/// The `evaluation` section of a study.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluation {
    pub task: EvalTask,
    /// Different workers who judge each item (exactly this many judgments are counted).
    #[serde(default = "default_judgments")]
    #[schemars(range(min = 1, max = MAX_JUDGMENTS))]
    pub judgments_per_item: u32,
    /// Items one worker judges (at most) in one participation, gold items not counted.
    #[serde(default = "default_items_per_worker")]
    #[schemars(range(min = 1, max = MAX_ITEMS_PER_WORKER))]
    pub items_per_worker: u32,
    /// Seconds a worker holds an item before it goes back to the pool.
    #[serde(default = "default_lease")]
    #[schemars(range(min = MIN_LEASE_S, max = MAX_SECONDS))]
    pub lease_s: u32,
    /// The dialogues, written in the study file.
    #[serde(default)]
    pub dialogues: Vec<Dialogue>,
    /// A YAML or JSON file of more dialogues (a list, same shape), relative to the study folder.
    #[serde(default)]
    pub dialogues_file: Option<String>,
    /// More dialogues: sessions in the store (imported datasets or collected sessions), selected
    /// by one filter or a list of them. Read when the server starts.
    #[serde(default)]
    pub from_store: Option<FromStore>,
    /// Comparisons: which pairs of dialogues are items (given, or formed by a rule).
    #[serde(default)]
    pub pairs: Option<Pairs>,
    /// Ratings: the dialogues to rate (default: every dialogue not used by onboarding or gold).
    #[serde(default)]
    pub items: Option<Vec<String>>,
    /// Comparisons: the question asked of each pair.
    #[serde(default)]
    pub question: Option<String>,
    /// Comparisons: the reason asked for the choice.
    #[serde(default)]
    pub justification: Justification,
    /// Questions asked of each item (rating scales; for comparisons, optional extras).
    #[serde(default)]
    pub questions: Vec<Question>,
    /// Per-turn annotation of the shown dialogues.
    #[serde(default)]
    pub annotate: Option<TurnAnnotation>,
    /// Known-answer items a worker must pass before judging (shown by an `onboarding` page).
    #[serde(default)]
    pub onboarding: Option<Onboarding>,
    /// Attention checks mixed into the items.
    #[serde(default)]
    pub gold: Option<Gold>,
    /// The page shown when no item is left for a worker.
    #[serde(default)]
    pub no_items: Ending,
    /// Whether a surplus judgment (submitted after its lease expired, when the item no longer
    /// needed it) is paid. It is always kept.
    #[serde(default = "yes")]
    pub pay_surplus: bool,
    /// Worker ids (of any platform) not admitted to this study.
    #[serde(default)]
    pub blocklist: Vec<String>,
    /// Chats and battles: the systems under test, by name in the study's `systems` (default:
    /// every one of them, in the order declared).
    #[serde(default)]
    pub systems: Vec<String>,
    /// Chats and battles: turns, time and what is asked along the way.
    #[serde(default)]
    pub conversation: Conversation,
    /// Arena: which pair the next battle is given to.
    #[serde(default)]
    pub schedule: Schedule,
    /// Arena: the leaderboard's settings.
    #[serde(default)]
    pub leaderboard: LeaderboardSettings,
    /// Self-dialogs (`task: self_dialog`): the scenarios and the length of a dialogue.
    #[serde(default)]
    pub self_dialog: Option<SelfDialogs>,
    /// Span annotation (`task: spans`): the slot names a span may be marked with.
    #[serde(default)]
    pub spans: Option<SpanAnnotation>,
    /// Dialogue-act annotation (`task: turn_acts`): the act set, the slots and which turns.
    #[serde(default)]
    pub acts: Option<ActAnnotation>,
    /// Model judges asked the same questions, calibrated against the people's judgments
    /// (`wozkit judge`); their answers never count towards `judgments_per_item`.
    #[serde(default)]
    pub judges: Vec<crate::judges::ModelJudge>,
    /// Set by the loader when `systems` was left out and filled with every declared system
    /// (so systems added by `serve --add-system` join too).
    #[serde(skip)]
    pub systems_defaulted: bool,
}

/// The rules of a live conversation with systems (`chat` and `arena` pages). A turn is one
/// message of the participant.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    /// Turns before the participant may end the chat (or vote).
    #[serde(default = "default_min_turns")]
    #[schemars(range(min = 1, max = 200))]
    pub min_turns: u32,
    /// Turns after which the input closes.
    #[serde(default = "default_max_turns")]
    #[schemars(range(min = 1, max = 200))]
    pub max_turns: u32,
    /// Seconds from the first message after which the input closes.
    #[serde(default)]
    #[schemars(range(min = 10, max = MAX_SECONDS))]
    pub time_limit_s: Option<u32>,
    /// Longest message, in characters.
    #[serde(default = "default_max_chars")]
    #[schemars(range(min = 1, max = 10_000))]
    pub max_chars: u32,
    /// Live feedback under each reply: satisfied / frustrated buttons (as CRS Arena collects).
    #[serde(default)]
    pub feedback: bool,
    /// Arena: show the systems' names after the vote.
    #[serde(default = "yes")]
    pub reveal: bool,
    /// Shown in the empty input box.
    #[serde(default)]
    pub placeholder: Option<String>,
}

impl Default for Conversation {
    fn default() -> Self {
        Conversation {
            min_turns: default_min_turns(),
            max_turns: default_max_turns(),
            time_limit_s: None,
            max_chars: default_max_chars(),
            feedback: false,
            reveal: true,
            placeholder: None,
        }
    }
}

fn default_min_turns() -> u32 {
    3
}
fn default_max_turns() -> u32 {
    10
}
fn default_max_chars() -> u32 {
    1000
}

/// How an arena chooses the pair of the next battle. Either way each pair gets exactly
/// `judgments_per_item` counted battles; the schedule decides the order in which they come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// The pair with the fewest battles (done plus running) first: every pair keeps an equal
    /// share all along.
    #[default]
    Balanced,
    /// The pair whose outcome is least certain first: the widest interval of its win rate
    /// from the counted battles so far (few battles, or a win rate near one half), so that
    /// early battles go where they tell the most.
    Uncertain,
}

/// How uncertain a pair's outcome is after `a_wins`, `b_wins` and `ties` counted battles: the
/// standard error of the first system's smoothed score share, (wins + ties / 2 + 1) / (n + 2),
/// over n + 2 battles. Larger is less certain; a pair never battled has the largest (0.3536).
pub fn pair_uncertainty(a_wins: u64, b_wins: u64, ties: u64) -> f64 {
    let n = (a_wins + b_wins + ties) as f64;
    let p = (a_wins as f64 + ties as f64 / 2.0 + 1.0) / (n + 2.0);
    (p * (1.0 - p) / (n + 2.0)).sqrt()
}

/// How the arena's leaderboard is computed and who may see it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderboardSettings {
    /// Shown to anyone at `/leaderboard/STUDY` (otherwise to researchers only).
    #[serde(default = "yes")]
    pub public: bool,
    /// Elo's K factor.
    #[serde(default = "default_elo_k")]
    #[schemars(range(min = 0.0, max = 400.0))]
    pub elo_k: f64,
    /// Every system's Elo rating before its first battle.
    #[serde(default = "default_elo_start")]
    #[schemars(range(min = 0.0, max = 10_000.0))]
    pub elo_start: f64,
    /// Bootstrap resamples of the Bradley-Terry intervals.
    #[serde(default = "default_bootstrap")]
    #[schemars(range(min = 0, max = 10_000))]
    pub bootstrap: u32,
    /// Seed of the bootstrap (so the intervals are reproducible).
    #[serde(default)]
    pub seed: u64,
}

impl Default for LeaderboardSettings {
    fn default() -> Self {
        LeaderboardSettings {
            public: true,
            elo_k: default_elo_k(),
            elo_start: default_elo_start(),
            bootstrap: default_bootstrap(),
            seed: 0,
        }
    }
}

fn default_elo_k() -> f64 {
    16.0
}
fn default_elo_start() -> f64 {
    1000.0
}
fn default_bootstrap() -> u32 {
    1000
}

/// The speaker name per-turn annotation uses for a system's replies in chats and battles.
pub const SYSTEM_SPEAKER: &str = "system";

fn default_judgments() -> u32 {
    3
}
fn default_items_per_worker() -> u32 {
    5
}
fn default_lease() -> u32 {
    600
}
fn yes() -> bool {
    true
}

/// One dialogue to be judged.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dialogue {
    /// Unique among the study's dialogues.
    pub id: String,
    /// The system (model, wizard, …) whose side of the conversation is judged.
    pub system: String,
    /// Dialogues with the same scenario are compared with each other by `pairs.rule`.
    #[serde(default)]
    pub scenario: Option<String>,
    /// Shown above the turns (a persona, a user goal).
    #[serde(default)]
    pub context: Option<String>,
    pub turns: Vec<Turn>,
}

/// One turn of a dialogue.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Who speaks, e.g. `user` or `bot`; per-turn annotation picks turns by speaker.
    pub speaker: String,
    pub text: String,
    /// Whether the turn was typed as free text (`false`: chosen from a wizard's states or
    /// options); unknown for written dialogues. `acts.which: wizard_free_text` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_text: Option<bool>,
}

/// The `from_store` field: one selection of stored sessions, or several.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FromStore {
    One(StoreSelection),
    Many(Vec<StoreSelection>),
}

impl FromStore {
    /// The selections, in the order written.
    pub fn selections(&self) -> &[StoreSelection] {
        match self {
            FromStore::One(s) => std::slice::from_ref(s),
            FromStore::Many(list) => list,
        }
    }
}

/// Stored sessions taken as dialogues: each becomes a dialogue whose id is the session's id in
/// the store, whose turns are its messages (speaker `user` or `wizard`), in the order the store
/// lists sessions (creation time, then id).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreSelection {
    /// The study the sessions belong to in the store, e.g. `import:taskmaster1` for an imported
    /// dataset, or a live study's id.
    pub study: String,
    /// Which sessions: `ended` (default) or `any` (live ones too).
    #[serde(default)]
    pub status: StoreStatus,
    /// At most this many sessions (the first ones listed).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub limit: Option<u32>,
    /// The system of the dialogues: a name, or `{annotation: KEY, field: NAME}` to read it from
    /// each session's annotation (default: the store study).
    #[serde(default)]
    pub system: Option<StoreValue>,
    /// The scenario of the dialogues (for `pairs.match_by: scenario`), likewise.
    #[serde(default)]
    pub scenario: Option<StoreValue>,
}

/// Which stored sessions a selection takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreStatus {
    /// Ended sessions only (every finished import is ended).
    #[default]
    Ended,
    /// Live sessions too.
    Any,
}

/// A value of every selected session: written out, or read from each session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StoreValue {
    /// The same for every session.
    Fixed(String),
    /// A field of the session's first annotation with key `annotation` (e.g. an imported
    /// dataset's `crsarena.dialogue`); `field` may be a dotted path into nested objects.
    Field { annotation: String, field: String },
}

impl StoreValue {
    /// The value for a session with these events, `None` when the session does not have it
    /// (a number or boolean field is written out as text).
    pub fn of(&self, events: &[Event]) -> Option<String> {
        let (key, field) = match self {
            StoreValue::Fixed(v) => return Some(v.clone()),
            StoreValue::Field { annotation, field } => (annotation, field),
        };
        let note = events.iter().find_map(|e| match &e.kind {
            EventKind::Annotation { key: k, value } if k == key => Some(value),
            _ => None,
        })?;
        let found = field.split('.').try_fold(note, |v, part| v.get(part))?;
        match found {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

impl std::fmt::Display for StoreValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreValue::Fixed(v) => write!(f, "`{v}`"),
            StoreValue::Field { annotation, field } => {
                write!(f, "{{annotation: {annotation}, field: {field}}}")
            }
        }
    }
}

impl Dialogue {
    /// A stored session as a dialogue: its messages, in order, are the turns (the speaker is the
    /// sender's role, `user` or `wizard`). `None` when it has no message.
    pub fn from_events(
        id: &str,
        system: String,
        scenario: Option<String>,
        events: &[Event],
    ) -> Option<Dialogue> {
        let turns: Vec<Turn> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Message { role, text, source } => Some(Turn {
                    speaker: role.as_str().to_string(),
                    text: text.to_string(),
                    free_text: Some(matches!(source, crate::event::MessageSource::Free)),
                }),
                _ => None,
            })
            .collect();
        (!turns.is_empty()).then(|| Dialogue {
            id: id.to_string(),
            system,
            scenario,
            context: None,
            turns,
        })
    }
}

/// How comparison items are made.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pairs {
    /// Pairs written out.
    #[serde(default)]
    pub given: Vec<GivenPair>,
    /// Or a rule forming the pairs.
    #[serde(default)]
    pub rule: Option<PairRule>,
    /// With a rule: how two systems' dialogues are matched.
    #[serde(default)]
    pub match_by: MatchBy,
}

/// One pair written out.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GivenPair {
    pub a: String,
    pub b: String,
}

/// Rules forming comparison pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PairRule {
    /// Every system against every other system.
    AllSystems,
}

/// How a rule matches the dialogues of two systems.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchBy {
    /// Dialogues with the same `scenario` (the n-th of one system with the n-th of the other).
    #[default]
    Scenario,
    /// The n-th dialogue of one system with the n-th of the other, in file order.
    Order,
}

/// The reason asked for a comparison's choice.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Justification {
    /// Asked at all.
    #[serde(default = "yes")]
    pub ask: bool,
    #[serde(default = "yes")]
    pub required: bool,
    /// Fewest words of a required reason.
    #[serde(default)]
    #[schemars(range(max = 1000))]
    pub min_words: u32,
    #[serde(default)]
    pub prompt: Option<String>,
}

impl Default for Justification {
    fn default() -> Self {
        Justification {
            ask: true,
            required: true,
            min_words: 0,
            prompt: None,
        }
    }
}

/// How turns are annotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnnotationKind {
    /// Any of `options` may be ticked for each turn (none is an answer too).
    Checkboxes,
    /// One point of a scale for each turn.
    Scale,
}

/// Per-turn annotation (as ParlAI's model_chat "buckets").
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnAnnotation {
    /// The speaker whose turns are annotated, e.g. `bot`.
    pub speaker: String,
    pub kind: AnnotationKind,
    /// Shown above the dialogue.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Checkbox labels.
    #[serde(default)]
    pub options: Vec<String>,
    /// Points of the scale, 2 to 11.
    #[serde(default)]
    pub points: Option<u32>,
    #[serde(default)]
    pub low: Option<String>,
    #[serde(default)]
    pub high: Option<String>,
    /// Checkboxes: options that rule out every other, e.g. `None of these`; a turn with one of
    /// them ticked beside another option is refused with a message next to the turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclusive: Vec<String>,
    /// Every annotated turn needs an answer (a ticked option, or a point of the scale); a turn
    /// left without one is refused with a message next to it. Default: false, a turn may be
    /// left blank.
    #[serde(default)]
    pub required: bool,
}

impl TurnAnnotation {
    pub fn points(&self) -> u32 {
        self.points.unwrap_or(5)
    }

    /// What is wrong with the answer given to one turn (the ticked options, or the point of the
    /// scale), as a sentence to show next to it; `None` when it may be stored.
    pub fn turn_problem(&self, labels: &[String], score: Option<u32>) -> Option<String> {
        match self.kind {
            AnnotationKind::Checkboxes => {
                if let Some(only) = self.exclusive.iter().find(|o| labels.contains(o))
                    && labels.len() > 1
                {
                    let others: Vec<&str> = labels
                        .iter()
                        .filter(|l| *l != only)
                        .map(String::as_str)
                        .collect();
                    return Some(format!(
                        "\u{201c}{only}\u{201d} cannot be ticked together with \u{201c}{}\u{201d}: \
                         untick one of them.",
                        others.join("\u{201d}, \u{201c}")
                    ));
                }
                (self.required && labels.is_empty()).then(|| match self.exclusive.first() {
                    Some(none) => format!(
                        "Tick at least one option for this message (\u{201c}{none}\u{201d} if \
                         none applies)."
                    ),
                    None => "Tick at least one option for this message.".to_string(),
                })
            }
            AnnotationKind::Scale => (self.required && score.is_none())
                .then(|| "Choose a point of the scale for this message.".to_string()),
        }
    }
}

/// An expected answer range of one rating question.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
}

impl Expect {
    pub fn holds(&self, x: f64) -> bool {
        self.min.is_none_or(|m| x >= m) && self.max.is_none_or(|m| x <= m)
    }
}

/// An item with a known answer: a pair with the better dialogue named (comparisons), or a
/// dialogue with expected answer ranges (ratings).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnownItem {
    /// Comparisons: the two dialogues.
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    /// Comparisons: the id of the dialogue a careful worker picks.
    #[serde(default)]
    pub better: Option<String>,
    /// Ratings: the dialogue.
    #[serde(default)]
    pub dialogue: Option<String>,
    /// Ratings: the answers a careful worker gives, by question id.
    #[serde(default)]
    pub expect: IndexMap<String, Expect>,
}

impl KnownItem {
    /// The item's dialogues, in the order written.
    pub fn dialogues(&self) -> Vec<String> {
        [&self.a, &self.b, &self.dialogue]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// The item's id: its dialogues joined by `~`.
    pub fn id(&self) -> String {
        self.dialogues().join("~")
    }

    /// Whether a judgment is the known answer: the better dialogue chosen, every expected
    /// answer within its range.
    pub fn correct(
        &self,
        choice: Option<&str>,
        answers: &IndexMap<String, serde_json::Value>,
    ) -> bool {
        let choice_ok = self
            .better
            .as_deref()
            .is_none_or(|better| choice == Some(better));
        let answers_ok = self.expect.iter().all(|(q, e)| {
            answers
                .get(q)
                .and_then(serde_json::Value::as_f64)
                .is_some_and(|x| e.holds(x))
        });
        choice_ok && answers_ok
    }
}

/// What a screened-out worker (or one with no item left) is shown.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ending {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    /// Whether a completion code is given.
    #[serde(default)]
    pub code: bool,
}

/// The onboarding test.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Onboarding {
    /// Share of the items that must be answered correctly, 0 to 1 (default all).
    #[serde(default = "one")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub pass_mark: f64,
    pub items: Vec<KnownItem>,
    /// What a worker who fails is shown.
    #[serde(default)]
    pub fail: Ending,
}

fn one() -> f64 {
    1.0
}

/// Attention checks.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gold {
    /// Share of a worker's items that are attention checks, 0 to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub rate: f64,
    /// Failed checks allowed; one more screens the worker out. None: never screened out.
    #[serde(default)]
    pub max_failures: Option<u32>,
    pub items: Vec<KnownItem>,
    /// What a screened-out worker is shown.
    #[serde(default)]
    pub fail: Ending,
}

/// One item as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemSpec {
    pub id: String,
    pub pool: ItemPool,
    pub dialogues: Vec<String>,
}

impl Evaluation {
    /// The dialogue with this id.
    pub fn dialogue(&self, id: &str) -> Option<&Dialogue> {
        self.dialogues.iter().find(|d| d.id == id)
    }

    /// The system of a dialogue (empty when unknown); for a `turn_acts` item `DIALOGUE#TURN`,
    /// its dialogue's.
    pub fn system_of(&self, id: &str) -> String {
        self.dialogue(id)
            .or_else(|| {
                let (d, _) = parse_turn_item(id).filter(|_| self.task == EvalTask::TurnActs)?;
                self.dialogue(d)
            })
            .map(|d| d.system.clone())
            .unwrap_or_default()
    }

    /// The stored-session selections of `from_store` (none when it is absent).
    pub fn store_selections(&self) -> &[StoreSelection] {
        self.from_store.as_ref().map_or(&[], FromStore::selections)
    }

    /// Dialogue ids that `items`, `pairs.given`, onboarding or gold name but no dialogue has, in
    /// the order named. The loader reports them; with `from_store` they may be stored sessions,
    /// so the server asks again once it has read them.
    pub fn unknown_dialogues(&self) -> Vec<String> {
        let given = self
            .pairs
            .iter()
            .flat_map(|p| p.given.iter())
            .flat_map(|p| [p.a.clone(), p.b.clone()]);
        let known = self
            .onboarding
            .iter()
            .flat_map(|o| o.items.iter())
            .chain(self.gold.iter().flat_map(|g| g.items.iter()))
            .flat_map(KnownItem::dialogues);
        let mut out: Vec<String> = vec![];
        for id in self
            .items
            .iter()
            .flatten()
            .cloned()
            .chain(given)
            .chain(known)
        {
            if self.dialogue(&id).is_none() && !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    /// Dialogues used by onboarding or gold items: never judged as ordinary items.
    fn reserved(&self) -> Vec<&str> {
        let known = self
            .onboarding
            .iter()
            .flat_map(|o| o.items.iter())
            .chain(self.gold.iter().flat_map(|g| g.items.iter()));
        let mut out: Vec<&str> = vec![];
        for k in known {
            out.extend(
                [&k.a, &k.b, &k.dialogue]
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
        out
    }

    /// Every item: the ordinary ones (pairs or dialogues) then the gold ones.
    pub fn items(&self) -> Vec<ItemSpec> {
        let item = |id: String, dialogues: Vec<String>| ItemSpec {
            id,
            pool: ItemPool::Item,
            dialogues,
        };
        let mut out: Vec<ItemSpec> = match self.task {
            EvalTask::Rate | EvalTask::Spans => self
                .item_dialogues()
                .into_iter()
                .map(|id| item(id.to_string(), vec![id.to_string()]))
                .collect(),
            // One item per selected turn of each dialogue to annotate.
            EvalTask::TurnActs => self.turn_items(),
            EvalTask::Compare => self
                .pairs()
                .into_iter()
                .map(|(a, b)| item(format!("{a}~{b}"), vec![a, b]))
                .collect(),
            // A worker chats with each system at most once (the item's "dialogue" is the system).
            EvalTask::Chat => self
                .systems
                .iter()
                .map(|s| item(s.clone(), vec![s.clone()]))
                .collect(),
            // A worker battles each pair at most once, but meets a system in several pairs.
            EvalTask::Arena => self
                .system_pairs()
                .into_iter()
                .map(|(a, b)| {
                    let id = format!("{a}~{b}");
                    item(id.clone(), vec![id])
                })
                .collect(),
            // One item per scenario: each written by `judgments_per_item` workers.
            EvalTask::SelfDialog => self
                .self_dialog
                .iter()
                .flat_map(|w| w.scenarios.iter())
                .map(|s| item(s.id.clone(), vec![s.id.clone()]))
                .collect(),
        };
        if let Some(gold) = &self.gold {
            out.extend(gold.items.iter().map(|k| ItemSpec {
                id: k.id(),
                pool: ItemPool::Gold,
                dialogues: k.dialogues(),
            }));
        }
        out
    }

    /// The dialogues that are items: those `items` lists, else every dialogue that onboarding or
    /// gold items do not use.
    fn item_dialogues(&self) -> Vec<&str> {
        let reserved = self.reserved();
        match &self.items {
            Some(ids) => ids.iter().map(String::as_str).collect(),
            None => self
                .dialogues
                .iter()
                .map(|d| d.id.as_str())
                .filter(|id| !reserved.contains(id))
                .collect(),
        }
    }

    /// The items of `task: turn_acts`: one per selected turn of each dialogue to annotate.
    fn turn_items(&self) -> Vec<ItemSpec> {
        let which = self.acts.as_ref().map(|a| a.which).unwrap_or_default();
        self.item_dialogues()
            .into_iter()
            .filter_map(|id| self.dialogue(id))
            .flat_map(|d| {
                d.turns
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| which.takes(t))
                    .map(|(i, _)| {
                        // The turn, not its dialogue, is what a worker may see once:
                        // one worker may label several turns of a dialogue.
                        let id = turn_item_id(&d.id, i);
                        ItemSpec {
                            id: id.clone(),
                            pool: ItemPool::Item,
                            dialogues: vec![id],
                        }
                    })
            })
            .collect()
    }

    /// The comparison pairs, given or formed by the rule.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let Some(pairs) = &self.pairs else {
            return vec![];
        };
        let mut out: Vec<(String, String)> = pairs
            .given
            .iter()
            .map(|p| (p.a.clone(), p.b.clone()))
            .collect();
        if pairs.rule == Some(PairRule::AllSystems) {
            let reserved = self.reserved();
            // Per system, its dialogues grouped by the matching key, in file order.
            let mut by_system: BTreeMap<&str, BTreeMap<String, Vec<&str>>> = BTreeMap::new();
            for d in &self.dialogues {
                if reserved.contains(&d.id.as_str()) {
                    continue;
                }
                let key = match pairs.match_by {
                    MatchBy::Scenario => d.scenario.clone().unwrap_or_default(),
                    MatchBy::Order => String::new(),
                };
                by_system
                    .entry(d.system.as_str())
                    .or_default()
                    .entry(key)
                    .or_default()
                    .push(d.id.as_str());
            }
            let systems: Vec<&str> = by_system.keys().copied().collect();
            for (i, s1) in systems.iter().enumerate() {
                for s2 in &systems[i + 1..] {
                    for (key, left) in &by_system[s1] {
                        let Some(right) = by_system[s2].get(key) else {
                            continue;
                        };
                        for (a, b) in left.iter().zip(right.iter()) {
                            out.push((a.to_string(), b.to_string()));
                        }
                    }
                }
            }
        }
        out
    }

    /// Arena: every pair of the systems under test, in the order they are listed.
    pub fn system_pairs(&self) -> Vec<(String, String)> {
        let mut out = vec![];
        for (i, a) in self.systems.iter().enumerate() {
            for b in &self.systems[i + 1..] {
                out.push((a.clone(), b.clone()));
            }
        }
        out
    }

    /// The systems of a chat or arena item (its id: a system, or two joined by `~`).
    pub fn item_systems(&self, item: &str) -> Vec<String> {
        match self.task {
            EvalTask::Arena => item.split('~').map(str::to_string).collect(),
            _ => vec![item.to_string()],
        }
    }

    /// The known answer of a gold item, by item id.
    pub fn gold_item(&self, id: &str) -> Option<&KnownItem> {
        self.gold.as_ref()?.items.iter().find(|k| k.id() == id)
    }

    /// The comparison question.
    pub fn question(&self) -> &str {
        self.question
            .as_deref()
            .unwrap_or("Which of the two conversations is better?")
    }
}

/// Most scenarios one self-dialog study may list.
pub const MAX_SCENARIOS: usize = 10_000;
/// Most turns of one self-dialog.
pub const MAX_SELF_TURNS: u32 = 200;
/// The annotation key of one written turn of a self-dialog in the worker's log: `{lease, item,
/// index, speaker, text}`. A turn with the index of the last one replaces it (an edit).
pub const SELF_DIALOG_TURN: &str = "self_dialog.turn";
/// The annotation key of one marked span in the worker's log: `{lease, item, turn, start_index,
/// end_index, text, slot}`; `{lease, item, remove: N}` removes the N-th span marked so far.
pub const SPAN_MARK: &str = "spans.segment";
/// The speaker names of a self-dialog, in the order they speak (Taskmaster-1's).
pub const SELF_SPEAKERS: [&str; 2] = ["USER", "ASSISTANT"];

/// The `self_dialog` section: the scenarios workers write, and how long a dialogue is.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelfDialogs {
    /// The scenarios; each is an item written by `judgments_per_item` workers.
    pub scenarios: Vec<Scenario>,
    /// Turns (of both speakers together) before the dialogue may be submitted.
    #[serde(default = "default_self_min")]
    #[schemars(range(min = 1, max = MAX_SELF_TURNS))]
    pub min_turns: u32,
    /// Turns after which the dialogue must be submitted.
    #[serde(default = "default_self_max")]
    #[schemars(range(min = 1, max = MAX_SELF_TURNS))]
    pub max_turns: u32,
    /// Longest turn, in characters.
    #[serde(default = "default_max_chars")]
    #[schemars(range(min = 1, max = 10_000))]
    pub max_chars: u32,
}

fn default_self_min() -> u32 {
    4
}
fn default_self_max() -> u32 {
    20
}

/// One scenario of a self-dialog study.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique among the scenarios; exported as Taskmaster-1's `instruction_id`.
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    /// What the worker is asked to write (Markdown).
    pub instructions: String,
}

/// The `spans` section: what annotators mark.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpanAnnotation {
    /// The slot names (Taskmaster-1 annotation names, e.g. `restaurant_reservation.num.guests`).
    pub slots: Vec<String>,
    /// Shown above the dialogue (Markdown).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Fewest spans before a dialogue may be submitted (0: a dialogue may have none).
    #[serde(default)]
    pub min_spans: u32,
}

impl Evaluation {
    /// The self-dialog scenario with this id.
    pub fn scenario(&self, id: &str) -> Option<&Scenario> {
        self.self_dialog
            .as_ref()?
            .scenarios
            .iter()
            .find(|s| s.id == id)
    }
}

/// The speaker of the turn at `index` of a self-dialog (USER first, then in turn).
pub fn self_speaker(index: usize) -> &'static str {
    SELF_SPEAKERS[index % 2]
}

/// Why a written turn is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnProblem {
    /// The turn is empty (or only spaces).
    Empty,
    /// Longer than `max_chars`.
    TooLong { max: u32 },
    /// The dialogue already has `max_turns` turns.
    Full { max: u32 },
    /// The index is neither the next turn nor the last one: `expected` is the next one.
    OutOfOrder { index: usize, expected: usize },
    /// The speaker is not the one whose turn it is.
    WrongSpeaker {
        index: usize,
        expected: &'static str,
    },
}

impl std::fmt::Display for TurnProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnProblem::Empty => write!(f, "the turn is empty: write what is said"),
            TurnProblem::TooLong { max } => write!(f, "the turn is longer than {max} characters"),
            TurnProblem::Full { max } => {
                write!(f, "the dialogue has its {max} turns: submit it")
            }
            TurnProblem::OutOfOrder { index, expected } => write!(
                f,
                "turn {index} cannot be written now: the next turn is {expected} (or edit the last)"
            ),
            TurnProblem::WrongSpeaker { index, expected } => {
                write!(f, "turn {index} is spoken by {expected}")
            }
        }
    }
}

/// Writes turn `index` of `turns`: the next turn (appended) or the last one (replaced). The
/// speaker, when given, must be the one whose turn it is (USER at even indexes). Returns the text
/// as stored (trimmed).
pub fn write_turn(
    spec: &SelfDialogs,
    turns: &mut Vec<String>,
    index: usize,
    speaker: Option<&str>,
    text: &str,
) -> Result<String, TurnProblem> {
    let text = text.trim();
    if text.is_empty() {
        return Err(TurnProblem::Empty);
    }
    if text.chars().count() > spec.max_chars as usize {
        return Err(TurnProblem::TooLong {
            max: spec.max_chars,
        });
    }
    let expected = self_speaker(index);
    if speaker.is_some_and(|s| !s.eq_ignore_ascii_case(expected)) {
        return Err(TurnProblem::WrongSpeaker { index, expected });
    }
    if index + 1 == turns.len() {
        turns[index] = text.to_string();
    } else if index == turns.len() {
        if turns.len() >= spec.max_turns as usize {
            return Err(TurnProblem::Full {
                max: spec.max_turns,
            });
        }
        turns.push(text.to_string());
    } else {
        return Err(TurnProblem::OutOfOrder {
            index,
            expected: turns.len(),
        });
    }
    Ok(text.to_string())
}

/// The turns written so far under `lease`, replayed from the worker's log (each
/// [`SELF_DIALOG_TURN`] annotation appends or replaces the last turn).
pub fn written_turns(events: &[Event], lease: &str) -> Vec<String> {
    let mut turns: Vec<String> = vec![];
    for value in annotations(events, SELF_DIALOG_TURN, lease) {
        let (Some(index), Some(text)) = (
            value.get("index").and_then(serde_json::Value::as_u64),
            value.get("text").and_then(serde_json::Value::as_str),
        ) else {
            continue;
        };
        let index = index as usize;
        if index + 1 == turns.len() {
            turns[index] = text.to_string();
        } else if index == turns.len() {
            turns.push(text.to_string());
        }
    }
    turns
}

fn annotations<'a>(
    events: &'a [Event],
    key: &'a str,
    lease: &'a str,
) -> impl Iterator<Item = &'a serde_json::Value> {
    events.iter().filter_map(move |e| match &e.kind {
        EventKind::Annotation { key: k, value }
            if k == key && value.get("lease").and_then(|l| l.as_str()) == Some(lease) =>
        {
            Some(value)
        }
        _ => None,
    })
}

/// One marked span: Taskmaster-1's segment of one utterance, with one annotation name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The utterance's index in the dialogue.
    pub turn: u32,
    /// Character offset of the first character (Unicode scalar values, as Python indexes).
    pub start_index: u32,
    /// Character offset after the last character (exclusive).
    pub end_index: u32,
    /// The utterance's characters from `start_index` to `end_index`.
    pub text: String,
    /// The slot name.
    pub slot: String,
}

/// Why a span is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanProblem {
    NoTurn {
        turn: u32,
        turns: usize,
    },
    Empty {
        start: u32,
        end: u32,
    },
    PastEnd {
        end: u32,
        len: usize,
    },
    UnknownSlot {
        slot: String,
    },
    /// The given text is not the utterance's characters at those offsets.
    TextMismatch {
        found: String,
        given: String,
    },
}

impl std::fmt::Display for SpanProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanProblem::NoTurn { turn, turns } => write!(
                f,
                "utterance {turn} does not exist: the dialogue has {turns} utterances (0 to {})",
                turns.saturating_sub(1)
            ),
            SpanProblem::Empty { start, end } => write!(
                f,
                "the span {start}..{end} is empty: the end must be after the start"
            ),
            SpanProblem::PastEnd { end, len } => write!(
                f,
                "the span ends at {end}, past the end of the utterance ({len} characters)"
            ),
            SpanProblem::UnknownSlot { slot } => {
                write!(f, "`{slot}` is not one of the study's slot names")
            }
            SpanProblem::TextMismatch { found, given } => write!(
                f,
                "the offsets select {found:?}, not the text given ({given:?})"
            ),
        }
    }
}

/// Checks a span against the dialogue's utterances and the slot names, and fills its text: the
/// characters `start..end` (exclusive end) of utterance `turn`. With `given` text, the
/// characters must be that text.
pub fn check_span(
    utterances: &[&str],
    slots: &[String],
    turn: u32,
    start: u32,
    end: u32,
    slot: &str,
    given: Option<&str>,
) -> Result<Span, SpanProblem> {
    let Some(text) = utterances.get(turn as usize) else {
        return Err(SpanProblem::NoTurn {
            turn,
            turns: utterances.len(),
        });
    };
    if end <= start {
        return Err(SpanProblem::Empty { start, end });
    }
    let len = text.chars().count();
    if end as usize > len {
        return Err(SpanProblem::PastEnd { end, len });
    }
    if !slots.iter().any(|s| s == slot) {
        return Err(SpanProblem::UnknownSlot {
            slot: slot.to_string(),
        });
    }
    let found: String = text
        .chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect();
    if let Some(given) = given.filter(|g| !g.is_empty())
        && given != found
    {
        return Err(SpanProblem::TextMismatch {
            found,
            given: given.to_string(),
        });
    }
    Ok(Span {
        turn,
        start_index: start,
        end_index: end,
        text: found,
        slot: slot.to_string(),
    })
}

/// The spans marked so far under `lease`, replayed from the worker's log.
pub fn marked_spans(events: &[Event], lease: &str) -> Vec<Span> {
    let mut spans: Vec<Span> = vec![];
    for value in annotations(events, SPAN_MARK, lease) {
        if let Some(n) = value.get("remove").and_then(serde_json::Value::as_u64) {
            if (n as usize) < spans.len() {
                spans.remove(n as usize);
            }
        } else if let Ok(span) = serde_json::from_value::<Span>(value.clone()) {
            spans.push(span);
        }
    }
    spans
}

/// Taskmaster-1 `segments` of one utterance from its spans: spans with the same offsets are one
/// segment listing each slot name (in the order marked), segments in order of offsets.
pub fn segments_of(spans: &[Span], turn: u32) -> Vec<serde_json::Value> {
    let mut segs: Vec<(u32, u32, String, Vec<String>)> = vec![];
    for s in spans.iter().filter(|s| s.turn == turn) {
        match segs
            .iter_mut()
            .find(|g| g.0 == s.start_index && g.1 == s.end_index)
        {
            Some(g) => g.3.push(s.slot.clone()),
            None => segs.push((
                s.start_index,
                s.end_index,
                s.text.clone(),
                vec![s.slot.clone()],
            )),
        }
    }
    segs.sort_by_key(|g| (g.0, g.1));
    segs.into_iter()
        .map(|(start, end, text, names)| {
            serde_json::json!({
                "start_index": start,
                "end_index": end,
                "text": text,
                "annotations": names.into_iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>(),
            })
        })
        .collect()
}

impl Evaluation {
    /// What is wrong with the `self_dialog` and `spans` sections for the task (`task:
    /// self_dialog` or `spans`), as JSON pointers and messages; the loader reports them.
    pub fn writing_problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = vec![];
        match self.task {
            EvalTask::SelfDialog => {
                let Some(w) = &self.self_dialog else {
                    out.push((
                        "/evaluation".into(),
                        "`task: self_dialog` needs a `self_dialog` section with `scenarios`".into(),
                    ));
                    return out;
                };
                self.self_dialog_problems(w, &mut out);
            }
            EvalTask::Spans => self.spans_problems(&mut out),
            EvalTask::TurnActs => self.turn_acts_problems(&mut out),
            _ => {
                if self.self_dialog.is_some() {
                    out.push((
                        "/evaluation/self_dialog".into(),
                        "`self_dialog` is for `task: self_dialog`".into(),
                    ));
                }
                if self.spans.is_some() {
                    out.push((
                        "/evaluation/spans".into(),
                        "`spans` are for `task: spans`".into(),
                    ));
                }
            }
        }
        let mut err = |ptr: &str, msg: String| out.push((ptr.to_string(), msg));
        if self.acts.is_some() && self.task != EvalTask::TurnActs {
            err(
                "/evaluation/acts",
                "`acts` are for `task: turn_acts`".into(),
            );
        }
        if matches!(
            self.task,
            EvalTask::SelfDialog | EvalTask::Spans | EvalTask::TurnActs
        ) && (self.pairs.is_some() || !self.questions.is_empty() || self.annotate.is_some())
        {
            err(
                "/evaluation",
                "`pairs`, `questions` and `annotate` are not used by self-dialogs, span or act annotation"
                    .into(),
            );
        }
        out
    }

    /// The problems of a `self_dialog` section `w` for `task: self_dialog`.
    fn self_dialog_problems(&self, w: &SelfDialogs, out: &mut Vec<(String, String)>) {
        let mut err = |ptr: &str, msg: String| out.push((ptr.to_string(), msg));
        if w.scenarios.is_empty() || w.scenarios.len() > MAX_SCENARIOS {
            err(
                "/evaluation/self_dialog/scenarios",
                format!("list 1 to {MAX_SCENARIOS} scenarios"),
            );
        }
        let mut seen = std::collections::HashSet::new();
        for (i, s) in w.scenarios.iter().enumerate() {
            if s.id.is_empty() || s.id.contains('~') || !seen.insert(s.id.as_str()) {
                err(
                    &format!("/evaluation/self_dialog/scenarios/{i}/id"),
                    format!("scenario id `{}` is empty, has `~` or is used twice", s.id),
                );
            }
            if s.instructions.trim().is_empty() {
                err(
                    &format!("/evaluation/self_dialog/scenarios/{i}/instructions"),
                    format!("scenario `{}` has no instructions", s.id),
                );
            }
        }
        if w.min_turns == 0 || w.min_turns > w.max_turns || w.max_turns > MAX_SELF_TURNS {
            err(
                "/evaluation/self_dialog",
                format!(
                    "turns must satisfy 1 <= min_turns ({}) <= max_turns ({}) <= {MAX_SELF_TURNS}",
                    w.min_turns, w.max_turns
                ),
            );
        }
        if self.spans.is_some() {
            err(
                "/evaluation/spans",
                "`spans` are for `task: spans` (a separate annotation study)".into(),
            );
        }
    }

    /// The problems of the sections for `task: spans`.
    fn spans_problems(&self, out: &mut Vec<(String, String)>) {
        let mut err = |ptr: &str, msg: String| out.push((ptr.to_string(), msg));
        match &self.spans {
            None => err(
                "/evaluation",
                "`task: spans` needs a `spans` section with `slots`".into(),
            ),
            Some(sp) => {
                if sp.slots.is_empty() {
                    err(
                        "/evaluation/spans/slots",
                        "list at least one slot name".into(),
                    );
                }
                let mut seen = std::collections::HashSet::new();
                for (i, slot) in sp.slots.iter().enumerate() {
                    if slot.trim().is_empty() || !seen.insert(slot.as_str()) {
                        err(
                            &format!("/evaluation/spans/slots/{i}"),
                            format!("slot name `{slot}` is empty or listed twice"),
                        );
                    }
                }
            }
        }
        if self.self_dialog.is_some() {
            err(
                "/evaluation/self_dialog",
                "`self_dialog` is for `task: self_dialog`".into(),
            );
        }
    }

    /// The problems of the sections for `task: turn_acts`.
    fn turn_acts_problems(&self, out: &mut Vec<(String, String)>) {
        let mut err = |ptr: &str, msg: String| out.push((ptr.to_string(), msg));
        match &self.acts {
            None => err(
                "/evaluation",
                "`task: turn_acts` needs an `acts` section with `acts`".into(),
            ),
            Some(a) => {
                for (what, list) in [("acts", &a.acts), ("slots", &a.slots)] {
                    if what == "acts" && list.is_empty() {
                        err("/evaluation/acts/acts", "list at least one act".into());
                    }
                    let mut seen = std::collections::HashSet::new();
                    for (i, name) in list.iter().enumerate() {
                        if name.trim().is_empty() || !seen.insert(name.as_str()) {
                            err(
                                &format!("/evaluation/acts/{what}/{i}"),
                                format!("name `{name}` is empty or listed twice"),
                            );
                        }
                    }
                }
                if a.max_pairs > MAX_ACT_PAIRS {
                    err(
                        "/evaluation/acts/max_pairs",
                        format!("at most {MAX_ACT_PAIRS} slot-value pairs per turn"),
                    );
                }
            }
        }
        if self.self_dialog.is_some() || self.spans.is_some() {
            err(
                "/evaluation",
                "`self_dialog` and `spans` are not used by `task: turn_acts`".into(),
            );
        }
    }
}

/// Most slot-value pairs one turn's label may have.
pub const MAX_ACT_PAIRS: u32 = 20;

/// The `acts` section of a `turn_acts` study: the act set, the slots, which turns.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActAnnotation {
    /// The dialogue acts a turn may be labelled with (e.g. `inform`, `request`, or MultiWOZ's
    /// `Restaurant-Inform`).
    pub acts: Vec<String>,
    /// The slots of slot-value pairs (e.g. `food`, `area`); empty: acts without pairs.
    #[serde(default)]
    pub slots: Vec<String>,
    /// Which turns are items.
    #[serde(default)]
    pub which: TurnSelection,
    /// Shown above the dialogue (Markdown).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Rows of slot-value pairs on the page (the most one label may have).
    #[serde(default = "default_max_pairs")]
    #[schemars(range(min = 0, max = MAX_ACT_PAIRS))]
    pub max_pairs: u32,
}

fn default_max_pairs() -> u32 {
    4
}

/// Which turns of the dialogues a `turn_acts` study labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnSelection {
    /// The user's turns (speaker `user`).
    #[default]
    User,
    /// The wizard's (or system's) turns typed as free text; turns whose source is unknown
    /// (written dialogues) are taken too.
    WizardFreeText,
    /// Every turn.
    All,
}

impl TurnSelection {
    /// Whether a turn is labelled.
    pub fn takes(self, t: &Turn) -> bool {
        let user = t.speaker.eq_ignore_ascii_case("user");
        match self {
            TurnSelection::User => user,
            TurnSelection::WizardFreeText => !user && t.free_text != Some(false),
            TurnSelection::All => true,
        }
    }
}

/// The item id of turn `index` (from 0) of dialogue `dialogue`: `DIALOGUE#INDEX`.
pub fn turn_item_id(dialogue: &str, index: usize) -> String {
    format!("{dialogue}#{index}")
}

/// The dialogue and turn index of a `turn_acts` item id (`None` when it is not one).
pub fn parse_turn_item(id: &str) -> Option<(&str, usize)> {
    let (d, i) = id.rsplit_once('#')?;
    Some((d, i.parse().ok()?))
}

/// One slot-value pair of a turn's label, under one of its acts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActPair {
    pub act: String,
    pub slot: String,
    pub value: String,
}

/// One annotator's label of a turn: its acts and slot-value pairs (stored as the judgment's
/// `acts` and `pairs` answers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActLabel {
    pub acts: Vec<String>,
    pub pairs: Vec<ActPair>,
}

/// One slot-value row as the form sends it (any field may be empty).
#[derive(Clone, Debug, Default)]
pub struct PairRow {
    pub act: String,
    pub slot: String,
    pub value: String,
}

/// The longest value of a slot-value pair, in characters.
pub const MAX_PAIR_VALUE: usize = 500;

/// What is wrong with a submitted act label ([`check_act_label`]). Rows count from 1, as the
/// form numbers them. `Display` is the English of logs and the CLI; the pages word each variant
/// in the study's language from its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActProblem {
    /// A ticked act that is not in the study's act set.
    UnknownAct { act: String, known: Vec<String> },
    /// No act ticked.
    NoAct,
    /// A pair whose act is not one of the ticked acts.
    ActNotTicked {
        row: usize,
        act: String,
        ticked: Vec<String>,
    },
    /// A pair whose slot is not one of the study's slots.
    UnknownSlot {
        row: usize,
        slot: String,
        known: Vec<String>,
    },
    /// A pair without a value.
    NoValue { row: usize, slot: String },
    /// A pair whose value is longer than [`MAX_PAIR_VALUE`].
    ValueTooLong { row: usize, max: usize },
    /// A pair given twice.
    SamePair { row: usize },
}

impl std::fmt::Display for ActProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActProblem::UnknownAct { act, known } => write!(
                f,
                "act `{act}` is not in the study's act set ({})",
                known.join(", ")
            ),
            ActProblem::NoAct => f.write_str("tick at least one dialogue act"),
            ActProblem::ActNotTicked { row, act, ticked } => write!(
                f,
                "pair {row}: its act `{act}` is not one of the ticked acts ({})",
                ticked.join(", ")
            ),
            ActProblem::UnknownSlot { row, slot, known } => write!(
                f,
                "pair {row}: slot `{slot}` is not one of the study's slots ({})",
                known.join(", ")
            ),
            ActProblem::NoValue { row, slot } => {
                write!(f, "pair {row}: give the value of slot `{slot}`")
            }
            ActProblem::ValueTooLong { row, max } => {
                write!(f, "pair {row}: the value is longer than {max} characters")
            }
            ActProblem::SamePair { row } => write!(f, "pair {row}: the same pair is given twice"),
        }
    }
}

/// Checks a submitted label against the study's act set and slots: at least one act, each of
/// the set and ticked once; each filled pair row (from 1) has a ticked act, a listed slot and a
/// value of at most [`MAX_PAIR_VALUE`] characters. Empty rows are left out.
pub fn check_act_label(
    spec: &ActAnnotation,
    acts: &[String],
    rows: &[PairRow],
) -> Result<ActLabel, Vec<ActProblem>> {
    let mut problems = vec![];
    let mut label = ActLabel::default();
    for a in acts {
        if !spec.acts.contains(a) {
            problems.push(ActProblem::UnknownAct {
                act: a.clone(),
                known: spec.acts.clone(),
            });
        } else if !label.acts.contains(a) {
            label.acts.push(a.clone());
        }
    }
    if acts.is_empty() {
        problems.push(ActProblem::NoAct);
    }
    for (i, r) in rows.iter().enumerate() {
        let (act, slot, value) = (r.act.trim(), r.slot.trim(), r.value.trim());
        if act.is_empty() && slot.is_empty() && value.is_empty() {
            continue;
        }
        let row = i + 1;
        if act.is_empty() || !label.acts.iter().any(|a| a == act) {
            problems.push(ActProblem::ActNotTicked {
                row,
                act: act.into(),
                ticked: label.acts.clone(),
            });
        }
        if !spec.slots.iter().any(|s| s == slot) {
            problems.push(ActProblem::UnknownSlot {
                row,
                slot: slot.into(),
                known: spec.slots.clone(),
            });
        }
        if value.is_empty() {
            problems.push(ActProblem::NoValue {
                row,
                slot: slot.into(),
            });
        } else if value.chars().count() > MAX_PAIR_VALUE {
            problems.push(ActProblem::ValueTooLong {
                row,
                max: MAX_PAIR_VALUE,
            });
        }
        let pair = ActPair {
            act: act.into(),
            slot: slot.into(),
            value: value.into(),
        };
        if label.pairs.contains(&pair) {
            problems.push(ActProblem::SamePair { row });
        } else {
            label.pairs.push(pair);
        }
    }
    if problems.is_empty() {
        Ok(label)
    } else {
        Err(problems)
    }
}
