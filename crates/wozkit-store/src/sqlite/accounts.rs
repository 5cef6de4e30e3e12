//! Researcher accounts, logins and failed logins on SQLite. Writes go through the writer like
//! every other write; they touch no event log, so they are also allowed on a store opened
//! beside a running server ([`SqliteStore::open_shared`](super::SqliteStore::open_shared)).

use async_trait::async_trait;
use sqlx::SqliteConnection;

use super::ops::Apply;
use super::writer::BatchState;
use crate::codec::{self, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{Account, NewAccount, NewLogin};

/// Stores a new account.
pub(super) struct CreateAccount(pub NewAccount);

#[async_trait]
impl Apply for CreateAccount {
    type Output = Account;
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Account>, sqlx::Error> {
        let new = &self.0;
        let created = match to_i64("account creation time", new.created_at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "INSERT INTO accounts (id, name, access, password_hash, created_at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        )
        .bind(new.id.as_str())
        .bind(new.name.as_str())
        .bind(new.access.as_str())
        .bind(new.password_hash.as_str())
        .bind(created)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Err(StoreError::Conflict {
                what: "account",
                key: new.name.clone(),
            }));
        }
        Ok(Ok(Account {
            id: new.id.clone(),
            name: new.name.clone(),
            access: new.access.clone(),
            password_hash: new.password_hash.clone(),
            created_at_ms: new.created_at_ms,
            removed_at_ms: None,
        }))
    }
}

/// Replaces a live account's password hash and ends its logins.
pub(super) struct SetPassword {
    pub id: String,
    pub hash: String,
}

#[async_trait]
impl Apply for SetPassword {
    type Output = bool;
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE accounts SET password_hash = ?2 WHERE id = ?1 AND removed_at_ms IS NULL",
        )
        .bind(self.id.as_str())
        .bind(self.hash.as_str())
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Ok(false));
        }
        end_logins(conn, &self.id).await?;
        Ok(Ok(true))
    }
}

/// Removes a live account and ends its logins.
pub(super) struct RemoveAccount {
    pub id: String,
    pub at_ms: u64,
}

#[async_trait]
impl Apply for RemoveAccount {
    type Output = bool;
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let at = match to_i64("account removal time", self.at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "UPDATE accounts SET removed_at_ms = ?2, password_hash = '' \
             WHERE id = ?1 AND removed_at_ms IS NULL",
        )
        .bind(self.id.as_str())
        .bind(at)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Ok(false));
        }
        end_logins(conn, &self.id).await?;
        Ok(Ok(true))
    }
}

async fn end_logins(conn: &mut SqliteConnection, account: &str) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("DELETE FROM logins WHERE account_id = ?1")
        .bind(account)
        .execute(&mut *conn)
        .await?
        .rows_affected())
}

/// Stores a login of a live account, forgetting expired ones.
pub(super) struct CreateLogin(pub NewLogin);

#[async_trait]
impl Apply for CreateLogin {
    type Output = ();
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<()>, sqlx::Error> {
        let login = &self.0;
        let (created, expires) = match (
            to_i64("login creation time", login.created_at_ms),
            to_i64("login expiry time", login.expires_at_ms),
        ) {
            (Ok(c), Ok(e)) => (c, e),
            (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
        };
        sqlx::query("DELETE FROM logins WHERE expires_at_ms <= ?1")
            .bind(created)
            .execute(&mut *conn)
            .await?;
        let done = sqlx::query(
            "INSERT INTO logins (token_hash, account_id, created_at_ms, expires_at_ms) \
             SELECT ?1, id, ?3, ?4 FROM accounts WHERE id = ?2 AND removed_at_ms IS NULL",
        )
        .bind(login.token_hash.as_str())
        .bind(login.account_id.as_str())
        .bind(created)
        .bind(expires)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Err(StoreError::NotFound {
                what: "account",
                id: login.account_id.clone(),
            }));
        }
        Ok(Ok(()))
    }
}

/// Ends one login (`by_account: false`, `key` a token hash) or every login of an account.
pub(super) struct EndLogins {
    pub key: String,
    pub by_account: bool,
}

#[async_trait]
impl Apply for EndLogins {
    type Output = u64;
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<u64>, sqlx::Error> {
        if self.by_account {
            return Ok(Ok(end_logins(conn, &self.key).await?));
        }
        let done = sqlx::query("DELETE FROM logins WHERE token_hash = ?1")
            .bind(self.key.as_str())
            .execute(&mut *conn)
            .await?;
        Ok(Ok(done.rows_affected()))
    }
}

/// Records a failed login against an address and a name; forgets old failures.
pub(super) struct RecordFailedLogin {
    pub address: String,
    pub name: String,
    pub at_ms: u64,
    pub forget_before_ms: u64,
}

#[async_trait]
impl Apply for RecordFailedLogin {
    type Output = ();
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<()>, sqlx::Error> {
        let (at, forget) = match (
            to_i64("failed login time", self.at_ms),
            to_i64("failed login time", self.forget_before_ms),
        ) {
            (Ok(a), Ok(f)) => (a, f),
            (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
        };
        sqlx::query("DELETE FROM failed_logins WHERE at_ms < ?1")
            .bind(forget)
            .execute(&mut *conn)
            .await?;
        sqlx::query(
            "INSERT INTO failed_logins (kind, subject, at_ms) \
             VALUES ('address', ?1, ?3), ('name', ?2, ?3)",
        )
        .bind(self.address.as_str())
        .bind(self.name.as_str())
        .bind(at)
        .execute(&mut *conn)
        .await?;
        Ok(Ok(()))
    }
}

/// Forgets the failed logins against one name.
pub(super) struct ClearFailedLogins(pub String);

#[async_trait]
impl Apply for ClearFailedLogins {
    type Output = ();
    const SHARED: bool = true;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<()>, sqlx::Error> {
        sqlx::query("DELETE FROM failed_logins WHERE kind = 'name' AND subject = ?1")
            .bind(self.0.as_str())
            .execute(&mut *conn)
            .await?;
        Ok(Ok(()))
    }
}

/// The account query by one column: `SELECT <columns> FROM accounts WHERE $cond`.
pub(super) fn select_accounts(cond: &str) -> String {
    format!(
        "SELECT {} FROM accounts WHERE {cond}",
        codec::ACCOUNT_COLUMNS
    )
}
