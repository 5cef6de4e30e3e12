//! The schema of each backend, embedded in the binary so a deployment needs no migration files
//! on disk. Each backend has its own folder under `migrations/`; a new migration is a new file
//! there plus a line here (the version must match the file's number prefix).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// `(version, description, sql)` for one migration.
type Source = (i64, &'static str, &'static str);

const SQLITE: &[Source] = &[
    (
        1,
        "init",
        include_str!("../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "append keys",
        include_str!("../migrations/sqlite/0002_append_keys.sql"),
    ),
    (
        3,
        "evaluation",
        include_str!("../migrations/sqlite/0003_evaluation.sql"),
    ),
    (
        4,
        "accounts",
        include_str!("../migrations/sqlite/0004_accounts.sql"),
    ),
    (
        5,
        "room leases",
        include_str!("../migrations/sqlite/0005_room_leases.sql"),
    ),
    (
        6,
        "waiting",
        include_str!("../migrations/sqlite/0006_waiting.sql"),
    ),
    (
        7,
        "lobby roles",
        include_str!("../migrations/sqlite/0007_lobby_roles.sql"),
    ),
];

const POSTGRES: &[Source] = &[
    (
        1,
        "init",
        include_str!("../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "append keys",
        include_str!("../migrations/postgres/0002_append_keys.sql"),
    ),
    (
        3,
        "evaluation",
        include_str!("../migrations/postgres/0003_evaluation.sql"),
    ),
    (
        4,
        "accounts",
        include_str!("../migrations/postgres/0004_accounts.sql"),
    ),
    (
        5,
        "room leases",
        include_str!("../migrations/postgres/0005_room_leases.sql"),
    ),
    (
        6,
        "waiting",
        include_str!("../migrations/postgres/0006_waiting.sql"),
    ),
    (
        7,
        "lobby roles",
        include_str!("../migrations/postgres/0007_lobby_roles.sql"),
    ),
    (
        8,
        "claim function",
        include_str!("../migrations/postgres/0008_claim_function.sql"),
    ),
];

pub(crate) fn sqlite() -> Migrator {
    migrator(SQLITE)
}

pub(crate) fn postgres() -> Migrator {
    migrator(POSTGRES)
}

fn migrator(sources: &[Source]) -> Migrator {
    Migrator::with_migrations(
        sources
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// The newest migration version of a migrator.
pub(crate) fn latest(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}
