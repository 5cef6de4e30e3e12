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

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind, Role};

use super::record::{Defaults, Fields, Layout, export_record, exported, import_record};
use crate::error::{ExportError, ImportError};
use crate::input::{Ctx, Input, expected};
use crate::output::JsonStream;
use crate::session::{Format, ImportedSession, Turn};

const DIAL: Layout = Layout {
    format: Format::CrsArena,
    turns_key: "conversation",
    speaker: Some(("participant", "USER", "AGENT")),
    text_key: "utterance",
    head: &["participant", "utterance", "utterance ID"],
};

const EVAL: Layout = Layout {
    format: Format::CrsArenaEval,
    turns_key: "dialogue",
    speaker: Some(("role", "USER", "ASST")),
    text_key: "utterance",
    head: &["turn_ind", "role", "utterance"],
};

/// Reads CRSArena-Dial dialogues (plain or vote-merged).
pub fn import_crsarena(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_list(
        input,
        &DIAL,
        &["conversation ID", "conversation_id"],
        input.json_lenient()?,
    )
}

/// Writes CRSArena-Dial dialogues (indent 4, like the released files).
pub fn export_crsarena(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_list(sessions, out, &DIAL, &DialDefaults)
}

/// Reads CRSArena-Eval rated dialogues.
pub fn import_crsarena_eval(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_list(input, &EVAL, &["conv_id"], input.json()?)
}

/// Writes CRSArena-Eval rated dialogues (indent 2, like the released file).
pub fn export_crsarena_eval(
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    export_list(sessions, out, &EVAL, &EvalDefaults)
}

fn import_list(
    input: &Input,
    layout: &Layout,
    id_keys: &[&str],
    value: Value,
) -> Result<Vec<ImportedSession>, ImportError> {
    let Value::Array(items) = &value else {
        return Err(Ctx::new(input.name(), "-").err("", expected("an array", &value)));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let ctx = Ctx::new(input.name(), i.to_string());
            let record = ctx.object(item, "")?;
            let Some((key, id)) = id_keys.iter().find_map(|k| record.get(*k).map(|v| (*k, v)))
            else {
                return Err(ctx.err(id_keys.join(" | "), "missing (required by the format)"));
            };
            let id = ctx.string(id, key)?;
            import_record(layout, &Ctx::new(input.name(), id), id, record)
        })
        .collect()
}

fn export_list(
    sessions: &[ImportedSession],
    out: impl Write,
    layout: &Layout,
    defaults: &impl Defaults,
) -> Result<(), ExportError> {
    let indent = if layout.format == Format::CrsArena {
        4
    } else {
        2
    };
    let mut stream = JsonStream::array(out, indent)?;
    for (index, session) in exported(layout.format, sessions) {
        stream.item(&Value::Object(export_record(
            layout, session, index, defaults,
        )?))?;
    }
    stream.finish()?;
    Ok(())
}

struct DialDefaults;

/// Agent and user ids of a session from elsewhere.
fn ids(session: &ImportedSession) -> (String, String) {
    let agent = session.events.iter().find_map(|e| match &e.actor {
        Actor::Bot {
            role: Role::Wizard,
            name,
        } => Some(name.clone()),
        _ => None,
    });
    (agent.unwrap_or_else(|| "wizard".into()), session.id.clone())
}

impl Defaults for DialDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let (agent, user) = ids(session);
        let sentiment = session.events.iter().find_map(|e| match &e.kind {
            EventKind::SurveyAnswered { answers, .. } => answers.get("sentiment").cloned(),
            _ => None,
        });
        let mut metadata = Fields::new();
        if let Some(sentiment) = sentiment {
            metadata.insert("sentiment".into(), sentiment);
        }
        let mut record = Fields::new();
        record.insert("conversation ID".into(), json!(format!("{agent}_{user}")));
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
        let (agent, user) = ids(session);
        let mut fields = Fields::new();
        fields.insert(
            "utterance ID".into(),
            json!(format!("{agent}-{user}_{position}")),
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
