//! The sidecar of an export: every event that the exported file cannot give back, so that an
//! export loses nothing. It is a JSON Lines file next to the export (`<out>.wozkit-sidecar.jsonl`,
//! see [`sidecar_path`]) with one [`SidecarLine`] per session that lost anything, holding those
//! events verbatim (with their `seq`, so they can be merged back into the imported log).
//!
//! An event counts as kept when importing the exported file yields it unchanged, up to `seq`:
//! - annotations under the format's own prefix (`"<format>."`);
//! - messages with no server time, sent by a participant without an id, and — except in CRWIZ,
//!   whose labels carry the source — typed as free text.
//!
//! Everything else is lost: session and state events, surveys, votes, other formats'
//! annotations, timestamps, bots, dialogue-act labels outside CRWIZ, and whole sessions without
//! messages (which dialogue exports skip). Per format, the module docs of [`crate::formats`] say
//! which of these the file still shows in its own way (merged turns, derived acts, say); the
//! sidecar keeps the event all the same.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wozkit_core::event::{Event, EventKind};

use crate::error::{ExportError, ImportError};
use crate::formats::crwiz;
use crate::formats::{self, Shape, shaped};
use crate::input::Input;
use crate::session::{Format, ImportedSession, is_plain_message};

/// One session's lost events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SidecarLine {
    /// The format of the export this sidecar belongs to.
    pub format: String,
    pub session: String,
    pub events: Vec<Event>,
    /// The record's turns that hold other than exactly one message, as the format's turn shape
    /// made them (see `docs/datasets.md`); absent when every turn is one message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<ShapedTurn>,
}

/// A turn of an exported record that merged consecutive messages of one speaker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapedTurn {
    /// The turn's position in the record's turn list.
    pub turn: usize,
    /// The `seq` of the messages it holds, in order.
    pub messages: Vec<u64>,
    /// What joins each message's text to the one before it in the turn's text (a space, or
    /// nothing where the text is Chinese or Japanese).
    pub joins: Vec<String>,
}

/// The merged turns of an export of `session` to `format` (see [`SidecarLine::turns`]).
pub fn shaped_turns(format: Format, session: &ImportedSession) -> Vec<ShapedTurn> {
    let Some(layout) = formats::layout(format) else {
        return vec![];
    };
    if layout.shape == Shape::AsSpoken {
        return vec![];
    }
    let seqs = message_seqs(session);
    shaped(layout, session)
        .iter()
        .enumerate()
        .filter_map(|(i, (_, turn))| turn.as_ref().map(|t| (i, t)))
        .filter(|(_, t)| t.messages.len() > 1)
        .map(|(i, t)| ShapedTurn {
            turn: i,
            messages: t
                .messages
                .iter()
                .filter_map(|m| seqs.get(*m).copied())
                .collect(),
            joins: t.joins.iter().map(|j| j.to_string()).collect(),
        })
        .collect()
}

fn message_seqs(session: &ImportedSession) -> Vec<u64> {
    session
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Message { .. }))
        .map(|e| e.seq)
        .collect()
}

/// The positions among `session`'s messages of those an export to `format` writes as a turn of
/// their own (others are merged with a neighbour or left out by the turn shape).
fn single_turn_messages(format: Format, session: &ImportedSession) -> Option<HashSet<usize>> {
    let layout = formats::layout(format)?;
    Some(
        shaped(layout, session)
            .iter()
            .filter_map(|(_, t)| t.as_ref())
            .filter(|t| t.messages.len() == 1)
            .flat_map(|t| t.messages.iter().copied())
            .collect(),
    )
}

/// Where the sidecar of the export at `out` goes: `<out>.wozkit-sidecar.jsonl`.
pub fn sidecar_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".wozkit-sidecar.jsonl");
    PathBuf::from(name)
}

/// The events of `session` that an export to `format` does not give back.
pub fn lost_events(format: Format, session: &ImportedSession) -> Vec<&Event> {
    let kept = match format {
        _ if !session.is_dialogue_for(format) => vec![false; session.events.len()],
        Format::Crwiz => crwiz::kept(session),
        _ => {
            let singles = single_turn_messages(format, session);
            let mut message = 0;
            session
                .events
                .iter()
                .map(|e| {
                    let kept = kept_by_records(format, e);
                    if !matches!(e.kind, EventKind::Message { .. }) {
                        return kept;
                    }
                    message += 1;
                    kept && singles.as_ref().is_none_or(|s| s.contains(&(message - 1)))
                })
                .collect()
        }
    };
    session
        .events
        .iter()
        .zip(kept)
        .filter(|(_, kept)| !kept)
        .map(|(e, _)| e)
        .collect()
}

fn kept_by_records(format: Format, event: &Event) -> bool {
    match &event.kind {
        EventKind::Annotation { key, .. } => key
            .strip_prefix(format.name())
            .is_some_and(|rest| rest.starts_with('.')),
        EventKind::Message { .. } => is_plain_message(event),
        _ => false,
    }
}

/// Writes the sidecar of an export of `sessions` to `format`; returns the number of lines.
pub fn write_sidecar(
    format: Format,
    sessions: &[ImportedSession],
    mut out: impl Write,
) -> Result<usize, ExportError> {
    let mut lines = 0;
    for session in sessions {
        let events = lost_events(format, session);
        if events.is_empty() {
            continue;
        }
        let line = SidecarLine {
            format: format.name().to_string(),
            session: session.id.clone(),
            events: events.into_iter().cloned().collect(),
            turns: shaped_turns(format, session),
        };
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
        lines += 1;
    }
    Ok(lines)
}

/// Reads a sidecar back.
pub fn read_sidecar(input: &Input) -> Result<Vec<SidecarLine>, ImportError> {
    let text = String::from_utf8_lossy(input.bytes());
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| ImportError::Line {
                file: input.name().to_string(),
                line: i + 1,
                problem: e.to_string(),
            })
        })
        .collect()
}
