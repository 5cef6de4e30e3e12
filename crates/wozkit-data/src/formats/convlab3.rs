//! The ConvLab-3 unified format (`dialogues.json` / `dummy_data.json`): a JSON array of
//! dialogues. Goals, domains, ids and dataset-specific extras ride in `convlab3.dialogue`; each
//! turn's `utt_idx`, `dialogue_acts`, `state`, `db_results` and extras in `convlab3.turn`. The
//! session id is the `dialogue_id`.
//!
//! Sessions from elsewhere become `dataset` `"wozkit"`, `data_split` `"train"`, `dialogue_id`
//! `wozkit-train-<n>` with `original_id` = the session id, an empty goal, an empty `state` on user
//! turns and empty `db_results` on system turns. A labelled wizard message becomes the binary act
//! `{intent: label, domain: "general", slot: ""}`. Speakers are written as they come (the format
//! wants them alternating). A session that drew a scenario gets its drawn and computed world
//! variables as sentences in `goal.description` and the extra dialogue key `scenario` between
//! `goal` and `turns` (see [`super::scenario`]). A session with a user goal gets it in `goal` and
//! `domains`, per-turn states, `db_results` and the derived `inform`, `recommend`, `nooffer`
//! and `request` acts (see `goal_state.rs`).
//! Timestamps, act types and every other event go to the sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::Role;

use super::goal_state;
use super::record::{
    Defaults, Fields, Layout, export_list, export_record, import_list, wizard_label,
};
use super::scenario::{self, SCENARIO_KEY};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::session::{Format, ImportedSession, Turn};

const LAYOUT: Layout = Layout {
    format: Format::ConvLab3,
    turns_key: "turns",
    speaker: Some(("speaker", "user", "system")),
    text_key: "utterance",
    head: &["speaker", "utterance", "utt_idx"],
};

/// Reads a unified-format dialogue list.
pub fn import_convlab3(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_list(&LAYOUT, input, &["dialogue_id"], input.json()?)
}

/// Writes a unified-format dialogue list (indent 2, the layout of the released files).
pub fn export_convlab3(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_list(&LAYOUT, sessions, out, 2, &ConvLabDefaults)
}

/// One dialogue of the list, the `index`-th exported.
pub(crate) fn record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&LAYOUT, session, index, &ConvLabDefaults)
}

struct ConvLabDefaults;

impl Defaults for ConvLabDefaults {
    fn record(&self, session: &ImportedSession, index: usize) -> Fields {
        let mut record = Fields::new();
        record.insert("dataset".into(), json!("wozkit"));
        record.insert("data_split".into(), json!("train"));
        record.insert("dialogue_id".into(), json!(format!("wozkit-train-{index}")));
        record.insert("original_id".into(), json!(session.id));
        record.insert("domains".into(), json!([]));
        let drawn = scenario::logged(session);
        let description = drawn
            .as_ref()
            .map(|d| d.lines(|v| v.to_string()).join(" "))
            .unwrap_or_default();
        let goal = json!({"description": description, "inform": {}, "request": {}});
        record.insert("goal".into(), goal);
        if let Some(drawn) = drawn {
            record.insert(SCENARIO_KEY.into(), drawn.to_value());
        }
        record.insert("turns".into(), Value::Null);
        goal_state::convlab3_record(session, &mut record);
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields {
        let binary: Vec<Value> = wizard_label(turn)
            .map(|label| json!({"intent": label, "domain": "general", "slot": ""}))
            .into_iter()
            .collect();
        let acts = json!({"binary": binary, "categorical": [], "non-categorical": []});
        let mut fields = Fields::new();
        fields.insert("utt_idx".into(), position.into());
        fields.insert("dialogue_acts".into(), acts);
        match role {
            Role::User => fields.insert("state".into(), json!({})),
            Role::Wizard => fields.insert("db_results".into(), json!({})),
        };
        goal_state::convlab3_turn(session, role, turn, &mut fields);
        fields
    }
}
