//! wozkit-store: persistence for wozkit. It keeps each session's append-only event log (the
//! source of every live state, replay and export), the sessions themselves, participants with
//! their hashed tokens and crowd identities, and a small key-value table of settings.
//!
//! It stores and returns; it does not decide. Which events happen, who may act and when a
//! session ends are the engine's and server's business; the store only guarantees that events
//! are numbered without gaps, written all or nothing, and durable before they are acknowledged.
//!
//! Map of the crate:
//! - [`store`]: the [`Store`] trait, the one interface the server and the data crate use.
//! - [`model`]: the records (sessions, participants, new events, filters) it takes and returns.
//! - [`sqlite`]: the embedded default, one WAL-mode file with a group-committing writer task.
//! - [`postgres`]: the backend for several instances sharing a database.
//! - [`token`]: participant tokens (random, stored hashed) and random ids.
//! - [`error`]: [`StoreError`], shared by both backends.
//! - `codec` and `migrations` (private): row conversions and the embedded schemas.
//!
//! [`open`] picks the backend from a location string.

#![forbid(unsafe_code)]

mod codec;
pub mod error;
mod migrations;
pub mod model;
pub mod postgres;
pub mod sqlite;
pub mod store;
pub mod token;

use std::path::Path;
use std::sync::Arc;

pub use error::{Result, StoreError};
pub use model::{
    EventCursor, NewEvent, NewParticipant, NewSession, Participant, ParticipantPatch, Platform,
    SessionEnd, SessionFilter, SessionRecord, SessionStatus,
};
pub use postgres::{PgOptions, PgStore};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use store::Store;
pub use token::{hash_token, new_id, new_token};

/// Opens the store at `location`:
/// - `postgres://…` or `postgresql://…`: a PostgreSQL database;
/// - `sqlite:FILE` (or `sqlite://FILE`): that SQLite file (a directory there means its
///   `wozkit.sqlite3`);
/// - any other string without `://`: a data directory, holding `wozkit.sqlite3`.
///
/// The schema is created or updated on the way.
pub async fn open(location: &str) -> Result<Arc<dyn Store>> {
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        return Ok(Arc::new(PgStore::connect(location).await?));
    }
    let bad = |reason: &str| StoreError::Location {
        location: location.to_owned(),
        reason: reason.to_owned(),
    };
    if let Some(path) = location
        .strip_prefix("sqlite://")
        .or_else(|| location.strip_prefix("sqlite:"))
    {
        if path.is_empty() {
            return Err(bad(
                "no file after `sqlite:`; write e.g. sqlite:./wozkit-data/wozkit.sqlite3",
            ));
        }
        if Path::new(path).is_dir() {
            return Ok(Arc::new(SqliteStore::open_dir(path).await?));
        }
        return Ok(Arc::new(
            SqliteStore::open_with(path, SqliteOptions::default()).await?,
        ));
    }
    if location.is_empty() || location.contains("://") {
        return Err(bad(
            "expected a data directory, sqlite:FILE or postgres://user:password@host/database",
        ));
    }
    Ok(Arc::new(SqliteStore::open_dir(location).await?))
}
