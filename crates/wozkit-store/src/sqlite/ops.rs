//! The write requests the SQLite writer applies inside a group-commit transaction. Each returns
//! two layers of result: the outer `sqlx::Error` means the transaction itself failed (every
//! request in the batch fails with it); the inner result concerns this request only (unknown
//! session, duplicate id) and leaves the rest of the batch untouched, so one bad request never
//! costs another its write.

use async_trait::async_trait;
use sqlx::SqliteConnection;
use wozkit_core::event::EndReason;

use super::writer::BatchState;
use crate::codec::{self, EncodedEvent, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{
    NewParticipant, NewSession, Participant, ParticipantPatch, SessionKind, SessionRecord,
};

/// One kind of write request.
#[async_trait]
pub(super) trait Apply: Send + 'static {
    type Output: Send + 'static;
    /// Whether this write may run on a store opened beside the process holding the data
    /// directory ([`SqliteStore::open_shared`](super::SqliteStore::open_shared)): true only for
    /// writes that no in-memory state of that process depends on (accounts, logins).
    const SHARED: bool = false;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<Self::Output>, sqlx::Error>;
}

/// Append events to one session; the output is the first assigned `seq`.
pub(super) struct AppendEvents {
    pub session: String,
    pub rows: Vec<EncodedEvent>,
    /// Only if the log still ends at this `seq` (`EventStore::append_after`).
    pub after: Option<u64>,
}

#[async_trait]
impl Apply for AppendEvents {
    type Output = u64;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<u64>, sqlx::Error> {
        let Some(last) = state.last_seq(conn, &self.session).await? else {
            return Ok(Err(StoreError::UnknownSession(self.session.clone())));
        };
        if let Some(after) = self.after.filter(|a| *a != last) {
            return Ok(Err(StoreError::LogMoved {
                session: self.session.clone(),
                after,
                last,
            }));
        }
        let count = self.rows.len() as u64;
        let (Ok(first), Ok(_)) = (to_i64("seq", last + 1), to_i64("seq", last + count)) else {
            return Ok(Err(StoreError::OutOfRange {
                what: "seq",
                value: last,
            }));
        };
        state.push_rows(&self.session, first, std::mem::take(&mut self.rows));
        state.advance(&self.session, last + count);
        Ok(Ok(last + 1))
    }
}

/// Append events to one session unless `key` was used before in it; the output is the first
/// assigned `seq`, or `None` when the key was taken (nothing is appended then). The key row is
/// inserted in the batch's transaction, so a rollback forgets it with the events.
pub(super) struct AppendOnce {
    pub key: String,
    pub append: AppendEvents,
}

#[async_trait]
impl Apply for AppendOnce {
    type Output = Option<u64>;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<Option<u64>>, sqlx::Error> {
        let session = self.append.session.as_str();
        if state.last_seq(conn, session).await?.is_none() {
            return Ok(Err(StoreError::UnknownSession(session.to_owned())));
        }
        let done = sqlx::query(
            "INSERT INTO append_keys (session_id, key) VALUES (?1, ?2) \
             ON CONFLICT (session_id, key) DO NOTHING",
        )
        .bind(session)
        .bind(self.key.as_str())
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Ok(None));
        }
        Ok(self.append.apply(conn, state).await?.map(Some))
    }
}

/// Create a session of `kind`. A dialogue with a taken id is a conflict; a participant log with
/// a taken id is answered with the existing record (creating a participant log is idempotent).
pub(super) struct CreateSession {
    pub new: NewSession,
    pub kind: SessionKind,
}

#[async_trait]
impl Apply for CreateSession {
    type Output = SessionRecord;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<SessionRecord>, sqlx::Error> {
        let new = &self.new;
        let created = match to_i64("session creation time", new.created_at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "INSERT INTO sessions (id, study_id, study_version, seed, created_at_ms, kind) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
        )
        .bind(new.id.as_str())
        .bind(new.study_id.as_str())
        .bind(new.study_version.as_str())
        .bind(new.seed.to_string())
        .bind(created)
        .bind(self.kind.as_str())
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            if self.kind == SessionKind::Participant {
                return existing_session(conn, state, &new.id).await;
            }
            return Ok(Err(StoreError::Conflict {
                what: "session",
                key: new.id.clone(),
            }));
        }
        Ok(Ok(SessionRecord {
            id: new.id.clone(),
            study_id: new.study_id.clone(),
            study_version: new.study_version.clone(),
            seed: new.seed,
            created_at_ms: new.created_at_ms,
            kind: self.kind,
            ended: None,
            last_seq: 0,
        }))
    }
}

