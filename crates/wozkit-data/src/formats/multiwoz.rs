//! MultiWOZ 2.1 in the `data.json` layout: one object keyed by dialogue id, each `{goal, log}`,
//! where even log turns are the user's and odd ones the system's (zipped or not). Each turn's
//! `metadata`, `dialog_act` and `span_info` ride in `multiwoz21.turn`.
//!
//! Sessions from elsewhere get an empty goal, turns forced to alternate (an empty turn is
//! inserted between two messages of the same speaker, and an empty system turn closes an
//! odd-length dialogue; these come back as empty messages on import), empty belief states, and a
//! labelled wizard message as the general act `{"general-<label>": [["none", "none"]]}`. A
//! session that drew a scenario gets one `goal.message` line per drawn or computed world variable
//! (the value in the corpus's emphasis markup) and the extra key `scenario` after `log` (see
//! [`super::scenario`]). A session with a user goal gets it in `goal`, the wizard's belief state
//! in the system turns' `metadata` and the derived `Inform`, `Recommend`, `NoOffer` and
//! `Request` acts (see `goal_state.rs`). Timestamps, act types and every other event go to the
//! sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::Role;

use super::goal_state;
use super::record::{
    Defaults, Fields, Layout, export_keyed, export_record, import_keyed, wizard_label,
};
use super::scenario::{self, SCENARIO_KEY};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::session::{Format, ImportedSession, Turn};

const LAYOUT: Layout = Layout {
    format: Format::MultiWoz21,
    turns_key: "log",
    speaker: None,
    text_key: "text",
    head: &["text"],
};

/// Reads MultiWOZ 2.1 `data.json` (or a split of it), zipped or not.
pub fn import_multiwoz21(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_keyed(&LAYOUT, input)
}

/// Writes the `data.json` layout (indent 2). Wrap it with [`crate::write_zipped`] for a zip.
pub fn export_multiwoz21(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_keyed(&LAYOUT, sessions, out, 2, &MultiWozDefaults)
}

/// One dialogue's record (the value under its id).
pub(crate) fn record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&LAYOUT, session, index, &MultiWozDefaults)
}

struct MultiWozDefaults;

impl Defaults for MultiWozDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let drawn = scenario::logged(session);
        let mut goal = Fields::new();
        for domain in ["taxi", "police", "hospital", "hotel", "attraction", "train"] {
            goal.insert(domain.into(), json!({}));
        }
        let message = drawn
            .as_ref()
            .map(|d| d.lines(scenario::emphasis))
            .unwrap_or_default();
        goal.insert("message".into(), json!(message));
        goal.insert("restaurant".into(), json!({}));
        goal_state::multiwoz_goal(session, &mut goal);
        let mut record = Fields::new();
        record.insert("goal".into(), Value::Object(goal));
        record.insert("log".into(), Value::Null);
        if let Some(drawn) = drawn {
            record.insert(SCENARIO_KEY.into(), drawn.to_value());
        }
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        _position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields {
        let mut acts = Fields::new();
        if role == Role::Wizard
            && let Some(label) = wizard_label(turn)
        {
            acts.insert(format!("general-{label}"), json!([["none", "none"]]));
        }
        let mut fields = Fields::new();
        fields.insert("metadata".into(), json!({}));
        fields.insert("dialog_act".into(), Value::Object(acts));
        fields.insert("span_info".into(), json!([]));
        goal_state::multiwoz_turn(session, role, turn, &mut fields);
        fields
    }
}
