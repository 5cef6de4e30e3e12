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

use super::record::{Defaults, Fields, Layout, export_list, export_record, import_list};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::output::pretty;
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
    let value = match input.json()? {
        object @ Value::Object(_) => Value::Array(vec![object]),
        other => other,
    };
    import_list(&LAYOUT, input, &["conversation_id"], value)
}

/// Writes the dataset layout: a JSON array of conversations (indent 2).
pub fn export_taskmaster1(
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    export_list(&LAYOUT, sessions, out, 2, &TmDefaults)
}

/// One conversation of the dataset layout, the `index`-th exported.
pub(crate) fn record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&LAYOUT, session, index, &TmDefaults)
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