/// A session as the open batch sees it: `last_seq` counts events queued earlier in the batch.
async fn existing_session(
    conn: &mut SqliteConnection,
    state: &mut BatchState,
    id: &str,
) -> Result<Result<SessionRecord>, sqlx::Error> {
    let Some(last) = state.last_seq(conn, id).await? else {
        return Ok(Err(StoreError::UnknownSession(id.to_owned())));
    };
    let row = sqlx::query(
        "SELECT id, study_id, study_version, seed, created_at_ms, ended_at_ms, end_reason, kind, \
         ?2 AS last_seq FROM sessions WHERE id = ?1",
    )
    .bind(id)
    .bind(i64::try_from(last).unwrap_or(i64::MAX))
    .fetch_one(&mut *conn)
    .await?;
    Ok(codec::session_from_row(&row))
}

/// Mark a session ended; the output says whether this call ended it.
pub(super) struct EndSession {
    pub id: String,
    pub reason: EndReason,
    pub at_ms: u64,
}

#[async_trait]
impl Apply for EndSession {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let at = match to_i64("session end time", self.at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "UPDATE sessions SET ended_at_ms = ?2, end_reason = ?3 \
             WHERE id = ?1 AND ended_at_ms IS NULL",
        )
        .bind(self.id.as_str())
        .bind(at)
        .bind(codec::end_reason_name(self.reason))
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 1 {
            state.forget_after_commit(&self.id);
            return Ok(Ok(true));
        }
        let known: Option<i64> = sqlx::query_scalar("SELECT 1 FROM sessions WHERE id = ?1")
            .bind(self.id.as_str())
            .fetch_optional(&mut *conn)
            .await?;
        Ok(match known {
            Some(_) => Ok(false),
            None => Err(StoreError::UnknownSession(self.id.clone())),
        })
    }
}

/// Create a participant.
pub(super) struct CreateParticipant(pub NewParticipant);

#[async_trait]
impl Apply for CreateParticipant {
    type Output = Participant;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Participant>, sqlx::Error> {
        let new = &self.0;
        let (created, external_ids) = match (
            to_i64("participant creation time", new.created_at_ms),
            codec::external_ids_json(&new.external_ids),
        ) {
            (Ok(c), Ok(x)) => (c, x),
            (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "INSERT INTO participants (id, token_hash, study_id, platform, worker_id, \
             external_ids, flow_step, created_at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
        )
        .bind(new.id.as_str())
        .bind(new.token_hash.as_str())
        .bind(new.study_id.as_str())
        .bind(new.platform.as_str())
        .bind(new.worker_id.as_deref())
        .bind(external_ids)
        .bind(new.flow_step.as_str())
        .bind(created)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Err(codec::participant_conflict(new)));
        }
        Ok(Ok(Participant {
            id: new.id.clone(),
            token_hash: new.token_hash.clone(),
            study_id: new.study_id.clone(),
            platform: new.platform,
            worker_id: new.worker_id.clone(),
            external_ids: new.external_ids.clone(),
            role: None,
            session_id: None,
            flow_step: new.flow_step.clone(),
            completion_code: None,
            created_at_ms: new.created_at_ms,
        }))
    }
}

/// Change a participant.
pub(super) struct UpdateParticipant {
    pub id: String,
    pub patch: ParticipantPatch,
}

#[async_trait]
impl Apply for UpdateParticipant {
    type Output = Participant;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Participant>, sqlx::Error> {
        let patch = &self.patch;
        let row = sqlx::query(
            "UPDATE participants SET \
               role = CASE WHEN ?2 THEN ?3 ELSE role END, \
               session_id = CASE WHEN ?4 THEN ?5 ELSE session_id END, \
               flow_step = COALESCE(?6, flow_step), \
               completion_code = CASE WHEN ?7 THEN ?8 ELSE completion_code END \
             WHERE id = ?1 RETURNING *",
        )
        .bind(self.id.as_str())
        .bind(patch.role.is_some())
        .bind(patch.role.flatten().map(|r| r.as_str()))
        .bind(patch.session_id.is_some())
        .bind(patch.session_id.clone().flatten())
        .bind(patch.flow_step.as_deref())
        .bind(patch.completion_code.is_some())
        .bind(patch.completion_code.clone().flatten())
        .fetch_optional(&mut *conn)
        .await?;
        Ok(match row {
            Some(row) => codec::participant_from_row(&row),
            None => Err(StoreError::NotFound {
                what: "participant",
                id: self.id.clone(),
            }),
        })
    }
}

