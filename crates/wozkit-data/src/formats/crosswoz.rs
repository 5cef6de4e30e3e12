//! CrossWOZ: one JSON object keyed by dialogue id (`test.json`, usually inside `test.json.zip`).
//! Goals, task descriptions and the goal type ride in `crosswoz.dialogue`; each message's
//! `dialog_act`, `user_state` or `sys_state`/`sys_state_init` in `crosswoz.turn`.
//!
//! Sessions from elsewhere are keyed by session id, with `sys-usr` `[0, 0]` (no integer worker
//! aliases are known), empty goals and the empty five-domain state on wizard turns, in
//! CrossWOZ's turn shape: the user first, then alternating (the wizard's messages before the
//! user's first are left out, consecutive messages of one speaker are one turn joined by
//! a space, or by nothing where the text is Chinese, and an empty system turn closes a dialogue
//! that ends with the user; the sidecar keeps the messages and the joins). A wizard's state label
//! is not a CrossWOZ act and is not written as one (the acts the study's `datasets.crosswoz`
//! mapping gives the state are, see [`crate::mapping`]); system states hold CrossWOZ's five domains
//! and their slots only. A session that drew a scenario gets one
//! `task description` line per drawn or computed world variable and the extra key `scenario`
//! after `type` (see [`super::scenario`]). A session with a user goal gets its goal, final goal,
//! goal type, per-turn user and system states and the derived `Inform`, `Recommend`, `NoOffer`
//! and `Request` acts (see `goal_state.rs`).
//! Timestamps, act types and every other event go to the sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::Role;

use super::record::{Defaults, Exporter, Fields, Layout, Shape, import_keyed};
use super::scenario::{self, SCENARIO_KEY};
use super::{goal_state, vocab};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::mapping::Mappings;
use crate::session::{Format, ImportedSession, Turn};

pub(crate) const LAYOUT: Layout = Layout {
    format: Format::CrossWoz,
    turns_key: "messages",
    speaker: Some(("role", "usr", "sys")),
    text_key: "content",
    head: &["content", "role"],
    shape: Shape::UserFirst {
        join: " ",
        even: true,
    },
};

/// Reads CrossWOZ JSON, zipped or not.
pub fn import_crosswoz(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_keyed(&LAYOUT, input)
}

/// Writes CrossWOZ JSON (indent 4, the layout of the released files), with the built-in
/// studies' dataset mappings. Wrap it with [`crate::write_zipped`] for the `.json.zip` form.
pub fn export_crosswoz(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    super::export(Format::CrossWoz, sessions, out)
}

/// The format's exporter with the dataset mappings `mappings`.
pub(crate) fn exporter(mappings: &Mappings) -> Exporter<impl Defaults + '_> {
    Exporter::new(&LAYOUT, CrossWozDefaults { mappings })
}

struct CrossWozDefaults<'a> {
    mappings: &'a Mappings,
}

impl Defaults for CrossWozDefaults<'_> {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let value = json!({
            "sys-usr": [0, 0],
            "goal": [],
            "messages": null,
            "final_goal": [],
            "task description": [],
            "type": "",
        });
        let mut record = value.as_object().cloned().unwrap_or_default();
        if let Some(drawn) = scenario::logged(session) {
            let lines = drawn.lines(|v| v.to_string());
            record.insert("task description".into(), json!(lines));
            record.insert(SCENARIO_KEY.into(), drawn.to_value());
        }
        goal_state::crosswoz_record(session, &mut record);
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        _position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields {
        let mut fields = Fields::new();
        fields.insert("dialog_act".into(), json!([]));
        match role {
            Role::User => {
                fields.insert("user_state".into(), json!([]));
            }
            Role::Wizard => {
                fields.insert("sys_state".into(), empty_sys_state());
                fields.insert("sys_state_init".into(), empty_sys_state());
            }
        }
        let map = self.mappings.acts_for(session, Format::CrossWoz);
        goal_state::crosswoz_turn(session, role, turn, &mut fields, &empty_sys_state(), map);
        if role == Role::Wizard {
            goal_state::crosswoz_mapped(session, turn, map, &mut fields);
        }
        fields
    }
}

/// The wizard's DB state before any query: all five domains, every slot unconstrained.
fn empty_sys_state() -> Value {
    let mut state = Fields::new();
    for (domain, slots) in vocab::CROSSWOZ_DOMAINS {
        let mut fields: Fields = slots.iter().map(|s| (s.to_string(), json!(""))).collect();
        fields.insert("selectedResults".into(), json!([]));
        state.insert(domain.into(), Value::Object(fields));
    }
    Value::Object(state)
}
