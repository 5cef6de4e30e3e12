//! MultiWOZ 2.1 in the `data.json` layout: one object keyed by dialogue id, each `{goal, log}`,
//! where even log turns are the user's and odd ones the system's (zipped or not). Each turn's
//! `metadata`, `dialog_act` and `span_info` ride in `multiwoz21.turn`.
//!
//! Sessions from elsewhere get an empty goal and turns in MultiWOZ's shape: the user first, then
//! alternating (the wizard's messages before the user's first are left out, consecutive messages
//! of one speaker are one turn joined by a space, an empty system turn closes a dialogue that
//! ends with the user; the sidecar keeps the messages and the joins). System turns carry the
//! `metadata` of the released files: all seven domains with their `book` and `semi` slots, `""`
//! where the session has no value. A wizard's state label is not a MultiWOZ act and is not
//! written as one; the acts the study's `datasets.multiwoz` mapping gives the state are (see
//! [`crate::mapping`]). A
//! session that drew a scenario gets one `goal.message` line per drawn or computed world variable
//! (the value in the corpus's emphasis markup) and the extra key `scenario` after `log` (see
//! [`super::scenario`]). A session with a user goal gets it in `goal`, the wizard's belief state
//! in the system turns' `metadata` and the derived `Inform`, `Recommend`, `NoOffer` and
//! `Request` acts (see `goal_state.rs`). Timestamps, act types and every other event go to the
//! sidecar.

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
    format: Format::MultiWoz21,
    turns_key: "log",
    speaker: None,
    text_key: "text",
    head: &["text"],
    shape: Shape::UserFirst {
        join: " ",
        even: true,
    },
};

/// Reads MultiWOZ 2.1 `data.json` (or a split of it), zipped or not.
pub fn import_multiwoz21(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_keyed(&LAYOUT, input)
}

/// Writes the `data.json` layout (indent 2), with the built-in studies' dataset mappings. Wrap
/// it with [`crate::write_zipped`] for a zip.
pub fn export_multiwoz21(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    super::export(Format::MultiWoz21, sessions, out)
}

/// The format's exporter with the dataset mappings `mappings`.
pub(crate) fn exporter(mappings: &Mappings) -> Exporter<impl Defaults + '_> {
    Exporter::new(&LAYOUT, MultiWozDefaults { mappings })
}

struct MultiWozDefaults<'a> {
    mappings: &'a Mappings,
}

impl Defaults for MultiWozDefaults<'_> {
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
        let map = self.mappings.acts_for(session, Format::MultiWoz21);
        goal_state::multiwoz_goal(session, &mut goal, map);
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
        let mut fields = Fields::new();
        let map = self.mappings.acts_for(session, Format::MultiWoz21);
        let metadata = match (role, map) {
            (Role::User, _) => json!({}),
            // A mapped study's searches fill the mapped slots (a goal's states replace them).
            (Role::Wizard, Some(map)) => goal_state::multiwoz_belief_metadata(
                &goal_state::searched_belief(session, turn, map),
            ),
            (Role::Wizard, None) => vocab::multiwoz_metadata(|_, _, _| None),
        };
        fields.insert("metadata".into(), metadata);
        fields.insert("dialog_act".into(), json!({}));
        fields.insert("span_info".into(), json!([]));
        goal_state::multiwoz_turn(session, role, turn, &mut fields, map);
        if role == Role::Wizard {
            goal_state::multiwoz_mapped(session, turn, map, &mut fields);
        }
        fields
    }
}