/// Set a `meta` value.
pub(super) struct SetMeta {
    pub key: String,
    pub value: String,
}

#[async_trait]
impl Apply for SetMeta {
    type Output = ();
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<()>, sqlx::Error> {
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(self.key.as_str())
        .bind(self.value.as_str())
        .execute(&mut *conn)
        .await?;
        Ok(Ok(()))
    }
}

/// Set a `meta` value only if it is the expected one (`None`: absent). Atomic because the
/// single writer runs it.
pub(super) struct SwapMeta {
    pub key: String,
    pub expected: Option<String>,
    pub new: String,
}

#[async_trait]
impl Apply for SwapMeta {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let done =
            match &self.expected {
                None => sqlx::query(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                )
                .bind(self.key.as_str())
                .bind(self.new.as_str())
                .execute(&mut *conn)
                .await?,
                Some(old) => {
                    sqlx::query("UPDATE meta SET value = ?2 WHERE key = ?1 AND value = ?3")
                        .bind(self.key.as_str())
                        .bind(self.new.as_str())
                        .bind(old.as_str())
                        .execute(&mut *conn)
                        .await?
                }
            };
        Ok(Ok(done.rows_affected() == 1))
    }
}

/// Add one to an integer `meta` value (a missing key counts as 0) and return the new value.
/// Atomic because the single writer runs it: no other write comes between the read and the
/// write.
pub(super) struct IncrementMeta {
    pub key: String,
}

#[async_trait]
impl Apply for IncrementMeta {
    type Output = i64;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<i64>, sqlx::Error> {
        let current: Option<String> = sqlx::query_scalar("SELECT value FROM meta WHERE key = ?1")
            .bind(self.key.as_str())
            .fetch_optional(&mut *conn)
            .await?;
        let next = match current.as_deref().map(str::parse::<i64>) {
            None => 1,
            Some(Ok(n)) => match n.checked_add(1) {
                Some(next) => next,
                None => {
                    return Ok(Err(StoreError::Corrupt {
                        what: "meta counter",
                        detail: format!("{:?} is {n}, the largest count; it cannot grow", self.key),
                    }));
                }
            },
            Some(Err(e)) => {
                return Ok(Err(StoreError::Corrupt {
                    what: "meta counter",
                    detail: format!(
                        "{:?} holds {:?}, not an integer ({e})",
                        self.key,
                        current.unwrap_or_default()
                    ),
                }));
            }
        };
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(self.key.as_str())
        .bind(next.to_string())
        .execute(&mut *conn)
        .await?;
        Ok(Ok(next))
    }
}

/// Caps how large the database file may grow (SQLite's `max_page_count`, a setting of the
/// writer's connection): what a full disk does to a write, for tests that need one without a
/// small filesystem to fill. The output is the cap now in force, in pages.
pub(super) struct CapPages {
    /// Pages the database may still grow by; `None` lifts the cap.
    pub headroom: Option<u64>,
}

/// SQLite's own largest `max_page_count`: no cap.
const NO_PAGE_CAP: i64 = 4_294_967_294;

#[async_trait]
impl Apply for CapPages {
    type Output = u64;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _state: &mut BatchState,
    ) -> Result<Result<u64>, sqlx::Error> {
        let cap = match self.headroom {
            Some(headroom) => {
                let (pages,): (i64,) = sqlx::query_as("PRAGMA page_count")
                    .fetch_one(&mut *conn)
                    .await?;
                pages.saturating_add(i64::try_from(headroom).unwrap_or(NO_PAGE_CAP))
            }
            None => NO_PAGE_CAP,
        }
        .min(NO_PAGE_CAP);
        // A pragma takes no parameters; `cap` is a number this function computed.
        let sql = format!("PRAGMA max_page_count = {cap}");
        let (now,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut *conn)
            .await?;
        Ok(Ok(u64::try_from(now).unwrap_or(0)))
    }
}
