//! Scenario variants in the report: the values a session drew (its `scenario_drawn` event), the
//! `scenario.<name>=<value>` filter, and the per-variant breakdown of the main figures.
//!
//! A variant is the set of a session's drawn values that are not numbers (choices of places,
//! robots, conditions); numeric draws (ranges such as a distance) would make every session its own
//! variant, so they are left out of the grouping but can still be filtered on.

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use wozkit_core::event::{Event, EventKind};
use wozkit_core::scenario::value_text;

use super::features::{Outcome, SessionFeatures};
use super::summary::{MeanSd, summarise};

/// The filter key prefix: `scenario.fire_location=pu_nt`.
pub const FILTER_PREFIX: &str = "scenario.";

/// The values a session drew, if its study draws any.
pub fn drawn(events: &[Event]) -> Option<&IndexMap<String, Value>> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::ScenarioDrawn { values, .. } => Some(values),
        _ => None,
    })
}

/// Whether the session drew `value` for `name` (a string compared as it is, anything else as
/// its JSON text, so `travel_distance_m=70` matches the number 70).
pub fn matches(events: &[Event], name: &str, value: &str) -> bool {
    drawn(events)
        .and_then(|v| v.get(name))
        .is_some_and(|v| value_text(v) == value)
}

/// A session's variant: its drawn values that are not numbers, as text; None without a draw.
pub fn variant(events: &[Event]) -> Option<IndexMap<String, String>> {
    let values = drawn(events)?;
    Some(
        values
            .iter()
            .filter(|(_, v)| !v.is_number())
            .map(|(k, v)| (k.clone(), value_text(v)))
            .collect(),
    )
}

/// The main figures of the sessions of one variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantRow {
    /// `name=value` pairs joined by `, `.
    pub variant: String,
    pub values: IndexMap<String, String>,
    /// Dialogue sessions of the variant.
    pub sessions: usize,
    pub outcome_known: usize,
    pub outcome_reached: usize,
    /// Share of the sessions with a known outcome that reached it.
    pub outcome_share: Option<f64>,
    pub turns: MeanSd,
    pub user_turns: MeanSd,
    pub wizard_turns: MeanSd,
    pub wizard_typed_percent: MeanSd,
}

/// The breakdown: one row per variant, in the order of the variants' names; empty when no
/// session drew a scenario.
pub fn breakdown(
    sessions: &[SessionFeatures],
    variants: &[Option<IndexMap<String, String>>],
    outcome: Outcome,
) -> Vec<VariantRow> {
    let mut groups: BTreeMap<String, (IndexMap<String, String>, Vec<SessionFeatures>)> =
        BTreeMap::new();
    for (f, v) in sessions.iter().zip(variants) {
        let Some(values) = v else { continue };
        let label = values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        groups
            .entry(label)
            .or_insert_with(|| (values.clone(), vec![]))
            .1
            .push(f.clone());
    }
    groups
        .into_iter()
        .map(|(variant, (values, group))| {
            let s = summarise(&group, &HashMap::new(), &IndexMap::new(), outcome, 0);
            VariantRow {
                variant,
                values,
                sessions: s.sessions,
                outcome_known: s.outcome_known,
                outcome_reached: s.outcome_reached,
                outcome_share: (s.outcome_known > 0)
                    .then(|| s.outcome_reached as f64 / s.outcome_known as f64),
                turns: s.interaction.turns,
                user_turns: s.interaction.user_turns,
                wizard_turns: s.interaction.wizard_turns,
                wizard_typed_percent: s.interaction.wizard_typed_percent,
            }
        })
        .collect()
}
