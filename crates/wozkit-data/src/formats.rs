//! Importers and exporters of the public dialogue datasets, as pure functions between file
//! content and sessions of events. Each module's doc says how its fields map to events and what a
//! session from elsewhere (a live wizard-of-oz session, another dataset) looks like in it; what a
//! format cannot hold goes to the [sidecar](crate::sidecar).

use std::io::Write;

use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::mapping::Mappings;
use crate::session::{Format, ImportedSession};

pub mod convlab3;
pub mod crosswoz;
pub mod crsarena;
pub mod crwiz;
pub mod crwiz_labels;
mod goal_state;
pub mod multiwoz;
mod record;
pub(crate) use record::{Layout, Shape, shaped};
pub mod scenario;
pub mod taskmaster1;
pub(crate) mod vocab;

/// Imports `input` as `format`.
pub fn import(format: Format, input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    match format {
        Format::Taskmaster1 => taskmaster1::import_taskmaster1(input),
        Format::CrossWoz => crosswoz::import_crosswoz(input),
        Format::MultiWoz21 => multiwoz::import_multiwoz21(input),
        Format::ConvLab3 => convlab3::import_convlab3(input),
        Format::CrsArena => crsarena::import_crsarena(input),
        Format::CrsArenaEval => crsarena::import_crsarena_eval(input),
        Format::Crwiz => crwiz::import_crwiz(input),
    }
}

/// Exports `sessions` as `format` (the plain JSON; see [`crate::write_zipped`] for archives),
/// with the built-in studies' dataset mappings ([`Mappings::builtin`]).
pub fn export(
    format: Format,
    sessions: &[ImportedSession],
    out: impl Write,
) -> Result<(), ExportError> {
    export_mapped(format, sessions, Mappings::builtin(), out)
}

/// Exports `sessions` as `format`, each session of a study with a mapping in `mappings` written
/// with the acts, domains and slots it maps to (see [`crate::mapping`]).
pub fn export_mapped(
    format: Format,
    sessions: &[ImportedSession],
    mappings: &Mappings,
    out: impl Write,
) -> Result<(), ExportError> {
    match format {
        Format::Taskmaster1 => taskmaster1::exporter(mappings).file(sessions, out),
        Format::CrossWoz => crosswoz::exporter(mappings).file(sessions, out),
        Format::MultiWoz21 => multiwoz::exporter(mappings).file(sessions, out),
        Format::ConvLab3 => convlab3::export_with(sessions, mappings, out),
        Format::CrsArena => crsarena::export_crsarena(sessions, out),
        Format::CrsArenaEval => crsarena::export_crsarena_eval(sessions, out),
        Format::Crwiz => crwiz::export_crwiz(sessions, out),
    }
}

/// The record layout of a format whose records are a turn list (all but CRWIZ).
pub(crate) fn layout(format: Format) -> Option<&'static Layout> {
    match format {
        Format::Taskmaster1 => Some(&taskmaster1::LAYOUT),
        Format::CrossWoz => Some(&crosswoz::LAYOUT),
        Format::MultiWoz21 => Some(&multiwoz::LAYOUT),
        Format::ConvLab3 => Some(&convlab3::LAYOUT),
        Format::CrsArena => Some(&crsarena::DIAL),
        Format::CrsArenaEval => Some(&crsarena::EVAL),
        Format::Crwiz => None,
    }
}

/// How a format's file holds its records, for writers that assemble the file one record at a
/// time (see [`crate::stored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Container {
    /// A JSON array of records.
    Array,
    /// A JSON object of records keyed by dialogue id.
    Object,
    /// One file per dialogue (CRWIZ).
    FilePerDialogue,
}

impl Format {
    /// The container of the format's file and its indent (the released files' layout).
    pub(crate) fn container(self) -> (Container, usize) {
        match self {
            Format::Taskmaster1 | Format::ConvLab3 | Format::CrsArenaEval => (Container::Array, 2),
            Format::CrsArena => (Container::Array, 4),
            Format::CrossWoz => (Container::Object, 4),
            Format::MultiWoz21 => (Container::Object, 2),
            Format::Crwiz => (Container::FilePerDialogue, 2),
        }
    }
}

/// The record of one session in an array or object format, `index` being its position among
/// the exported sessions. `None` when the export skips the session (no messages, not from this
/// format) or the format writes one file per dialogue.
pub(crate) fn record(
    format: Format,
    session: &ImportedSession,
    index: usize,
) -> Result<Option<serde_json::Value>, ExportError> {
    record_in_part(format, session, index, None, Mappings::builtin())
}

/// As [`record`], for the part `part` of a split export (the formats that name their split in
/// the record, ConvLab-3, use it), with the dataset mappings `mappings`.
pub(crate) fn record_in_part(
    format: Format,
    session: &ImportedSession,
    index: usize,
    part: Option<&str>,
    mappings: &Mappings,
) -> Result<Option<serde_json::Value>, ExportError> {
    if !session.is_dialogue_for(format) {
        return Ok(None);
    }
    let fields = match format {
        Format::Taskmaster1 => taskmaster1::exporter(mappings).record(session, index)?,
        Format::CrossWoz => crosswoz::exporter(mappings).record(session, index)?,
        Format::MultiWoz21 => multiwoz::exporter(mappings).record(session, index)?,
        Format::ConvLab3 => convlab3::record_in(session, index, part, mappings)?,
        Format::CrsArena => crsarena::dial_record(session, index)?,
        Format::CrsArenaEval => crsarena::eval_record(session, index)?,
        Format::Crwiz => return Ok(None),
    };
    Ok(Some(serde_json::Value::Object(fields)))
}
