//! wozkit-store: persistence for wozkit. It keeps each session's append-only event log (the
//! source of every live state, replay and export), the sessions themselves, participants with
//! their hashed tokens and crowd identities, and a small key-value table of settings.
//!
//! It stores and returns; it does not decide. Which events happen, who may act and when a
//! session ends are the engine's and server's business; the store only guarantees that events
//! are numbered without gaps, written all or nothing, and durable before they are acknowledged.
//!
//! Map of the crate:
//! - [`cached`]: event logs read again and again, answered from memory (over SQLite).
//! - [`store`]: the [`Store`] trait, the one interface the server and the data crate use.
//! - [`model`]: the records (sessions, participants, new events, filters) it takes and returns.
//! - [`sqlite`]: the embedded default, one WAL-mode file with a group-committing writer task.
//! - [`postgres`]: the backend for several instances sharing a database.
//! - [`token`]: participant tokens (random, stored hashed) and random ids.
//! - [`testing`]: a fresh PostgreSQL database per test, for every crate's PostgreSQL tests.
//! - [`error`]: [`StoreError`], shared by both backends.
//! - `codec` and `migrations` (private): row conversions and the embedded schemas.
//!
//! [`open`] picks the backend from a location string.

#![forbid(unsafe_code)]

pub mod cached;
mod codec;
pub mod error;
mod migrations;
pub mod model;
pub mod postgres;
pub mod sqlite;
pub mod store;
pub mod testing;
pub mod token;

use std::path::Path;
use std::sync::Arc;

pub use error::{Result, StoreError};
pub use model::{
    Account, ClaimRequest, EvalItem, EventCursor, FailedLogins, ItemCount, Lease, LeaseState,
    LiveLogin, NewAccount, NewEvent, NewLogin, NewParticipant, NewSession, Participant,
    ParticipantPatch, Platform, SIMULATED_KEY, SessionEnd, SessionFilter, SessionKind,
    SessionRecord, SessionStatus, SubmitOutcome, TEST_KEY,
};
pub use postgres::{PgOptions, PgStore};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use store::{
    AccountStore, ClaimStore, EventStore, LobbyStore, MetaStore, ParticipantStore, RoomLeaseStore,
    SessionStore, Store,
};

/// Every store capability's methods in scope (`use wozkit_store::prelude::*;`), for code that
/// holds a whole [`Store`] and calls across its capabilities.
pub mod prelude {
    pub use crate::store::{
        AccountStore as _, ClaimStore as _, EventStore as _, LobbyStore as _, MetaStore as _,
        ParticipantStore as _, RoomLeaseStore as _, SessionStore as _, Store,
    };
}
pub use token::{hash_token, new_id, new_token};

/// Where a store lives, parsed from a location string (see [`open`]).
enum Location<'a> {
    Postgres(&'a str),
    SqliteFile(&'a Path),
    SqliteDir(&'a Path),
}

impl<'a> Location<'a> {
    fn parse(location: &'a str) -> Result<Location<'a>> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Ok(Location::Postgres(location));
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
            let path = Path::new(path);
            return Ok(if path.is_dir() {
                Location::SqliteDir(path)
            } else {
                Location::SqliteFile(path)
            });
        }
        if location.is_empty() || location.contains("://") {
            return Err(bad(
                "expected a data directory, sqlite:FILE or postgres://user:password@host/database",
            ));
        }
        Ok(Location::SqliteDir(Path::new(location)))
    }
}

/// Opens the store at `location` for reading and writing:
/// - `postgres://…` or `postgresql://…`: a PostgreSQL database;
/// - `sqlite:FILE` (or `sqlite://FILE`): that SQLite file (a directory there means its
///   `wozkit.sqlite3`);
/// - any other string without `://`: a data directory, holding `wozkit.sqlite3`.
///
/// The schema is created or updated on the way. A SQLite store is held by one process at a
/// time ([`StoreError::Locked`] otherwise); to read beside a running server use
/// [`open_snapshot`]. Since only this process writes to it, the logs it reads more than once
/// are held in memory ([`cached`]).
pub async fn open(location: &str) -> Result<Arc<dyn Store>> {
    Ok(match Location::parse(location)? {
        Location::Postgres(url) => Arc::new(PgStore::connect(url).await?),
        Location::SqliteFile(path) => {
            cached(SqliteStore::open_with(path, SqliteOptions::default()).await?)
        }
        Location::SqliteDir(dir) => cached(SqliteStore::open_dir(dir).await?),
    })
}

/// A SQLite store, which this process alone writes to, with its logs read more than once held
/// in memory ([`cached::CachedReads`]): at most [`cached::DEFAULT_CAPACITY`] events, or as many
/// as the environment variable `WOZKIT_LOG_CACHE_EVENTS` says (`0`: none, every read goes to
/// the file, as for measuring what the memory saves).
fn cached(store: SqliteStore) -> Arc<dyn Store> {
    let capacity = std::env::var(cached::CAPACITY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(cached::DEFAULT_CAPACITY);
    if capacity == 0 {
        return Arc::new(store);
    }
    Arc::new(cached::CachedReads::new(Arc::new(store), capacity))
}

/// Opens the store at `location` (as [`open`] reads it) for reading only, beside whatever
/// else uses it: for SQLite a consistent snapshot that takes no lock, creates nothing and
/// migrates nothing ([`SqliteStore::open_snapshot`]); PostgreSQL serves any number of
/// processes, so there it is the ordinary store, where each query sees the data committed
/// when it started. Writes on a SQLite snapshot fail with [`StoreError::ReadOnly`].
pub async fn open_snapshot(location: &str) -> Result<Arc<dyn Store>> {
    Ok(match Location::parse(location)? {
        Location::Postgres(url) => Arc::new(PgStore::connect(url).await?),
        Location::SqliteFile(path) => Arc::new(SqliteStore::open_snapshot(path).await?),
        Location::SqliteDir(dir) => {
            Arc::new(SqliteStore::open_snapshot(dir.join(sqlite::DB_FILE)).await?)
        }
    })
}

/// Opens the store at `location` (as [`open`] reads it) to manage researcher accounts, even
/// while a server uses it: when another process holds a SQLite data directory, the database is
/// opened beside it ([`SqliteStore::open_shared`]), where account, login and failed-login
/// writes work and every other write fails with [`StoreError::ReadOnly`]; otherwise (nobody
/// holds it, or PostgreSQL) this is [`open`].
pub async fn open_accounts(location: &str) -> Result<Arc<dyn Store>> {
    let path = match Location::parse(location)? {
        Location::Postgres(url) => return Ok(Arc::new(PgStore::connect(url).await?)),
        Location::SqliteFile(path) => path.to_path_buf(),
        Location::SqliteDir(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
            dir.join(sqlite::DB_FILE)
        }
    };
    let options = SqliteOptions {
        lock_wait: std::time::Duration::ZERO,
        ..SqliteOptions::default()
    };
    match SqliteStore::open_with(&path, options).await {
        Err(StoreError::Locked(_)) => Ok(Arc::new(SqliteStore::open_shared(&path).await?)),
        other => Ok(Arc::new(other?)),
    }
}
