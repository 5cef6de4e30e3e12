//! Imports into and exports from a [`Store`](wozkit_store::Store): the part of the data crate that
//! does IO, used by `wozkit import`, `wozkit export` and `wozkit report`. The pure converters in
//! [`crate::formats`] do the work; this layer decides session ids, keeps a failed import from
//! leaving anything visible, and streams exports page by page.
//!
//! Conventions of an imported session in the store:
//! - its id is `<format>:<dialogue id>` (votes: `votes-csv:<cast time>:<user id>`), so importing
//!   the same file twice finds the sessions already there instead of duplicating them;
//! - its study is `import:<format>`;
//! - its first event is an [`Origin`] annotation (key [`IMPORT_KEY`], at the import time) naming
//!   the format, file, dialogue id and position in the file, followed by the importer's events;
//! - it is ended (reason `finished`) only once every session of the import is written. Until
//!   then it counts as *importing*: exports and reports skip it, and running the same import
//!   again finishes it (see [`import`]).
//!
//! Exports give each format the session as the importer made it ([`StoredSession::dataset_view`]:
//! the origin annotation removed, the dialogue id restored), so import → store → export gives the
//! file back.

use serde::{Deserialize, Serialize};
use wozkit_core::event::EventKind;

pub mod export;
pub mod import;
pub mod read;
mod sinks;
pub mod split;

pub use export::{
    ExportFormat, ExportOptions, ExportSummary, StoreExportError, export_store,
    export_store_annotated, export_store_mapped, export_store_with_segments, span_judgments,
};
pub use import::{ImportSummary, StoreImportError, import_files};
pub use read::{SessionStream, StoredSession};
pub use split::SplitSpec;

/// The key of the annotation that records where an imported session came from.
pub const IMPORT_KEY: &str = "import";

/// The study prefix of imported sessions: `import:<format>`.
pub const IMPORT_STUDY_PREFIX: &str = "import:";

/// Where an imported session came from: the value of its [`IMPORT_KEY`] annotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The format name (`crosswoz`, `votes-csv`, …).
    pub format: String,
    /// The file name (without folders, so the same file imported from elsewhere matches).
    pub file: String,
    /// The dialogue id in the file (the session id the importer gave).
    pub id: String,
    /// Position among the sessions of the whole import run, from 0; exports keep this order.
    pub position: u64,
}

impl Origin {
    /// The origin recorded by an event, if it is an import annotation.
    pub fn of(kind: &EventKind) -> Option<Origin> {
        match kind {
            EventKind::Annotation { key, value } if key == IMPORT_KEY => {
                serde_json::from_value(value.clone()).ok()
            }
            _ => None,
        }
    }
}

/// Reports progress of a long import or export; the CLI draws it as a progress bar.
pub trait Progress: Sync {
    /// A new phase begins (`total` units, when known).
    fn start(&self, phase: &str, total: Option<u64>);
    /// `n` more units are done.
    fn advance(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Progress that goes nowhere (tests, library callers).
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _phase: &str, _total: Option<u64>) {}
    fn advance(&self, _n: u64) {}
    fn finish(&self) {}
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
