//! wozkit-data: the data side of wozkit — dataset imports and exports, the statistics that
//! reports print, and the reports themselves. The converters and statistics are pure functions
//! over sessions of events and bytes: no database, no network, no clock. Only [`stored`] and
//! [`report`] talk to a [`Store`](wozkit_store::Store), and only through its trait; this crate
//! must not decide how sessions are stored or served.
//!
//! Map of the modules:
//! - [`session`]: [`ImportedSession`], [`Format`] and the annotation conventions every format uses.
//! - [`formats`]: one module per dataset (Taskmaster-1, CrossWOZ, MultiWOZ 2.1, ConvLab-3 unified,
//!   CRSArena-Dial and -Eval, CRWIZ), plus [`formats::import`] / [`formats::export`] by name.
//! - [`votes`](mod@votes), [`survey`]: the votes CSV (CRSArena layout) and the survey-answer CSV.
//! - [`acts`]: adjudicated dialogue acts of annotated turns, written into the dataset exports.
//! - [`judgments`]: the judgments of evaluation studies as a JSON Lines or CSV table.
//! - [`leaderboard`]: arena battles ranked (Elo, Bradley-Terry, win-rate grid) and as HTML.
//! - [`native`]: wozkit's own JSON Lines event log, the lossless export.
//! - [`sidecar`]: what an export's format cannot hold, next to the export.
//! - [`input`], [`output`]: reading files (zip, lenient JSON) and streaming pretty JSON and zips.
//! - [`stats`]: descriptive statistics, tests, correlations, ratings and agreement for reports.
//! - [`stored`]: `wozkit import` / `wozkit export` against a store: deterministic ids,
//!   all-or-nothing imports, exports streamed page by page, splits.
//! - [`report`]: `wozkit report`: the report's numbers as JSON and as an HTML page with SVG charts.

#![forbid(unsafe_code)]

pub mod acts;
pub mod completion;
pub mod download;
pub mod error;
pub mod formats;
pub mod input;
pub mod judgments;
pub mod leaderboard;
pub mod mapping;
pub mod native;
pub mod output;
pub mod records;
pub mod report;
pub mod session;
pub mod sidecar;
pub mod stats;
pub mod stored;
pub mod survey;
pub mod votes;

pub use error::{ExportError, ImportError};
pub use formats::convlab3::{export_convlab3, import_convlab3};
pub use formats::crosswoz::{export_crosswoz, import_crosswoz};
pub use formats::crsarena::{
    export_crsarena, export_crsarena_eval, import_crsarena, import_crsarena_eval,
};
pub use formats::crwiz::{export_crwiz, import_crwiz};
pub use formats::crwiz_labels::crwiz_act_type;
pub use formats::multiwoz::{export_multiwoz21, import_multiwoz21};
pub use formats::taskmaster1::{
    SpanSegments, add_segments, export_taskmaster1, export_taskmaster1_conversation,
    import_taskmaster1,
};
pub use input::Input;
pub use native::{export_jsonl, import_jsonl};
pub use output::write_zipped;
pub use session::{Format, ImportedSession};
pub use sidecar::{lost_events, read_sidecar, sidecar_path, write_sidecar};
pub use survey::export_survey_csv;
pub use votes::{Vote, export_votes_csv, import_votes_csv, votes};
