//! The store's error type: one enum for every backend, so callers match on what went wrong
//! (unknown session, duplicate id, unreadable row) without knowing which database is behind.

use std::sync::Arc;

/// What went wrong in a store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Events were appended to (or an operation named) a session that was never created.
    #[error("unknown session {0:?}: create it with `create_session` first")]
    UnknownSession(String),
    /// A record looked up for an update does not exist.
    #[error("{what} {id:?} not found")]
    NotFound { what: &'static str, id: String },
    /// A record with the same id or unique key already exists.
    #[error("{what} {key:?} already exists")]
    Conflict { what: &'static str, key: String },
    /// A value does not fit the database (e.g. a timestamp beyond `i64::MAX`).
    #[error(
        "the log of session {session:?} ends at seq {last}, not at {after}: another writer \
         appended to it (an instance that took its room over)"
    )]
    LogMoved {
        session: String,
        after: u64,
        last: u64,
    },

    #[error("{what} is out of range: {value}")]
    OutOfRange { what: &'static str, value: u64 },
    /// A stored row could not be read back; the database was edited by hand or is damaged.
    #[error("stored {what} cannot be read: {detail}")]
    Corrupt { what: &'static str, detail: String },
    /// An event could not be encoded as JSON.
    #[error("event cannot be encoded as JSON: {0}")]
    Encode(#[source] serde_json::Error),
    /// The database reported an error. Shared because one failed group commit fails every
    /// request in it.
    #[error("database error: {0}")]
    Database(#[source] Arc<sqlx::Error>),
    /// The schema could not be brought up to date.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The location given to [`open`](crate::open) is not usable.
    #[error("invalid store location {location:?}: {reason}")]
    Location { location: String, reason: String },
    /// Another process (or another open store in this one) holds the SQLite data directory.
    #[error("{0} is in use by another wozkit process; stop it or choose another data directory")]
    Locked(String),
    /// Creating the data directory or its lock file failed.
    #[error("cannot prepare data directory {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The store was closed (or its writer task stopped) before the request was answered.
    #[error("the store is closed")]
    Closed,
    /// A write was asked of a store opened as a read-only snapshot (see
    /// [`open_snapshot`](crate::open_snapshot)).
    #[error(
        "this store was opened read-only (a snapshot beside a running server); it cannot write"
    )]
    ReadOnly,
    /// The database's schema is not the one this build reads, and a read-only store cannot
    /// migrate it.
    #[error(
        "{path} has schema version {found} but this wozkit reads version {expected}; run a \
         command that writes (e.g. `wozkit serve`) on it once to upgrade it"
    )]
    SchemaVersion {
        path: String,
        found: i64,
        expected: i64,
    },
}

impl StoreError {
    /// Whether the database refused the write for want of room: SQLite's `SQLITE_FULL` (the
    /// disk is full, or the database reached its page cap) or PostgreSQL's `disk_full`
    /// (SQLSTATE 53100). Nothing of such a write was stored; it succeeds once space returns.
    pub fn is_storage_full(&self) -> bool {
        const SQLITE_FULL: &str = "13";
        const PG_DISK_FULL: &str = "53100";
        match self {
            StoreError::Database(err) => match err.as_ref() {
                sqlx::Error::Database(db) => {
                    matches!(db.code().as_deref(), Some(SQLITE_FULL | PG_DISK_FULL))
                }
                _ => false,
            },
            _ => false,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        StoreError::Database(Arc::new(err))
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
