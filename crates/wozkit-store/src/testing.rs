//! PostgreSQL for tests: one fresh database per test on the server named by
//! `WOZKIT_TEST_PG_URL` (`.ci/start-postgres.sh` starts one and prints the URL).
//!
//! Without the URL a PostgreSQL test is skipped with a note on stderr — unless
//! `WOZKIT_TEST_PG_REQUIRED` is set (as `scripts/test-all.sh` does after starting a server), in
//! which case a missing URL or an unreachable server fails the test with a message that says
//! which. Every crate's PostgreSQL tests go through [`TestDatabase::create`], so the rule is the
//! same everywhere.

use sqlx::{Connection, PgConnection};

/// The environment variable naming the test server's admin URL (its database is left alone;
/// each test gets a new one beside it).
pub const PG_URL_ENV: &str = "WOZKIT_TEST_PG_URL";

/// The environment variable that, set to anything but empty or `0`, makes a PostgreSQL test
/// fail instead of skipping when [`PG_URL_ENV`] is missing or the server does not answer.
pub const PG_REQUIRED_ENV: &str = "WOZKIT_TEST_PG_REQUIRED";

/// A database created for one test; [`TestDatabase::drop_database`] removes it.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    /// The admin URL it was created through ([`PG_URL_ENV`]).
    pub admin_url: String,
    /// The new database's name.
    pub name: String,
    /// The URL of the new database, for [`crate::open`] or a `--data` argument.
    pub url: String,
}

/// Whether [`PG_REQUIRED_ENV`] asks PostgreSQL tests to run.
pub fn pg_required() -> bool {
    std::env::var(PG_REQUIRED_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

impl TestDatabase {
    /// A fresh, empty database on the test server for the test `case`, or `None` (with a note
    /// on stderr) when [`PG_URL_ENV`] is not set and [`PG_REQUIRED_ENV`] is not either.
    ///
    /// # Panics
    /// When [`PG_REQUIRED_ENV`] is set but [`PG_URL_ENV`] is not, and whenever the URL is set
    /// but the server cannot be reached or refuses to create the database.
    pub async fn create(case: &str) -> Option<TestDatabase> {
        let admin_url = match std::env::var(PG_URL_ENV) {
            Ok(url) if !url.is_empty() => url,
            _ if pg_required() => panic!(
                "{case}: {PG_REQUIRED_ENV} is set but {PG_URL_ENV} is not: the test command \
                 meant to start a PostgreSQL server (.ci/start-postgres.sh) and did not pass its \
                 URL on"
            ),
            _ => {
                eprintln!(
                    "skipped {case} on PostgreSQL: set {PG_URL_ENV} (see .ci/start-postgres.sh)"
                );
                return None;
            }
        };
        let name = format!("wozkit_t_{}", crate::new_id());
        let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "{case}: cannot connect to the PostgreSQL test server {PG_URL_ENV}={admin_url}: {e}"
            )
        });
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("{case}: CREATE DATABASE {name} on {admin_url}: {e}"));
        let _ = admin.close().await;
        let url = with_database(&admin_url, &name);
        Some(TestDatabase {
            admin_url,
            name,
            url,
        })
    }

    /// Drops the database (closing any connection still open to it); errors are ignored, as
    /// the whole test server is thrown away after the run anyway.
    pub async fn drop_database(self) {
        if let Ok(mut admin) = PgConnection::connect(&self.admin_url).await {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut admin)
            .await;
            let _ = admin.close().await;
        }
    }
}

/// `url` with its database name replaced by `db` (query parameters kept).
pub fn with_database(url: &str, db: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_name_is_replaced_and_query_kept() {
        assert_eq!(
            with_database("postgres://u@h:5/wozkit_test", "x"),
            "postgres://u@h:5/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h/a?sslmode=disable", "x"),
            "postgres://u:p@h/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:5", "x"), "postgres://h:5/x");
    }
}
