//! What a report needs from one session, read from its events (live or imported alike), so the
//! report streams sessions and keeps only these small records.
//!
//! Where the numbers come from:
//! - turns: chat messages; words: whitespace-separated tokens of user messages; typed: wizard
//!   messages sent as free text;
//! - dialogue acts: the label and act type of labelled wizard messages; user acts from dataset
//!   annotations that carry them (CRWIZ's `nlu` field);
//! - outcome `goal_reached`: the `SessionEnded` event, or for CRWIZ files whether the
//!   `assess_damage` subtask was reached (CRWIZ's own success measure); outcome `satisfied`: the
//!   `sentiment` answer or CRSArena's `metadata.sentiment`;
//! - questionnaire: numeric survey answers (`<role>.<item>`, keeping the question id so the
//!   study's scale can reverse it, see [`super::questionnaire`]), and CRSArena-Eval's
//!   dialogue-level ratings (used as the file gives them: the file carries no scale);
//! - study: the `SessionStarted` event's study id, which names the questionnaire the answers
//!   belong to (imported dataset sessions have none);
//! - system: the bot that played the wizard, or CRSArena's agent id.

use serde_json::Value;
use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;

use crate::session::{Format, ImportedSession};

/// The act types in report order.
pub const ACT_TYPES: [ActType; 4] = [
    ActType::Request,
    ActType::Interaction,
    ActType::Action,
    ActType::Update,
];

/// The JSON name of an act type.
pub fn act_type_name(act_type: ActType) -> &'static str {
    match act_type {
        ActType::Request => "request",
        ActType::Interaction => "interaction",
        ActType::Action => "action",
        ActType::Update => "update",
    }
}

/// Which per-session outcome splits the questionnaire and feeds the correlations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    GoalReached,
    Satisfied,
}

impl Outcome {
    pub fn parse(name: &str) -> Option<Outcome> {
        match name {
            "goal_reached" => Some(Outcome::GoalReached),
            "satisfied" => Some(Outcome::Satisfied),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::GoalReached => "goal_reached",
            Outcome::Satisfied => "satisfied",
        }
    }
}

/// The report's view of one session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionFeatures {
    pub turns: usize,
    pub user_turns: usize,
    pub wizard_turns: usize,
    pub user_words: usize,
    pub wizard_typed: usize,
    /// Labelled wizard messages per act type, in [`ACT_TYPES`] order.
    pub act_types: [usize; 4],
    /// Every dialogue-act label with the role that produced it.
    pub acts: Vec<(Role, String)>,
    pub goal_reached: Option<bool>,
    pub sentiment: Option<String>,
    /// Numeric questionnaire answers, as given (before any reversal).
    pub answers: Vec<Answer>,
    pub system: Option<String>,
    /// The study the session was played in (`SessionStarted`), for its questionnaire's scales.
    pub study: Option<String>,
}

/// One numeric questionnaire answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The report's name of the item: `<role>.<question>` for survey answers, the rating's name
    /// for dataset ratings.
    pub item: String,
    /// The survey question id, for survey answers: the key into the study's questionnaire.
    pub question: Option<String>,
    pub value: f64,
}

impl SessionFeatures {
    /// Whether the session is a dialogue (it has messages); vote-only sessions are not.
    pub fn is_dialogue(&self) -> bool {
        self.turns > 0
    }

    pub fn labelled(&self) -> usize {
        self.act_types.iter().sum()
    }

    pub fn outcome(&self, outcome: Outcome) -> Option<bool> {
        match outcome {
            Outcome::GoalReached => self.goal_reached,
            Outcome::Satisfied => self.sentiment.as_deref().and_then(|s| match s {
                "satisfied" => Some(true),
                "frustrated" => Some(false),
                _ => None,
            }),
        }
    }
}

