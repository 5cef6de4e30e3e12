//! `wozkit export`: every visible session of the store written in one format, optionally split
//! into parts. Sessions are streamed from the store ([`SessionStream`]); each goes to the sink of
//! its part. JSON Lines and the CSVs are written as the sessions arrive; formats that are one
//! JSON document keep each record's rendered text (not the events) until the end, to write the
//! records in import order; CRWIZ writes one file per dialogue as it comes.
//!
//! The judgments formats read the participants' logs instead of the dialogues
//! ([`export_judgments`], columns in [`crate::judgments`]).
//!
//! A `votes-csv` export writes the votes of imported sessions and then those of the live arena
//! battles (the participants' logs), so both are in one file.
//!
//! A CRSArena-Dial export also writes the votes of the arena battles in the participants' logs
//! (counted, not void; see [`crate::leaderboard`]), in cast order, as a votes CSV beside the
//! dialogues: [`votes_path`] (`crs_arena_dial_open.json` → `votes_open.csv`, as in the release;
//! `battles.json` → `votes_battles.csv`). Importing both files with `--format crsarena` gives
//! the same leaderboard. With `--split`, the votes of every part go to the one file named after
//! `--out`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use thiserror::Error;
use wozkit_core::event::{EventKind, Judgment};
use wozkit_store::{SessionFilter, SessionKind, Store, StoreError};

use super::Progress;
use super::read::{SessionStream, log_worker, test_session_ids, visible_session_ids};
use super::sinks::{self, OutFile, Sink};
use super::split::{SplitSpec, part_path};
use crate::acts::TurnActs;
use crate::error::ExportError;
use crate::formats::taskmaster1::SpanSegments;
use crate::judgments::{JudgmentsCsv, JudgmentsJsonl, log_rows};
use crate::leaderboard::{study_rows, votes_from_rows};
use crate::mapping::Mappings;
use crate::session::Format;
use crate::votes::VotesWriter;

/// An export target: a dataset format or one of wozkit's own files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Dataset(Format),
    /// The lossless event log, one event per line, store ids and origin annotations included.
    Jsonl,
    /// Survey answers, one row per item.
    SurveyCsv,
    /// Pairwise votes in the CRSArena layout.
    VotesCsv,
    /// Judgments of evaluation studies, one JSON object per line ([`crate::judgments`]).
    JudgmentsJsonl,
    /// Judgments of evaluation studies as CSV, one column per answer key.
    JudgmentsCsv,
}

impl ExportFormat {
    /// Every name [`ExportFormat::parse`] accepts (aliases aside).
    pub const NAMES: [&'static str; 12] = [
        "taskmaster1",
        "crosswoz",
        "multiwoz",
        "convlab3",
        "crsarena",
        "crsarena_eval",
        "crwiz",
        "jsonl",
        "survey-csv",
        "votes-csv",
        "judgments-jsonl",
        "judgments-csv",
    ];

    /// Parses a name; `multiwoz21` and `crsarena-eval` are accepted too.
    pub fn parse(name: &str) -> Option<ExportFormat> {
        match name {
            "jsonl" => Some(ExportFormat::Jsonl),
            "survey-csv" => Some(ExportFormat::SurveyCsv),
            "votes-csv" => Some(ExportFormat::VotesCsv),
            "judgments-jsonl" => Some(ExportFormat::JudgmentsJsonl),
            "judgments-csv" => Some(ExportFormat::JudgmentsCsv),
            other => parse_dataset(other).map(ExportFormat::Dataset),
        }
    }
}

/// Parses a dataset format name as the CLI spells it (`multiwoz` for MultiWOZ 2.1).
pub fn parse_dataset(name: &str) -> Option<Format> {
    match name {
        "multiwoz" => Some(Format::MultiWoz21),
        "crsarena-eval" => Some(Format::CrsArenaEval),
        other => Format::parse(other),
    }
}

/// What to export and where.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// The file (a folder for CRWIZ). A name ending in `.zip` gets a zip archive holding one file.
    pub out: PathBuf,
    pub split: Option<SplitSpec>,
    /// Only this study's sessions (imported ones are in `import:<format>`).
    pub study: Option<String>,
    /// Test sessions too (`/try`, lab links with `test=1`); left out otherwise.
    pub include_test: bool,
}

/// What an export did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Sessions read from the store.
    pub sessions_read: usize,
    /// Sessions written into the export (dialogue formats skip sessions without messages).
    pub sessions_written: usize,
    pub events_read: u64,
    /// Every file written, sidecars included.
    pub files: Vec<PathBuf>,
    /// Sessions with events the format cannot hold, kept in the sidecar.
    pub sidecar_sessions: usize,
}

