//! `wozkit import`: dataset files into the store, all or nothing.
//!
//! 1. Every file is read and parsed before anything is written, so a bad file writes nothing.
//! 2. Session ids are deterministic (`<format>:<dialogue id>`). Ids repeated across the files,
//!    or already in the store with other content, are conflicts: the import stops before writing
//!    and names them. A session already stored with the same events is skipped (re-importing a
//!    file is a no-op).
//! 3. Sessions are written *importing* (live), then all ended together. The store has no
//!    transaction across sessions, so if writing fails halfway the written sessions stay
//!    importing, hidden from exports and reports, and running the same import again completes
//!    them (a session's events are appended in one all-or-nothing call, so each is either empty
//!    or complete).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use futures_util::{StreamExt, TryStreamExt, stream};
use serde_json::Value;
use thiserror::Error;
use wozkit_core::event::{Actor, EndReason, Event, EventKind};
use wozkit_store::{NewEvent, NewSession, Store, StoreError};

use super::{IMPORT_KEY, IMPORT_STUDY_PREFIX, Origin, Progress, now_ms};
use crate::error::{ExportError, ImportError};
use crate::formats;
use crate::input::Input;
use crate::session::{Format, ImportedSession};
use crate::votes::{VOTE_KEY, Vote, import_votes_csv};

/// Store requests in flight at once, so the SQLite writer can group-commit them.
const CONCURRENCY: usize = 64;

/// The origin format of a votes CSV.
pub const VOTES_FORMAT: &str = "votes-csv";

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub files: usize,
    /// Sessions written by this run.
    pub sessions: usize,
    /// Events written by this run (origin annotations included).
    pub events: usize,
    /// Sessions already stored with the same content, left as they were.
    pub unchanged: usize,
    /// Sessions of an interrupted earlier import that this run finished.
    pub resumed: usize,
}

