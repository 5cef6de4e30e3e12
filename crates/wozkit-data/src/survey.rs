//! Survey answers as a CSV table for spreadsheets and R: one row per answered item, in log order,
//! with the columns `session,role,item,value`. A text answer is written as is; any other answer
//! (number, boolean, list) as its JSON text.

use std::io::Write;

use serde_json::Value;
use wozkit_core::event::EventKind;

use crate::error::ExportError;
use crate::session::ImportedSession;

/// Writes every `SurveyAnswered` answer of the sessions.
pub fn export_survey_csv(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    let mut writer = SurveyWriter::new(out)?;
    for session in sessions {
        writer.session(session)?;
    }
    writer.finish()?;
    Ok(())
}

/// The survey CSV written one session at a time (exports streamed from the store).
pub struct SurveyWriter<W: Write> {
    writer: csv::Writer<W>,
}

impl<W: Write> SurveyWriter<W> {
    /// Starts the file with its header.
    pub fn new(out: W) -> Result<Self, ExportError> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(["session", "role", "item", "value"])?;
        Ok(SurveyWriter { writer })
    }

    /// Writes the session's answers; returns how many rows.
    pub fn session(&mut self, session: &ImportedSession) -> Result<usize, ExportError> {
        let mut rows = 0;
        for event in &session.events {
            let EventKind::SurveyAnswered { role, answers } = &event.kind else {
                continue;
            };
            for (item, value) in answers {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                self.writer
                    .write_record([session.id.as_str(), role.as_str(), item, &value])?;
                rows += 1;
            }
        }
        Ok(rows)
    }

    /// Flushes the CSV and gives the output back.
    pub fn finish(self) -> Result<W, ExportError> {
        self.writer
            .into_inner()
            .map_err(|e| ExportError::Io(e.into_error()))
    }
}
