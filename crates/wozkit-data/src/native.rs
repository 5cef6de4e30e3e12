//! wozkit's own event log as JSON Lines: one [`Event`] per line, sessions one after another. It is
//! the lossless export; every other format is a projection of it.

use std::io::Write;

use indexmap::IndexMap;
use wozkit_core::event::Event;

use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::session::ImportedSession;

/// Writes every event of every session, one JSON object per line.
pub fn export_jsonl(sessions: &[ImportedSession], mut out: impl Write) -> Result<(), ExportError> {
    for event in sessions.iter().flat_map(|s| &s.events) {
        serde_json::to_writer(&mut out, event)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads an event log. Events are grouped by their `session`, in order of first appearance;
/// within a session `seq` must increase.
pub fn import_jsonl(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let text = std::str::from_utf8(input.bytes()).map_err(|e| ImportError::Line {
        file: input.name().to_string(),
        line: 1 + input
            .bytes()
            .get(..e.valid_up_to())
            .map_or(0, |ok| ok.iter().filter(|&&b| b == b'\n').count()),
        problem: "not UTF-8".into(),
    })?;
    let mut sessions: IndexMap<String, Vec<Event>> = IndexMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_err = |problem: String| ImportError::Line {
            file: input.name().to_string(),
            line: i + 1,
            problem,
        };
        let event: Event = serde_json::from_str(line).map_err(|e| line_err(e.to_string()))?;
        let events = sessions.entry(event.session.clone()).or_default();
        if let Some(last) = events.last()
            && last.seq >= event.seq
        {
            let problem = format!(
                "session {}: seq {} does not follow seq {}",
                event.session, event.seq, last.seq
            );
            return Err(line_err(problem));
        }
        events.push(event);
    }
    Ok(sessions
        .into_iter()
        .map(|(id, events)| ImportedSession { id, events })
        .collect())
}