/// Why an import wrote nothing (or, for [`StoreImportError::Interrupted`], nothing visible).
#[derive(Debug, Error)]
pub enum StoreImportError {
    #[error(transparent)]
    Parse(#[from] ImportError),
    #[error("{0}")]
    Record(#[from] ExportError),
    #[error(
        "{count} session id(s) conflict, nothing was imported: {examples}. {hint}",
        examples = .ids.join(", ")
    )]
    Conflict {
        count: usize,
        /// The first few conflicting ids.
        ids: Vec<String>,
        hint: &'static str,
    },
    #[error(
        "import interrupted after writing {written} of {total} sessions: {error}. The written \
         sessions stay hidden from exports and reports; run the same import again to finish it"
    )]
    Interrupted {
        written: usize,
        total: usize,
        error: StoreError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One session ready to be written.
struct Planned {
    id: String,
    study: String,
    events: Vec<NewEvent>,
}

/// What to do with a planned session given the store's content.
enum Action {
    Write,
    /// Stored complete by an interrupted import: only end it.
    End,
    /// Stored empty by an interrupted import: append and end.
    Append,
    Unchanged,
    Conflict,
}

/// Imports `paths` as `format` into `store`. For [`Format::CrsArena`], a `.csv` file is read as
/// votes and a file of CRSArena-Eval records as ratings, so one call takes a whole release.
pub async fn import_files(
    store: &dyn Store,
    format: Format,
    paths: &[PathBuf],
    progress: &dyn Progress,
) -> Result<ImportSummary, StoreImportError> {
    let now = now_ms();
    let planned = read_all(format, paths, progress, now)?;
    let actions = check_all(store, &planned, progress).await?;

    let mut summary = ImportSummary {
        files: paths.len(),
        ..ImportSummary::default()
    };
    let work: Vec<(&Planned, &Action)> = planned.iter().zip(&actions).collect();
    summary.unchanged = work
        .iter()
        .filter(|(_, a)| matches!(a, Action::Unchanged))
        .count();
    summary.resumed = work
        .iter()
        .filter(|(_, a)| matches!(a, Action::End | Action::Append))
        .count();
    let to_write: Vec<&Planned> = work
        .iter()
        .filter(|(_, a)| matches!(a, Action::Write | Action::Append))
        .map(|(p, _)| *p)
        .collect();
    let to_end: Vec<&str> = work
        .iter()
        .filter(|(_, a)| matches!(a, Action::Write | Action::Append | Action::End))
        .map(|(p, _)| p.id.as_str())
        .collect();
    let appends: HashSet<&str> = work
        .iter()
        .filter(|(_, a)| matches!(a, Action::Append))
        .map(|(p, _)| p.id.as_str())
        .collect();

    progress.start("writing", Some(to_write.len() as u64));
    let total = to_end.len();
    let written = std::sync::atomic::AtomicUsize::new(0);
    let write_result = stream::iter(to_write)
        .map(|p| {
            let (appends, written) = (&appends, &written);
            async move {
                if !appends.contains(p.id.as_str()) {
                    store.create_session(new_session(p, now)).await?;
                }
                store.append(&p.id, p.events.clone()).await?;
                written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                progress.advance(1);
                Ok::<usize, StoreError>(p.events.len())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_fold(0usize, |sum, n| async move { Ok(sum + n) })
        .await;
    progress.finish();
    let interrupted = |error| StoreImportError::Interrupted {
        written: written.load(std::sync::atomic::Ordering::Relaxed),
        total,
        error,
    };
    summary.events = write_result.map_err(interrupted)?;
    summary.sessions = written.load(std::sync::atomic::Ordering::Relaxed);

    stream::iter(to_end)
        .map(|id| async move { store.end_session(id, EndReason::Finished, now).await })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<bool>>()
        .await
        .map_err(interrupted)?;
    Ok(summary)
}

/// Reads and parses every file into the sessions to import (refusing a session id twice).
fn read_all(
    format: Format,
    paths: &[PathBuf],
    progress: &dyn Progress,
    now: u64,
) -> Result<Vec<Planned>, StoreImportError> {
    progress.start("reading", Some(paths.len() as u64));
    let mut planned = Vec::new();
    for path in paths {
        let input = Input::read(path)?;
        let (origin_format, sessions) = parse(format, &input)?;
        let file = file_name(path);
        for session in sessions {
            let position = planned.len() as u64;
            planned.push(plan(&origin_format, &file, position, session, now)?);
        }
        progress.advance(1);
    }
    progress.finish();
    check_duplicates(&planned)?;
    Ok(planned)
}

/// What to do with each planned session, given what the store holds; refuses the import when
/// any is in the store with different content.
async fn check_all(
    store: &dyn Store,
    planned: &[Planned],
    progress: &dyn Progress,
) -> Result<Vec<Action>, StoreImportError> {
    progress.start("checking", Some(planned.len() as u64));
    let actions: Vec<Action> = stream::iter(planned)
        .map(|p| async move {
            let action = decide(store, p).await;
            progress.advance(1);
            action
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    progress.finish();
    let conflicts: Vec<String> = planned
        .iter()
        .zip(&actions)
        .filter(|(_, a)| matches!(a, Action::Conflict))
        .map(|(p, _)| p.id.clone())
        .collect();
    if !conflicts.is_empty() {
        return Err(conflict(
            conflicts,
            "they are already in the store with different content (imported from another \
             version of the file?); import into a fresh --data directory",
        ));
    }
    Ok(actions)
}

/// Parses one file; returns the origin format name and the sessions.
fn parse(format: Format, input: &Input) -> Result<(String, Vec<ImportedSession>), ImportError> {
    if format == Format::CrsArena && input.name().to_ascii_lowercase().ends_with(".csv") {
        return Ok((VOTES_FORMAT.to_string(), import_votes_csv(input)?));
    }
    let format = match format {
        Format::CrsArena if looks_like_crsarena_eval(input) => Format::CrsArenaEval,
        other => other,
    };
    Ok((format.name().to_string(), formats::import(format, input)?))
}

/// Whether the file is a JSON array whose first record has CRSArena-Eval's `conv_id`.
fn looks_like_crsarena_eval(input: &Input) -> bool {
    let head = input
        .bytes()
        .iter()
        .take(4096)
        .copied()
        .collect::<Vec<u8>>();
    let text = String::from_utf8_lossy(&head);
    text.trim_start().starts_with('[') && text.contains("\"conv_id\"")
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The store id, study and events (origin first) of an imported session.
fn plan(
    format: &str,
    file: &str,
    position: u64,
    session: ImportedSession,
    now: u64,
) -> Result<Planned, ExportError> {
    let id = match format {
        VOTES_FORMAT => vote_session_id(&session)?,
        _ => format!("{format}:{}", session.id),
    };
    let origin = Origin {
        format: format.to_string(),
        file: file.to_string(),
        id: session.id,
        position,
    };
    let mut events = Vec::with_capacity(session.events.len() + 1);
    events.push(NewEvent {
        actor: Actor::System,
        kind: EventKind::Annotation {
            key: IMPORT_KEY.to_string(),
            value: serde_json::to_value(&origin)?,
        },
        at_ms: now,
    });
    events.extend(session.events.into_iter().map(|e| NewEvent {
        actor: e.actor,
        kind: e.kind,
        at_ms: e.at_ms,
    }));
    Ok(Planned {
        id,
        study: format!("{IMPORT_STUDY_PREFIX}{format}"),
        events,
    })
}

/// `votes-csv:<cast time>:<user id>`: sorts votes in the order they were cast.
fn vote_session_id(session: &ImportedSession) -> Result<String, ExportError> {
    let value = session.annotations(VOTE_KEY).next().cloned();
    let vote: Vote = serde_json::from_value(value.unwrap_or(Value::Null))
        .map_err(|e| ExportError::field(&session.id, VOTE_KEY, e.to_string()))?;
    Ok(format!(
        "{VOTES_FORMAT}:{}:{}",
        vote.session_id, vote.user_id
    ))
}

fn check_duplicates(planned: &[Planned]) -> Result<(), StoreImportError> {
    let mut seen = HashSet::new();
    let repeated: Vec<String> = planned
        .iter()
        .filter(|p| !seen.insert(p.id.as_str()))
        .map(|p| p.id.clone())
        .collect();
    if repeated.is_empty() {
        return Ok(());
    }
    Err(conflict(
        repeated,
        "these dialogue ids occur more than once in the files given; import the files into \
         separate --data directories",
    ))
}

fn conflict(ids: Vec<String>, hint: &'static str) -> StoreImportError {
    StoreImportError::Conflict {
        count: ids.len(),
        ids: ids.into_iter().take(5).collect(),
        hint,
    }
}

async fn decide(store: &dyn Store, planned: &Planned) -> Result<Action, StoreError> {
    let Some(record) = store.session(&planned.id).await? else {
        return Ok(Action::Write);
    };
    let stored = store.events(&planned.id, 0).await?;
    let importing = record.is_live() && record.study_id == planned.study;
    Ok(match (importing, stored.is_empty()) {
        (true, true) => Action::Append,
        _ if !same_content(&stored, &planned.events) => Action::Conflict,
        (true, false) => Action::End,
        (false, _) => Action::Unchanged,
    })
}

/// Whether stored events equal the planned ones, the origin annotation (time, file name)
/// aside.
fn same_content(stored: &[Event], planned: &[NewEvent]) -> bool {
    stored.len() == planned.len()
        && stored
            .iter()
            .zip(planned)
            .skip(1)
            .all(|(s, p)| s.actor == p.actor && s.kind == p.kind && s.at_ms == p.at_ms)
}

fn new_session(planned: &Planned, now: u64) -> NewSession {
    NewSession {
        id: planned.id.clone(),
        study_id: planned.study.clone(),
        study_version: String::new(),
        seed: 0,
        created_at_ms: now,
    }
}
