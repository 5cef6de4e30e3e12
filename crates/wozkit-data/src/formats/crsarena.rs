//! CRSArena-Dial dialogues (`crs_arena_dial_{open,closed}.json`, DialogueKit layout, also the
//! merge tool's `*_with_votes.json`) and CRSArena-Eval ratings (`crs_arena_eval.json`). Both are
//! JSON arrays of dialogues.
//!
//! - Dialogues: `agent`, `user`, `metadata` (sentiment) and, in merged files, `vote_result` or
//!   `vote` ride in `crsarena.dialogue`; each utterance's `utterance ID` (either spelling) in
//!   `crsarena.turn`. The merge tool writes a bare `NaN` for empty feedback: it is read as `null`
//!   and written as `null`, so exports are always valid JSON.
//! - Eval: `dial_level_aggregated` rides in `crsarena_eval.dialogue`, each turn's `turn_ind` and
//!   `turn_level_aggregated` in `crsarena_eval.turn`.
//!
//! Sessions from elsewhere: the agent id is the name of the bot that sent the wizard messages (or
//! `"wizard"`), the user id is the session id, utterance ids follow the dataset's
//! `<agent>-<user>_<n>` pattern, and `metadata.sentiment` is a `sentiment` survey answer when one
//! exists. Timestamps, labels and every other event go to the sidecar.
//!
//! Live chats and arena battles (sessions starting with `ChatStarted`): the agent id is the
//! system's name and the user id the participant's id, so the two sides of a battle share it, as
//! in the dataset. A participant may meet the same system in several battles, so the
//! conversation id is `<agent>_<session id>` and the utterance ids `<agent>-<session id>_<n>`
//! (unique per dialogue). Without a `sentiment` survey answer, `metadata.sentiment` is the
//! last live feedback (`satisfied` or `frustrated`) given to a reply, as the arena's buttons
//! labelled the conversation. The votes of the battles are written beside the dialogues by
//! `wozkit export` (see [`crate::stored::export`]).

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind, Role};

use super::record::{Defaults, Fields, Layout, Shape, export_list, export_record, import_list};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::session::{Format, ImportedSession, Turn};

pub(crate) const DIAL: Layout = Layout {
    format: Format::CrsArena,
    turns_key: "conversation",
    speaker: Some(("participant", "USER", "AGENT")),
    text_key: "utterance",
    head: &["participant", "utterance", "utterance ID"],
    shape: Shape::AsSpoken,
};

pub(crate) const EVAL: Layout = Layout {
    format: Format::CrsArenaEval,
    turns_key: "dialogue",
    speaker: Some(("role", "USER", "ASST")),
    text_key: "utterance",
    head: &["turn_ind", "role", "utterance"],
    shape: Shape::AsSpoken,
};

/// Reads CRSArena-Dial dialogues (plain or vote-merged).
pub fn import_crsarena(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let ids = ["conversation ID", "conversation_id"];
    import_list(&DIAL, input, &ids, input.json_lenient()?)
}

/// Writes CRSArena-Dial dialogues (indent 4, like the released files).
pub fn export_crsarena(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_list(&DIAL, sessions, out, 4, &DialDefaults)
}

/// Reads CRSArena-Eval rated dialogues.
pub fn import_crsarena_eval(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_list(&EVAL, input, &["conv_id"], input.json()?)
}

/// Writes CRSArena-Eval rated dialogues (indent 2, like the released file).
pub fn export_crsarena_eval(
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    export_list(&EVAL, sessions, out, 2, &EvalDefaults)
}

/// One CRSArena-Dial dialogue of the list.
pub(crate) fn dial_record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&DIAL, session, index, &DialDefaults)
}

/// One CRSArena-Eval dialogue of the list.
pub(crate) fn eval_record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&EVAL, session, index, &EvalDefaults)
}

struct DialDefaults;

/// The ids of a session from elsewhere: the agent id, the user id, and the id that names the
/// conversation after the agent (the user id, or the session id for a live chat).
fn ids(session: &ImportedSession) -> (String, String, String) {
    let chat = session.events.iter().find_map(|e| match &e.kind {
        EventKind::ChatStarted {
            participant,
            system,
            ..
        } => Some((system.clone(), participant.clone())),
        _ => None,
    });
    if let Some((system, participant)) = chat {
        return (system, participant, session.id.clone());
    }
    let agent = session.events.iter().find_map(|e| match &e.actor {
        Actor::Bot {
            role: Role::Wizard,
            name,
        } => Some(name.clone()),
        _ => None,
    });
    let user = session.id.clone();
    (agent.unwrap_or_else(|| "wizard".into()), user.clone(), user)
}

impl Defaults for DialDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let (agent, user, key) = ids(session);
        let survey = session.events.iter().find_map(|e| match &e.kind {
            EventKind::SurveyAnswered { answers, .. } => answers.get("sentiment").cloned(),
            _ => None,
        });
        let feedback = || {
            session.events.iter().rev().find_map(|e| match &e.kind {
                EventKind::TurnAnnotated {
                    feedback: Some(f), ..
                } => Some(json!(f)),
                _ => None,
            })
        };
        let sentiment = survey.or_else(feedback);
        let mut metadata = Fields::new();
        if let Some(sentiment) = sentiment {
            metadata.insert("sentiment".into(), sentiment);
        }
        let mut record = Fields::new();
        record.insert("conversation ID".into(), json!(format!("{agent}_{key}")));
        record.insert("agent".into(), json!({"id": agent, "type": "AGENT"}));
        record.insert("user".into(), json!({"id": user, "type": "USER"}));
        record.insert("conversation".into(), Value::Null);
        record.insert("metadata".into(), Value::Object(metadata));
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        position: usize,
        _role: Role,
        _turn: Option<&Turn<'_>>,
    ) -> Fields {
        let (agent, _, key) = ids(session);
        let mut fields = Fields::new();
        fields.insert(
            "utterance ID".into(),
            json!(format!("{agent}-{key}_{position}")),
        );
        fields
    }
}

struct EvalDefaults;

impl Defaults for EvalDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let mut record = Fields::new();
        record.insert("conv_id".into(), json!(session.id));
        record.insert("dialogue".into(), Value::Null);
        record.insert("dial_level_aggregated".into(), json!({}));
        record
    }

    fn turn(
        &self,
        _session: &ImportedSession,
        position: usize,
        _role: Role,
        _turn: Option<&Turn<'_>>,
    ) -> Fields {
        let mut fields = Fields::new();
        fields.insert("turn_ind".into(), position.into());
        fields
    }
}
