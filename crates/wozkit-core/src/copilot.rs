//! The wizard's copilot (`copilot:` in a study, `docs/copilot.md`): one of the study's systems
//! suggests the wizard's next message, which the wizard may send as it is, edit, or ignore.
//!
//! The log keeps all three parts: `suggested` (the suggestion, numbered from 1 in the session),
//! the wizard's `message` (what was sent, as any free text), and right after it `suggestion_used`
//! (which suggestion it came from and the edit distance between the two). A suggestion the
//! wizard never sent from was ignored. [`uptake`] reads a session's events into those counts,
//! for the report.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{Event, EventKind};

/// The copilot of a WoZ study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Copilot {
    /// The system asked for each suggestion: one of the study's `systems`. It is given the
    /// dialogue so far, as a system under test is, and its reply is the suggestion.
    pub system: String,
    /// Whether the wizard's first message is suggested too, before the user has said anything
    /// (otherwise suggestions start with the user's first message).
    #[serde(default = "yes")]
    pub opening: bool,
}

fn yes() -> bool {
    true
}

/// The edit distance between a suggestion and the message sent from it: the fewest characters
/// inserted, deleted or replaced (Levenshtein over Unicode scalar values), after trimming both.
pub fn edits(suggested: &str, sent: &str) -> u32 {
    let d = strsim::levenshtein(suggested.trim(), sent.trim());
    u32::try_from(d).unwrap_or(u32::MAX)
}

/// What became of a session's suggestions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Uptake {
    /// Suggestions shown to the wizard.
    pub suggested: u32,
    /// Sent exactly as suggested.
    pub sent: u32,
    /// Sent after editing (edit distance above 0).
    pub edited: u32,
    /// Never sent from.
    pub ignored: u32,
    /// The edit distances of the edited ones.
    pub edit_distances: Vec<u32>,
    /// The length in characters of the suggestions that were edited, in the same order (to
    /// give the distance relative to what was suggested).
    pub edited_lengths: Vec<u32>,
}

impl Uptake {
    /// Adds another session's counts.
    pub fn add(&mut self, other: &Uptake) {
        self.suggested += other.suggested;
        self.sent += other.sent;
        self.edited += other.edited;
        self.ignored += other.ignored;
        self.edit_distances.extend(&other.edit_distances);
        self.edited_lengths.extend(&other.edited_lengths);
    }
}

/// The suggestions of a session's events and what became of each (see the module docs), with
/// the system that made them; `None` when the session had no suggestion.
pub fn uptake(events: &[Event]) -> Option<(String, Uptake)> {
    let mut system = None;
    let mut texts: Vec<(u32, u32)> = vec![];
    let mut u = Uptake::default();
    for e in events {
        match &e.kind {
            EventKind::Suggested { n, system: s, text } => {
                system.get_or_insert_with(|| s.clone());
                u.suggested += 1;
                let len = u32::try_from(text.trim().chars().count()).unwrap_or(u32::MAX);
                texts.push((*n, len));
            }
            EventKind::SuggestionUsed { n, edits } => {
                if *edits == 0 {
                    u.sent += 1;
                } else {
                    u.edited += 1;
                    u.edit_distances.push(*edits);
                    let len = texts.iter().find(|(m, _)| m == n).map_or(0, |(_, l)| *l);
                    u.edited_lengths.push(len);
                }
            }
            _ => {}
        }
    }
    let system = system?;
    u.ignored = u.suggested.saturating_sub(u.sent + u.edited);
    Some((system, u))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edit_distance_counts_characters_not_bytes() {
        assert_eq!(edits("Send the drone.", "Send the drone."), 0);
        assert_eq!(edits("  Send the drone. ", "Send the drone."), 0);
        assert_eq!(edits("Send the drone.", "Send the drones."), 1);
        // One character changed, three bytes in UTF-8.
        assert_eq!(edits("派无人机去", "派无人车去"), 1);
        assert_eq!(edits("无人机", "机器人"), 3);
        assert_eq!(edits("", "Hi"), 2);
    }
}