/// Reads the features of one session.
pub fn features(session: &ImportedSession) -> SessionFeatures {
    let mut f = SessionFeatures::default();
    let mut reached_assess = None;
    for event in &session.events {
        match &event.kind {
            EventKind::Message { role, text, source } => {
                f.turns += 1;
                match role {
                    Role::User => {
                        f.user_turns += 1;
                        f.user_words += text.split_whitespace().count();
                    }
                    Role::Wizard => {
                        f.wizard_turns += 1;
                        if *source == MessageSource::Free {
                            f.wizard_typed += 1;
                        }
                    }
                }
                if let Some((label, act_type)) = source.act() {
                    if let Some(i) = ACT_TYPES.iter().position(|t| *t == act_type) {
                        f.act_types[i] += 1;
                    }
                    f.acts.push((*role, label.to_string()));
                }
            }
            EventKind::SessionEnded { goal_reached, .. } => f.goal_reached = Some(*goal_reached),
            EventKind::SessionStarted { study, .. } => {
                f.study.get_or_insert_with(|| study.clone());
            }
            EventKind::SurveyAnswered { role, answers } => {
                for (item, value) in answers {
                    if item == "sentiment" {
                        f.sentiment = value.as_str().map(str::to_string);
                    } else if let Some(number) = number(value) {
                        f.answers.push(Answer {
                            item: format!("{}.{item}", role.as_str()),
                            question: Some(item.clone()),
                            value: number,
                        });
                    }
                }
            }
            EventKind::Annotation { key, value } => {
                annotation(&mut f, key, value, &mut reached_assess);
            }
            _ => {}
        }
        if let Actor::Bot {
            role: Role::Wizard,
            name,
        } = &event.actor
        {
            f.system.get_or_insert_with(|| name.clone());
        }
    }
    if f.goal_reached.is_none() {
        f.goal_reached = reached_assess;
    }
    f
}

/// Dataset annotations that carry report data.
fn annotation(f: &mut SessionFeatures, key: &str, value: &Value, reached: &mut Option<bool>) {
    if key == Format::Crwiz.dialogue_key() {
        reached.get_or_insert(false);
    } else if key == Format::Crwiz.turn_key() {
        if value.get("subtask").and_then(Value::as_str) == Some("assess_damage") {
            *reached = Some(true);
        }
        if let Some(nlu) = value.get("nlu").and_then(Value::as_str) {
            f.acts
                .extend(crwiz_user_acts(nlu).into_iter().map(|a| (Role::User, a)));
        }
    } else if key == Format::CrsArena.dialogue_key() {
        let agent = value.pointer("/agent/id").and_then(Value::as_str);
        f.system = agent.map(str::to_string).or(f.system.take());
        let sentiment = value.pointer("/metadata/sentiment").and_then(Value::as_str);
        if let Some(sentiment) = sentiment {
            f.sentiment = Some(sentiment.to_string());
        }
    } else if key == Format::CrsArenaEval.dialogue_key() {
        if let Some(id) = value.get("conv_id").and_then(Value::as_str) {
            let system: Vec<&str> = id.splitn(3, '_').take(2).collect();
            f.system.get_or_insert_with(|| system.join("_"));
        }
        if let Some(Value::Object(ratings)) = value.get("dial_level_aggregated") {
            for (item, value) in ratings {
                if let Some(number) = number(value) {
                    f.answers.push(Answer {
                        item: item.clone(),
                        question: None,
                        value: number,
                    });
                }
            }
        }
    }
}

/// The operator dialogue acts in a CRWIZ `nlu` string (`{"dialogue_acts": [{"dialogue_act"}]}`).
fn crwiz_user_acts(nlu: &str) -> Vec<String> {
    let Ok(value) = serde_json::from_str::<Value>(nlu) else {
        return Vec::new();
    };
    value
        .get("dialogue_acts")
        .and_then(Value::as_array)
        .map(|acts| {
            acts.iter()
                .filter_map(|a| a.get("dialogue_act").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A numeric answer: a number, or text holding one (Likert answers often arrive as text).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok().filter(|v: &f64| v.is_finite()),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}