/// Why an export failed.
#[derive(Debug, Error)]
pub enum StoreExportError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// The options do not apply to the format.
    #[error("{0}")]
    Options(String),
}

/// Exports the store's sessions as `options` says.
pub async fn export_store(
    store: &dyn Store,
    options: &ExportOptions,
    progress: &dyn Progress,
) -> Result<ExportSummary, StoreExportError> {
    export_store_with_segments(store, options, &SpanSegments::default(), progress).await
}

/// Exports the store's sessions as `options` says, each dialogue first given the Taskmaster-1
/// `segments` of its spans ([`SpanSegments::apply`], by store session id), as the server's
/// Taskmaster-1 download does; `segments` is read with [`span_judgments`].
pub async fn export_store_with_segments(
    store: &dyn Store,
    options: &ExportOptions,
    segments: &SpanSegments,
    progress: &dyn Progress,
) -> Result<ExportSummary, StoreExportError> {
    export_store_annotated(store, options, segments, &TurnActs::default(), progress).await
}

/// As [`export_store_with_segments`], each session's turns also given their adjudicated
/// dialogue acts ([`TurnActs::apply`], by store session id) in the formats with acts (MultiWOZ
/// 2.1, ConvLab-3, CrossWOZ); `acts` is read with [`TurnActs::from_judgments`]. The built-in
/// studies' dataset mappings apply ([`Mappings::builtin`]).
pub async fn export_store_annotated(
    store: &dyn Store,
    options: &ExportOptions,
    segments: &SpanSegments,
    acts: &TurnActs,
    progress: &dyn Progress,
) -> Result<ExportSummary, StoreExportError> {
    export_store_mapped(
        store,
        options,
        segments,
        acts,
        Mappings::builtin(),
        progress,
    )
    .await
}

/// As [`export_store_annotated`], each session of a study with a dataset mapping in `mappings`
/// written with the acts, domains and slots it maps to ([`crate::mapping`]; the store keeps no
/// study definitions, so `mappings` holds the studies the caller knows).
pub async fn export_store_mapped(
    store: &dyn Store,
    options: &ExportOptions,
    segments: &SpanSegments,
    acts: &TurnActs,
    mappings: &Mappings,
    progress: &dyn Progress,
) -> Result<ExportSummary, StoreExportError> {
    if matches!(
        options.format,
        ExportFormat::JudgmentsJsonl | ExportFormat::JudgmentsCsv
    ) {
        return export_judgments(store, options, progress).await;
    }
    let skip = if options.include_test {
        HashSet::new()
    } else {
        test_session_ids(store, options.study.as_deref()).await?
    };
    let mut ids = visible_session_ids(store, options.study.as_deref()).await?;
    ids.retain(|id| !skip.contains(id));
    let (mut parts, assignment) = open_sinks(options, mappings, &ids)?;
    let mut summary = ExportSummary::default();
    progress.start("exporting", Some(ids.len() as u64));
    let mut stream = SessionStream::open(store, options.study.as_deref())
        .await?
        .skipping(skip);
    if !options.include_test {
        stream = stream.skipping_test_chats();
    }
    while let Some(mut session) = stream.next().await? {
        segments.apply(&session.store_id, &mut session.events);
        if let ExportFormat::Dataset(format) = options.format {
            acts.apply(format, &mut session)?;
        }
        let part = assignment
            .as_ref()
            .and_then(|a| a.get(&session.store_id).copied())
            .unwrap_or(0);
        if let Some(sink) = parts.get_mut(part) {
            let added = sink.add(&session)?;
            summary.sessions_written += usize::from(added.written);
            summary.sidecar_sessions += usize::from(added.sidecar);
        }
        summary.sessions_read += 1;
        progress.advance(1);
    }
    progress.finish();
    summary.events_read = stream.events_read;
    if options.format == ExportFormat::VotesCsv {
        // The live arena's votes are in the participants' logs, not in dialogue sessions; with
        // `--split` they go to the first part.
        let rows = study_rows(store, options.study.as_deref(), options.include_test).await?;
        if let Some(first) = parts.first_mut() {
            first.add_votes(&votes_from_rows(&rows))?;
        }
    }
    for sink in parts {
        summary.files.extend(sink.finish()?);
    }
    if options.format == ExportFormat::Dataset(Format::CrsArena) {
        write_arena_votes(store, options, &mut summary).await?;
    }
    Ok(summary)
}

/// An export's sinks, and the part (an index into them) of each session id under `--split`.
type Parts = (Vec<Box<dyn Sink>>, Option<HashMap<String, usize>>);

