//! Projections of the store for the researcher: the per-session dialogue log with automatic
//! metrics ([`export_log`]) and the payment table ([`payments`]), read-only: they never change
//! the store; and the ledger of what was paid ([`ledger`]), the one writer here (compare-and-set
//! records in the store's meta table). Participants appear by their wozkit id, role and
//! platform; crowd worker ids stay in the payment table, which is for paying, not for
//! publishing.

pub mod ledger;
pub mod metrics;
pub mod payments;
pub mod review_log;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;
use wozkit_core::event::{Actor, Event, EventKind, Role};
use wozkit_store::{Platform, SessionFilter, SessionRecord, Store, StoreError};

pub use metrics::{Metrics, metrics};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write CSV: {0}")]
    Csv(String),
}

/// A participant as the log shows it.
#[derive(Clone, Debug, Serialize)]
pub struct LoggedParticipant {
    pub id: String,
    pub role: Option<Role>,
    pub platform: Platform,
    pub completion_code: Option<String>,
    /// A test participant (`/try`, a lab link with `test=1`); written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
}

/// One session's log: the record, who took part, the metrics, and every event.
#[derive(Clone, Debug, Serialize)]
pub struct SessionLog {
    /// `wozkit-session-log`.
    pub format: &'static str,
    pub version: u32,
    pub session: SessionRecord,
    pub participants: Vec<LoggedParticipant>,
    /// The simulated user who played the user's seat (`simulated:NAME` in the events); written
    /// only for such a session (`docs/simulated-users.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_user: Option<String>,
    pub metrics: Metrics,
    pub events: Vec<Event>,
}

/// Builds the log of one session.
pub async fn session_log(
    store: &dyn Store,
    record: SessionRecord,
) -> Result<SessionLog, StoreError> {
    let events = store.events(&record.id, 0).await?;
    let participants = store
        .participants_in_session(&record.id)
        .await?
        .into_iter()
        .map(|p| LoggedParticipant {
            test: p.is_test(),
            id: p.id,
            role: p.role,
            platform: p.platform,
            completion_code: p.completion_code,
        })
        .collect();
    let simulated_user = events.iter().find_map(|e| match (&e.kind, &e.actor) {
        (EventKind::Joined { bot: true, .. }, Actor::Bot { name, .. }) => name
            .strip_prefix(wozkit_core::simulated_users::ACTOR_PREFIX)
            .map(str::to_string),
        _ => None,
    });
    Ok(SessionLog {
        format: "wozkit-session-log",
        version: 1,
        simulated_user,
        metrics: metrics(&events),
        session: record,
        participants,
        events,
    })
}

/// Every session (of `study`, if given), oldest first.
pub async fn sessions(
    store: &dyn Store,
    study: Option<&str>,
) -> Result<Vec<SessionRecord>, StoreError> {
    store
        .list_sessions(&SessionFilter {
            study_id: study.map(str::to_string),
            ..SessionFilter::default()
        })
        .await
}

/// Whether a participant of the session is a test one (see [`wozkit_store::TEST_KEY`]).
pub async fn is_test_session(store: &dyn Store, session: &str) -> Result<bool, StoreError> {
    Ok(store
        .participants_in_session(session)
        .await?
        .iter()
        .any(|p| p.is_test()))
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> RecordsError + '_ {
    move |source| RecordsError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes the logs: to `out` as JSON Lines (one session per line) when it ends in `.jsonl`,
/// otherwise into the folder `out`, one `<session>.json` each. Returns the number of sessions.
pub async fn export_log(
    store: &dyn Store,
    study: Option<&str>,
    include_test: bool,
    out: &Path,
) -> Result<usize, RecordsError> {
    let mut records = sessions(store, study).await?;
    if !include_test {
        let mut kept = Vec::with_capacity(records.len());
        for r in records {
            if !is_test_session(store, &r.id).await? {
                kept.push(r);
            }
        }
        records = kept;
    }
    let n = records.len();
    let jsonl = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    if jsonl {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let mut w = BufWriter::new(File::create(out).map_err(io_err(out))?);
        for r in records {
            let log = session_log(store, r).await?;
            serde_json::to_writer(&mut w, &log)?;
            w.write_all(b"\n").map_err(io_err(out))?;
        }
        w.flush().map_err(io_err(out))?;
    } else {
        std::fs::create_dir_all(out).map_err(io_err(out))?;
        for r in records {
            let name: String =
                r.id.chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
            let path = out.join(format!("{name}.json"));
            let log = session_log(store, r).await?;
            let mut w = BufWriter::new(File::create(&path).map_err(io_err(&path))?);
            serde_json::to_writer_pretty(&mut w, &log)?;
            w.write_all(b"\n").map_err(io_err(&path))?;
            w.flush().map_err(io_err(&path))?;
        }
    }
    Ok(n)
}
