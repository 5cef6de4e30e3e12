//! Opens each backend for a conformance case: SQLite in a temporary directory always, PostgreSQL
//! in a fresh database per case when `WOZKIT_TEST_PG_URL` names a server (see
//! `.ci/start-postgres.sh`). `Backend::open` may be called again to reopen the same database.

#![allow(dead_code)]

use std::sync::Arc;

use sqlx::{Connection, PgConnection};
use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_store::{NewEvent, NewSession, Store, new_id};

pub const PG_ENV: &str = "WOZKIT_TEST_PG_URL";

pub enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres {
        admin_url: String,
        db: String,
        url: String,
    },
}

impl Backend {
    pub fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().expect("temporary directory"))
    }

    /// A fresh database on the test server, or `None` (with a note) when none is configured.
    pub async fn postgres(case: &str) -> Option<Backend> {
        let Ok(admin_url) = std::env::var(PG_ENV) else {
            eprintln!("skipped {case} on PostgreSQL: set {PG_ENV} (see .ci/start-postgres.sh)");
            return None;
        };
        let db = format!("wozkit_t_{}", new_id());
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .expect("connect to the PostgreSQL test server");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let url = with_database(&admin_url, &db);
        Some(Backend::Postgres { admin_url, db, url })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// Opens (or reopens) this backend's database through the public `open`.
    pub async fn open(&self) -> Arc<dyn Store> {
        let location = match self {
            Backend::Sqlite(dir) => dir.path().display().to_string(),
            Backend::Postgres { url, .. } => url.clone(),
        };
        wozkit_store::open(&location).await.expect("open store")
    }

    /// Drops the test database (PostgreSQL); the temporary directory goes with `self`.
    pub async fn cleanup(self) {
        if let Backend::Postgres { admin_url, db, .. } = self
            && let Ok(mut admin) = PgConnection::connect(&admin_url).await
        {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await;
        }
    }
}

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (main, query) = match url.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (url, None),
    };
    let after_scheme = main.find("://").map_or(0, |i| i + 3);
    let base = match main[after_scheme..].find('/') {
        Some(i) => &main[..after_scheme + i],
        None => main,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
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
