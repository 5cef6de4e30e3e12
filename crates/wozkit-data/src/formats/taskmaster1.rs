//! Taskmaster-1 (`TM-1-2019`): a JSON array of conversations, or one conversation object as in
//! `sample.json`. Each utterance's `index` and `segments` ride in the `taskmaster1.turn`
//! annotation.
//!
//! Sessions from elsewhere get `conversation_id` = `"dlg-" + session id`, `instruction_id` = the
//! study id of `SessionStarted` (or `""`) and utterances without segments; Taskmaster-1 has no
//! place for dialogue-act labels, timestamps or other events, which go to the sidecar.

use std::io::Write;

use serde_json::Value;
use wozkit_core::event::{EventKind, Role};

use super::record::{Defaults, Fields, Layout, export_record, exported, import_record};
use crate::error::{ExportError, ImportError};
use crate::input::{Ctx, Input, expected};
use crate::output::{JsonStream, pretty};
use crate::session::{Format, ImportedSession, Turn};

const LAYOUT: Layout = Layout {
    format: Format::Taskmaster1,
    turns_key: "utterances",
    speaker: Some(("speaker", "USER", "ASSISTANT")),
    text_key: "text",
    head: &["index", "speaker", "text"],
};

/// Reads a Taskmaster-1 file: an array of conversations or a single conversation object.
pub fn import_taskmaster1(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let value = input.json()?;
    match &value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| conversation(input, &i.to_string(), item))
            .collect(),
        Value::Object(_) => Ok(vec![conversation(input, "0", &value)?]),
        other => Err(Ctx::new(input.name(), "-").err("", expected("an array or an object", other))),
    }
}

fn conversation(input: &Input, index: &str, value: &Value) -> Result<ImportedSession, ImportError> {
    let ctx = Ctx::new(input.name(), index);
    let record = ctx.object(value, "")?;
    let id = ctx.string(
        ctx.get(record, "conversation_id", "conversation_id")?,
        "conversation_id",
    )?;
    let ctx = Ctx::new(input.name(), id);
    import_record(&LAYOUT, &ctx, id, record)
}

/// Writes the dataset layout: a JSON array of conversations (indent 2).
pub fn export_taskmaster1(
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    let mut stream = JsonStream::array(out, 2)?;
    for (index, session) in exported(Format::Taskmaster1, sessions) {
        stream.item(&Value::Object(export_record(
            &LAYOUT,
            session,
            index,
            &TmDefaults,
        )?))?;
    }
    stream.finish()?;
    Ok(())
}

/// Writes one conversation as a single object, the layout of `sample.json` (indent 4).
pub fn export_taskmaster1_conversation(
    session: &ImportedSession,
    mut out: impl Write,
) -> Result<(), ExportError> {
    let record = export_record(&LAYOUT, session, 0, &TmDefaults)?;
    out.write_all(&pretty(&Value::Object(record), 4)?)?;
    Ok(())
}

struct TmDefaults;

impl Defaults for TmDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let study = session.events.iter().find_map(|e| match &e.kind {
            EventKind::SessionStarted { study, .. } => Some(study.clone()),
            _ => None,
        });
        let mut record = Fields::new();
        record.insert(
            "conversation_id".into(),
            format!("dlg-{}", session.id).into(),
        );
        record.insert("instruction_id".into(), study.unwrap_or_default().into());
        record.insert("utterances".into(), Value::Null);
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
        fields.insert("index".into(), position.into());
        fields
    }
}