/// The sinks an export writes: one at `options.out`, or one per part of `--split` with the
/// part of each session id.
fn open_sinks(
    options: &ExportOptions,
    mappings: &Mappings,
    ids: &[String],
) -> Result<Parts, StoreExportError> {
    let ontology = sinks::SharedOntology::default();
    Ok(match &options.split {
        None => (
            vec![sinks::open(options.format, &options.out, mappings)?],
            None,
        ),
        Some(spec) => {
            let parts = spec
                .parts
                .iter()
                .map(|(name, _)| {
                    let path = part_path(&options.out, name);
                    sinks::open_part(options.format, &path, Some(name), &ontology, mappings)
                })
                .collect::<Result<_, _>>()?;
            (parts, Some(spec.assign(ids)))
        }
    })
}

/// Writes the live arena's votes beside a CRSArena export (none when there are none).
async fn write_arena_votes(
    store: &dyn Store,
    options: &ExportOptions,
    summary: &mut ExportSummary,
) -> Result<(), StoreExportError> {
    let rows = study_rows(store, options.study.as_deref(), options.include_test).await?;
    let votes = votes_from_rows(&rows);
    if !votes.is_empty() {
        let mut writer = VotesWriter::new(OutFile::create(&votes_path(&options.out))?)?;
        for vote in &votes {
            writer.vote(vote)?;
        }
        summary.files.push(writer.finish()?.finish()?);
    }
    Ok(())
}

/// The judgments in the participant logs of the span-annotation studies `studies`, in log
/// order: what [`SpanSegments::from_judgments`] reads (it keeps the counted ones).
pub async fn span_judgments(
    store: &dyn Store,
    studies: &[String],
) -> Result<Vec<Judgment>, StoreError> {
    let mut judgments = vec![];
    for study in studies {
        let logs = SessionFilter {
            study_id: Some(study.clone()),
            kind: SessionKind::Participant,
            ..SessionFilter::default()
        };
        for log in store.list_sessions(&logs).await? {
            for e in store.events(&log.id, 0).await? {
                if let EventKind::Judged(j) = e.kind {
                    judgments.push(*j);
                }
            }
        }
    }
    Ok(judgments)
}

/// Where a CRSArena-Dial export puts its votes: beside `out`, named `votes_<name>.csv`, where
/// `<name>` is `out`'s file name without `.zip`, `.json` and a leading `crs_arena_dial_`.
pub fn votes_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".zip").unwrap_or(&name);
    let name = name.strip_suffix(".json").unwrap_or(name);
    let name = name.strip_prefix("crs_arena_dial_").unwrap_or(name);
    let name = if name.is_empty() { "crsarena" } else { name };
    out.with_file_name(format!("votes_{name}.csv"))
}

/// Exports the judgments of the participant logs (of `options.study`; test participants only
/// with `include_test`) as JSON Lines or CSV. A summary's sessions are participant logs: read, and
/// written when they hold a judgment or onboarding answer.
pub async fn export_judgments(
    store: &dyn Store,
    options: &ExportOptions,
    progress: &dyn Progress,
) -> Result<ExportSummary, StoreExportError> {
    if options.split.is_some() {
        return Err(StoreExportError::Options(
            "--split applies to dialogue exports, not to judgments".into(),
        ));
    }
    let mut out = OutFile::create(&options.out)?;
    let mut jsonl = JudgmentsJsonl::new(&mut out);
    let mut csv = JudgmentsCsv::new();
    let mut summary = ExportSummary::default();
    progress.start("exporting judgments", None);
    let mut stream = SessionStream::participant_logs(store, options.study.as_deref()).await?;
    while let Some(log) = stream.next().await? {
        let (worker, test) = log_worker(store, &log).await?;
        summary.sessions_read += 1;
        progress.advance(1);
        if test && !options.include_test {
            continue;
        }
        let rows = log_rows(&log.events, &worker);
        summary.sessions_written += usize::from(!rows.is_empty());
        match options.format {
            ExportFormat::JudgmentsCsv => csv.rows(rows),
            _ => jsonl.rows(rows),
        }
    }
    progress.finish();
    if options.format == ExportFormat::JudgmentsCsv {
        csv.write(&mut out)?;
    } else {
        jsonl.finish()?;
    }
    summary.events_read = stream.events_read;
    summary.files.push(out.finish()?);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes_file_is_named_like_the_release() {
        let path = |p: &str| votes_path(Path::new(p));
        assert_eq!(
            path("out/crs_arena_dial_open.json"),
            Path::new("out/votes_open.csv")
        );
        assert_eq!(path("battles.json.zip"), Path::new("votes_battles.csv"));
        assert_eq!(path("a/b/dump"), Path::new("a/b/votes_dump.csv"));
        assert_eq!(path(".json"), Path::new("votes_crsarena.csv"));
    }
}
