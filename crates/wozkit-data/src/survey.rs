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
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(["session", "role", "item", "value"])?;
    for session in sessions {
        for event in &session.events {
            let EventKind::SurveyAnswered { role, answers } = &event.kind else {
                continue;
            };
            for (item, value) in answers {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                writer.write_record([session.id.as_str(), role.as_str(), item, &value])?;
            }
        }
    }
    writer.flush()?;
    Ok(())
}
