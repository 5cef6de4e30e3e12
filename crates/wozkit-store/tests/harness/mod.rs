//! Opens each backend for a conformance case: SQLite in a temporary directory always, PostgreSQL
//! in a fresh database per case when `WOZKIT_TEST_PG_URL` names a server (see
//! `.ci/start-postgres.sh`). `Backend::open` may be called again to reopen the same database.

#![allow(dead_code)]

use std::sync::Arc;

use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_store::testing::TestDatabase;
use wozkit_store::{NewEvent, NewSession, Store};

pub const PG_ENV: &str = wozkit_store::testing::PG_URL_ENV;

pub enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(TestDatabase),
}

impl Backend {
    pub fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().expect("temporary directory"))
    }

    /// A fresh database on the test server, or `None` (with a note) when none is configured;
    /// fails when `WOZKIT_TEST_PG_REQUIRED` is set and there is none ([`TestDatabase::create`]).
    pub async fn postgres(case: &str) -> Option<Backend> {
        TestDatabase::create(case).await.map(Backend::Postgres)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Opens (or reopens) this backend's database through the public `open`.
    pub async fn open(&self) -> Arc<dyn Store> {
        let location = match self {
            Backend::Sqlite(dir) => dir.path().display().to_string(),
            Backend::Postgres(db) => db.url.clone(),
        };
        wozkit_store::open(&location).await.expect("open store")
    }

    /// Drops the test database (PostgreSQL); the temporary directory goes with `self`.
    pub async fn cleanup(self) {
        if let Backend::Postgres(db) = self {
            db.drop_database().await;
        }
    }
}

/// Runs a conformance case on SQLite and, when configured, on PostgreSQL.
#[macro_export]
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = $crate::harness::Backend::sqlite();
                    super::$case(&backend).await;
                    backend.cleanup().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    if let Some(backend) = $crate::harness::Backend::postgres(stringify!($case)).await {
                        super::$case(&backend).await;
                        backend.cleanup().await;
                    }
                }
            )*
        }
    };
}

pub fn new_session(id: &str, study: &str, created_at_ms: u64) -> NewSession {
    NewSession {
        id: id.to_owned(),
        study_id: study.to_owned(),
        study_version: "1".to_owned(),
        seed: u64::MAX - 7,
        created_at_ms,
    }
}

/// A user message whose text identifies it.
pub fn message(text: &str, at_ms: u64) -> NewEvent {
    NewEvent {
        actor: Actor::Participant {
            role: Role::User,
            participant: Some("p1".to_owned()),
        },
        kind: EventKind::Message {
            role: Role::User,
            text: text.to_owned(),
            source: MessageSource::Free,
        },
        at_ms,
    }
}

/// The text of a message event.
pub fn text_of(kind: &EventKind) -> &str {
    match kind {
        EventKind::Message { text, .. } => text,
        _ => "",
    }
}
