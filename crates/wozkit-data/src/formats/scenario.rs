//! The scenario a session drew (its `scenario_drawn` event, see "Scenario variation" in
//! `docs/engine-semantics.md`) as the record formats show it, for sessions exported from a live
//! study:
//!
//! - CrossWOZ: one `task description` line per world variable the draw set (and one naming the
//!   robots out of service), plus an extra record key `scenario` after `type`;
//! - MultiWOZ 2.1: the same lines in `goal.message`, the drawn value emphasised with the
//!   corpus's `<span class='emphasis'>` markup, plus an extra record key `scenario` after `log`;
//! - ConvLab-3: the lines joined into `goal.description`, plus an extra dialogue key `scenario`
//!   between `goal` and `turns` (the unified format allows extra keys).
//!
//! The `scenario` key holds `{values, world, out_of_service}`, the fields of the event. A session
//! without a draw is written as before. On import the key stays in the record's
//! `"<format>.dialogue"` annotation like every other record field, so [`drawn`] finds the draw
//! of a re-imported export there; the event itself is still lost by the file and kept by the
//! sidecar.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wozkit_core::event::EventKind;
use wozkit_core::scenario::value_text;

use crate::session::{Format, ImportedSession};

/// The record key holding the draw in the CrossWOZ, MultiWOZ and ConvLab-3 exports.
pub const SCENARIO_KEY: &str = "scenario";

/// What a session drew: the fields of its `scenario_drawn` event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Drawn {
    /// The drawn variables, in the study's order.
    pub values: IndexMap<String, Value>,
    /// Every world variable the draw set: the drawn ones, then the computed ones.
    #[serde(default)]
    pub world: IndexMap<String, Value>,
    /// Robots out of service in the session (ids).
    #[serde(default)]
    pub out_of_service: Vec<String>,
}

impl Drawn {
    /// The draw as the value of the `scenario` record key.
    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The variables the description lines name: the world values the draw set, or the drawn
    /// values where the event lists no world values.
    fn shown(&self) -> &IndexMap<String, Value> {
        if self.world.is_empty() {
            &self.values
        } else {
            &self.world
        }
    }

    /// One sentence per variable (`Scenario: fire_location is pu_nt.`) and one naming the robots
    /// out of service, with each value passed through `mark`.
    pub(crate) fn lines(&self, mark: impl Fn(&str) -> String) -> Vec<String> {
        let mut lines: Vec<String> = self
            .shown()
            .iter()
            .map(|(name, value)| format!("Scenario: {name} is {}.", mark(&value_text(value))))
            .collect();
        if !self.out_of_service.is_empty() {
            let robots: Vec<String> = self.out_of_service.iter().map(|r| mark(r)).collect();
            lines.push(format!("Out of service: {}.", robots.join(", ")));
        }
        lines
    }
}

/// The session's draw: its `scenario_drawn` event or, for a session imported from a CrossWOZ,
/// MultiWOZ or ConvLab-3 export, the `scenario` key of the record it came from. `None` when the
/// session drew nothing (or the key does not hold a draw).
pub fn drawn(session: &ImportedSession) -> Option<Drawn> {
    logged(session).or_else(|| {
        [Format::CrossWoz, Format::MultiWoz21, Format::ConvLab3]
            .into_iter()
            .filter_map(|f| session.dialogue_note(f))
            .find_map(|note| note.get(SCENARIO_KEY))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    })
}

/// The draw logged in the session's events (not one read from a record).
pub(crate) fn logged(session: &ImportedSession) -> Option<Drawn> {
    session.events.iter().find_map(|e| match &e.kind {
        EventKind::ScenarioDrawn {
            values,
            world,
            out_of_service,
        } => Some(Drawn {
            values: values.clone(),
            world: world.clone(),
            out_of_service: out_of_service.clone(),
        }),
        _ => None,
    })
}

/// `text` inside MultiWOZ's emphasis markup, with `&`, `<` and `>` escaped.
pub(crate) fn emphasis(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<span class='emphasis'>{escaped}</span>")
}
